package world

import (
	"errors"
	"fmt"

	"github.com/tobe-body/tobe-body/ledger"
)

// ProjectionName names the model's projection.
const ProjectionName = "world"

// Projection is the temporal memory: every record, end, seen mark and
// change of the model's events, indexed by entity, source and valid
// time (see the keys in records.go), written in the transaction of the
// event (so in the transaction of the sensed event it was derived from)
// and read at startup. It follows only the model's own events, which
// are kept, so verify rebuilds it whatever retention deleted since.
type Projection struct{}

func (Projection) Name() string { return ProjectionName }
func (Projection) Types() []string {
	return []string{EventObserved, EventSeen, EventEnded, EventChanged}
}

// Apply implements ledger.Projection.
func (Projection) Apply(kv ledger.KV, e *ledger.Event) error {
	seq, ok := ledger.SeqOf(kv)
	if !ok {
		return errors.New("world: the projection needs the events' sequences")
	}
	switch e.Type {
	case EventObserved:
		var r Record
		if err := ledger.UnmarshalPayload(e.Payload, &r); err != nil {
			return fmt.Errorf("world: a record: %w", err)
		}
		if err := kv.Put(recordKey(seq), e.Payload); err != nil {
			return err
		}
		if err := kv.Put(currentKey(r.Entity, r.Source), u64(seq)); err != nil {
			return err
		}
		if err := kv.Put(key(kSource, r.Entity, r.Source), []byte{1}); err != nil {
			return err
		}
		if r.Supersedes != 0 {
			if err := kv.Put(closedKey(r.Supersedes), u64(seq)); err != nil {
				return err
			}
		}
		return kv.Put(validKey(r.Entity, r.Source, r.ValidFrom, seq), []byte{'o'})
	case EventSeen:
		var s Seen
		if err := ledger.UnmarshalPayload(e.Payload, &s); err != nil {
			return fmt.Errorf("world: a seen mark: %w", err)
		}
		return kv.Put(markKey(s.Channel, seq), e.Payload)
	case EventEnded:
		var x Ended
		if err := ledger.UnmarshalPayload(e.Payload, &x); err != nil {
			return fmt.Errorf("world: an end: %w", err)
		}
		if err := kv.Put(closedKey(x.Record), u64(seq)); err != nil {
			return err
		}
		ck := currentKey(x.Entity, x.Source)
		if getU64(kv.Get(ck)) == x.Record {
			if err := kv.Delete(ck); err != nil {
				return err
			}
		}
		return kv.Put(validKey(x.Entity, x.Source, x.At, seq), append([]byte{'x'}, x.Reason...))
	case EventChanged:
		var c Changed
		if err := ledger.UnmarshalPayload(e.Payload, &c); err != nil {
			return fmt.Errorf("world: a change: %w", err)
		}
		if err := kv.Put(entityKey(c.Entity), e.Payload); err != nil {
			return err
		}
		return kv.Put(historyKey(c.Entity, c.At, seq), e.Payload)
	}
	return nil
}
