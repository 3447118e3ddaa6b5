package work

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tobe-body/tobe-body/ledger"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)

func open(t *testing.T, path string) *ledger.Store {
	t.Helper()
	s, err := ledger.Open(ledger.Options{Path: path, AgentID: ledger.UUID{1}, BodyID: ledger.UUID{2}, Projections: []ledger.Projection{Items{}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func exec(s *ledger.Store, cmd ledger.Command) error {
	_, err := s.Execute(context.Background(), cmd)
	return err
}

func create(t *testing.T, s *ledger.Store, spec Spec) Item {
	t.Helper()
	if spec.Goal == "" {
		spec.Goal = "the goal of " + spec.ID
	}
	if spec.DoneWhen == nil {
		spec.DoneWhen = []string{"it is done"}
	}
	c := NewCreate(spec, "agent:test", t0)
	if err := exec(s, c); err != nil {
		t.Fatalf("create %s: %v", spec.ID, err)
	}
	return c.Item
}

func move(s *ledger.Store, it Item, to Status) (Item, error) {
	m := &Move{ID: it.ID, Expected: it.Version, To: to, Reason: "test", By: "agent:test", At: t0.Add(time.Minute)}
	if to == Blocked {
		m.BlockedOn = "a part on order"
	}
	err := exec(s, m)
	return m.Item, err
}

// pathTo is a shortest list of allowed moves from open to a status.
func pathTo(to Status) []Status {
	prev := map[Status]Status{Open: ""}
	queue := []Status{Open}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for _, n := range moves[s] {
			if _, seen := prev[n]; !seen {
				prev[n] = s
				queue = append(queue, n)
			}
		}
	}
	var path []Status
	for s := to; s != Open; s = prev[s] {
		path = append([]Status{s}, path...)
	}
	return path
}

// TestEveryTransition moves an item from each status to each status:
// the allowed ones are recorded, with the status left; every other is
// refused, naming both, and changes nothing.
func TestEveryTransition(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "ledger.db"))
	allowed := 0
	for _, from := range Statuses {
		for _, to := range Statuses {
			t.Run(fmt.Sprintf("%s→%s", from, to), func(t *testing.T) {
				id := fmt.Sprintf("%s-%s", from, to)
				spec := Spec{ID: id}
				if from == Draft {
					spec.Status = Draft
				}
				it := create(t, s, spec)
				if from != Draft {
					for _, step := range pathTo(from) {
						var err error
						if it, err = move(s, it, step); err != nil {
							t.Fatalf("to %s on the way to %s: %v", step, from, err)
						}
					}
				}
				if it.Status != from {
					t.Fatalf("at %s, not %s", it.Status, from)
				}
				got, err := move(s, it, to)
				want := slices.Contains(moves[from], to)
				switch {
				case want && err != nil:
					t.Fatalf("refused: %v", err)
				case want:
					allowed++
					if got.Status != to || got.Version != it.Version+1 {
						t.Fatalf("moved to %+v", got)
					}
					evs, _ := s.Events(ledger.Filter{Types: []string{EventMoved}})
					var r Record
					ledger.UnmarshalPayload(evs[len(evs)-1].Payload, &r)
					if r.From != from || r.Item.Status != to || r.Reason != "test" || r.By != "agent:test" {
						t.Errorf("the record %+v", r)
					}
				case from.Final():
					if !errors.Is(err, ErrFinal) || !strings.Contains(err.Error(), string(from)) {
						t.Fatalf("from final %s: %v", from, err)
					}
				default:
					if !errors.Is(err, ErrMove) || !strings.Contains(err.Error(), fmt.Sprintf("from %s to %s", from, to)) {
						t.Fatalf("not refused as a move not allowed: %v", err)
					}
				}
				if err != nil {
					if now, _ := Get(s, id); now.Version != it.Version || now.Status != from {
						t.Errorf("a refused move changed the item: %+v", now)
					}
				}
			})
		}
	}
	n := 0
	for _, to := range moves {
		n += len(to)
	}
	if allowed != n {
		t.Errorf("%d moves allowed, the table has %d", allowed, n)
	}
}

// TestCreateRefused: what a new item may not be, each refused naming
// the field, and nothing recorded.
func TestCreateRefused(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "ledger.db"))
	create(t, s, Spec{ID: "root"})
	create(t, s, Spec{ID: "child", Parent: "root"})
	create(t, s, Spec{ID: "grandchild", Parent: "child"})
	create(t, s, Spec{ID: "d1"})
	create(t, s, Spec{ID: "d2", DependsOn: []string{"d1"}})
	create(t, s, Spec{ID: "d3", DependsOn: []string{"d2"}})
	long := strings.Repeat("x", MaxText+1)
	for _, c := range []struct {
		name string
		spec Spec
		err  error
		says string
	}{
		{"no goal", Spec{ID: "a", Goal: " ", DoneWhen: []string{"x"}}, ErrInvalid, "goal: empty"},
		{"a long goal", Spec{ID: "a", Goal: long, DoneWhen: []string{"x"}}, ErrInvalid, "goal: 1001 bytes"},
		{"no criterion", Spec{ID: "a", Goal: "g", DoneWhen: []string{}}, ErrInvalid, "done_when: at least one acceptance criterion"},
		{"an empty criterion", Spec{ID: "a", Goal: "g", DoneWhen: []string{"x", ""}}, ErrInvalid, "done_when[1]: empty"},
		{"too many criteria", Spec{ID: "a", Goal: "g", DoneWhen: slices.Repeat([]string{"x"}, MaxCriteria+1)}, ErrInvalid, "done_when: 17 criteria"},
		{"born running", Spec{ID: "a", Status: Running}, ErrInvalid, `status: a new item is draft or open, not "running"`},
		{"an id with a slash", Spec{ID: "a/b"}, ErrInvalid, `id: '/' is not allowed`},
		{"a long id", Spec{ID: strings.Repeat("a", MaxIDLen+1)}, ErrInvalid, "id: 65 bytes"},
		{"an id taken", Spec{ID: "root"}, ErrExists, "root"},
		{"both requirements", Spec{ID: "a", Requires: &Requirement{Capability: "gpio.set", Device: "camera.front"}}, ErrInvalid, "requires: a capability or a device"},
		{"an empty requirement", Spec{ID: "a", Requires: &Requirement{}}, ErrInvalid, "requires: a capability or a device"},
		{"a budget without a window", Spec{ID: "a", Budget: &Budget{Max: 3}}, ErrInvalid, "interrupt_budget"},
		{"a negative budget", Spec{ID: "a", Budget: &Budget{Max: -1, WindowS: 60}}, ErrInvalid, "interrupt_budget"},
		{"no such parent", Spec{ID: "a", Parent: "nobody"}, ErrInvalid, "parent: no work item nobody"},
		{"its own parent", Spec{ID: "a", Parent: "a"}, ErrInvalid, "parent: an item is not its own parent"},
		{"too deep", Spec{ID: "a", Parent: "grandchild"}, ErrInvalid, "parent: a would be at depth 4; at most 3"},
		{"no such dependency", Spec{ID: "a", DependsOn: []string{"d1", "nobody"}}, ErrInvalid, "depends_on: no work item nobody"},
		{"on itself", Spec{ID: "a", DependsOn: []string{"a"}}, ErrInvalid, "depends_on: an item does not depend on itself"},
		{"twice", Spec{ID: "a", DependsOn: []string{"d1", "d1"}}, ErrInvalid, "depends_on: d1 twice"},
		{"a long chain", Spec{ID: "a", DependsOn: []string{"d3"}}, ErrInvalid, "depends_on: a chain of 4 dependencies from a; at most 3"},
		{"a negative check time", Spec{ID: "a", NextCheckAt: -1}, ErrInvalid, "next_check_at"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.spec.Goal == "" {
				c.spec.Goal = "g"
			}
			if c.spec.DoneWhen == nil {
				c.spec.DoneWhen = []string{"x"}
			}
			before, _ := s.Stats()
			err := exec(s, NewCreate(c.spec, "agent:test", t0))
			if !errors.Is(err, c.err) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("got %v, want %v saying %q", err, c.err, c.says)
			}
			if after, _ := s.Stats(); after.Events != before.Events {
				t.Errorf("a refused item was recorded: %d events, were %d", after.Events, before.Events)
			}
		})
	}
	// Accepted at the bounds: depth 3, a chain of 3.
	create(t, s, Spec{ID: "ok-depth", Parent: "child"})
	create(t, s, Spec{ID: "ok-chain", DependsOn: []string{"d2", "d1"}})
}

