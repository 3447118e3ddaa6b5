package gate

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/awareness/control/wait"
	"github.com/tobe-body/tobe-body/awareness/control/work"
	"github.com/tobe-body/tobe-body/ledger"
)

func stored(typ, ch string, trust ledger.Level) *ledger.Stored {
	return &ledger.Stored{Seq: 7, Event: ledger.Event{ID: ledger.NewID(), Type: typ, ChannelID: ch, Trust: trust, Provenance: ledger.Observed}}
}

func itemsOf(its ...work.Item) Items {
	return func(id string) (work.Item, bool) {
		for _, it := range its {
			if it.ID == id {
				return it, true
			}
		}
		return work.Item{}, false
	}
}

// TestDecide: one row per rule of L1, each with the outcome, the
// attention of a wake, and the reason of everything else.
func TestDecide(t *testing.T) {
	now := t0.Add(time.Hour)
	door := &wait.Condition{ID: "door", Owner: "watch", Priority: wait.High, CooldownMS: 60_000}
	cooled := &wait.Condition{ID: "cooled", Owner: "watch", Priority: wait.High, CooldownMS: 60_000, LastMatchedAt: now.Add(-20 * time.Second).UnixMilli(), LastEvent: "E1"}
	past := &wait.Condition{ID: "past", Owner: "watch", Priority: wait.Medium, CooldownMS: 60_000, LastMatchedAt: now.Add(-2 * time.Minute).UnixMilli()}
	low := &wait.Condition{ID: "low", Owner: "watch", Priority: wait.Low}
	orphan := &wait.Condition{ID: "orphan", Owner: "gone", Priority: wait.High}
	ofClosed := &wait.Condition{ID: "of-closed", Owner: "done", Priority: wait.High}
	ofUser := &wait.Condition{ID: "of-user", Owner: "ask", Priority: wait.Medium}
	items := itemsOf(work.Item{ID: "watch", Status: work.Running}, work.Item{ID: "done", Status: work.Closed}, work.Item{ID: "ask", Status: work.AwaitingUser})
	for _, c := range []struct {
		name      string
		e         *ledger.Stored
		matches   []*wait.Condition
		outcome   Outcome
		attention string
		reason    string
	}{
		{"the e-stop, with no condition", stored("estop.tripped", "estop.main", ledger.High), nil, Wake, "max", ""},
		{"the e-stop, with a condition in cooldown", stored("estop.tripped", "estop.main", ledger.High), []*wait.Condition{cooled}, Wake, "max", ""},
		{"a person's takeover", stored("lease.human_takeover", "gpio.relay1", ledger.High), nil, Wake, "high", ""},
		{"a grant", stored("grant.added", "", ledger.High), nil, Wake, "high", ""},
		{"a system event", stored("channel.revoked", "camera.front", ledger.High), nil, Wake, "high", ""},
		{"nothing wants it", stored("gpio.changed", "gpio.button", ledger.Medium), nil, Ignore, "", "no wait condition wants it"},
		{"a match", stored("camera.motion_started", "camera.front", ledger.Medium), []*wait.Condition{door}, Wake, "high", ""},
		{"a match past its cooldown", stored("camera.motion_started", "camera.front", ledger.Medium), []*wait.Condition{past}, Wake, "medium", ""},
		{"a match in its cooldown", stored("camera.motion_started", "camera.front", ledger.Medium), []*wait.Condition{cooled}, Record, "", "cooldown: condition cooled matched 20s ago (event E1), within its 1m0s"},
		{"a low priority match", stored("camera.motion_started", "camera.front", ledger.Medium), []*wait.Condition{low}, Wake, "low", ""},
		{"a band from the rules above the priority", stored("body.disk_low", "body.self", ledger.High), []*wait.Condition{low}, Wake, "high", ""},
		{"a work item not there", stored("camera.motion_started", "camera.front", ledger.Medium), []*wait.Condition{orphan}, Record, "", "work item gone is not there"},
		{"a work item closed", stored("camera.motion_started", "camera.front", ledger.Medium), []*wait.Condition{ofClosed}, Record, "", "work item done is closed"},
		{"an untrusted event", stored("camera.motion_started", "camera.front", ledger.Off), []*wait.Condition{door}, Record, "", "low confidence: the event's trust off is below low"},
		{"a work item awaiting a person", stored("camera.motion_started", "camera.front", ledger.Medium), []*wait.Condition{ofUser}, Ask, "medium", "work item ask awaits a person"},
		{"the weightier of two, in cooldown, then the other", stored("camera.motion_started", "camera.front", ledger.Medium), []*wait.Condition{low, cooled}, Wake, "low", ""},
		{"two that do not wake: the weightier's reason", stored("camera.motion_started", "camera.front", ledger.Medium), []*wait.Condition{ofClosed, cooled}, Record, "", "cooldown: condition cooled"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := NewSalience(DefaultRules())
			d := s.Decide(c.e, c.matches, items, now)
			if d.Outcome != c.outcome || d.Attention != c.attention || !strings.HasPrefix(d.Reason, c.reason) || (c.reason == "") != (d.Reason == "") {
				t.Fatalf("%s at %q, reason %q; want %s at %q, reason %q\n%+v", d.Outcome, d.Attention, d.Reason, c.outcome, c.attention, c.reason, d.Path)
			}
			if len(d.Path) == 0 || d.Path[len(d.Path)-1].Rule != "decision" || d.Event != c.e.ID.String() || d.Seq != 7 {
				t.Errorf("the decision's path or event: %+v", d)
			}
		})
	}
}

