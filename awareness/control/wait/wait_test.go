package wait

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tobe-body/tobe-body/awareness/control/work"
	"github.com/tobe-body/tobe-body/ledger"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)

func f(v float64) *float64 { return &v }

func fields(t *testing.T, v any) *Fields {
	t.Helper()
	p, err := ledger.MarshalPayload(v)
	if err != nil {
		t.Fatal(err)
	}
	return DecodeFields(p)
}

// TestClauseKinds: each kind of clause against payloads as the sense
// channels encode them (CBOR: integers and floats, strings, nested maps,
// arrays).
func TestClauseKinds(t *testing.T) {
	motion := map[string]any{"zone": "door", "box": []float64{0.1, 0.2, 0.4, 0.6}, "area": 0.12}
	self := map[string]any{"temps": map[string]any{"cpu": 71.5, "gpu": 60}, "throttled": true, "level": uint64(3)}
	key := map[string]any{"device": "tobe-lab-keypad", "key": "KEY_ENTER"}
	for _, c := range []struct {
		name    string
		clause  Clause
		payload map[string]any
		holds   bool
	}{
		{"equals a string", Clause{Field: "zone", Equals: "door"}, motion, true},
		{"equals another string", Clause{Field: "zone", Equals: "yard"}, motion, false},
		{"equals a float", Clause{Field: "area", Equals: 0.12}, motion, true},
		{"equals an integer as a number", Clause{Field: "level", Equals: float64(3)}, self, true},
		{"equals a boolean", Clause{Field: "throttled", Equals: true}, self, true},
		{"equals: a string is not a number", Clause{Field: "zone", Equals: float64(1)}, motion, false},
		{"equals: no such field", Clause{Field: "nothing", Equals: "door"}, motion, false},
		{"in", Clause{Field: "key", In: []any{"KEY_ESC", "KEY_ENTER"}}, key, true},
		{"in: not among", Clause{Field: "key", In: []any{"KEY_ESC", "KEY_1"}}, key, false},
		{"in: numbers", Clause{Field: "level", In: []any{float64(1), float64(3)}}, self, true},
		{"prefix", Clause{Field: "device", Prefix: "tobe-lab-"}, key, true},
		{"prefix: another", Clause{Field: "device", Prefix: "usb-"}, key, false},
		{"prefix: not a string", Clause{Field: "area", Prefix: "0"}, motion, false},
		{"above, nested", Clause{Field: "temps.cpu", Above: f(70)}, self, true},
		{"above: not above", Clause{Field: "temps.gpu", Above: f(70)}, self, false},
		{"above: equal is not above", Clause{Field: "temps.cpu", Above: f(71.5)}, self, false},
		{"below", Clause{Field: "temps.gpu", Below: f(65)}, self, true},
		{"between", Clause{Field: "temps.cpu", Above: f(70), Below: f(80)}, self, true},
		{"between: outside", Clause{Field: "temps.cpu", Above: f(72), Below: f(80)}, self, false},
		{"threshold: not a number", Clause{Field: "zone", Above: f(0)}, motion, false},
		{"threshold: a path through a number", Clause{Field: "area.x", Above: f(0)}, motion, false},
		{"zone by name", Clause{Zone: &Zone{Names: []string{"yard", "door"}}}, motion, true},
		{"zone by another name", Clause{Zone: &Zone{Names: []string{"yard"}}}, motion, false},
		{"zone by box: overlaps", Clause{Zone: &Zone{Box: &[4]float64{0.3, 0.5, 0.9, 0.9}}}, motion, true},
		{"zone by box: beside", Clause{Zone: &Zone{Box: &[4]float64{0.5, 0.0, 0.9, 0.9}}}, motion, false},
		{"zone by box: touching is outside", Clause{Zone: &Zone{Box: &[4]float64{0.4, 0.0, 0.9, 0.9}}}, motion, false},
		{"zone by box: no box", Clause{Zone: &Zone{Box: &[4]float64{0, 0, 1, 1}}}, key, false},
		{"zone: a field named", Clause{Field: "device", Zone: &Zone{Names: []string{"tobe-lab-keypad"}}}, key, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := c.clause.check(); err != nil {
				t.Fatalf("check: %v", err)
			}
			if got := c.clause.Holds(fields(t, c.payload)); got != c.holds {
				t.Errorf("holds %v, want %v", got, c.holds)
			}
		})
	}
}

