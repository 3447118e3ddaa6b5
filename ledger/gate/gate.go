package gate

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/tobe-body/tobe-body/ledger"
	"github.com/tobe-body/tobe-body/ledger/wait"
	"github.com/tobe-body/tobe-body/ledger/work"
)

// EventDecided is the type of the record of a decision that was not to
// ignore: a wake, a question to a person, or a match recorded with the
// reason it did not wake.
const EventDecided = "gate.decided"

// Projections are the gate's: where it is (gate_cursor), the decisions
// by event (gate_decisions) and the recent interruptions
// (gate_interrupts), with the work items and the wait conditions it
// reads. Register them in ledger.Options.Projections.
func Projections() []ledger.Projection {
	return []ledger.Projection{work.Items{}, wait.Conditions{}, cursor{}, decisions{}, interrupts{}}
}

const (
	projCursor    = "gate_cursor"
	projDecisions = "gate_decisions"
)

var keyCursor = []byte("seq")

// cursor keeps the seq of the last event decided (gate.decided's Seq).
type cursor struct{}

func (cursor) Name() string    { return projCursor }
func (cursor) Types() []string { return []string{EventDecided} }
func (cursor) Apply(kv ledger.KV, e *ledger.Event) error {
	var d Decision
	if err := ledger.UnmarshalPayload(e.Payload, &d); err != nil {
		return fmt.Errorf("gate: %s %s: %w", e.Type, e.ID, err)
	}
	if old := kv.Get(keyCursor); old != nil && binary.BigEndian.Uint64(old) >= d.Seq {
		return nil
	}
	return kv.Put(keyCursor, binary.BigEndian.AppendUint64(nil, d.Seq))
}

// decisions keeps, per event id decided, the decision.
type decisions struct{}

func (decisions) Name() string    { return projDecisions }
func (decisions) Types() []string { return []string{EventDecided} }
func (decisions) Apply(kv ledger.KV, e *ledger.Event) error {
	var d Decision
	if err := ledger.UnmarshalPayload(e.Payload, &d); err != nil {
		return fmt.Errorf("gate: %s %s: %w", e.Type, e.ID, err)
	}
	return kv.Put([]byte(d.Event), e.Payload)
}

// decide is the command that records a decision, and the match of the
// condition that woke (its cooldown starts there). An event is decided
// once: the decision's dedupe key is the event's id, so a decision made
// again after a crash is a duplicate and Dup says so.
type decide struct {
	d     Decision
	cause ledger.UUID
	at    time.Time
	dup   bool
}

func (c *decide) Decide(v *ledger.View) ([]ledger.Event, error) {
	if v.Get(projDecisions, []byte(c.d.Event)) != nil {
		c.dup = true
		return nil, nil
	}
	p, err := ledger.MarshalPayload(c.d)
	if err != nil {
		return nil, err
	}
	evs := []ledger.Event{{ID: ledger.NewID(), Type: EventDecided, OccurredAt: c.at.UnixNano(), Provenance: ledger.Inferred,
		Trust: ledger.High, Privacy: ledger.Internal, CausationID: c.cause, DedupeKey: "gate/" + c.d.Event, Payload: p}}
	if c.d.Condition != "" && (c.d.Outcome == Wake || c.d.Outcome == Ask) {
		m := &wait.Matched{ID: c.d.Condition, Event: c.d.Event, At: c.at}
		more, err := m.Decide(v)
		if err != nil && !errors.Is(err, wait.ErrRemoved) {
			return nil, err
		}
		evs = append(evs, more...)
	}
	return evs, nil
}

// Gate follows the ledger and decides on every event after the last it
// decided: L0 against the wait conditions (kept in step with the wait
// events it follows), L1's salience, the noise pool for what nothing
// wanted. Each decision that is not to ignore is recorded, with the
// match that woke, before Push hears of a wake or a question: after a
// crash the events after the last recorded decision are decided again,
// and one already decided is never pushed twice.
type Gate struct {
	Store *ledger.Store
	Sal   *Salience
	Pool  *Pool
	// Classes give the noise pool each event's class.
	Classes ledger.Classes
	// Push hears of each wake and question, once, after its record.
	Push func(Decision, ledger.Stored)
	Now  func() time.Time
	Log  *slog.Logger

	// mu orders the index's changes (the gate's goroutine) with Claims
	// (another's); the gate's own reads need no lock.
	mu     sync.RWMutex
	ix     *Index
	after  uint64
	loaded bool
}

// Claims tells whether a wait condition matches e now (L0 only): the
// agent boundary leaves to the gate what a condition wants, so that one
// event is not pushed twice. Safe for concurrent use, once Load ran.
func (g *Gate) Claims(e *ledger.Event) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.ix == nil {
		return false
	}
	var f wait.Fields
	return len(g.ix.match(e, g.now().UnixMilli(), nil, &f)) > 0
}

func (g *Gate) now() time.Time {
	if g.Now == nil {
		return time.Now()
	}
	return g.Now()
}

// answered records the answer to an open interruption of a work item
// when e is a change of it by a principal (the agent or a person, not
// the body's own scheduler), after the interruption.
func (g *Gate) answered(ctx context.Context, e *ledger.Stored) {
	st := g.Sal.State
	if st == nil {
		return
	}
	var r work.Record
	if ledger.UnmarshalPayload(e.Payload, &r) != nil || r.By == "" || r.By == "scheduler" || r.By == "body" {
		return
	}
	o, ok := st.open[r.Item.ID]
	at := e.OccurredAt / int64(time.Millisecond)
	if !ok || at < o.At {
		return
	}
	o.AnsweredBy, o.AnsweredAfterMS = r.By, at-o.At
	if _, err := g.Store.Execute(context.WithoutCancel(ctx), &answer{in: o, at: g.now()}); err == nil {
		st.closed(o.WorkItem, o.Event)
	}
}

