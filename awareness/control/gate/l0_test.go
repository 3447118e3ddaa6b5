package gate

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tobe-body/tobe-body/awareness/control/wait"
	"github.com/tobe-body/tobe-body/ledger"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)

func payload(t testing.TB, v any) []byte {
	t.Helper()
	p, err := ledger.MarshalPayload(v)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func ids(cs []*wait.Condition) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.ID)
	}
	slices.Sort(out)
	return out
}

func TestIndexMatch(t *testing.T) {
	later := t0.Add(time.Hour).UnixMilli()
	cond := func(id string, types, chans []string, match ...wait.Clause) wait.Condition {
		return wait.Condition{ID: id, Owner: "w", Types: types, Channels: chans, Match: match, ExpiresAt: later}
	}
	ix := Build([]wait.Condition{
		cond("door", []string{"camera.motion_started"}, []string{"camera.front"}, wait.Clause{Zone: &wait.Zone{Names: []string{"door"}}}),
		cond("any-motion", []string{"camera.motion_started"}, nil),
		cond("camera-anything", []string{"camera."}, []string{"camera."}),
		cond("overlap", []string{"camera.", "camera.motion_started"}, []string{"camera.", "camera.front"}),
		cond("enter", []string{"input.pressed"}, nil, wait.Clause{Field: "key", Equals: "KEY_ENTER"}),
		cond("hot", []string{"body.hot"}, []string{"body.self"}, wait.Clause{Field: "value", Above: ptr(70)}),
		cond("expired", []string{"camera.motion_started"}, nil),
		{ID: "removed", Owner: "w", Types: []string{"camera.motion_started"}, ExpiresAt: later, Removed: "expired"},
	})
	exp, _ := ix.Get("expired")
	exp.ExpiresAt = t0.UnixMilli()
	if ix.Len() != 7 {
		t.Fatalf("%d conditions indexed, want 7 (a removed one is not)", ix.Len())
	}
	for _, c := range []struct {
		name    string
		typ, ch string
		payload any
		want    []string
	}{
		{"motion at the door", "camera.motion_started", "camera.front", map[string]any{"zone": "door"}, []string{"any-motion", "camera-anything", "door", "overlap"}},
		{"motion in the yard", "camera.motion_started", "camera.front", map[string]any{"zone": "yard"}, []string{"any-motion", "camera-anything", "overlap"}},
		{"motion at the door of another camera", "camera.motion_started", "camera.back", map[string]any{"zone": "door"}, []string{"any-motion", "camera-anything", "overlap"}},
		{"motion ended", "camera.motion_ended", "camera.front", map[string]any{"zone": "door"}, []string{"camera-anything", "overlap"}},
		{"enter", "input.pressed", "input.keypad", map[string]any{"key": "KEY_ENTER"}, []string{"enter"}},
		{"escape", "input.pressed", "input.keypad", map[string]any{"key": "KEY_ESC"}, nil},
		{"hot", "body.hot", "body.self", map[string]any{"value": 75.5}, []string{"hot"}},
		{"warm", "body.hot", "body.self", map[string]any{"value": 65}, nil},
		{"nothing wants it", "gpio.changed", "gpio.button", map[string]any{"level": "high"}, nil},
		{"a payload that is not a map", "input.pressed", "input.keypad", []int{1}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := &ledger.Stored{Seq: 1, Event: ledger.Event{Type: c.typ, ChannelID: c.ch, Payload: payload(t, c.payload)}}
			if got := ids(ix.Match(e, t0.UnixMilli(), nil)); !slices.Equal(got, c.want) {
				t.Errorf("matched %v, want %v", got, c.want)
			}
		})
	}
	ix.Delete("overlap")
	ix.Put(cond("any-motion", []string{"camera.motion_ended"}, nil))
	e := &ledger.Stored{Seq: 2, Event: ledger.Event{Type: "camera.motion_started", ChannelID: "camera.front", Payload: payload(t, map[string]any{"zone": "door"})}}
	if got := ids(ix.Match(e, t0.UnixMilli(), nil)); !slices.Equal(got, []string{"camera-anything", "door"}) {
		t.Errorf("after a delete and a replace: %v", got)
	}
	if ix.Len() != 6 {
		t.Errorf("%d conditions", ix.Len())
	}
}

func ptr(v float64) *float64 { return &v }

// TestIndexIsAScan: on random conditions and events, the index matches
// exactly what looking at every condition would.
func TestIndexIsAScan(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	w := newWorld(r, 2000, 40, 4)
	ix := Build(w.conds)
	now := t0.UnixMilli()
	for i := range 5000 {
		e := ledger.Stored{Seq: uint64(i + 1), Event: w.event(r)}
		got := ids(ix.Match(&e, now, nil))
		var want []string
		f := wait.DecodeFields(e.Payload)
		for j := range w.conds {
			c := &w.conds[j]
			if c.ExpiresAt > now && c.Wants(e.Type, e.ChannelID) && c.Holds(f) {
				want = append(want, c.ID)
			}
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("event %d %s on %s: the index matched %v, a scan %v", i, e.Type, e.ChannelID, got, want)
		}
	}
}