func TestClauseRefused(t *testing.T) {
	for _, c := range []struct {
		clause Clause
		says   string
	}{
		{Clause{Field: "x"}, "no test"},
		{Clause{Field: "x", Equals: "a", Prefix: "b"}, "more than one test (equals, prefix)"},
		{Clause{Equals: "a"}, "equals: no field"},
		{Clause{Field: "x", Equals: []int{1}}, "equals: []int: a string, a number or a boolean"},
		{Clause{Field: "x", In: []any{}}, "in: 1 to 64 values, not 0"},
		{Clause{Field: "x", In: []any{"a", map[string]any{}}}, "in[1]"},
		{Clause{Field: "x", Above: f(5), Below: f(5)}, "nothing is between"},
		{Clause{Field: strings.Repeat("x", 65), Equals: "a"}, "field: 65 bytes"},
		{Clause{Zone: &Zone{}}, "zone: names or a box"},
		{Clause{Zone: &Zone{Box: &[4]float64{0.5, 0, 0.2, 1}}}, "x0 < x1"},
		{Clause{Zone: &Zone{Box: &[4]float64{0, 0, 1.5, 1}}}, "coordinates from 0 to 1"},
	} {
		if err := c.clause.check(); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%+v: %v, want %q", c.clause, err, c.says)
		}
	}
}

func open(t *testing.T, path string) *ledger.Store {
	t.Helper()
	s, err := ledger.Open(ledger.Options{Path: path, AgentID: ledger.UUID{1}, BodyID: ledger.UUID{2},
		Projections: []ledger.Projection{work.Items{}, Conditions{}}})
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

func door(owner string) Condition {
	return Condition{ID: "door", Owner: owner, Types: []string{"camera.motion_started"}, Channels: []string{"camera."},
		Match: []Clause{{Zone: &Zone{Names: []string{"door"}}}}, Priority: High, CooldownMS: 60_000,
		ExpiresAt: t0.Add(10 * time.Minute).UnixMilli()}
}

// TestAddRefused: a condition without an owner or an expiry, or with
// anything else wrong, is refused naming the field; nothing is recorded.
func TestAddRefused(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "ledger.db"))
	it := work.NewCreate(work.Spec{ID: "watch", Goal: "watch the door", DoneWhen: []string{"told of motion"}}, "agent:t", t0)
	if err := exec(s, it); err != nil {
		t.Fatal(err)
	}
	gone := work.NewCreate(work.Spec{ID: "gone", Goal: "g", DoneWhen: []string{"x"}}, "agent:t", t0)
	exec(s, gone)
	exec(s, &work.Move{ID: "gone", Expected: 1, To: work.Cancelled, At: t0})
	for _, c := range []struct {
		name string
		mod  func(*Condition)
		says string
	}{
		{"no owner", func(c *Condition) { c.Owner = "" }, "owner: a wait condition belongs to a work item"},
		{"no expiry", func(c *Condition) { c.ExpiresAt = 0 }, "expires_at: a wait condition expires"},
		{"an expiry past", func(c *Condition) { c.ExpiresAt = t0.Add(-time.Second).UnixMilli() }, "expires_at: 2026-12-02T07:59:59Z is past"},
		{"an expiry too far", func(c *Condition) { c.ExpiresAt = t0.Add(100 * 24 * time.Hour).UnixMilli() }, "more than 90 days ahead"},
		{"an owner that is not there", func(c *Condition) { c.Owner = "nobody" }, "owner: no work item nobody"},
		{"an owner cancelled", func(c *Condition) { c.Owner = "gone" }, "owner: work item gone is cancelled"},
		{"no types", func(c *Condition) { c.Types = nil }, "event_types: 1 to 16 types, not 0"},
		{"a bad type", func(c *Condition) { c.Types = []string{"Camera.Motion"} }, `event_types[0]: "Camera.Motion"`},
		{"a bad channel", func(c *Condition) { c.Channels = []string{".camera"} }, `channels[0]: ".camera"`},
		{"a bad clause", func(c *Condition) { c.Match = []Clause{{Field: "zone"}} }, "match[0]: no test"},
		{"a bad priority", func(c *Condition) { c.Priority = "urgent" }, `priority: "urgent"`},
		{"a negative cooldown", func(c *Condition) { c.CooldownMS = -1 }, "cooldown_ms: negative"},
		{"a bad dedupe", func(c *Condition) { c.Dedupe = "twice" }, `dedupe: "twice"`},
		{"dedupe by no field", func(c *Condition) { c.Dedupe = DedupeField }, "dedupe_field"},
		{"an id with a slash", func(c *Condition) { c.ID = "a/b" }, "id:"},
		{"a follow-up without a goal", func(c *Condition) { c.FollowUp = &FollowUp{DoneWhen: []string{"x"}} }, "follow_up: goal: empty"},
		{"a follow-up without criteria", func(c *Condition) { c.FollowUp = &FollowUp{Goal: "look"} }, "follow_up: done_when: at least one acceptance criterion"},
		{"a follow-up with a blank criterion", func(c *Condition) { c.FollowUp = &FollowUp{Goal: "look", DoneWhen: []string{"x", " "}} }, "follow_up: done_when[1]: empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cond := door("watch")
			c.mod(&cond)
			before, _ := s.Stats()
			err := exec(s, NewAdd(cond, "agent:t", t0))
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("got %v, want %q", err, c.says)
			}
			if after, _ := s.Stats(); after.Events != before.Events {
				t.Errorf("recorded: %d events, were %d", after.Events, before.Events)
			}
		})
	}
}

