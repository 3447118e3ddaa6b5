package gate

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/tobe-body/tobe-body/awareness/control/wait"
	"github.com/tobe-body/tobe-body/awareness/control/work"
	"github.com/tobe-body/tobe-body/ledger"
)

// EventDecided is the type of the record of a decision that was not to
// ignore: a wake, a question to a person, or a match recorded with the
// reason it did not wake.
const EventDecided = "gate.decided"

// EventBegan records where a gate that had decided nothing yet began:
// the ledger's last event when it first started. What came before it was
// never the gate's to decide, so a body whose ledger is older than its
// gate does not wake its agent for a year of history.
const EventBegan = "gate.began"

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
func (cursor) Types() []string { return []string{EventDecided, EventBegan} }
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
	var more []ledger.Event
	if c.d.Condition != "" && (c.d.Outcome == Wake || c.d.Outcome == Ask) {
		m := &wait.Matched{ID: c.d.Condition, Event: c.d.Event, At: c.at}
		evs, err := m.Decide(v)
		if err != nil && !errors.Is(err, wait.ErrRemoved) {
			return nil, err
		}
		more = append(more, evs...)
		if m.Condition.FollowUp != nil && err == nil {
			evs, err := c.followUp(v, &m.Condition)
			if err != nil {
				return nil, err
			}
			more = append(more, evs...)
		}
	}
	p, err := ledger.MarshalPayload(c.d)
	if err != nil {
		return nil, err
	}
	return append([]ledger.Event{{ID: ledger.NewID(), Type: EventDecided, OccurredAt: c.at.UnixNano(), Provenance: ledger.Inferred,
		Trust: ledger.High, Privacy: ledger.Internal, CausationID: c.cause, DedupeKey: "gate/" + c.d.Event, Payload: p}}, more...), nil
}

// FollowUpID is the id of the follow-up work item a wake for the event
// makes: one event wakes for one condition at most, so one id an event.
func FollowUpID(eventID string) string { return "follow-" + eventID }

// followUp makes the follow-up work item of condition cond for the
// decision's event: a child of the condition's work item, with its owner
// and authorization profile, naming the event. A follow-up the item's
// place does not allow (too deep, the parent gone) is not made, and the
// decision's path says why; the decision stands.
func (c *decide) followUp(v *ledger.View, cond *wait.Condition) ([]ledger.Event, error) {
	parent, ok, err := work.Lookup(v, cond.Owner)
	if err != nil {
		return nil, err
	}
	if !ok {
		c.d.step("follow-up", "not made: work item %s is not there", cond.Owner)
		return nil, nil
	}
	spec := work.Spec{ID: FollowUpID(c.d.Event), Goal: cond.FollowUp.Goal, DoneWhen: cond.FollowUp.DoneWhen, Owner: parent.Owner,
		Parent: parent.ID, AuthProfile: parent.AuthProfile, Source: c.d.Event, FollowUp: true}
	cr := work.NewCreate(spec, FollowUpBy, c.at)
	evs, err := cr.Decide(v)
	switch {
	case errors.Is(err, work.ErrInvalid), errors.Is(err, work.ErrExists):
		c.d.step("follow-up", "not made: %v", err)
		return nil, nil
	case err != nil:
		return nil, err
	}
	c.d.FollowUp = spec.ID
	c.d.step("follow-up", "made work item %s, a child of %s", spec.ID, parent.ID)
	return evs, nil
}