// TestNovelty: a source that repeats stops waking after Repeats events
// within about a half-life, and is novel again when it has been quiet.
func TestNovelty(t *testing.T) {
	s := NewSalience(Rules{NoveltyHalfLife: time.Minute, Repeats: 3})
	c := &wait.Condition{ID: "c", Owner: "w", Priority: wait.Medium}
	items := itemsOf(work.Item{ID: "w", Status: work.Running})
	var got []Outcome
	at := t0
	for range 5 {
		got = append(got, s.Decide(stored("camera.motion_started", "camera.front", ledger.Medium), []*wait.Condition{c}, items, at).Outcome)
		at = at.Add(time.Second)
	}
	// The fourth comes after 2.95 repeats (three, decayed over 3 s of a
	// one-minute half-life), below 3; the fifth after 3.9.
	if fmt.Sprint(got) != "[wake wake wake wake record]" {
		t.Fatalf("five in five seconds: %v", got)
	}
	d := s.Decide(stored("camera.motion_started", "camera.front", ledger.Medium), []*wait.Condition{c}, items, at)
	if !strings.HasPrefix(d.Reason, "not novel: camera.front camera.motion_started repeated") {
		t.Errorf("the reason: %q", d.Reason)
	}
	// Another source is novel; the same one after ten half-lives too.
	if d := s.Decide(stored("camera.motion_started", "camera.back", ledger.Medium), []*wait.Condition{c}, items, at); d.Outcome != Wake {
		t.Errorf("another source: %s %s", d.Outcome, d.Reason)
	}
	if d := s.Decide(stored("camera.motion_started", "camera.front", ledger.Medium), []*wait.Condition{c}, items, at.Add(10*time.Minute)); d.Outcome != Wake {
		t.Errorf("after ten half-lives: %s %s", d.Outcome, d.Reason)
	}
	// Critical is never silenced by repeats.
	crit := &wait.Condition{ID: "crit", Owner: "w", Priority: wait.Max}
	for range 10 {
		if d := s.Decide(stored("camera.motion_started", "camera.side", ledger.Medium), []*wait.Condition{crit}, items, at); d.Outcome != Wake || d.Attention != "max" {
			t.Fatalf("critical, repeated: %s %s", d.Outcome, d.Reason)
		}
	}
}

