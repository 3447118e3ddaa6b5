package gate

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tobe-body/tobe-body/awareness/control/work"
	"github.com/tobe-body/tobe-body/ledger"
)

// Budget bounds interruptions: at most Max in any Window.
type Budget struct {
	Max    int
	Window time.Duration
}

// Quiet is a quiet period of each day, From to To in the body's local
// time ("22:00" to "07:00" spans midnight): nothing but a hard rule's
// event wakes then.
type Quiet struct {
	From, To string
}

// in tells whether t falls in the period.
func (q Quiet) in(t time.Time) bool {
	from, err1 := time.Parse("15:04", q.From)
	to, err2 := time.Parse("15:04", q.To)
	if err1 != nil || err2 != nil {
		return false
	}
	m := t.Hour()*60 + t.Minute()
	f, e := from.Hour()*60+from.Minute(), to.Hour()*60+to.Minute()
	if f <= e {
		return m >= f && m < e
	}
	return m >= f || m < e
}

// Check checks a quiet period's times.
func (q Quiet) Check() error {
	for _, s := range []string{q.From, q.To} {
		if _, err := time.Parse("15:04", s); err != nil {
			return fmt.Errorf("quiet period %s-%s: %q is not HH:MM", q.From, q.To, s)
		}
	}
	return nil
}

// Interruption is a wake or a question pushed, as the intervention
// record keeps it: what triggered it, its kind, and who answered it and
// how long it took (an agent's or a person's change of the work item),
// or that nobody did.
type Interruption struct {
	Event     string  `cbor:"event_id" json:"event_id"`
	WorkItem  string  `cbor:"work_item,omitempty" json:"work_item,omitempty"`
	Condition string  `cbor:"condition,omitempty" json:"condition,omitempty"`
	Kind      Outcome `cbor:"kind" json:"kind"`
	At        int64   `cbor:"at" json:"at"` // Unix ms
	// AnsweredBy is the principal whose change of the work item answered
	// it; AnsweredAfterMS how long after the push.
	AnsweredBy      string `cbor:"answered_by,omitempty" json:"answered_by,omitempty"`
	AnsweredAfterMS int64  `cbor:"answered_after_ms,omitempty" json:"answered_after_ms,omitempty"`
	// Unanswered: nobody answered within the answer window.
	Unanswered bool `cbor:"unanswered,omitempty" json:"unanswered,omitempty"`
}

// The intervention events.
const (
	EventAnswered   = "gate.answered"
	EventUnanswered = "gate.unanswered"
)

// keep bounds the interruptions the state remembers per work item and in
// all: more than any budget counts.
const keep = 64

// Interrupts is what budgets and merging need of the interruptions
// pushed: per work item and in all, the times of the latest, and the
// one of each item still waiting for an answer. The projection
// gate_interrupts keeps it, bounded, so a start reads it, not history.
type Interrupts struct {
	byItem map[string][]int64
	all    []int64
	open   map[string]Interruption // by work item
}

func newInterrupts() *Interrupts {
	return &Interrupts{byItem: map[string][]int64{}, open: map[string]Interruption{}}
}

// count is how many of times fall after since and not after now: a time
// after now is of before the wall clock stepped back, and does not count
// (a budget is never spent for longer than its window by a step).
func count(times []int64, since, now int64) int {
	n := 0
	for _, t := range times {
		if t > since && t <= now {
			n++
		}
	}
	return n
}

func push(times []int64, at int64) []int64 {
	times = append(times, at)
	if len(times) > keep {
		times = slices.Delete(times, 0, len(times)-keep)
	}
	return times
}

// within tells whether an age (now minus a time, in ms) is within a
// span: a negative age, of a time the wall clock stepped back past, is
// not.
func within(age, span int64) bool { return age >= 0 && age < span }

// pushed notes an interruption.
func (st *Interrupts) pushed(in Interruption) {
	st.all = push(st.all, in.At)
	if in.WorkItem != "" {
		st.byItem[in.WorkItem] = push(st.byItem[in.WorkItem], in.At)
		st.open[in.WorkItem] = in
	}
}

// closed notes an answer, or none, to the item's open interruption.
func (st *Interrupts) closed(item, event string) {
	if o, ok := st.open[item]; ok && o.Event == event {
		delete(st.open, item)
	}
}

