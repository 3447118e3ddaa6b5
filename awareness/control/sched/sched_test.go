package sched

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tobe-body/tobe-body/awareness/control/wait"
	"github.com/tobe-body/tobe-body/awareness/control/work"
	"github.com/tobe-body/tobe-body/ledger"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)

func open(t *testing.T, path string) *ledger.Store {
	t.Helper()
	s, err := ledger.Open(ledger.Options{Path: path, AgentID: ledger.UUID{1}, BodyID: ledger.UUID{2},
		Projections: []ledger.Projection{work.Items{}, wait.Conditions{}}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func must(t *testing.T, s *ledger.Store, cmd ledger.Command) {
	t.Helper()
	if _, err := s.Execute(context.Background(), cmd); err != nil {
		t.Fatal(err)
	}
}

func item(t *testing.T, s *ledger.Store, spec work.Spec) work.Item {
	t.Helper()
	spec.Goal, spec.DoneWhen = "the goal of "+spec.ID, []string{"done"}
	c := work.NewCreate(spec, "agent:pi", t0)
	must(t, s, c)
	return c.Item
}

func moveTo(t *testing.T, s *ledger.Store, it work.Item, path ...work.Status) work.Item {
	t.Helper()
	for _, to := range path {
		m := &work.Move{ID: it.ID, Expected: it.Version, To: to, Reason: "test", At: t0}
		if to == work.Blocked {
			m.BlockedOn = work.BlockedOnDependencies
		}
		must(t, s, m)
		it = m.Item
	}
	return it
}

// TestTick: one tick records what came due, what went stale, ends the
// conditions that expired or whose item ended, and makes ready the items
// blocked on dependencies that all closed, and only those; a second tick
// does none of it again.
func TestTick(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	s := open(t, path)
	now := t0.Add(2 * time.Hour)

	item(t, s, work.Spec{ID: "due", NextCheckAt: t0.Add(time.Hour).UnixMilli()})
	item(t, s, work.Spec{ID: "later", NextCheckAt: t0.Add(3 * time.Hour).UnixMilli()})
	old := item(t, s, work.Spec{ID: "old"})
	moveTo(t, s, old, work.Ready, work.Running)
	item(t, s, work.Spec{ID: "draft", Status: work.Draft}) // a draft is not pursued: never stale

	a := item(t, s, work.Spec{ID: "a"})
	e := item(t, s, work.Spec{ID: "e"})
	moveTo(t, s, item(t, s, work.Spec{ID: "b", DependsOn: []string{"a"}}), work.Blocked)
	c := item(t, s, work.Spec{ID: "c", DependsOn: []string{"a"}})
	mc := &work.Move{ID: "c", Expected: c.Version, To: work.Blocked, BlockedOn: "a part on order", At: t0}
	must(t, s, mc)
	moveTo(t, s, item(t, s, work.Spec{ID: "d", DependsOn: []string{"a", "e"}}), work.Blocked)
	moveTo(t, s, a, work.Ready, work.Running, work.Verifiable, work.Closed)

	add := func(id, owner string, expires time.Time) {
		must(t, s, wait.NewAdd(wait.Condition{ID: id, Owner: owner, Types: []string{"camera.motion_started"}, ExpiresAt: expires.UnixMilli()}, "agent:pi", t0))
	}
	add("expiring", "due", t0.Add(time.Hour))
	add("waiting", "due", t0.Add(5*time.Hour))
	add("of-closed", "e", t0.Add(5*time.Hour))
	moveTo(t, s, e, work.Cancelled)

	sc := &Scheduler{Store: s, StaleAfter: 90 * time.Minute, Now: func() time.Time { return now }}
	rep, err := sc.Tick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(rep.Stale)
	if !slices.Equal(rep.Due, []string{"due"}) || !slices.Equal(rep.Expired, []string{"expiring"}) || !slices.Equal(rep.Ended, []string{"of-closed"}) ||
		!slices.Equal(rep.Released, []string{"b"}) {
		t.Fatalf("the tick: %+v", rep)
	}
	// Stale: every active item older than 90 minutes without progress;
	// not the draft, not the closed or cancelled ones, not "b" (released
	// by this tick: a move is progress, and it is looked at before).
	for _, id := range rep.Stale {
		if id == "draft" || id == "a" || id == "e" {
			t.Errorf("%s went stale", id)
		}
	}
	if !slices.Contains(rep.Stale, "old") {
		t.Errorf("old is not stale: %v", rep.Stale)
	}
	got, _ := work.Get(s, "b")
	if got.Status != work.Ready || got.BlockedOn != "" {
		t.Errorf("b after the release: %+v", got)
	}
	for id, st := range map[string]work.Status{"c": work.Blocked, "d": work.Blocked} {
		if it, _ := work.Get(s, id); it.Status != st {
			t.Errorf("%s is %s, want %s", id, it.Status, st)
		}
	}
	if it, _ := work.Get(s, "due"); it.NextCheckAt != 0 {
		t.Errorf("due still has a check: %+v", it)
	}
	conds, _ := wait.List(s, nil)
	for _, c := range conds {
		want := map[string]string{"expiring": "expired", "waiting": "", "of-closed": "its work item is cancelled"}[c.ID]
		if c.Removed != want {
			t.Errorf("condition %s removed %q, want %q", c.ID, c.Removed, want)
		}
	}

	// Again, a minute on: nothing new.
	now = now.Add(time.Minute)
	rep, err = sc.Tick(context.Background())
	if err != nil || len(rep.Due)+len(rep.Stale)+len(rep.Expired)+len(rep.Ended)+len(rep.Released) != 0 {
		t.Fatalf("a second tick: %+v %v", rep, err)
	}
	// Progress on "old" makes it fresh; without more it goes stale again.
	cur, _ := work.Get(s, "old")
	must(t, s, &work.Change{ID: "old", Expected: cur.Version, Patch: work.Patch{Progress: true}, At: now})
	now = now.Add(2 * time.Hour)
	if rep, _ = sc.Tick(context.Background()); !slices.Contains(rep.Stale, "old") {
		t.Errorf("old, two hours after its progress: %+v", rep)
	}
	rep2, _ := s.Verify(context.Background())
	if !rep2.OK() {
		t.Fatalf("verify: %+v", rep2)
	}
	s.Close()
}

// TestDueWhileDownRunsOnce: a check that fell due while the body was
// down is recorded once by the first tick after the start, and not
// again by the ticks after it or by another start.
func TestDueWhileDownRunsOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	s := open(t, path)
	item(t, s, work.Spec{ID: "w", NextCheckAt: t0.Add(time.Hour).UnixMilli()})
	s.Close()
	now := t0.Add(5 * time.Hour) // the body was off from t0 to here
	for start := range 2 {
		s = open(t, path)
		sc := &Scheduler{Store: s, Now: func() time.Time { return now }}
		for tick := range 3 {
			rep, err := sc.Tick(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if want := start == 0 && tick == 0; want != slices.Equal(rep.Due, []string{"w"}) {
				t.Fatalf("start %d tick %d: due %v", start, tick, rep.Due)
			}
		}
		evs, _ := s.Events(ledger.Filter{Types: []string{work.EventDue}})
		if len(evs) != 1 {
			t.Fatalf("%d work.due events, want 1", len(evs))
		}
		s.Close()
		now = now.Add(time.Hour)
	}
}

func TestFollowUpNamesItsSourceAndParent(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "ledger.db"))
	defer s.Close()
	item(t, s, work.Spec{ID: "p"})
	for _, spec := range []work.Spec{
		{ID: "f1", FollowUp: true, Parent: "p"},
		{ID: "f2", FollowUp: true, Source: "01a2..."},
	} {
		spec.Goal, spec.DoneWhen = "g", []string{"x"}
		if _, err := s.Execute(context.Background(), work.NewCreate(spec, "body", t0)); err == nil {
			t.Errorf("%s: a follow-up without its source or parent was made", spec.ID)
		}
	}
	spec := work.Spec{ID: "f3", Goal: "g", DoneWhen: []string{"x"}, FollowUp: true, Parent: "p", Source: "01a2"}
	c := work.NewCreate(spec, "body", t0)
	if _, err := s.Execute(context.Background(), c); err != nil || c.Item.Source != "01a2" {
		t.Errorf("a follow-up with both: %v %+v", err, c.Item)
	}
}