// unanswered records the open interruptions nobody answered within the
// answer window.
func (g *Gate) unanswered(ctx context.Context, now time.Time) {
	st, within := g.Sal.State, g.Sal.Rules.AnswerWithin
	if st == nil || within <= 0 {
		return
	}
	for _, o := range st.open {
		if now.UnixMilli()-o.At < within.Milliseconds() {
			continue
		}
		o.Unanswered = true
		if _, err := g.Store.Execute(context.WithoutCancel(ctx), &answer{in: o, at: now}); err == nil {
			st.closed(o.WorkItem, o.Event)
		}
	}
}

// own are the types the gate does not decide on: its own records and
// those of the control plane.
var own = []string{"gate.", "wait.", "work."}

// Load reads where the gate is from the projections: the conditions
// that wait, the last event decided, the recent interruptions. Run
// loads when it was not.
func (g *Gate) Load() error {
	conds, err := wait.List(g.Store, func(c *wait.Condition) bool { return c.Removed == "" })
	if err != nil {
		return err
	}
	var after uint64
	err = g.Store.ReadProjection(projCursor, func(kv ledger.ReadKV) error {
		if b := kv.Get(keyCursor); len(b) == 8 {
			after = binary.BigEndian.Uint64(b)
		}
		return nil
	})
	if err != nil {
		return err
	}
	st, err := loadInterrupts(g.Store)
	if err != nil {
		return err
	}
	g.mu.Lock()
	g.ix, g.after, g.Sal.State, g.loaded = Build(conds), after, st, true
	g.mu.Unlock()
	return nil
}

// Run decides until ctx ends.
func (g *Gate) Run(ctx context.Context) error {
	if !g.loaded {
		if err := g.Load(); err != nil {
			return err
		}
	}
	after := g.after
	if g.Log != nil {
		g.Log.Info("gate", "conditions", g.ix.Len(), "after", after, "open_interruptions", len(g.Sal.State.open))
	}
	out := make([]*wait.Condition, 0, 16)
	return g.Store.Follow(ctx, ledger.Filter{After: after}, func(e ledger.Stored) error {
		g.unanswered(ctx, g.now())
		switch {
		case strings.HasPrefix(e.Type, "wait."):
			g.follow(&e)
		case strings.HasPrefix(e.Type, "work."):
			g.answered(ctx, &e)
		}
		for _, p := range own {
			if strings.HasPrefix(e.Type, p) {
				return nil
			}
		}
		now := g.now()
		out = g.ix.Match(&e.Event, now.UnixMilli(), out[:0])
		d := g.Sal.Decide(&e, out, g.items, now)
		if d.Outcome == Ignore {
			if g.Pool != nil {
				g.Pool.Add(&e, g.Classes.Of(e.Type).Name, now)
			}
			return nil
		}
		cmd := &decide{d: d, cause: e.ID, at: now}
		if _, err := g.Store.Execute(context.WithoutCancel(ctx), cmd); err != nil {
			if g.Log != nil {
				g.Log.Error("gate: the decision was not recorded", "event", d.Event, "err", err)
			}
			return nil // not pushed: what was not recorded did not happen
		}
		if c, ok := g.ix.Get(d.Condition); ok && (d.Outcome == Wake || d.Outcome == Ask) && !cmd.dup {
			g.mu.Lock()
			c.LastMatchedAt, c.LastEvent = now.UnixMilli(), d.Event
			g.mu.Unlock()
		}
		if !cmd.dup && (d.Outcome == Wake || d.Outcome == Ask) {
			g.Sal.State.pushed(Interruption{Event: d.Event, WorkItem: d.WorkItem, Condition: d.Condition, Kind: d.Outcome, At: now.UnixMilli()})
			if g.Push != nil {
				g.Push(d, e)
			}
		}
		return nil
	})
}

// follow keeps the index in step with a wait event.
func (g *Gate) follow(e *ledger.Stored) {
	r, err := wait.Read(&e.Event)
	if err != nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if r.Condition.Removed != "" {
		g.ix.Delete(r.Condition.ID)
		return
	}
	g.ix.Put(r.Condition)
}

func (g *Gate) items(id string) (work.Item, bool) {
	it, err := work.Get(g.Store, id)
	return it, err == nil
}

// Explain returns the decision recorded for an event, or, when there is
// none, why: the noise pool's sample of it, or that nothing wanted it.
func Explain(r work.Reader, pool *Pool, eventID string, now time.Time) (Decision, error) {
	var d Decision
	found := false
	err := r.ReadProjection(projDecisions, func(kv ledger.ReadKV) error {
		b := kv.Get([]byte(eventID))
		if b == nil {
			return nil
		}
		found = true
		return ledger.UnmarshalPayload(b, &d)
	})
	if err != nil {
		return Decision{}, fmt.Errorf("gate: %w", err)
	}
	if found {
		return d, nil
	}
	d = Decision{Event: eventID, Outcome: Ignore, Reason: reasonNoCondition}
	if pool != nil {
		if s, ok := pool.Find(eventID, now); ok {
			d.Seq, d.Type = s.Seq, s.Type
			d.Path = []Step{{"L0", "no wait condition wanted it"}, {"noise pool", fmt.Sprintf("kept in the sample of its channel and class since %s", s.At.UTC().Format(time.RFC3339))}}
			return d, nil
		}
	}
	d.Path = []Step{{"L0", "no decision was recorded for it: nothing wanted it, or the gate has not reached it"}}
	return d, nil
}
