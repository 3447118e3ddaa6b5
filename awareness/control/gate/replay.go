package gate

import (
	"errors"
	"fmt"

	"github.com/tobe-body/tobe-body/awareness/control/wait"
	"github.com/tobe-body/tobe-body/ledger"
)

// ErrNoRecords says the gate keeps no records of its decisions (its
// state could not be read), so what it pushed cannot be read again.
var ErrNoRecords = errors.New("gate: running without its state, it keeps no record of what it pushed")

// One Woken call reads at most replayRounds scans of replayScan bytes of
// the ledger, so that a cursor far back costs a bounded read a call.
const (
	replayScan   = 4 << 20
	replayRounds = 4
)

// Woken reads again what the gate pushed after the event at sequence
// after: each wake and question, in the order it decided them (that of
// their events), with the event itself, up to limit of them. It is what
// an agent that was away missed, from the ledger and so across restarts:
// the observations' Seq is the cursor, and next is the last event's
// sequence to pass again while more is set (more: there may be more
// decisions to read). A decision whose event is no longer in the ledger
// (retention took it) is left out. Words are found as when it pushed.
func (g *Gate) Woken(after uint64, limit int, fn func(Decision, ledger.Stored)) (next uint64, more bool, err error) {
	if g.stateless {
		return after, false, ErrNoRecords
	}
	if limit <= 0 {
		limit = 100
	}
	next = after
	// A decision is recorded after its event, and the gate decides the
	// events in their order, so the decisions of the events after the
	// cursor are all recorded after it, in the order of their events.
	from, n := after, 0
	var f wait.Fields // the gate's own is the gate's: this runs beside it
	for range replayRounds {
		evs, last, m, err := g.Store.Scan(ledger.Filter{After: from, Types: []string{EventDecided}, Limit: limit, MaxScan: replayScan})
		if err != nil {
			return next, false, err
		}
		for i := range evs {
			var d Decision
			if err := ledger.UnmarshalPayload(evs[i].Payload, &d); err != nil {
				return next, false, fmt.Errorf("gate: %s %d: %w", EventDecided, evs[i].Seq, err)
			}
			if d.Seq <= next {
				continue
			}
			if d.Outcome != Wake && d.Outcome != Ask {
				// Every event before it was decided before it: a cursor
				// past it misses nothing.
				next = d.Seq
				continue
			}
			if n == limit {
				return next, true, nil
			}
			e, ok, err := g.eventAt(d.Seq)
			if err != nil {
				return next, false, err
			}
			next = d.Seq
			if !ok {
				continue
			}
			if r := g.Sal.standingWith(&e, &f); r != nil {
				d.Words = r.pos
			}
			fn(d, e)
			n++
		}
		if !m {
			return next, false, nil
		}
		from = last
	}
	return next, true, nil
}

// eventAt reads the event at seq; ok is false when it is gone.
func (g *Gate) eventAt(seq uint64) (ledger.Stored, bool, error) {
	evs, err := g.Store.Events(ledger.Filter{After: seq - 1, Limit: 1})
	if err != nil || len(evs) == 0 || evs[0].Seq != seq {
		return ledger.Stored{}, false, err
	}
	return evs[0], true, nil
}
