package ledger

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// countMotion derives "world.count" from every camera event: how many it
// has seen, read from its own projection, so each derivation depends on
// the one before it in the same transaction. A payload of "bad" fails.
type countMotion struct{}

func (countMotion) Name() string    { return "count" }
func (countMotion) Types() []string { return []string{"camera."} }
func (countMotion) Derive(v *View, e *Event, d Derivation) ([]Event, error) {
	switch {
	case bytes.Equal(e.Payload, []byte("bad")): // a text of two bytes, "ad"
		return nil, errors.New("a bad payload")
	case bytes.Equal(e.Payload, []byte{0x01}):
		return []Event{{Type: "world.count", Payload: []byte{0x01, 0x02}}}, nil // two items: the ledger refuses it
	}
	var n uint64
	if b := v.Get("count", []byte("n")); b != nil {
		if err := UnmarshalPayload(b, &n); err != nil {
			return nil, err
		}
	}
	p, err := MarshalPayload(n + 1)
	return []Event{{Type: "world.count", OccurredAt: e.OccurredAt, Payload: p}}, err
}

// lastCount keeps the last world.count.
type lastCount struct{}

func (lastCount) Name() string                { return "count" }
func (lastCount) Types() []string             { return []string{"world.count"} }
func (lastCount) Apply(kv KV, e *Event) error { return kv.Put([]byte("n"), e.Payload) }

func TestDeriverWritesInTheEventsTransaction(t *testing.T) {
	var logged bytes.Buffer
	s := openTest(t, tempPath(t), func(o *Options) {
		o.Projections = append(o.Projections, lastCount{})
		o.Derivers = []Deriver{countMotion{}}
		o.Log = slog.New(slog.NewTextHandler(&logged, nil))
	})
	ctx := context.Background()
	// Three in one request, one that fails to derive, one alone.
	bad := motion(3)
	bad.Payload = []byte("bad")
	if _, err := s.Append(ctx, motion(1), motion(2), bad); err != nil {
		t.Fatal(err)
	}
	junk := motion(5)
	junk.Payload = []byte{0x01}
	if _, err := s.Append(ctx, junk); err != nil {
		t.Fatalf("an event whose derivation the ledger refuses: %v", err)
	}
	res, err := s.AppendGrouped(ctx, s.opts.Now(), motion(4))
	if err != nil {
		t.Fatal(err)
	}
	evs, err := s.Events(Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		got = append(got, e.Type)
	}
	want := []string{"camera.motion_started", "world.count", "camera.motion_started", "world.count", "camera.motion_started",
		"camera.motion_started", "camera.motion_started", "world.count"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	if res[0].Seq != evs[6].Seq || evs[7].Seq != res[0].Seq+1 {
		t.Errorf("the derived event is at %d; want right after its event at %d", evs[7].Seq, res[0].Seq)
	}
	var n uint64
	if err := UnmarshalPayload(evs[7].Payload, &n); err != nil || n != 3 {
		t.Errorf("the last count is %d, want 3: each derivation reads the one before it", n)
	}
	if !bytes.Contains(logged.Bytes(), []byte("a bad payload")) || !bytes.Contains(logged.Bytes(), []byte("more than one item")) {
		t.Errorf("the failed derivation was not logged: %s", logged.String())
	}
	rep, err := s.Verify(ctx)
	if err != nil || !rep.OK() {
		t.Fatalf("verify: %v %v", rep.Problems, err)
	}
}

// lostProbe derives a world.probe with its event's payload, and notes
// the Lost count each derivation is told.
type lostProbe struct{ lost *[]uint64 }

func (lostProbe) Name() string    { return "probe" }
func (lostProbe) Types() []string { return []string{"camera."} }
func (p lostProbe) Derive(v *View, e *Event, d Derivation) ([]Event, error) {
	*p.lost = append(*p.lost, d.Lost)
	if bytes.Equal(e.Payload, probe("bad")) {
		return nil, errors.New("a bad payload")
	}
	return []Event{{Type: "world.probe", Payload: e.Payload}}, nil
}

// failProbe is a projection of world.probe that fails on "boom": the
// transaction that wrote it fails.
type failProbe struct{}

func (failProbe) Name() string    { return "probe" }
func (failProbe) Types() []string { return []string{"world.probe"} }
func (failProbe) Apply(kv KV, e *Event) error {
	if bytes.Equal(e.Payload, probe("boom")) {
		return errors.New("boom")
	}
	return kv.Put([]byte("last"), e.Payload)
}

func probe(text string) []byte {
	p, _ := MarshalPayload(text)
	return p
}

// A deriver is told when what it derived may not be in the ledger: a
// derivation the ledger refused or logged as failed, a transaction
// rolled back after it ran.
func TestDerivationsLostAreCounted(t *testing.T) {
	var lost []uint64
	s := openTest(t, tempPath(t), func(o *Options) {
		o.Projections = append(o.Projections, failProbe{})
		o.Derivers = []Deriver{lostProbe{&lost}}
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	})
	ctx := context.Background()
	with := func(text string) Event {
		e := motion(1)
		e.Payload = probe(text)
		return e
	}
	step := func(e Event, wantErr bool) uint64 {
		t.Helper()
		if _, err := s.Append(ctx, e); (err != nil) != wantErr {
			t.Fatalf("append %q: %v", e.Payload, err)
		}
		n := len(lost)
		if _, err := s.Append(ctx, with("ok")); err != nil {
			t.Fatal(err)
		}
		return lost[n]
	}
	base := step(with("ok"), false)
	if n := step(with("ok"), false); n != base {
		t.Fatalf("lost moved from %d to %d after derivations that were all written", base, n)
	}
	if n := step(with("bad"), false); n == base {
		t.Fatalf("lost still %d after a derivation that failed", n)
	}
	was := lost[len(lost)-1]
	if n := step(with("boom"), true); n <= was {
		t.Fatalf("lost still %d after a transaction rolled back with a derivation in it", n)
	}
	was = lost[len(lost)-1]
	if n := step(with("ok"), false); n != was {
		t.Fatalf("lost moved from %d to %d with nothing lost", was, n)
	}
	// Another open of the file counts from another base.
	path := s.opts.Path
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, path, func(o *Options) {
		o.Projections = append(o.Projections, failProbe{})
		o.Derivers = []Deriver{lostProbe{&lost}}
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	})
	if n := step(with("ok"), false); n == was {
		t.Fatalf("lost is %d in the file opened again, as it was before: a deriver kept over the reopen would not forget", n)
	}
}