// world is event types and channels, conditions over them and events
// from them. Most conditions want a value (a zone, a key, a number) of
// a space of zones sized by the caller.
type world struct {
	types, chans, zones []string
	conds               []wait.Condition
}

func newWorld(r *rand.Rand, n, types, zones int) *world {
	w := &world{}
	for i := range zones {
		w.zones = append(w.zones, fmt.Sprintf("zone%d", i))
	}
	for i := range types {
		w.types = append(w.types, fmt.Sprintf("kind%d.event%d", i%8, i))
	}
	for i := range 30 {
		w.chans = append(w.chans, fmt.Sprintf("dev%d.unit%d", i%6, i))
	}
	later := t0.Add(time.Hour).UnixMilli()
	zone := func() string { return w.zones[r.IntN(len(w.zones))] }
	for i := range n {
		c := wait.Condition{ID: fmt.Sprintf("c%d", i), Owner: "w", ExpiresAt: later}
		typ := w.types[r.IntN(len(w.types))]
		if r.IntN(10) == 0 {
			typ = typ[:strings.IndexByte(typ, '.')+1] // a prefix: "kindN."
		}
		c.Types = []string{typ}
		switch r.IntN(4) {
		case 0:
		case 1:
			ch := w.chans[r.IntN(len(w.chans))]
			c.Channels = []string{ch[:strings.IndexByte(ch, '.')+1]} // "devN."
		default:
			c.Channels = []string{w.chans[r.IntN(len(w.chans))]}
		}
		switch r.IntN(50) {
		case 0: // no clause: every event of its type and channel
		default:
			switch r.IntN(5) {
			case 0, 1:
				c.Match = []wait.Clause{{Zone: &wait.Zone{Names: []string{zone()}}}}
			case 2:
				c.Match = []wait.Clause{{Field: "value", Above: ptr(float64(r.IntN(100)))}, {Field: "zone", Equals: zone()}}
			case 3:
				c.Match = []wait.Clause{{Zone: &wait.Zone{Names: []string{zone(), zone()}}}, {Field: "key", In: []any{"KEY_1", "KEY_ENTER"}}}
			case 4:
				c.Match = []wait.Clause{{Zone: &wait.Zone{Box: &[4]float64{0, 0, 0.5, 0.5}}}, {Field: "zone", In: []any{zone()}}}
			}
		}
		if r.IntN(50) == 0 {
			c.ExpiresAt = t0.UnixMilli()
		}
		w.conds = append(w.conds, c)
	}
	return w
}

func (w *world) event(r *rand.Rand) ledger.Event {
	p, _ := ledger.MarshalPayload(map[string]any{"zone": w.zones[r.IntN(len(w.zones))], "value": r.IntN(100), "key": "KEY_ENTER", "box": []float64{0.1, 0.1, 0.3, 0.3}})
	return ledger.Event{ID: ledger.NewID(), Type: w.types[r.IntN(len(w.types))], ChannelID: w.chans[r.IntN(len(w.chans))], Payload: p}
}

func TestIsSystem(t *testing.T) {
	for typ, want := range map[string]bool{
		"estop.tripped": true, "estop.reset": true, "lease.human_takeover": true, "lease.human_released": true,
		"body.offline": true, "body.online": true, "channel.revoked": true, "body.degradation": true,
		"lease.granted": false, "body.hot": false, "camera.motion_started": false, "estop": false,
	} {
		if IsSystem(typ) != want {
			t.Errorf("%s: %v", typ, !want)
		}
	}
}

