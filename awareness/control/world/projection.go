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
	return []string{EventChanged, EventObserved, EventSeen}
}

// Apply implements ledger.Projection.
func (Projection) Apply(kv ledger.KV, e *ledger.Event) error {
	seq, ok := ledger.SeqOf(kv)
	if !ok {
		return errors.New("world: the projection needs the events' sequences")
	}
	switch e.Type {
	case EventChanged:
		var c Changed
		if err := ledger.UnmarshalPayload(e.Payload, &c); err != nil {
			return fmt.Errorf("world: a change: %w", err)
		}
		if err := applyStep(kv, seq, c.Ended, c.Records); err != nil {
			return err
		}
		// The change as the entity's state, without its step: the
		// records are kept once, under their own keys.
		c.Records, c.Ended = nil, nil
		b, err := ledger.MarshalPayload(c)
		if err != nil {
			return err
		}
		if err := kv.Put(entityKey(c.Entity), b); err != nil {
			return err
		}
		return kv.Put(historyKey(c.Entity, c.At, seq), b)
	case EventObserved:
		var st Step
		if err := ledger.UnmarshalPayload(e.Payload, &st); err != nil {
			return fmt.Errorf("world: a step: %w", err)
		}
		return applyStep(kv, seq, st.Ended, st.Records)
	case EventSeen:
		var s Seen
		if err := ledger.UnmarshalPayload(e.Payload, &s); err != nil {
			return fmt.Errorf("world: a seen mark: %w", err)
		}
		return kv.Put(markKey(s.Channel, seq), e.Payload)
	}
	return nil
}

// applyStep keeps the ends and then the records of a step recorded at
// seq.
func applyStep(kv ledger.KV, seq uint64, ended []Ended, recs []Record) error {
	for _, x := range ended {
		if err := kv.Put(closedKey(x.Entity, x.Source, x.Record), u64(seq)); err != nil {
			return err
		}
		ck := currentKey(x.Entity, x.Source)
		if getU64(kv.Get(ck)) == x.Record {
			if err := kv.Delete(ck); err != nil {
				return err
			}
		}
		if err := kv.Put(validKey(x.Entity, x.Source, x.At, seq), append([]byte{'x'}, x.Reason...)); err != nil {
			return err
		}
	}
	for _, r := range recs {
		b, err := ledger.MarshalPayload(r)
		if err != nil {
			return err
		}
		if err := kv.Put(recordKey(r.Entity, r.Source, seq), b); err != nil {
			return err
		}
		if err := kv.Put(currentKey(r.Entity, r.Source), u64(seq)); err != nil {
			return err
		}
		if err := kv.Put(key(kSource, r.Entity, r.Source), []byte{1}); err != nil {
			return err
		}
		if r.Supersedes != 0 {
			if err := kv.Put(closedKey(r.Entity, r.Source, r.Supersedes), u64(seq)); err != nil {
				return err
			}
		}
		if err := kv.Put(validKey(r.Entity, r.Source, r.ValidFrom, seq), []byte{'o'}); err != nil {
			return err
		}
	}
	return nil
}

// GenName names the projection of the model's generation.
const GenName = "world_gen"

// Gen is the model's generation: the sequence of the last event of the
// model, in a bucket of its own that holds nothing else, so the deriver
// reads it at every event for next to nothing (see Deriver).
type Gen struct{}

func (Gen) Name() string    { return GenName }
func (Gen) Types() []string { return Projection{}.Types() }

// Apply implements ledger.Projection.
func (Gen) Apply(kv ledger.KV, _ *ledger.Event) error {
	seq, ok := ledger.SeqOf(kv)
	if !ok {
		return errors.New("world: the generation needs the events' sequences")
	}
	return kv.Put(genKey, u64(seq))
}

// Projections are the model's projections.
func Projections() []ledger.Projection { return []ledger.Projection{Projection{}, Gen{}} }
