package awareness

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness/control/gate"
	"github.com/tobe-body/tobe-body/ledger"
)

// trip calls estop.trip for p with params and decodes what it answered.
func (b *testBody) trip(t *testing.T, p act.Principal, params string) TripOut {
	t.Helper()
	e, _ := b.table.Lookup(OpEStopTrip.Name)
	out, err := e.Call(context.Background(), p, json.RawMessage(params))
	if err != nil {
		t.Fatalf("estop.trip %s: %v", params, err)
	}
	return out.(TripOut)
}

// flushEStop writes what the e-stop has recorded to the ledger, as the
// daemon's recorder does, and returns once it is written.
func (b *testBody) flushEStop(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // written, then it returns
	act.RecordEStop(ctx, b.parts.EStop, b.store, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// estopRecords counts the e-stop's records of stops in the ledger.
func (b *testBody) estopRecords(t *testing.T) int {
	t.Helper()
	evs, err := b.store.Events(ledger.Filter{Types: []string{"estop.tripped", "estop.stop_again"}})
	if err != nil {
		t.Fatal(err)
	}
	return len(evs)
}

// TestAStopWithAKeyStopsOnce: a stop with an idempotency key acts once
// for its caller; a repeat, after a reset and after a restart alike,
// returns the first stop and stops nothing; another caller's same key is
// another stop.
func TestAStopWithAKeyStopsOnce(t *testing.T) {
	b := newTestBody(t)
	first := b.trip(t, agent, `{"reason":"provider_error","idempotency_key":"onward:inv-1","note":"onward rule make-safe, episode e1"}`)
	if first.Repeated || !first.LatchedNow || !first.AllSafe || !first.Recorded || first.Already {
		t.Fatalf("the first stop: %+v", first)
	}
	if first.Cause != "requested by agent:pi: provider_error" || first.By != "agent:pi" || first.Reason != "provider_error" ||
		first.Key != "onward:inv-1" || first.Note != "onward rule make-safe, episode e1" {
		t.Fatalf("the first stop says %+v", first)
	}
	trips := b.parts.EStop.Status().Trips

	again := b.trip(t, agent, `{"idempotency_key":"onward:inv-1"}`)
	if !again.Repeated || again.Cause != first.Cause || again.Key != first.Key {
		t.Fatalf("the repeat: %+v, want the first stop, repeated", again)
	}
	other := b.trip(t, maxAdmin, `{"idempotency_key":"onward:inv-1"}`)
	if other.Repeated || !other.Already {
		t.Fatalf("another caller's same key: %+v, want a stop of its own (again, latched already)", other)
	}
	b.flushEStop(t)
	if n := b.estopRecords(t); n != 2 {
		t.Fatalf("%d records of stops, want 2 (the trip, the other caller's stop again): a repeat records nothing", n)
	}
	if got := b.parts.EStop.Status().Trips; got != trips {
		t.Fatalf("trips %d after the repeat, want %d", got, trips)
	}

	// A person resets it: a repeat of the key still stops nothing.
	if _, err := b.call(t, maxAdmin, "estop.reset", `{}`); err != nil {
		t.Fatal(err)
	}
	after := b.trip(t, agent, `{"idempotency_key":"onward:inv-1"}`)
	if !after.Repeated || after.LatchedNow || b.parts.EStop.Latched() {
		t.Fatalf("a repeat after the reset: %+v, latched %v; want the first stop, and the e-stop left reset", after, b.parts.EStop.Latched())
	}

	// The body restarts: the key is found in the ledger.
	path := b.store.Path()
	if err := b.store.Close(); err != nil {
		t.Fatal(err)
	}
	store, err := ledger.Open(ledger.Options{Path: path, Projections: append(act.Projections(), gate.Projections()...)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	parts := &Parts{Info: b.parts.Info, Started: b.parts.Started, Registry: b.parts.Registry, EStop: b.parts.EStop, Runner: b.parts.Runner,
		Grants: b.parts.Grants, Store: store, Self: b.parts.Self}
	tb, err := parts.Table()
	if err != nil {
		t.Fatal(err)
	}
	b2 := &testBody{parts: parts, table: tb, store: store}
	restarted := b2.trip(t, agent, `{"idempotency_key":"onward:inv-1"}`)
	if !restarted.Repeated || restarted.Cause != first.Cause || restarted.Note != first.Note || !restarted.AllSafe || b.parts.EStop.Latched() {
		t.Fatalf("a repeat after a restart: %+v; want the first stop from its record, nothing stopped", restarted)
	}
	if fresh := b2.trip(t, agent, `{"idempotency_key":"onward:inv-2"}`); fresh.Repeated || !fresh.LatchedNow {
		t.Fatalf("a new key after the restart: %+v, want a stop", fresh)
	}
}

// TestAStopIsNeverRefusedForItsParams: whatever a stop's params say, it
// stops, with its text cleaned and bounded.
func TestAStopIsNeverRefusedForItsParams(t *testing.T) {
	long := strings.Repeat("é", 3000)
	for _, tc := range []struct {
		name, params string
		reason       string // "" to check only the bounds
	}{
		{"empty", `{}`, ""},
		{"null", `null`, ""},
		{"not an object", `[1,2]`, ""},
		{"not JSON", `{"reason":`, ""},
		{"trailing data", `{} {}`, ""},
		{"unknown keys", `{"reason":"x","force":true}`, "x"},
		{"a number for a reason", `{"reason":42}`, "42"},
		{"control characters", `{"reason":"a\u0000b\nc\td\u001b[31m"}`, "a b c d [31m"},
		{"long", `{"reason":"` + long + `","note":"` + long + `"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newTestBody(t)
			got := b.trip(t, agent, tc.params)
			if !got.LatchedNow || !got.AllSafe || got.Repeated {
				t.Fatalf("%+v: want a stop", got)
			}
			if tc.reason != "" && got.Reason != tc.reason {
				t.Errorf("reason %q, want %q", got.Reason, tc.reason)
			}
			if len(got.Reason) > MaxTripReason || len(got.Note) > MaxTripNote || !utf8.ValidString(got.Reason+got.Note) ||
				strings.ContainsFunc(got.Reason, unicode.IsControl) {
				t.Errorf("reason %q (%d bytes), note of %d bytes: out of bounds", got.Reason, len(got.Reason), len(got.Note))
			}
		})
	}
}

func TestCleanTripIn(t *testing.T) {
	longKey := strings.Repeat("k", MaxTripKey+1)
	for _, tc := range []struct {
		name string
		in   TripIn
		want TripIn
	}{
		{"clean", TripIn{Reason: "provider_error", IdempotencyKey: "k1", Note: "a\nb"}, TripIn{Reason: "provider_error", IdempotencyKey: "k1", Note: "a\nb"}},
		{"spaces run together in a reason", TripIn{Reason: "  a \n\n b\t"}, TripIn{Reason: "a b"}},
		{"a note keeps its lines", TripIn{Note: "one\n\ttwo\x07"}, TripIn{Note: "one\n\ttwo"}},
		{"invalid UTF-8", TripIn{Reason: "a\xffb"}, TripIn{Reason: "a b"}},
		{"cut at a character", TripIn{Reason: strings.Repeat("é", 101)}, TripIn{Reason: strings.Repeat("é", 98) + "…"}},
		{"a long key is hashed", TripIn{IdempotencyKey: longKey}, TripIn{IdempotencyKey: "sha256:" + sha(longKey)}},
		{"a key with a NUL is hashed", TripIn{IdempotencyKey: "a\x00b"}, TripIn{IdempotencyKey: "sha256:" + sha("a\x00b")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CleanTripIn(tc.in); got != tc.want {
				t.Errorf("got %+q\nwant %+q", got, tc.want)
			}
		})
	}
}

// FuzzTripIn: a stop's params never fail to decode when they are JSON,
// and what is cleaned is within its bounds.
func FuzzTripIn(f *testing.F) {
	for _, s := range []string{`{}`, `{"reason":"x","idempotency_key":"k","note":"n"}`, `{"reason":42}`, `[]`, `null`, `"x"`, `{"reason":"\u0000"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var in TripIn
		err := json.Unmarshal([]byte(s), &in)
		if err != nil && json.Valid([]byte(s)) {
			t.Fatalf("%q is JSON and failed: %v", s, err)
		}
		c := CleanTripIn(in)
		if len(c.Reason) > MaxTripReason || len(c.Note) > MaxTripNote || len(c.IdempotencyKey) > MaxTripKey ||
			!utf8.ValidString(c.Reason+c.Note+c.IdempotencyKey) || strings.ContainsFunc(c.Reason+c.IdempotencyKey, unicode.IsControl) {
			t.Fatalf("%+q cleaned to %+q: out of bounds", in, c)
		}
		if CleanTripIn(c) != c {
			t.Fatalf("cleaning %+q again changed it", c)
		}
	})
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestAStopWithAKeyStopsWhenTheLedgerCannotBeRead: a key that cannot be
// looked up does not hold a stop back; the trip says why it may repeat.
func TestAStopWithAKeyStopsWhenTheLedgerCannotBeRead(t *testing.T) {
	b := newTestBody(t)
	if err := b.store.Close(); err != nil {
		t.Fatal(err)
	}
	got := b.trip(t, agent, `{"reason":"crash_loop","idempotency_key":"k","note":"onward"}`)
	if got.Repeated || !got.LatchedNow || !got.AllSafe {
		t.Fatalf("%+v: want a stop", got)
	}
	if !strings.HasPrefix(got.Note, "onward\n(the key could not be looked up, so this may repeat a stop: ") {
		t.Fatalf("note %q: want it to say the key could not be looked up", got.Note)
	}
	if again := b.trip(t, agent, `{"idempotency_key":"k"}`); !again.Repeated {
		t.Fatalf("a repeat while the ledger is closed: %+v, want the first stop from memory", again)
	}
}