// TestEverySuppressionHasAReason: on random events, conditions and work
// items, every decision that does not wake says why, and every one has
// a path that ends in the decision.
func TestEverySuppressionHasAReason(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	rules := DefaultRules()
	// Default rules, for the events no condition matched: some wake, some
	// are off; a budget and a quiet hour that a default's wake meets too.
	rules.Defaults = []Default{{Type: "camera.motion_started", Attention: "medium"}, {Type: "input.pressed", Attention: "high"},
		{Type: "gpio.changed", Attention: "off"}, {Type: "body.hot", Attention: "low"}}
	rules.Quiet = []Quiet{{"08:30", "08:45"}}
	s := NewSalience(rules)
	s.State = newInterrupts()
	types := []string{"camera.motion_started", "gpio.changed", "estop.tripped", "body.hot", "input.pressed", "lease.human_takeover", "body.offline"}
	statuses := work.Statuses
	now := t0
	counts, byRule := map[Outcome]int{}, map[Outcome]int{}
	for i := range 20000 {
		now = now.Add(time.Duration(r.IntN(5000)) * time.Millisecond)
		var items []work.Item
		for j := range 3 {
			items = append(items, work.Item{ID: fmt.Sprintf("w%d", j), Status: statuses[r.IntN(len(statuses))]})
		}
		var matches []*wait.Condition
		for j := range r.IntN(4) {
			c := &wait.Condition{ID: fmt.Sprintf("c%d", j), Owner: fmt.Sprintf("w%d", r.IntN(4)),
				Priority: []wait.Priority{wait.Low, wait.Medium, wait.High, wait.Max}[r.IntN(4)], CooldownMS: int64(r.IntN(120_000))}
			if r.IntN(2) == 0 {
				c.LastMatchedAt = now.Add(-time.Duration(r.IntN(200_000)) * time.Millisecond).UnixMilli()
			}
			matches = append(matches, c)
		}
		e := stored(types[r.IntN(len(types))], fmt.Sprintf("dev.%d", r.IntN(3)), ledger.Level(r.IntN(5)))
		d := s.Decide(e, matches, itemsOf(items...), now)
		counts[d.Outcome]++
		if d.Rule != "" {
			byRule[d.Outcome]++
		}
		if d.Outcome == Wake || d.Outcome == Ask {
			s.State.pushed(Interruption{Event: d.Event, WorkItem: d.WorkItem, Kind: d.Outcome, At: now.UnixMilli()})
		}
		if d.Outcome != Wake && d.Reason == "" {
			t.Fatalf("event %d: %s without a reason: %+v", i, d.Outcome, d)
		}
		if d.Outcome == Wake && d.Attention == "" {
			t.Fatalf("event %d: a wake without an attention: %+v", i, d)
		}
		if len(d.Path) == 0 || d.Path[len(d.Path)-1].Rule != "decision" {
			t.Fatalf("event %d: the path %+v", i, d.Path)
		}
	}
	for _, o := range []Outcome{Ignore, Record, Wake, Ask} {
		if counts[o] == 0 {
			t.Errorf("no %s among 20,000 decisions: %v", o, counts)
		}
	}
	if byRule[Wake] == 0 || byRule[Record] == 0 {
		t.Errorf("the default rules decided %v", byRule)
	}
	t.Logf("%v; by default rules %v", counts, byRule)
}

// BenchmarkGate is L0 and L1 together, on one core (-cpu 1): the
// events, conditions and work items of BenchmarkL0, each event matched
// and decided.
func BenchmarkGate(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprintf("conditions=%d", n), func(b *testing.B) { benchDecide(b, n, DefaultRules()) })
	}
}

