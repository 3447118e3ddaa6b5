package act

import (
	"context"
	"log/slog"

	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/ledger"
)

// RecordEStop writes what the e-stop did to j, after the fact (the trip
// path never waits for it), until ctx ends; then it writes what is left
// and returns. Each record is stamped with the clock at the time the
// e-stop noted it. j nil: the records are logged only.
func RecordEStop(ctx context.Context, e *EStop, j Journal, clock *body.Clock, log *slog.Logger) {
	for {
		recs, err := e.Records(ctx)
		if err != nil {
			// Stopping: write what is left.
			done, cancel := context.WithCancel(context.Background())
			cancel()
			recs, _ = e.Records(done)
			if len(recs) == 0 {
				return
			}
		}
		evs := make([]ledger.Event, 0, len(recs))
		for _, r := range recs {
			p, err := ledger.MarshalPayload(r.Payload)
			if err != nil {
				log.Error("e-stop record", "type", r.Type, "err", err)
				continue
			}
			ev := ledger.Event{Type: r.Type, ChannelID: EStopChannel, Provenance: ledger.Observed, Trust: ledger.High, Privacy: ledger.Internal, Payload: p}
			if r.At != 0 && clock != nil {
				clock.Stamp(r.At).Apply(&ev)
			}
			evs = append(evs, ev)
			switch pl := r.Payload.(type) {
			case Trip:
				log.Error("E-STOP: tripped; every output safe, actions cancelled", "cause", pl.Cause, "all_safe", pl.AllSafe)
			case ResetDone:
				log.Warn("e-stop reset", "by", pl.By)
			default:
				if r.Type == "estop.reset_refused" || r.Type == "estop.wiring_fault" {
					log.Warn("e-stop", "event", r.Type, "detail", r.Payload)
				}
			}
		}
		if j != nil {
			if _, werr := j.Append(context.WithoutCancel(ctx), evs...); werr != nil {
				log.Error("e-stop records not written", "err", werr, "records", len(evs))
			}
		}
		if err != nil {
			return
		}
	}
}