// TestConditionLife: added, matched, removed; each recorded, the
// projection as it stands after a reopen, verify clean.
func TestConditionLife(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	s := open(t, path)
	if err := exec(s, work.NewCreate(work.Spec{ID: "watch", Goal: "watch the door", DoneWhen: []string{"told of motion"}}, "agent:t", t0)); err != nil {
		t.Fatal(err)
	}
	add := NewAdd(door("watch"), "agent:t", t0)
	if err := exec(s, add); err != nil {
		t.Fatal(err)
	}
	c := add.Condition
	if c.Version != 1 || c.Dedupe != DedupeNone || c.CreatedAt != t0.UnixMilli() {
		t.Fatalf("added %+v", c)
	}
	if err := exec(s, NewAdd(door("watch"), "agent:t", t0)); !errors.Is(err, ErrExists) {
		t.Fatalf("the same id again: %v", err)
	}
	if !c.Wants("camera.motion_started", "camera.front") || c.Wants("camera.motion_ended", "camera.front") || c.Wants("camera.motion_started", "gpio.button") {
		t.Error("Wants")
	}
	m := &Matched{ID: "door", Event: "e1", At: t0.Add(time.Minute)}
	if err := exec(s, m); err != nil || m.Condition.Matches != 1 || m.Condition.LastEvent != "e1" || m.Condition.Version != 2 {
		t.Fatalf("matched: %v %+v", err, m.Condition)
	}
	s.Close()
	s = open(t, path)
	cs, err := List(s, nil)
	if err != nil || len(cs) != 1 || !reflect.DeepEqual(cs[0], m.Condition) {
		t.Fatalf("after a reopen: %+v %v", cs, err)
	}
	r := &Remove{ID: "door", Why: "expired", At: t0.Add(10 * time.Minute)}
	if err := exec(s, r); err != nil || r.Condition.Removed != "expired" {
		t.Fatalf("removed: %v %+v", err, r.Condition)
	}
	if got, err := Get(s, "door"); err != nil || !reflect.DeepEqual(got, r.Condition) {
		t.Errorf("Get after the removal: %+v %v", got, err)
	}
	if _, err := Get(s, "nobody"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "nobody") {
		t.Errorf("Get of no condition: %v", err)
	}
	if err := exec(s, &Matched{ID: "door", Event: "e2", At: t0.Add(11 * time.Minute)}); !errors.Is(err, ErrRemoved) || !strings.Contains(err.Error(), "expired") {
		t.Errorf("a match after the removal: %v", err)
	}
	once := door("watch")
	once.ID, once.Dedupe = "once", DedupeOnce
	exec(s, NewAdd(once, "agent:t", t0))
	m = &Matched{ID: "once", Event: "e3", At: t0.Add(time.Minute)}
	if err := exec(s, m); err != nil || m.Condition.Removed != "matched once" {
		t.Errorf("dedupe once: %v %+v", err, m.Condition)
	}
	rep, err := s.Verify(context.Background())
	if err != nil || !rep.OK() {
		t.Fatalf("verify: %v %+v", err, rep)
	}
}

// FuzzMatch: any payload bytes, decoded once, against a clause of every
// kind: no panic, and a payload that is not a map has no fields.
func FuzzMatch(fz *testing.F) {
	for _, v := range []any{
		map[string]any{"zone": "door", "box": []float64{0.1, 0.2, 0.4, 0.6}},
		map[string]any{"temps": map[string]any{"cpu": 71.5}},
		map[string]any{"box": []any{"a", 1, nil, true}},
		[]int{1, 2},
		"text",
	} {
		p, _ := ledger.MarshalPayload(v)
		fz.Add([]byte(p))
	}
	clauses := []Clause{
		{Field: "zone", Equals: "door"}, {Field: "zone", In: []any{"door", float64(2)}}, {Field: "zone", Prefix: "d"},
		{Field: "temps.cpu", Above: f(70)}, {Field: "temps.cpu.x", Below: f(70)},
		{Zone: &Zone{Names: []string{"door"}, Box: &[4]float64{0, 0, 0.5, 0.5}}},
	}
	for i := range clauses {
		if err := clauses[i].check(); err != nil {
			fz.Fatal(err)
		}
	}
	fz.Fuzz(func(t *testing.T, p []byte) {
		fs := DecodeFields(p)
		c := Condition{Match: clauses[:1]}
		c.Holds(fs)
		for i := range clauses {
			clauses[i].Holds(fs)
		}
	})
}