// benchDecide matches and decides BenchWorld's events against its n
// conditions with rules, reporting events/s and wakes/event.
func benchDecide(b *testing.B, n int, rules Rules) {
	conds, evs, now := BenchWorld(n)
	ix := Build(conds)
	s := NewSalience(rules)
	items := itemsOf(work.Item{ID: "w", Status: work.Running})
	out := make([]*wait.Condition, 0, 64)
	woke := 0
	b.ResetTimer()
	for i := range b.N {
		e := &evs[i%len(evs)]
		out = ix.Match(e, now.UnixMilli(), out[:0])
		if d := s.Decide(e, out, items, now); d.Outcome == Wake {
			woke++
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(woke)/float64(b.N), "wakes/event")
}

// TestBudgetsQuietAndMerge: the interruption budgets (the item's, its
// own, the body's), quiet periods and merging, each recorded with its
// reason; critical exceeds the budgets but not a quiet period, and a
// hard rule wakes through everything.
func TestBudgetsQuietAndMerge(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.Local)
	ago := func(d time.Duration) int64 { return now.Add(-d).UnixMilli() }
	times := func(n int, d time.Duration) []int64 {
		var out []int64
		for i := range n {
			out = append(out, ago(d+time.Duration(i)*time.Second))
		}
		return out
	}
	high := &wait.Condition{ID: "c", Owner: "watch", Priority: wait.High}
	crit := &wait.Condition{ID: "k", Owner: "watch", Priority: wait.Max}
	own := &wait.Condition{ID: "o", Owner: "frugal", Priority: wait.High}
	items := itemsOf(work.Item{ID: "watch", Status: work.Running}, work.Item{ID: "frugal", Status: work.Running, Budget: &work.Budget{Max: 1, WindowS: 600}})
	for _, c := range []struct {
		name      string
		st        func(*Interrupts)
		rules     func(*Rules)
		e         string
		cond      *wait.Condition
		outcome   Outcome
		attention string
		reason    string
	}{
		{"within the budgets", func(st *Interrupts) { st.byItem["watch"] = times(5, 10*time.Minute) }, nil, "camera.motion_started", high, Wake, "high", ""},
		{"the item's budget spent", func(st *Interrupts) { st.byItem["watch"] = times(6, 10*time.Minute) }, nil, "camera.motion_started", high, Record, "", "budget: work item watch had 6 of its 6 interruptions in the last 1h0m0s"},
		{"spent long ago", func(st *Interrupts) { st.byItem["watch"] = times(6, 2*time.Hour) }, nil, "camera.motion_started", high, Wake, "high", ""},
		{"the item's own budget spent", func(st *Interrupts) { st.byItem["frugal"] = times(1, time.Minute) }, nil, "camera.motion_started", own, Record, "", "budget: work item frugal had 1 of its 1 interruptions in the last 10m0s"},
		{"the body's budget spent", func(st *Interrupts) { st.all = times(30, time.Minute) }, nil, "camera.motion_started", high, Record, "", "budget: the body made 30 of its 30 interruptions in the last 1h0m0s"},
		{"critical above the budgets", func(st *Interrupts) { st.byItem["watch"], st.all = times(6, time.Minute), times(30, time.Minute) }, nil, "camera.motion_started", crit, Wake, "max", ""},
		{"a quiet period", nil, func(r *Rules) { r.Quiet = []Quiet{{"11:30", "13:00"}} }, "camera.motion_started", high, Record, "", "quiet period 11:30-13:00"},
		{"a quiet period over midnight, not now", nil, func(r *Rules) { r.Quiet = []Quiet{{"22:00", "07:00"}} }, "camera.motion_started", high, Wake, "high", ""},
		{"critical in a quiet period", nil, func(r *Rules) { r.Quiet = []Quiet{{"11:30", "13:00"}} }, "camera.motion_started", crit, Record, "", "quiet period"},
		{"the e-stop in a quiet period", func(st *Interrupts) { st.all = times(30, time.Minute) }, func(r *Rules) { r.Quiet = []Quiet{{"00:00", "23:59"}} }, "estop.tripped", nil, Wake, "max", ""},
		{"merged into an unanswered one", func(st *Interrupts) {
			st.open["watch"] = Interruption{Event: "E0", WorkItem: "watch", At: ago(30 * time.Second)}
		}, nil, "camera.motion_started", high, Record, "", "merged: work item watch was interrupted 30s ago for event E0, not yet answered"},
		{"an unanswered one long ago", func(st *Interrupts) {
			st.open["watch"] = Interruption{Event: "E0", WorkItem: "watch", At: ago(10 * time.Minute)}
		}, nil, "camera.motion_started", high, Wake, "high", ""},
		{"critical is not merged", func(st *Interrupts) {
			st.open["watch"] = Interruption{Event: "E0", WorkItem: "watch", At: ago(30 * time.Second)}
		}, nil, "camera.motion_started", crit, Wake, "max", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := DefaultRules()
			if c.rules != nil {
				c.rules(&r)
			}
			s := NewSalience(r)
			s.State = newInterrupts()
			if c.st != nil {
				c.st(s.State)
			}
			var matches []*wait.Condition
			if c.cond != nil {
				matches = []*wait.Condition{c.cond}
			}
			d := s.Decide(stored(c.e, "camera.front", ledger.Medium), matches, items, now)
			if d.Outcome != c.outcome || d.Attention != c.attention || !strings.HasPrefix(d.Reason, c.reason) || (c.reason == "") != (d.Reason == "") {
				t.Fatalf("%s at %q, reason %q; want %s at %q, reason %q\n%+v", d.Outcome, d.Attention, d.Reason, c.outcome, c.attention, c.reason, d.Path)
			}
		})
	}
	if err := (Quiet{"22:00", "7"}).Check(); err == nil {
		t.Error("a quiet period to \"7\" passed")
	}
}