// TestStaleVersionIsRefusedWithTheCurrentItem: two callers change one
// item from the same version; the second is refused and told the item
// as it is now.
func TestStaleVersionIsRefusedWithTheCurrentItem(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "ledger.db"))
	it := create(t, s, Spec{ID: "w"})
	owner := "agent:a"
	first := &Change{ID: "w", Expected: it.Version, Patch: Patch{Owner: &owner, Progress: true}, By: "agent:a", At: t0.Add(time.Hour)}
	if err := exec(s, first); err != nil {
		t.Fatal(err)
	}
	if first.Item.Version != 2 || first.Item.Owner != owner || first.Item.LastProgressAt != t0.Add(time.Hour).UnixMilli() {
		t.Fatalf("changed: %+v", first.Item)
	}
	other := "agent:b"
	second := &Change{ID: "w", Expected: it.Version, Patch: Patch{Owner: &other}, By: "agent:b", At: t0.Add(time.Hour)}
	err := exec(s, second)
	st, ok := AsStale(err)
	if !ok || !errors.Is(err, ErrStale) || st.Expected != 1 || st.Current.Version != 2 || st.Current.Owner != owner {
		t.Fatalf("the stale change: %v (%+v)", err, st)
	}
	if !strings.Contains(err.Error(), "w is at version 2, not 1") {
		t.Errorf("the error: %v", err)
	}
	if _, err := move(s, it, Ready); !errors.Is(err, ErrStale) {
		t.Errorf("a stale move: %v", err)
	}
	if err := exec(s, &Change{ID: "nobody", Expected: 1, Patch: Patch{Owner: &owner}}); !errors.Is(err, ErrNotFound) {
		t.Errorf("a change of no item: %v", err)
	}
	if err := exec(s, &Change{ID: "w", Expected: 2}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "changes nothing") {
		t.Errorf("an empty patch: %v", err)
	}
}

