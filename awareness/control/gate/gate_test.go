package gate

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/awareness/control/wait"
	"github.com/tobe-body/tobe-body/awareness/control/work"
	"github.com/tobe-body/tobe-body/ledger"
)

type pushes struct {
	mu  sync.Mutex
	got []Decision
	c   chan Decision
}

func (p *pushes) push(d Decision, _ ledger.Stored) {
	p.mu.Lock()
	p.got = append(p.got, d)
	p.mu.Unlock()
	p.c <- d
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// openGated opens a ledger with the gate's projections, on the test's
// clock when clk is not nil.
func openGated(t *testing.T, path string, clk *clock) *ledger.Store {
	t.Helper()
	opts := ledger.Options{Path: path, AgentID: ledger.UUID{1}, BodyID: ledger.UUID{2}, Projections: Projections()}
	if clk != nil {
		opts.Now = clk.now
	}
	s, err := ledger.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// runGate runs a gate over s until the returned stop is called, pushing
// to p unless a change of it says otherwise.
func runGate(t *testing.T, s *ledger.Store, clk *clock, p *pushes, changes ...func(*Gate)) (stop func()) {
	t.Helper()
	g := &Gate{Store: s, Sal: NewSalience(DefaultRules()), Pool: &Pool{Per: 4, TTL: time.Hour, MaxKeys: 64},
		Classes: ledger.DefaultClasses(), Push: p.push, Now: clk.now}
	for _, change := range changes {
		change(g)
	}
	if err := g.Load(); err != nil { // before Run, so that a gate that begins here begins before what the test appends next
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil && ctx.Err() == nil {
			t.Errorf("gate: %v", err)
		}
	}
}

// execute runs commands on s, failing the test at the first refused.
func execute(t *testing.T, s *ledger.Store, cmds ...ledger.Command) {
	t.Helper()
	for _, cmd := range cmds {
		if _, err := s.Execute(context.Background(), cmd); err != nil {
			t.Fatal(err)
		}
	}
}

func motion(t *testing.T, s *ledger.Store, zone string) ledger.UUID {
	t.Helper()
	e := ledger.Event{ID: ledger.NewID(), Type: "camera.motion_started", ChannelID: "camera.front", Provenance: ledger.Observed, Trust: ledger.Medium,
		Payload: payload(t, map[string]any{"zone": zone, "box": []float64{0.1, 0.1, 0.3, 0.3}, "area": 0.04})}
	if _, err := s.Append(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	return e.ID
}

func waitPush(t *testing.T, p *pushes) Decision {
	t.Helper()
	select {
	case d := <-p.c:
		return d
	case <-time.After(time.Minute):
		t.Fatal("no push in a minute")
		return Decision{}
	}
}

func noPush(t *testing.T, p *pushes) {
	t.Helper()
	select {
	case d := <-p.c:
		t.Fatalf("pushed %+v", d)
	case <-time.After(200 * time.Millisecond):
	}
}

// decided waits until the gate recorded its decision on an event.
func decided(t *testing.T, s *ledger.Store, id ledger.UUID) Decision {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		d, err := Explain(s, nil, id.String(), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if d.Outcome != Ignore {
			return d
		}
	}
	t.Fatalf("no decision on %s in a minute", id)
	return Decision{}
}

// TestGateScenario: the agent leaves "motion at the door within 10
// minutes"; a crossing wakes it once, at high, naming the work item; a
// second within the cooldown is recorded with the reason; explain shows
// both; after a restart nothing decided is pushed again, an event that
// came while the gate was down is decided once, and the cooldown holds
// from the recorded match.
func TestGateScenario(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	clk := &clock{t: t0}
	s := openGated(t, path, clk)
	exec := func(cmd ledger.Command) {
		t.Helper()
		if _, err := s.Execute(context.Background(), cmd); err != nil {
			t.Fatal(err)
		}
	}
	exec(work.NewCreate(work.Spec{ID: "door-watch", Goal: "know when someone comes to the door", DoneWhen: []string{"told of motion at the door"}}, "agent:pi", t0))
	exec(&work.Move{ID: "door-watch", Expected: 1, To: work.Ready, At: t0})
	exec(wait.NewAdd(wait.Condition{ID: "door", Owner: "door-watch", Types: []string{"camera.motion_started"}, Channels: []string{"camera.front"},
		Match: []wait.Clause{{Zone: &wait.Zone{Names: []string{"door"}}}}, Priority: wait.High, CooldownMS: 60_000,
		ExpiresAt: t0.Add(10 * time.Minute).UnixMilli()}, "agent:pi", t0))

	p := &pushes{c: make(chan Decision, 16)}
	stop := runGate(t, s, clk, p)
	yard := motion(t, s, "yard")
	first := motion(t, s, "door")
	d := waitPush(t, p)
	if d.Event != first.String() || d.Outcome != Wake || d.Attention != "high" || d.WorkItem != "door-watch" || d.Condition != "door" {
		t.Fatalf("the wake: %+v", d)
	}
	clk.add(20 * time.Second)
	second := motion(t, s, "door")
	sd := decided(t, s, second)
	if sd.Outcome != Record || !strings.HasPrefix(sd.Reason, "cooldown: condition door matched 20s ago (event "+first.String()+"), within its 1m0s") {
		t.Fatalf("the second crossing: %+v", sd)
	}
	noPush(t, p)
	fd, _ := Explain(s, nil, first.String(), clk.now())
	if fd.Outcome != Wake || len(fd.Path) < 4 || fd.Path[0].Rule != "relevance" {
		t.Errorf("explain the first: %+v", fd)
	}
	if yd, _ := Explain(s, nil, yard.String(), clk.now()); yd.Outcome != Ignore || yd.Reason == "" {
		t.Errorf("explain the yard: %+v", yd)
	}
	// The agent answers: progress on the work item, 25 s after the wake.
	clk.add(5 * time.Second)
	it, _ := work.Get(s, "door-watch")
	exec(&work.Change{ID: "door-watch", Expected: it.Version, Patch: work.Patch{Progress: true}, By: "agent:pi", At: clk.now()})
	var ans []ledger.Stored
	for deadline := time.Now().Add(time.Minute); len(ans) == 0 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		ans, _ = s.Events(ledger.Filter{Types: []string{EventAnswered}})
	}
	var in Interruption
	if len(ans) != 1 || ledger.UnmarshalPayload(ans[0].Payload, &in) != nil || in.Event != first.String() || in.AnsweredBy != "agent:pi" || in.AnsweredAfterMS != 25_000 {
		t.Fatalf("the answer: %+v", in)
	}
	stop()

	// Down: an event comes; then a restart, as after a kill.
	clk.add(45 * time.Second) // 70 s after the first: past the cooldown
	third := motion(t, s, "door")
	s.Close()
	s = openGated(t, path, clk)
	defer s.Close()
	p2 := &pushes{c: make(chan Decision, 16)}
	stop = runGate(t, s, clk, p2)
	defer stop()
	d = waitPush(t, p2)
	if d.Event != third.String() {
		t.Fatalf("after the restart, pushed %s; want only the event that came while down (%s)", d.Event, third)
	}
	noPush(t, p2)
	// The cooldown runs from the recorded match, across the restart.
	clk.add(10 * time.Second)
	fourth := motion(t, s, "door")
	if fd := decided(t, s, fourth); fd.Outcome != Record || !strings.Contains(fd.Reason, third.String()) {
		t.Errorf("within the cooldown of the match before the restart: %+v", fd)
	}
	c, _ := wait.List(s, nil)
	if len(c) != 1 || c[0].Matches != 2 || c[0].LastEvent != third.String() {
		t.Errorf("the condition after it all: %+v", c)
	}
	rep, err := s.Verify(context.Background())
	if err != nil || !rep.OK() {
		t.Fatalf("verify: %v %+v", err, rep)
	}
}

// TestConditionMatchesOnlyLaterEvents: an event the ledger took before a
// condition was added does not match it, even when the gate decides on
// it afterwards (it was down, or it decides again after a restart).
func TestConditionMatchesOnlyLaterEvents(t *testing.T) {
	clk := &clock{t: t0}
	s := openGated(t, filepath.Join(t.TempDir(), "ledger.db"), clk)
	defer s.Close()
	runGate(t, s, clk, &pushes{c: make(chan Decision, 4)})() // it began here, and is down from now
	if _, err := s.Execute(context.Background(), work.NewCreate(work.Spec{ID: "w", Goal: "g", DoneWhen: []string{"x"}}, "agent:pi", t0)); err != nil {
		t.Fatal(err)
	}
	before := motion(t, s, "door")
	clk.add(time.Second)
	if _, err := s.Execute(context.Background(), wait.NewAdd(wait.Condition{ID: "door", Owner: "w", Types: []string{"camera.motion_started"},
		Match: []wait.Clause{{Zone: &wait.Zone{Names: []string{"door"}}}}, ExpiresAt: t0.Add(time.Hour).UnixMilli()}, "agent:pi", t0)); err != nil {
		t.Fatal(err)
	}
	clk.add(time.Second)
	after := motion(t, s, "door")
	p := &pushes{c: make(chan Decision, 4)}
	stop := runGate(t, s, clk, p)
	defer stop()
	if d := waitPush(t, p); d.Event != after.String() {
		t.Fatalf("pushed %s, want %s (the one after the condition), not %s", d.Event, after, before)
	}
	noPush(t, p)
}

// TestAGateBeginsAtTheHead: a gate that never decided begins after the
// ledger's last event (an older ledger's history is not its to decide),
// records where, and goes on from there after a restart.
func TestAGateBeginsAtTheHead(t *testing.T) {
	clk := &clock{t: t0}
	s := openGated(t, filepath.Join(t.TempDir(), "ledger.db"), clk)
	defer s.Close()
	if _, err := s.Execute(context.Background(), work.NewCreate(work.Spec{ID: "w", Goal: "g", DoneWhen: []string{"x"}}, "agent:pi", t0)); err != nil {
		t.Fatal(err)
	}
	old := ledger.Event{ID: ledger.NewID(), Type: "estop.tripped", Provenance: ledger.Observed, Payload: payload(t, map[string]any{"cause": "old"})}
	if _, err := s.Append(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	p := &pushes{c: make(chan Decision, 4)}
	stop := runGate(t, s, clk, p)
	noPush(t, p)
	stop()
	began, err := s.Events(ledger.Filter{Types: []string{EventBegan}})
	if err != nil || len(began) != 1 {
		t.Fatalf("gate.began: %v %d", err, len(began))
	}
	later := ledger.Event{ID: ledger.NewID(), Type: "estop.tripped", Provenance: ledger.Observed, Payload: payload(t, map[string]any{"cause": "new"})}
	if _, err := s.Append(context.Background(), later); err != nil {
		t.Fatal(err)
	}
	stop = runGate(t, s, clk, p)
	defer stop()
	if d := waitPush(t, p); d.Event != later.ID.String() {
		t.Fatalf("pushed %s, want the e-stop after the gate began (%s), never the older one (%s)", d.Event, later.ID, old.ID)
	}
	if began, _ = s.Events(ledger.Filter{Types: []string{EventBegan}}); len(began) != 1 {
		t.Errorf("gate.began recorded %d times, want once", len(began))
	}
}

// TestUnansweredIsRecorded: an interruption nobody answers within the
// answer window is recorded as unanswered (not as annoying), once, and
// no longer merges what comes after it.
func TestUnansweredIsRecorded(t *testing.T) {
	clk := &clock{t: t0}
	s := openGated(t, filepath.Join(t.TempDir(), "ledger.db"), clk)
	defer s.Close()
	execute(t, s,
		work.NewCreate(work.Spec{ID: "w", Goal: "g", DoneWhen: []string{"x"}}, "agent:pi", t0),
		wait.NewAdd(wait.Condition{ID: "door", Owner: "w", Types: []string{"camera.motion_started"}, Priority: wait.High,
			ExpiresAt: t0.Add(2 * time.Hour).UnixMilli()}, "agent:pi", t0),
	)
	p := &pushes{c: make(chan Decision, 4)}
	stop := runGate(t, s, clk, p)
	defer stop()
	first := motion(t, s, "door")
	waitPush(t, p)
	clk.add(31 * time.Minute)
	motion(t, s, "door") // the gate looks at its open interruptions as it goes
	d := waitPush(t, p)
	var un []ledger.Stored
	for deadline := time.Now().Add(time.Minute); len(un) == 0 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		un, _ = s.Events(ledger.Filter{Types: []string{EventUnanswered}})
	}
	var in Interruption
	if len(un) != 1 || ledger.UnmarshalPayload(un[0].Payload, &in) != nil || in.Event != first.String() || !in.Unanswered || in.AnsweredBy != "" {
		t.Fatalf("unanswered: %d %+v", len(un), in)
	}
	if d.Outcome != Wake {
		t.Errorf("the second, after the first went unanswered: %+v", d)
	}
	if rep, err := s.Verify(context.Background()); err != nil || !rep.OK() {
		t.Fatalf("verify: %v %+v", err, rep)
	}
}

// TestAClockThatStepsBack: a board without a real-time clock steps its
// wall clock. After a step back past the last interruption, what was
// pushed before the step spends no budget, merges nothing and holds no
// dedupe for longer than its span: the open interruption is closed as
// unanswered at once, and the next match wakes. Every budget and
// interruption being in the future would otherwise silence the agent
// until the clock came back.
func TestAClockThatStepsBack(t *testing.T) {
	clk := &clock{t: t0}
	s := openGated(t, filepath.Join(t.TempDir(), "ledger.db"), clk)
	defer s.Close()
	execute(t, s,
		work.NewCreate(work.Spec{ID: "w", Goal: "g", DoneWhen: []string{"x"}, Budget: &work.Budget{Max: 1, WindowS: 3600}}, "agent:pi", t0),
		wait.NewAdd(wait.Condition{ID: "door", Owner: "w", Types: []string{"camera.motion_started"}, Priority: wait.High,
			Dedupe: wait.DedupeField, DedupeField: "zone", CooldownMS: 600_000, ExpiresAt: t0.Add(48 * time.Hour).UnixMilli()}, "agent:pi", t0),
	)
	p := &pushes{c: make(chan Decision, 4)}
	stop := runGate(t, s, clk, p)
	defer stop()
	first := motion(t, s, "door")
	if d := decided(t, s, first); d.Outcome != Wake {
		t.Fatalf("the first: %+v", d)
	}
	if d := waitPush(t, p); d.Event != first.String() {
		t.Fatalf("pushed %+v", d)
	}
	clk.add(time.Minute)
	if d := decided(t, s, motion(t, s, "door")); d.Outcome != Record || !strings.HasPrefix(d.Reason, "dedupe:") {
		t.Fatalf("before the step, the same zone: %+v", d)
	}
	clk.add(-2 * time.Hour)
	second := motion(t, s, "door")
	if d := decided(t, s, second); d.Outcome != Wake {
		t.Fatalf("after the step back: %+v", d)
	}
	d := waitPush(t, p)
	if d.Event != second.String() || d.Outcome != Wake {
		t.Fatalf("after the step back: %+v", d)
	}
	un, err := s.Events(ledger.Filter{Types: []string{EventUnanswered}})
	var in Interruption
	if err != nil || len(un) != 1 || ledger.UnmarshalPayload(un[0].Payload, &in) != nil || in.Event != first.String() {
		t.Fatalf("the interruption from before the step: %v %d %+v", err, len(un), in)
	}
	// From the step on, the budget counts again: one in its hour.
	clk.add(time.Minute)
	if d := decided(t, s, motion(t, s, "yard")); d.Outcome != Record || !strings.HasPrefix(d.Reason, "budget: work item w had 1 of its 1") {
		t.Errorf("after the step, past the item's budget: %+v", d)
	}
}

// TestThePoolForgetsWhatExpired: the gate drops the noise pool's samples
// past their TTL from memory as it goes, not only from its answers.
func TestThePoolForgetsWhatExpired(t *testing.T) {
	clk := &clock{t: t0}
	s := openGated(t, filepath.Join(t.TempDir(), "ledger.db"), clk)
	defer s.Close()
	pool := &Pool{Per: 4, TTL: time.Minute, MaxKeys: 64}
	g := &Gate{Store: s, Sal: NewSalience(DefaultRules()), Pool: pool, Classes: ledger.DefaultClasses(), Now: clk.now}
	if err := g.Load(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	defer func() { cancel(); <-done }()
	kept := func(ch string) int {
		pool.mu.Lock()
		defer pool.mu.Unlock()
		n := 0
		for k, list := range pool.samples {
			if k.Channel == ch {
				n += len(list)
			}
		}
		return n
	}
	noise := func(ch string) ledger.UUID {
		e := ledger.Event{ID: ledger.NewID(), Type: "gpio.changed", ChannelID: ch, Provenance: ledger.Observed, Payload: payload(t, map[string]any{"level": 1})}
		if _, err := s.Append(context.Background(), e); err != nil {
			t.Fatal(err)
		}
		return e.ID
	}
	eventually := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); !ok(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal(what)
			}
		}
	}
	noise("gpio.a")
	eventually("the first sample never came", func() bool { return kept("gpio.a") == 1 })
	clk.add(2 * time.Minute)
	noise("gpio.b")
	eventually("the expired sample stayed in memory", func() bool { return kept("gpio.b") == 1 && kept("gpio.a") == 0 })
}

