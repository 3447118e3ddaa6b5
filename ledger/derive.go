package ledger

import (
	"fmt"
	"sync/atomic"
	"time"
)

// Deriver appends events of its own in the transaction of each event it
// follows: what the body concludes from what it sensed, kept as events of
// a class that lasts, so projections of them can be rebuilt by verify
// even after what they were concluded from has expired. The derived
// events take the sequences right after the event they were derived from,
// are written in its transaction (with its commit group: a power cut
// takes both or neither), and update the projections that follow them.
// They are not given to derivers again.
//
// Derive runs in the ledger's writer, once for every event of a type it
// follows, and must be quick and must not block: it reads the state it
// decides on from the view (projections as of this transaction, with the
// events before this one in it) and from d. It must not have side
// effects: a batch that fails is written again, one request at a time.
// An error, or a derived event the ledger refuses, is logged and
// derives nothing; the event it followed is written all the same (a
// conclusion that could not be drawn never costs what was sensed). The
// view is the deriver's only during the call. The ledger is done with
// the events Derive returns, their payloads included, before it calls
// it again: a deriver may write the next ones in the same memory.
type Deriver interface {
	// Name names it in logs.
	Name() string
	// Types lists the event types it follows ("camera." follows every
	// camera event); unlike a projection's, they may be of classes that
	// expire. The list does not change.
	Types() []string
	// Derive derives from e, whose payload is one item the ledger
	// checked (see Projection.Apply).
	Derive(v *View, e *Event, d Derivation) ([]Event, error)
}

// Derivation is what a Deriver is told of the event it derives from,
// beside the event.
type Derivation struct {
	// Seq is the event's sequence in the ledger.
	Seq uint64
	// Running is the ledger's running clock at its transaction (see
	// Store.Running): not the wall clock, which can step.
	Running time.Duration
	// Lost counts the derivations that may not be in the ledger: what
	// the ledger refused of a deriver, and every transaction rolled back
	// after a deriver ran in it. A deriver that keeps what it derived
	// between events (rather than reading it back) must forget it when
	// Lost has moved since. Each open of a store counts from a base of
	// its own: a deriver given to another store (or the same file opened
	// again, which another may have written meanwhile) forgets too.
	Lost uint64
}

// opens counts the stores opened in this process (see Derivation.Lost).
var opens atomic.Uint64

// derive runs the derivers that follow e, just written at seq, and
// writes what they derive.
func (w *writer) derive(e *Event, seq uint64) error {
	for _, d := range w.s.followers(e.Type).derivers {
		w.derived = true
		w.view = View{tx: w.tx, s: w.s, w: w}
		evs, err := d.Derive(&w.view, e, Derivation{Seq: seq, Running: time.Duration(w.run), Lost: w.s.derivedLost.Load()})
		if err == nil && len(evs) > 0 {
			var todo []int
			_, todo, _, err = w.prepare(evs)
			if err == nil && len(todo) != len(evs) {
				err = fmt.Errorf("%d of its %d events repeat stored ones", len(evs)-len(todo), len(evs))
			}
			// What write would refuse, refused before anything is
			// written (a failed write fails the whole transaction); the
			// records encoded here are the ones written.
			recs := make([][]byte, len(evs))
			for i := 0; err == nil && i < len(evs); i++ {
				w.buf.Reset()
				if err = Encode(&w.buf, &evs[i]); err == nil {
					recs[i] = w.keep(w.buf.Bytes())
				}
			}
			if err == nil {
				for _, i := range todo {
					if _, err := w.writeRecord(&evs[i], recs[i]); err != nil {
						return err // the transaction's own failure
					}
				}
			}
		}
		if err != nil {
			w.s.derivedLost.Add(1)
			w.s.opts.Log.Error("ledger: a deriver drew nothing from an event", "deriver", d.Name(), "seq", seq, "type", e.Type, "err", err)
		}
	}
	return nil
}