// TestChangeChecksLikeCreate: a change is held to what an item may be,
// and to its references: a dependency that would close a cycle is
// refused; a final item is not changed.
func TestChangeChecksLikeCreate(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "ledger.db"))
	a := create(t, s, Spec{ID: "a"})
	b := create(t, s, Spec{ID: "b", DependsOn: []string{"a"}})
	deps := []string{"b"}
	err := exec(s, &Change{ID: "a", Expected: a.Version, Patch: Patch{DependsOn: &deps}})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "depends_on: a cycle: [a b a]") {
		t.Fatalf("a cycle: %v", err)
	}
	empty := ""
	if err := exec(s, &Change{ID: "b", Expected: b.Version, Patch: Patch{Goal: &empty}}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "goal: empty") {
		t.Fatalf("an empty goal: %v", err)
	}
	c := &Change{ID: "b", Expected: b.Version, Patch: Patch{Requires: &Requirement{Device: "camera.front"}, Budget: &Budget{Max: 2, WindowS: 3600}}}
	if err := exec(s, c); err != nil || c.Item.Requires.Device != "camera.front" || c.Item.Budget.Max != 2 {
		t.Fatalf("requires and a budget: %v %+v", err, c.Item)
	}
	c2 := &Change{ID: "b", Expected: c.Item.Version, Patch: Patch{Requires: &Requirement{}, Budget: &Budget{}}}
	if err := exec(s, c2); err != nil || c2.Item.Requires != nil || c2.Item.Budget != nil {
		t.Fatalf("cleared: %v %+v", err, c2.Item)
	}
	gone, err := move(s, c2.Item, Cancelled)
	if err != nil {
		t.Fatal(err)
	}
	owner := "x"
	if err := exec(s, &Change{ID: "b", Expected: gone.Version, Patch: Patch{Owner: &owner}}); !errors.Is(err, ErrFinal) {
		t.Fatalf("a cancelled item changed: %v", err)
	}
	if _, err := move(s, Item{ID: "a", Version: a.Version}, Blocked); err != nil {
		t.Fatalf("to blocked with what it waits for: %v", err)
	}
	if err := exec(s, &Move{ID: "a", Expected: a.Version + 1, To: Blocked}); !errors.Is(err, ErrMove) {
		t.Fatalf("blocked to blocked: %v", err)
	}
	blocked, _ := Get(s, "a")
	if blocked.BlockedOn != "a part on order" {
		t.Errorf("blocked on %q", blocked.BlockedOn)
	}
	ready, err := move(s, blocked, Ready)
	if err != nil || ready.BlockedOn != "" {
		t.Errorf("unblocked: %v, still blocked on %q", err, ready.BlockedOn)
	}
	if err := exec(s, &Move{ID: "a", Expected: ready.Version, To: Blocked}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "blocked_on") {
		t.Errorf("blocked on nothing: %v", err)
	}
}