// TestDedupeByField: a condition that dedupes by a field wakes once per
// value of it in each cooldown, and for another value at once.
func TestDedupeByField(t *testing.T) {
	s := NewSalience(Rules{})
	c := &wait.Condition{ID: "keys", Owner: "w", Priority: wait.Medium, CooldownMS: 60_000, Dedupe: wait.DedupeField, DedupeField: "key",
		LastMatchedAt: t0.UnixMilli()}
	items := itemsOf(work.Item{ID: "w", Status: work.Running})
	key := func(k string, at time.Duration) Decision {
		e := stored("input.pressed", "input.keypad", ledger.Medium)
		e.Payload = payload(t, map[string]any{"key": k})
		return s.Decide(e, []*wait.Condition{c}, items, t0.Add(at))
	}
	for _, step := range []struct {
		key     string
		at      time.Duration
		outcome Outcome
		reason  string
	}{
		{"KEY_1", 0, Wake, ""},
		{"KEY_1", 10 * time.Second, Record, "dedupe: condition keys already woke for key KEY_1 10s ago, within its 1m0s"},
		{"KEY_2", 11 * time.Second, Wake, ""},
		{"KEY_1", 70 * time.Second, Wake, ""},
	} {
		d := key(step.key, step.at)
		if d.Outcome != step.outcome || d.Reason != step.reason {
			t.Fatalf("%s at %v: %s %q, want %s %q", step.key, step.at, d.Outcome, d.Reason, step.outcome, step.reason)
		}
	}
}

// TestWords: every wake says which default rule's words tell of its
// event, whichever rule decided, so that what says it in words matches
// no rule again.
func TestWords(t *testing.T) {
	now := t0.Add(time.Hour)
	door := &wait.Condition{ID: "door", Owner: "watch", Priority: wait.High}
	items := itemsOf(work.Item{ID: "watch", Status: work.Running})
	rules := Rules{Defaults: []Default{
		{Type: "estop.tripped", Attention: "max"},
		{Type: "camera.", Channel: "camera.back", Attention: "low"},
		{Type: "camera.motion_started", Attention: "medium"},
		{Type: "gpio.changed", Attention: "off"},
	}}
	for _, c := range []struct {
		name    string
		e       *ledger.Stored
		matches []*wait.Condition
		outcome Outcome
		words   int
	}{
		{"a hard rule, in the rule's words", stored("estop.tripped", "estop.main", ledger.High), nil, Wake, 1},
		{"a condition, in the first rule that selects the event", stored("camera.motion_started", "camera.front", ledger.Medium), []*wait.Condition{door}, Wake, 3},
		{"a default rule, in its own words", stored("camera.motion_started", "camera.front", ledger.Medium), nil, Wake, 3},
		{"an earlier rule by channel", stored("camera.motion_started", "camera.back", ledger.Medium), nil, Wake, 2},
		{"a system event no rule words", stored("channel.revoked", "camera.front", ledger.High), nil, Wake, 0},
		{"a rule that is off: ignored, no words", stored("gpio.changed", "gpio.button", ledger.Medium), nil, Ignore, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := NewSalience(rules)
			d := s.Decide(c.e, c.matches, items, now)
			if d.Words == 0 && d.Outcome == Wake {
				d.Words = s.Words(c.e) // as the gate does before it pushes
			}
			if d.Outcome != c.outcome || d.Words != c.words {
				t.Fatalf("%s in the words of rule %d; want %s in those of %d\n%+v", d.Outcome, d.Words, c.outcome, c.words, d.Path)
			}
		})
	}
}
