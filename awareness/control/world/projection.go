package world

import (
	"errors"
	"fmt"
	"math"

	"github.com/tobe-body/tobe-body/ledger"
)

// ProjectionName names the model's projection.
const ProjectionName = "world_memory_v3"

// Projection is the temporal memory: every record, end, seen mark and
// change of the model's events, indexed by entity, source and valid
// time (see the keys in records.go), written in the transaction of the
// event (so in the transaction of the sensed event it was derived from)
// and read at startup. It follows only the model's own events, which
// are kept, so verify rebuilds it whatever retention deleted since. It
// reads only what it writes over (a source's last entry): a rebuild
// into memory costs the same per event however long the history.
type Projection struct{}

func (Projection) Name() string { return ProjectionName }

// Retires names the memory's earlier forms (see ledger.Retirer): the
// first marked what the archive left with keys of their own, and the
// second kept every event's FROMs (r keys), not only those that are not
// the event's own times.
func (Projection) Retires() []string { return []string{"world_memory", "world_memory_v2"} }
func (Projection) Types() []string {
	return []string{EventChanged, EventObserved, EventSeen}
}

// Apply implements ledger.Projection.
func (Projection) Apply(kv ledger.KV, e *ledger.Event) error {
	seq, ok := ledger.SeqOf(kv)
	if !ok {
		return errors.New("world: the projection needs the events' sequences")
	}
	switch e.Type {
	case EventChanged, EventObserved:
		// Read as encoded, not decoded: the records are kept as they
		// are, and the change's state is its payload without them.
		w, err := readStep(e.Payload)
		if err != nil {
			return fmt.Errorf("world: a step: %w", err)
		}
		froms, moved, err := applyStep(kv, seq, w.ended, w.records)
		if err != nil {
			return err
		}
		if e.Type == EventObserved {
			if !moved {
				return nil
			}
			return putFroms(kv, seq, froms)
		}
		// From its valid time, but never before the change before it:
		// an entity's changes sort in the order recorded (see the keys).
		from := w.at
		if prev := kv.Get(entityKey(w.entity)); len(prev) >= 16 {
			t, pseq := tail(prev)
			from = max(from, t)
			if forgotten(kEntity, prev) { // it goes now that this takes its place
				if err := kv.Delete(historyKey(w.entity, t, pseq)); err != nil {
					return err
				}
			}
		}
		hk := historyKey(w.entity, from, seq)
		if err := kv.Put(hk, w.state); err != nil {
			return err
		}
		if moved || from != w.at {
			if err := putFroms(kv, seq, append(froms, from)); err != nil {
				return err
			}
		}
		return kv.Put(entityKey(w.entity), hk[len(hk)-16:])
	case EventSeen:
		raws, channels, err := seenMarks(e)
		if err != nil {
			return err
		}
		for i, raw := range raws {
			ch := channels[i]
			if old := kv.Get(lastMarkKey(ch)); forgotten(kMarked, old) {
				if err := kv.Delete(markKey(getU64(old), ch)); err != nil {
					return err
				}
			}
			if err := kv.Put(markKey(seq, ch), raw); err != nil {
				return err
			}
			if err := kv.Put(lastMarkKey(ch), u64(seq)); err != nil {
				return err
			}
		}
		return nil
	}
	return nil
}

// seenMarks reads a world.seen's marks as encoded (the ledger checked
// them), with the channel each names (all the projection needs of them:
// the marks are kept as they are).
func seenMarks(e *ledger.Event) (raws [][]byte, channels []string, err error) {
	err = ledger.CheckedFields(e.Payload, func(k, v []byte) error {
		if string(k) != "seen" {
			return nil
		}
		return ledger.CheckedItems(v, func(raw []byte) error {
			ch, err := markChannel(raw)
			if err != nil {
				return err
			}
			raws, channels = append(raws, raw), append(channels, ch)
			return nil
		})
	})
	if err != nil {
		return nil, nil, fmt.Errorf("world: seen marks: %w", err)
	}
	return raws, channels, nil
}