// FollowUpBy is who the record of a follow-up says made it: the body.
const FollowUpBy = "body"

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
	// Capture takes the evidence a condition asks for (its Evidence) when
	// it wakes the agent or asks a person, before the decision is
	// recorded, which names it; nil: none is taken.
	Capture func(ctx context.Context, c wait.Condition, e *ledger.Stored) (*Evidence, error)
	Now     func() time.Time
	// Decided, when set, hears the sequence of each event the gate is
	// done with: decided, recorded and pushed, or passed over.
	Decided func(seq uint64)
	Log     *slog.Logger
	// From is where a gate whose state cannot be read begins: after this
	// sequence (the ledger's last when the body started).
	From uint64

	ix     *Index
	after  uint64
	loaded bool
	// stateless: Load could not read the gate's state, and the gate runs
	// without it (see Load).
	stateless bool
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
	if ledger.UnmarshalPayload(e.Payload, &r) != nil || r.By == "" || r.By == "scheduler" || r.By == FollowUpBy {
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
		// After the wall clock stepped back past the push, it cannot be
		// told how long the interruption waited: it is closed as
		// unanswered, not kept open until the clock comes back.
		if d := now.UnixMilli() - o.At; d >= 0 && d < within.Milliseconds() {
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

// began is the command that records where a new gate begins, unless a
// cursor is already there.
type began struct{ seq uint64 }

func (c *began) Decide(v *ledger.View) ([]ledger.Event, error) {
	if v.Get(projCursor, keyCursor) != nil {
		return nil, nil
	}
	p, err := ledger.MarshalPayload(map[string]uint64{"seq": c.seq})
	if err != nil {
		return nil, err
	}
	return []ledger.Event{{ID: ledger.NewID(), Type: EventBegan, Provenance: ledger.Inferred, Trust: ledger.High,
		Privacy: ledger.Internal, Payload: p}}, nil
}

// Load reads where the gate is from the projections: the conditions
// that wait, the last event decided, the recent interruptions. A gate
// with no cursor yet begins after the ledger's last event, and records
// that. Run loads when it was not.
//
// When its state cannot be read, Load returns why, and the gate runs
// without it: from From, with no wait condition and no interruption
// counted, deciding by the hard, system and default rules alone, and
// pushing its wakes without recording them (its records are what could
// not be read). The agent is still told what the rules say it is told;
// it is the one way anything is pushed.
func (g *Gate) Load() error {
	err := g.load()
	if err != nil {
		g.ix, g.after, g.Sal.State, g.loaded, g.stateless = Build(nil), g.From, newInterrupts(), true, true
		return fmt.Errorf("gate: its state cannot be read, so it runs without it: %w", err)
	}
	return nil
}

func (g *Gate) load() error {
	conds, err := wait.List(g.Store, func(c *wait.Condition) bool { return c.Removed == "" })
	if err != nil {
		return err
	}
	after, found, err := g.cursor()
	if err != nil {
		return err
	}
	if !found {
		st, err := g.Store.Stats()
		if err != nil {
			return err
		}
		if _, err := g.Store.Execute(context.Background(), &began{seq: st.LastSeq}); err != nil {
			return fmt.Errorf("gate: recording where it begins: %w", err)
		}
		if after, _, err = g.cursor(); err != nil {
			return err
		}
	}
	st, err := loadInterrupts(g.Store)
	if err != nil {
		return err
	}
	g.ix, g.after, g.Sal.State, g.loaded = Build(conds), after, st, true
	return nil
}

// cursor reads the seq of the last event decided.
func (g *Gate) cursor() (after uint64, found bool, err error) {
	err = g.Store.ReadProjection(projCursor, func(kv ledger.ReadKV) error {
		if b := kv.Get(keyCursor); len(b) == 8 {
			after, found = binary.BigEndian.Uint64(b), true
		}
		return nil
	})
	return after, found, err
}

// poolExpiry is how often Run drops the noise pool's expired samples.
const poolExpiry = time.Minute

// Run decides until ctx ends.
func (g *Gate) Run(ctx context.Context) error {
	if !g.loaded {
		if err := g.Load(); err != nil && g.Log != nil {
			g.Log.Error("the gate cannot read its state: no wait condition is matched, and the default rules alone say what the agent is told", "err", err)
		}
	}
	after := g.after
	if g.Log != nil {
		g.Log.Info("gate", "conditions", g.ix.Len(), "after", after, "open_interruptions", len(g.Sal.State.open))
	}
	out := make([]*wait.Condition, 0, 16)
	var expired time.Time
	return g.Store.Follow(ctx, ledger.Filter{After: after}, func(e ledger.Stored) error {
		if g.Decided != nil {
			defer g.Decided(e.Seq)
		}
		g.unanswered(ctx, g.now())
		if now := g.now(); g.Pool != nil && now.Sub(expired) >= poolExpiry {
			g.Pool.Expire(now) // what is past its TTL leaves the pool's memory, not only its answers
			expired = now
		}
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
		out = g.ix.Match(&e, now.UnixMilli(), out[:0])
		d := g.Sal.Decide(&e, out, g.items, now)
		if d.Outcome == Ignore {
			if g.Pool != nil {
				g.Pool.Add(&e, g.Classes.Of(e.Type).Name, now)
			}
			return nil
		}
		if g.stateless {
			if (d.Outcome == Wake || d.Outcome == Ask) && g.Push != nil {
				g.push(d, &e)
			}
			return nil
		}
		if (d.Outcome == Wake || d.Outcome == Ask) && d.Condition != "" && g.Capture != nil {
			if c, ok := g.ix.Get(d.Condition); ok && c.Evidence != nil {
				ev, err := g.Capture(ctx, *c, &e)
				switch {
				case err != nil:
					d.EvidenceError = err.Error()
				default:
					d.Evidence = ev
				}
			}
		}
		cmd := &decide{d: d, cause: e.ID, at: now}
		// A wake or a question is on disk before it is pushed: what was
		// not recorded did not happen. A record alone goes to disk with
		// the next sync: a power cut before it takes the event's record
		// with it, or has the gate decide the event again.
		execute := g.Store.Execute
		if d.Outcome == Record {
			execute = g.Store.ExecuteSoon
		}
		if _, err := execute(context.WithoutCancel(ctx), cmd); err != nil {
			if g.Log != nil {
				g.Log.Error("gate: the decision was not recorded", "event", d.Event, "err", err)
			}
			return nil // not pushed: what was not recorded did not happen
		}
		d = cmd.d // as recorded: with the follow-up it made
		if c, ok := g.ix.Get(d.Condition); ok && (d.Outcome == Wake || d.Outcome == Ask) && !cmd.dup {
			c.LastMatchedAt, c.LastEvent = now.UnixMilli(), d.Event
		}
		if !cmd.dup && (d.Outcome == Wake || d.Outcome == Ask) {
			g.Sal.State.pushed(Interruption{Event: d.Event, WorkItem: d.WorkItem, Condition: d.Condition, Kind: d.Outcome, At: now.UnixMilli()})
			if g.Push != nil {
				g.push(d, &e)
			}
		}
		return nil
	})
}

// push tells Push of d, with the default rule whose words tell of e when
// the decision did not find it deciding: the rules are matched here, in
// the gate, and once.
func (g *Gate) push(d Decision, e *ledger.Stored) {
	if d.Words == 0 {
		d.Words = g.Sal.Words(e)
	}
	g.Push(d, *e)
}

// follow keeps the index in step with a wait event.
func (g *Gate) follow(e *ledger.Stored) {
	r, err := wait.Read(&e.Event, e.Seq)
	if err != nil {
		return
	}
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
	d, found, err := ledger.ReadRecord[Decision](r, projDecisions, []byte(eventID))
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