// TestItemsAreRestoredFromTheProjection: after a reopen the items are as
// they stood, read from the projection; verify rebuilds it from the
// events and finds it the same.
func TestItemsAreRestoredFromTheProjection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	s := open(t, path)
	a := create(t, s, Spec{ID: "a", Owner: "agent:pi", NextCheckAt: t0.Add(time.Hour).UnixMilli()})
	create(t, s, Spec{ID: "b", Parent: "a", Status: Draft})
	if _, err := move(s, a, Ready); err != nil {
		t.Fatal(err)
	}
	want, err := List(s, nil)
	if err != nil || len(want) != 2 {
		t.Fatalf("%v %v", want, err)
	}
	s.Close()
	s = open(t, path)
	got, err := List(s, nil)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("after a reopen:\n%+v\nwant\n%+v (%v)", got, want, err)
	}
	if ready, _ := List(s, func(it *Item) bool { return it.Status == Ready }); len(ready) != 1 || ready[0].ID != "a" || ready[0].Version != 2 {
		t.Errorf("ready: %+v", ready)
	}
	rep, err := s.Verify(context.Background())
	if err != nil || !rep.OK() || !slices.Contains(rep.Projections, Projection) {
		t.Fatalf("verify: %v %+v", err, rep)
	}
	if _, err := Get(s, "nobody"); !errors.Is(err, ErrNotFound) {
		t.Errorf("no item: %v", err)
	}
}

func TestStale(t *testing.T) {
	it := Item{Status: Running, LastProgressAt: t0.UnixMilli()}
	for _, c := range []struct {
		status Status
		at     time.Duration
		after  time.Duration
		stale  bool
	}{
		{Running, 2 * time.Hour, time.Hour, true},
		{Running, 30 * time.Minute, time.Hour, false},
		{Blocked, 2 * time.Hour, time.Hour, true},
		{Draft, 2 * time.Hour, time.Hour, false},
		{Closed, 2 * time.Hour, time.Hour, false},
		{Running, 2 * time.Hour, 0, false},
	} {
		it.Status = c.status
		if got := it.Stale(t0.Add(c.at), c.after); got != c.stale {
			t.Errorf("%s, %v on, stale after %v: %v", c.status, c.at, c.after, got)
		}
	}
}