// markChannel reads the channel a seen mark names, as encoded (of a
// payload the ledger checked).
func markChannel(raw []byte) (ch string, err error) {
	err = ledger.CheckedFields(raw, func(k, v []byte) error {
		if string(k) != "channel" {
			return nil
		}
		ch, err = ledger.RawText(v)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("world: a seen mark: %w", err)
	}
	if ch == "" {
		return "", errors.New("world: a seen mark names no channel")
	}
	return ch, nil
}

// applyStep keeps the ends and then the records of a step recorded at
// seq, each as the next entry of its source, and returns the FROM of
// each entry, in that order, and whether one is not its own valid time
// (the entry before it began later).
func applyStep(kv ledger.KV, seq uint64, ended []Ended, recs []stepRecord) (froms []int64, moved bool, err error) {
	add := func(entity, source string, x entry, v []byte) error {
		lk := lastKey(entity, source)
		lv := kv.Get(lk)
		if last, ok := entryOf(lv); ok {
			if last.from > x.from {
				x.from, moved = last.from, true
			}
			if forgotten(kLast, lv) {
				if err := kv.Delete(entryKey(entity, source, last)); err != nil {
					return err
				}
			}
		}
		if err := kv.Put(entryKey(entity, source, x), v); err != nil {
			return err
		}
		froms = append(froms, x.from)
		return kv.Put(lk, x.tail())
	}
	for _, x := range ended {
		if x.Entity == "" || x.Source == "" {
			return nil, false, errors.New("world: an end names no entity or source")
		}
		if err := add(x.Entity, x.Source, entry{from: x.At, seq: seq, end: true}, tagged('x', x.Reason)); err != nil {
			return nil, false, err
		}
	}
	for _, r := range recs {
		if err := add(r.entity, r.source, entry{from: r.validFrom, seq: seq}, tagged('o', r.raw)); err != nil {
			return nil, false, err
		}
	}
	return froms, moved, nil
}

// tagged is an entry's value: its tag, then v.
func tagged[T string | []byte](tag byte, v T) []byte {
	return append(append(make([]byte, 0, 1+len(v)), tag), v...)
}

// putFroms keeps, for the event at seq, the FROM of each key it added to
// the index (see Forget), when one of them is not its own valid time
// (the ends' at, the records' valid_from, the change's at): the others
// Forget reads from the event itself.
func putFroms(kv ledger.KV, seq uint64, froms []int64) error {
	if len(froms) == 0 {
		return nil
	}
	b := make([]byte, 0, 8*len(froms))
	for _, f := range froms {
		b = append(b, ordTime(f)...)
	}
	return kv.Put(fromsKey(seq), b)
}

// Forget implements ledger.Forgetter: the archive took the event, and the
// memory lets go of what it added, but for what is still a source's,
// entity's or channel's last (what holds now), which goes when the next
// takes its place. The memory so reaches back as far as the ledger's
// audit_keep; what was true before is in the archive. The same state
// comes whether the event is forgotten before the events after it are
// applied (a rebuild) or after (the body).
func (Projection) Forget(kv ledger.KV, e *ledger.Event) error {
	seq, ok := ledger.SeqOf(kv)
	if !ok {
		return errors.New("world: the projection needs the events' sequences")
	}
	// forget deletes k (an entry, a change, a seen mark), unless it is
	// its source's, entity's or channel's last (p, the value of the
	// pointer at pk, points to it): then it stays, and the pointer is
	// marked (see the keys), so that it goes when the next takes its
	// place. Forgetting twice is forgetting once.
	forget := func(k, pk, p []byte, last bool) error {
		switch {
		case !last:
			return kv.Delete(k)
		case forgotten(pk[0], p):
			return nil
		}
		return kv.Put(pk, forgottenPointer(pk[0], p))
	}
	// forgetEntry forgets x, an entry of a source.
	forgetEntry := func(entity, source string, x entry) error {
		lk := lastKey(entity, source)
		p := kv.Get(lk)
		last, ok := entryOf(p)
		return forget(entryKey(entity, source, x), lk, p, ok && last == x)
	}
	switch e.Type {
	case EventChanged, EventObserved:
		w, err := readStep(e.Payload)
		if err != nil {
			return fmt.Errorf("world: a step: %w", err)
		}
		// The FROMs the event's keys took: kept when one is not its own
		// valid time (see putFroms), read from the event when not.
		fb := kv.Get(fromsKey(seq))
		kept := fb != nil
		next := func(own int64) int64 {
			if fb == nil {
				return own
			}
			if len(fb) < 8 {
				return math.MinInt64 // fewer than the event's keys: none of theirs
			}
			f := timeOf(fb)
			fb = fb[8:]
			return f
		}
		for _, end := range w.ended {
			if err := forgetEntry(end.Entity, end.Source, entry{from: next(end.At), seq: seq, end: true}); err != nil {
				return err
			}
		}
		for _, r := range w.records {
			if err := forgetEntry(r.entity, r.source, entry{from: next(r.validFrom), seq: seq}); err != nil {
				return err
			}
		}
		if e.Type == EventChanged {
			f := next(w.at)
			ek := entityKey(w.entity)
			p := kv.Get(ek)
			t, s := tail(p)
			if err := forget(historyKey(w.entity, f, seq), ek, p, len(p) >= 16 && t == f && s == seq); err != nil {
				return err
			}
		}
		if !kept {
			return nil
		}
		return kv.Delete(fromsKey(seq))
	case EventSeen:
		_, channels, err := seenMarks(e)
		if err != nil {
			return err
		}
		for _, ch := range channels {
			dk := lastMarkKey(ch)
			p := kv.Get(dk)
			if err := forget(markKey(seq, ch), dk, p, len(p) >= 8 && getU64(p) == seq); err != nil {
				return err
			}
		}
	}
	return nil
}

// Projections are the model's projections.
func Projections() []ledger.Projection { return []ledger.Projection{Projection{}} }