// TestFollowUps: a condition with a follow-up makes, with each wake, a
// work item under its own, naming the event, in the transaction that
// records the decision; a match recorded without a wake makes none; a
// follow-up its place does not allow (deeper than work.MaxDepth) is not
// made, and the decision says why and still wakes.
func TestFollowUps(t *testing.T) {
	clk := &clock{t: t0}
	s := openGated(t, filepath.Join(t.TempDir(), "ledger.db"), clk)
	defer s.Close()
	spec := func(id, parent string) *work.Create {
		return work.NewCreate(work.Spec{ID: id, Goal: "watch " + id, DoneWhen: []string{"seen"}, Parent: parent, Owner: "agent:pi", AuthProfile: "household"}, "agent:pi", t0)
	}
	cond := func(id, owner, zone string) *wait.Add {
		return wait.NewAdd(wait.Condition{ID: id, Owner: owner, Types: []string{"camera.motion_started"}, Match: []wait.Clause{{Zone: &wait.Zone{Names: []string{zone}}}},
			Priority: wait.High, CooldownMS: 60_000, ExpiresAt: t0.Add(time.Hour).UnixMilli(),
			FollowUp: &wait.FollowUp{Goal: "look at who came to the " + zone, DoneWhen: []string{"the person is named", "or the motion explained"}}}, "agent:pi", t0)
	}
	// door-watch is at depth 1; deep is at depth 3, so its follow-up
	// would be at 4.
	execute(t, s, spec("door-watch", ""), spec("mid", "door-watch"), spec("deep", "mid"),
		cond("door", "door-watch", "door"), cond("yard", "deep", "yard"))

	p := &pushes{c: make(chan Decision, 16)}
	stop := runGate(t, s, clk, p)
	defer stop()
	first := motion(t, s, "door")
	d := waitPush(t, p)
	if d.Event != first.String() || d.FollowUp != FollowUpID(first.String()) {
		t.Fatalf("the wake: %+v", d)
	}
	it, err := work.Get(s, d.FollowUp)
	if err != nil {
		t.Fatal(err)
	}
	if it.Parent != "door-watch" || it.Source != first.String() || it.Owner != "agent:pi" || it.AuthProfile != "household" ||
		it.Status != work.Open || it.Goal != "look at who came to the door" || len(it.DoneWhen) != 2 {
		t.Errorf("the follow-up: %+v", it)
	}
	if last := d.Path[len(d.Path)-1]; last.Rule != "follow-up" || !strings.Contains(last.Said, "made work item "+d.FollowUp) {
		t.Errorf("the path's last step: %+v", last)
	}
	made, _ := s.Events(ledger.Filter{Types: []string{work.EventCreated}})
	var r work.Record
	if ledger.UnmarshalPayload(made[len(made)-1].Payload, &r) != nil || r.By != FollowUpBy || r.Item.ID != d.FollowUp {
		t.Errorf("the follow-up's record: %+v", r)
	}

	clk.add(10 * time.Second)
	second := motion(t, s, "door")
	if sd := decided(t, s, second); sd.Outcome != Record || sd.FollowUp != "" {
		t.Errorf("within the cooldown: %+v", sd)
	}
	if _, err := work.Get(s, FollowUpID(second.String())); err == nil {
		t.Error("a match within the cooldown made a follow-up")
	}

	deep := motion(t, s, "yard")
	d = waitPush(t, p)
	if d.Event != deep.String() || d.Outcome != Wake || d.FollowUp != "" {
		t.Fatalf("the wake of the deep item's condition: %+v", d)
	}
	if last := d.Path[len(d.Path)-1]; last.Rule != "follow-up" || !strings.Contains(last.Said, "not made") || !strings.Contains(last.Said, "depth 4") {
		t.Errorf("the path's last step: %+v", last)
	}
	if _, err := work.Get(s, FollowUpID(deep.String())); err == nil {
		t.Error("a follow-up deeper than allowed was made")
	}
	if rep, err := s.Verify(context.Background()); err != nil || !rep.OK() {
		t.Fatalf("verify: %v %+v", err, rep)
	}
}