func TestPool(t *testing.T) {
	p := &Pool{Per: 2, TTL: time.Minute, MaxKeys: 2}
	ev := func(seq uint64, ch string) *ledger.Stored {
		return &ledger.Stored{Seq: seq, Event: ledger.Event{ID: ledger.NewID(), Type: "gpio.changed", ChannelID: ch}}
	}
	var last *ledger.Stored
	for i := range 5 {
		last = ev(uint64(i+1), "gpio.button")
		p.Add(last, "telemetry", t0.Add(time.Duration(i)*time.Second))
	}
	first := ev(10, "camera.front")
	p.Add(first, "telemetry", t0)
	p.Add(ev(11, "audio.mic"), "telemetry", t0) // a third key: not kept
	if s, ok := p.Find(last.ID.String(), t0.Add(30*time.Second)); !ok || s.Seq != 5 {
		t.Errorf("the last sample: %+v %v", s, ok)
	}
	if _, ok := p.Find(ev(1, "").ID.String(), t0); ok {
		t.Error("found what was never added")
	}
	if got := p.Counts(); got["gpio.button telemetry"] != 5 || got["camera.front telemetry"] != 1 || len(got) != 2 {
		t.Errorf("counts %v", got)
	}
	p.mu.Lock()
	kept := len(p.samples[poolKey{"gpio.button", "telemetry"}])
	p.mu.Unlock()
	if kept != 2 {
		t.Errorf("%d samples kept of gpio.button, want 2", kept)
	}
	if _, ok := p.Find(first.ID.String(), t0.Add(time.Minute)); ok {
		t.Error("a sample past its TTL was found")
	}
	p.Expire(t0.Add(time.Minute + 3*time.Second))
	if s, ok := p.Find(last.ID.String(), t0.Add(time.Minute+3*time.Second)); !ok || s.Seq != 5 {
		t.Errorf("expired too much: %v", ok)
	}
	p.mu.Lock()
	n := len(p.samples)
	p.mu.Unlock()
	if n != 1 {
		t.Errorf("%d keys after the expiry, want 1", n)
	}
}

// BenchmarkL0 is the throughput of L0 (the index and the matchers, with
// the payload's fields read) on one core, run with -cpu 1: one stream of
// events (8 types, 30 channels, 4 zones), the same 10 conditions that
// want some of them, and 0, 990 or 9,990 more that want none of them:
// half over the same types and channels but other zones and values, half
// over other types. What it measures is what the conditions an event
// does not match cost it: by the index's promise, next to nothing.
func BenchmarkL0(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprintf("conditions=%d", n), func(b *testing.B) {
			r := rand.New(rand.NewPCG(3, 4))
			w, conds := benchWorld(r, n)
			benchMatch(b, Build(conds), w, r)
		})
	}
}

// benchWorld is BenchmarkL0's: the events' world with its 10
// conditions, and n-10 conditions that want none of its events.
func benchWorld(r *rand.Rand, n int) (*world, []wait.Condition) {
	w := newWorld(r, 10, 8, 4)
	conds := w.conds
	other := newWorld(r, n-10, 8, max(4, n/8))
	elsewhere := newWorld(r, n-10, max(8, n/50), 4)
	for i := range n - 10 {
		var c wait.Condition
		if i%2 == 0 {
			c = other.conds[i]
			for j := range c.Match { // other zones than the events'
				renameZones(&c.Match[j])
			}
			if len(c.Match) == 0 {
				c.Types = []string{"otherkind.none"}
			}
		} else {
			c = elsewhere.conds[i]
			for j := range c.Types {
				c.Types[j] = "other" + c.Types[j]
			}
		}
		c.ID = fmt.Sprintf("x%d", i)
		conds = append(conds, c)
	}
	return w, conds
}

// renameZones makes a clause want zones the events never have.
func renameZones(c *wait.Clause) {
	if c.Zone != nil {
		z := *c.Zone
		z.Names = slices.Clone(z.Names)
		for i := range z.Names {
			z.Names[i] = "other" + z.Names[i]
		}
		c.Zone = &z
	}
	if s, ok := c.Equals.(string); ok {
		c.Equals = "other" + s
	}
	if c.In != nil {
		in := slices.Clone(c.In)
		for i := range in {
			if s, ok := in[i].(string); ok && strings.HasPrefix(s, "zone") {
				in[i] = "other" + s
			}
		}
		c.In = in
	}
}

// BenchmarkL0Spread is L0 where the conditions and what they match grow
// together: 10, 1,000 and 10,000 conditions over event types and zones
// that grow with them (a type for 50 conditions, a zone for 8; at least
// 8 and 4) and 30 channels, events from the same world. Each event
// matches more conditions as they grow (matches/event): what this adds
// over BenchmarkL0 is the cost of the matches themselves.
func BenchmarkL0Spread(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprintf("conditions=%d", n), func(b *testing.B) {
			r := rand.New(rand.NewPCG(3, 4))
			w := newWorld(r, n, max(8, n/50), max(4, n/8))
			benchMatch(b, Build(w.conds), w, r)
		})
	}
}

func benchMatch(b *testing.B, ix *Index, w *world, r *rand.Rand) {
	evs := make([]ledger.Stored, 4096)
	for i := range evs {
		evs[i] = ledger.Stored{Seq: uint64(i + 1), Event: w.event(r)}
	}
	now := t0.UnixMilli()
	out := make([]*wait.Condition, 0, 64)
	matched := 0
	b.ResetTimer()
	for i := range b.N {
		out = ix.Match(&evs[i%len(evs)], now, out[:0])
		matched += len(out)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(matched)/float64(b.N), "matches/event")
}
