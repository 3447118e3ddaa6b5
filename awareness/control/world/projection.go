package world

import (
	"errors"
	"fmt"

	"github.com/fxamacker/cbor/v2"

	"github.com/tobe-body/tobe-body/ledger"
)

// ProjectionName names the model's projection.
const ProjectionName = "world"

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
func (Projection) Types() []string {
	return []string{EventChanged, EventObserved, EventSeen}
}

// stepWire is a step's payload (a Changed or a Step) as Apply reads it:
// its records as they were encoded, to be kept as they are.
type stepWire struct {
	Changed
	Records []cbor.RawMessage `cbor:"records,omitempty"`
}

// Apply implements ledger.Projection.
func (Projection) Apply(kv ledger.KV, e *ledger.Event) error {
	seq, ok := ledger.SeqOf(kv)
	if !ok {
		return errors.New("world: the projection needs the events' sequences")
	}
	switch e.Type {
	case EventChanged, EventObserved:
		var w stepWire
		if err := ledger.UnmarshalPayload(e.Payload, &w); err != nil {
			return fmt.Errorf("world: a step: %w", err)
		}
		if err := applyStep(kv, seq, w.Ended, w.Records); err != nil {
			return err
		}
		if e.Type == EventObserved {
			return nil
		}
		// The change as the entity's state, without its step: the
		// records are kept once, under their sources.
		c := w.Changed
		c.Records, c.Ended = nil, nil
		b, err := ledger.MarshalPayload(c)
		if err != nil {
			return err
		}
		// From its valid time, but never before the change before it:
		// an entity's changes sort in the order recorded (see the keys).
		from := c.At
		if prev := kv.Get(entityKey(c.Entity)); len(prev) >= 16 {
			t, _ := tail(prev)
			from = max(from, t)
		}
		hk := historyKey(c.Entity, from, seq)
		if err := kv.Put(hk, b); err != nil {
			return err
		}
		return kv.Put(entityKey(c.Entity), hk[len(hk)-16:])
	case EventSeen:
		var ms struct {
			Seen []cbor.RawMessage `cbor:"seen"`
		}
		if err := ledger.UnmarshalPayload(e.Payload, &ms); err != nil {
			return fmt.Errorf("world: seen marks: %w", err)
		}
		for _, raw := range ms.Seen {
			var s Seen
			if err := ledger.UnmarshalPayload(raw, &s); err != nil {
				return fmt.Errorf("world: a seen mark: %w", err)
			}
			if s.Channel == "" {
				return errors.New("world: a seen mark names no channel")
			}
			if err := kv.Put(markKey(seq, s.Channel), raw); err != nil {
				return err
			}
			if err := kv.Put(lastMarkKey(s.Channel), u64(seq)); err != nil {
				return err
			}
		}
		return nil
	}
	return nil
}

// applyStep keeps the ends and then the records of a step recorded at
// seq, each as the next entry of its source.
func applyStep(kv ledger.KV, seq uint64, ended []Ended, recs []cbor.RawMessage) error {
	add := func(entity, source string, x entry, v []byte) error {
		lk := lastKey(entity, source)
		if last, ok := entryOf(kv.Get(lk)); ok {
			x.from = max(x.from, last.from)
		}
		if err := kv.Put(entryKey(entity, source, x), v); err != nil {
			return err
		}
		return kv.Put(lk, x.tail())
	}
	for _, x := range ended {
		if x.Entity == "" || x.Source == "" {
			return errors.New("world: an end names no entity or source")
		}
		if err := add(x.Entity, x.Source, entry{from: x.At, seq: seq, end: true}, append([]byte{'x'}, x.Reason...)); err != nil {
			return err
		}
	}
	for _, raw := range recs {
		var r Record
		if err := ledger.UnmarshalPayload(raw, &r); err != nil {
			return fmt.Errorf("world: a record: %w", err)
		}
		if r.Entity == "" || r.Source == "" {
			return errors.New("world: a record names no entity or source")
		}
		if err := add(r.Entity, r.Source, entry{from: r.ValidFrom, seq: seq}, append([]byte{'o'}, raw...)); err != nil {
			return err
		}
	}
	return nil
}

// Projections are the model's projections.
func Projections() []ledger.Projection { return []ledger.Projection{Projection{}} }