// TestAGateWithoutItsState: a gate whose state cannot be read (here a
// ledger opened without the gate's projections) still runs, from From,
// by the rules alone, and pushes what they wake without a record: it is
// the one way anything reaches the agent.
func TestAGateWithoutItsState(t *testing.T) {
	s, err := ledger.Open(ledger.Options{Path: filepath.Join(t.TempDir(), "l.db"), AgentID: ledger.UUID{1}, BodyID: ledger.UUID{2}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before, err := s.Append(context.Background(), ledger.Event{Type: "estop.tripped", Provenance: ledger.Observed})
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: t0}
	p := &pushes{c: make(chan Decision, 8)}
	g := &Gate{Store: s, Sal: NewSalience(Rules{Defaults: []Default{{Type: "gpio.long_press", Attention: "high"}}}), Classes: ledger.DefaultClasses(),
		Push: p.push, Now: clk.now, From: before[0].Seq}
	if err := g.Load(); err == nil {
		t.Fatal("a gate loaded its state from a ledger without its projections")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil && ctx.Err() == nil {
			t.Errorf("gate: %v", err)
		}
	}()
	for _, typ := range []string{"gpio.changed", "gpio.long_press", "estop.tripped"} {
		if _, err := s.Append(context.Background(), ledger.Event{Type: typ, ChannelID: "gpio.button", Trust: ledger.High, Provenance: ledger.Observed}); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []struct {
		typ   string
		words int
	}{{"gpio.long_press", 1}, {"estop.tripped", 0}} {
		if d := waitPush(t, p); d.Type != want.typ || d.Outcome != Wake || d.Words != want.words {
			t.Errorf("pushed %s (%s, words %d); want a wake of %s in the words of rule %d", d.Type, d.Outcome, d.Words, want.typ, want.words)
		}
	}
	noPush(t, p)
}

// TestDecidedHearsEveryEvent: Decided hears each event the gate is done
// with, in order, once: its own record of where it began, an event it
// ignores, one it wakes on (after the push), and its record of the wake.
func TestDecidedHearsEveryEvent(t *testing.T) {
	clk := &clock{t: t0}
	s := openGated(t, filepath.Join(t.TempDir(), "ledger.db"), clk)
	defer s.Close()
	var mu sync.Mutex
	var heard, pushed []uint64
	var wakeHeardAfterPush bool
	heardc := make(chan uint64, 16)
	stop := runGate(t, s, clk, nil, func(g *Gate) {
		g.Push = func(_ Decision, e ledger.Stored) {
			mu.Lock()
			pushed = append(pushed, e.Seq)
			mu.Unlock()
		}
		g.Decided = func(seq uint64) {
			mu.Lock()
			heard = append(heard, seq)
			if slices.Contains(pushed, seq) {
				wakeHeardAfterPush = true
			}
			mu.Unlock()
			heardc <- seq
		}
	})
	defer stop()
	level := ledger.Event{ID: ledger.NewID(), Type: "audio.level", ChannelID: "audio.mic", Provenance: ledger.Observed,
		Payload: payload(t, map[string]any{"rms": -50})}
	estop := ledger.Event{ID: ledger.NewID(), Type: "estop.tripped", Provenance: ledger.Observed, Payload: payload(t, map[string]any{"cause": "test"})}
	res, err := s.Append(context.Background(), level, estop)
	if err != nil {
		t.Fatal(err)
	}
	// Where it began (1), the two events, and its record of the wake.
	want := []uint64{1, res[0].Seq, res[1].Seq, res[1].Seq + 1}
	for seq := uint64(0); seq < want[len(want)-1]; {
		select {
		case seq = <-heardc:
		case <-time.After(time.Minute):
			t.Fatalf("Decided heard nothing in a minute after %d", seq)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(heard, want) {
		t.Fatalf("Decided heard %v, want %v", heard, want)
	}
	if !slices.Equal(pushed, []uint64{res[1].Seq}) || !wakeHeardAfterPush {
		t.Errorf("pushed %v (want the e-stop's %d), Decided heard of it after its push: %v", pushed, res[1].Seq, wakeHeardAfterPush)
	}
	recs, err := s.Events(ledger.Filter{After: res[1].Seq})
	if err != nil || len(recs) != 1 || recs[0].Type != EventDecided {
		t.Fatalf("after the e-stop: %v, %v; want the gate's record of its decision", recs, err)
	}
}