// budgetStep weighs the budgets and the quiet period for a decision
// about to wake at band b for item, at now: "" when it may, else why not.
func (s *Salience) budgetStep(item string, budget *work.Budget, b Band, now time.Time, step func(rule, format string, a ...any)) string {
	r := s.Rules
	for _, q := range r.Quiet {
		if q.in(now.In(time.Local)) {
			step("quiet", "%s-%s: only hard rules wake", q.From, q.To)
			return fmt.Sprintf("quiet period %s-%s: only the e-stop, safety and permission events wake", q.From, q.To)
		}
	}
	st := s.State
	if st == nil {
		return ""
	}
	if b != BandCritical {
		ib := r.ItemBudget
		if budget != nil {
			ib = Budget{Max: budget.Max, Window: time.Duration(budget.WindowS) * time.Second}
		}
		if ib.Window > 0 && item != "" {
			if n := count(st.byItem[item], now.Add(-ib.Window).UnixMilli(), now.UnixMilli()); n >= ib.Max {
				step("budget", "work item %s: %d of %d interruptions in %v", item, n, ib.Max, ib.Window)
				return fmt.Sprintf("budget: work item %s had %d of its %d interruptions in the last %v", item, n, ib.Max, ib.Window)
			}
		}
		if g := r.Global; g.Window > 0 {
			if n := count(st.all, now.Add(-g.Window).UnixMilli(), now.UnixMilli()); n >= g.Max {
				step("budget", "the body: %d of %d interruptions in %v", n, g.Max, g.Window)
				return fmt.Sprintf("budget: the body made %d of its %d interruptions in the last %v", n, g.Max, g.Window)
			}
		}
		step("budget", "within the budgets")
	} else {
		step("budget", "critical: above the ordinary budgets")
	}
	if o, ok := st.open[item]; ok && r.Merge > 0 && within(now.UnixMilli()-o.At, r.Merge.Milliseconds()) && b != BandCritical {
		step("merge", "work item %s has an interruption unanswered since %v ago (event %s)", item, time.Duration(now.UnixMilli()-o.At)*time.Millisecond, o.Event)
		return fmt.Sprintf("merged: work item %s was interrupted %v ago for event %s, not yet answered", item,
			time.Duration(now.UnixMilli()-o.At)*time.Millisecond, o.Event)
	}
	return ""
}

// The projection of recent interruptions: per work item "i/ITEM" and in
// all "all", the latest times (8 bytes each, up to keep); per work item
// "o/ITEM" the open one.
const projInterrupts = "gate_interrupts"

type interrupts struct{}

func (interrupts) Name() string { return projInterrupts }
func (interrupts) Types() []string {
	return []string{EventDecided, EventAnswered, EventUnanswered}
}

func (interrupts) Apply(kv ledger.KV, e *ledger.Event) error {
	switch e.Type {
	case EventDecided:
		var d Decision
		if err := ledger.UnmarshalPayload(e.Payload, &d); err != nil {
			return fmt.Errorf("gate: %s %s: %w", e.Type, e.ID, err)
		}
		if d.Outcome != Wake && d.Outcome != Ask {
			return nil
		}
		at := e.OccurredAt / int64(time.Millisecond)
		for _, k := range []string{"all", "i/" + d.WorkItem} {
			if k == "i/" {
				continue
			}
			times := decodeTimes(kv.Get([]byte(k)))
			if err := kv.Put([]byte(k), encodeTimes(push(times, at))); err != nil {
				return err
			}
		}
		if d.WorkItem == "" {
			return nil
		}
		in := Interruption{Event: d.Event, WorkItem: d.WorkItem, Condition: d.Condition, Kind: d.Outcome, At: at}
		b, err := ledger.MarshalPayload(in)
		if err != nil {
			return err
		}
		return kv.Put([]byte("o/"+d.WorkItem), b)
	default:
		var in Interruption
		if err := ledger.UnmarshalPayload(e.Payload, &in); err != nil {
			return fmt.Errorf("gate: %s %s: %w", e.Type, e.ID, err)
		}
		k := []byte("o/" + in.WorkItem)
		if b := kv.Get(k); b != nil {
			var open Interruption
			if ledger.UnmarshalPayload(b, &open) == nil && open.Event == in.Event {
				return kv.Delete(k)
			}
		}
		return nil
	}
}

func decodeTimes(b []byte) []int64 {
	out := make([]int64, 0, len(b)/8)
	for i := 0; i+8 <= len(b); i += 8 {
		out = append(out, int64(binary.BigEndian.Uint64(b[i:])))
	}
	return out
}

func encodeTimes(ts []int64) []byte {
	b := make([]byte, 0, 8*len(ts))
	for _, t := range ts {
		b = binary.BigEndian.AppendUint64(b, uint64(t))
	}
	return b
}

// loadInterrupts reads the state from the projection.
func loadInterrupts(r work.Reader) (*Interrupts, error) {
	st := newInterrupts()
	err := r.ReadProjection(projInterrupts, func(kv ledger.ReadKV) error {
		return kv.ForEach(func(k, v []byte) error {
			key := string(k)
			switch {
			case key == "all":
				st.all = decodeTimes(v)
			case strings.HasPrefix(key, "i/"):
				st.byItem[key[2:]] = decodeTimes(v)
			case strings.HasPrefix(key, "o/"):
				var in Interruption
				if err := ledger.UnmarshalPayload(v, &in); err != nil {
					return err
				}
				st.open[key[2:]] = in
			}
			return nil
		})
	})
	return st, err
}

// answer is the command that records an interruption's answer, or that
// nobody answered.
type answer struct {
	in Interruption
	at time.Time
}

func (c *answer) Decide(*ledger.View) ([]ledger.Event, error) {
	typ := EventAnswered
	if c.in.Unanswered {
		typ = EventUnanswered
	}
	p, err := ledger.MarshalPayload(c.in)
	if err != nil {
		return nil, err
	}
	return []ledger.Event{{ID: ledger.NewID(), Type: typ, OccurredAt: c.at.UnixNano(), Provenance: ledger.Observed, Trust: ledger.High,
		Privacy: ledger.Internal, DedupeKey: "gate-answer/" + c.in.Event, Payload: p}}, nil
}