func TestEventsAtLeavesOutWhatIsNotThere(t *testing.T) {
	s := openTest(t, tempPath(t))
	res, err := s.Append(context.Background(), motion(1), motion(2))
	if err != nil {
		t.Fatal(err)
	}
	evs, err := s.EventsAt(res[1].Seq, 999, res[0].Seq)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Seq != res[1].Seq || evs[1].Seq != res[0].Seq || evs[0].ID != res[1].ID {
		t.Fatalf("got %+v; want events %d and %d in that order", evs, res[1].Seq, res[0].Seq)
	}
	for _, r := range res {
		e, ok, err := s.EventByID(r.ID)
		if err != nil || !ok || e.Seq != r.Seq {
			t.Errorf("EventByID(%s): %+v %v %v; want the event at %d", r.ID, e, ok, err, r.Seq)
		}
	}
	if _, ok, err := s.EventByID(NewID()); ok || err != nil {
		t.Errorf("EventByID of an id never stored: %v %v", ok, err)
	}
}

// keys is a projection that keeps the payload's text as a key.
type keys struct{}

func (keys) Name() string    { return "keys" }
func (keys) Types() []string { return []string{"grant.key"} }
func (keys) Apply(kv KV, e *Event) error {
	var k []byte
	if err := UnmarshalPayload(e.Payload, &k); err != nil {
		return err
	}
	return kv.Put(k, k)
}

func TestRangeReadsABucketAsItReadsMemory(t *testing.T) {
	all := []string{"a", "b1", "b2", "b3", "b\xff", "c", "\xff", "\xff\xff"}
	s := openTest(t, tempPath(t), func(o *Options) { o.Projections = append(o.Projections, keys{}) })
	mem := MemKV{}
	for _, k := range all {
		p, _ := MarshalPayload([]byte(k))
		if _, err := s.Append(context.Background(), Event{Type: "grant.key", Payload: p}); err != nil {
			t.Fatal(err)
		}
		mem.Put([]byte(k), []byte(k))
	}
	for _, tc := range []struct {
		prefix, from string
		fromNil      bool
		reverse      bool
		want         string
	}{
		{"b", "", true, false, "b1 b2 b3 b\xff"},
		{"b", "", true, true, "b\xff b3 b2 b1"},
		{"b", "b2", false, false, "b2 b3 b\xff"},
		{"b", "b2", false, true, "b2 b1"},
		{"b", "b25", false, true, "b2 b1"},
		{"b", "b0", false, true, ""},
		{"b", "b4", false, true, "b3 b2 b1"},
		{"\xff", "", true, true, "\xff\xff \xff"},
		{"", "", true, true, "\xff\xff \xff c b\xff b3 b2 b1 a"},
		{"x", "", true, false, ""},
	} {
		var from []byte
		if !tc.fromNil {
			from = []byte(tc.from)
		}
		read := func(kv ReadKV) string {
			var got []string
			Range(kv, []byte(tc.prefix), from, tc.reverse, func(k, _ []byte) bool { got = append(got, string(k)); return true })
			return strings.Join(got, " ")
		}
		var fromBucket string
		if err := s.ReadProjection("keys", func(kv ReadKV) error { fromBucket = read(kv); return nil }); err != nil {
			t.Fatal(err)
		}
		if got := read(mem); got != tc.want || fromBucket != tc.want {
			t.Errorf("prefix %q from %q reverse %v: memory %q, bucket %q; want %q", tc.prefix, tc.from, tc.reverse, got, fromBucket, tc.want)
		}
	}
}
