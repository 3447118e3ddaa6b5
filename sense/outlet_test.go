package sense

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/ledger"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeLedger records what is appended; gate, when set, holds every Append
// until it is closed; fails makes the next n Appends fail.
type fakeLedger struct {
	mu    sync.Mutex
	got   []ledger.Event
	calls int
	fails int
	gate  chan struct{}
}

func (l *fakeLedger) Append(ctx context.Context, evs ...ledger.Event) ([]ledger.Result, error) {
	if l.gate != nil {
		select {
		case <-l.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	for _, e := range evs {
		if e.Type == "bad" {
			return nil, fmt.Errorf("%w: no such type", ledger.ErrInvalid)
		}
	}
	if l.fails > 0 {
		l.fails--
		return nil, errors.New("disk full")
	}
	l.got = append(l.got, evs...)
	return make([]ledger.Result, len(evs)), nil
}

func (l *fakeLedger) types() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, e := range l.got {
		out = append(out, e.Type)
	}
	return out
}

func TestEmitNeverBlocksAndCountsWhatItSheds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &fakeLedger{gate: make(chan struct{})}
		o := NewOutlet(Source{Channel: "gpio.button"}, 8)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- o.Run(ctx, l) }()
		// The ledger is stuck: Run holds one batch, the queue fills, the
		// rest is shed, and no Emit waits.
		accepted := 0
		for i := range 100 {
			if o.Emit("gpio.changed", hal.Mono(i), uint64(i), nil) {
				accepted++
			}
			synctest.Wait()
		}
		s := o.Stats()
		if s.Queued != uint64(accepted) || s.Shed != uint64(100-accepted) || accepted < 8 || accepted > 9 {
			t.Errorf("accepted %d, stats %+v: want 8 or 9 queued (one in the held batch) and the rest shed", accepted, s)
		}
		close(l.gate)
		o.Close()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		cancel()
		if s := o.Stats(); s.Written != uint64(accepted) || s.Waiting != 0 {
			t.Errorf("after draining: %+v, want all %d written", s, accepted)
		}
	})
}

func TestRunRetriesAFailingLedgerInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &fakeLedger{fails: 3}
		o := NewOutlet(Source{Channel: "c"}, 16)
		for i := range 5 {
			o.Emit(fmt.Sprintf("t.e%d", i), 0, 0, nil)
		}
		o.Close()
		start := time.Now()
		if err := o.Run(t.Context(), l); err != nil {
			t.Fatal(err)
		}
		if got := l.types(); fmt.Sprint(got) != "[t.e0 t.e1 t.e2 t.e3 t.e4]" {
			t.Errorf("written %v", got)
		}
		s := o.Stats()
		if s.Failures != 3 || s.LastError == "" || s.Written != 5 {
			t.Errorf("stats %+v, want 3 failures and 5 written", s)
		}
		// 100 ms, 200 ms, 400 ms of backoff.
		if d := time.Since(start); d != 700*time.Millisecond {
			t.Errorf("retried for %v, want 700ms", d)
		}
	})
}

func TestAnInvalidEventIsDroppedAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &fakeLedger{}
		o := NewOutlet(Source{Channel: "c"}, 16)
		o.Emit("t.a", 0, 0, nil)
		o.Put(ledger.Event{Type: "bad"})
		o.Emit("t.b", 0, 0, nil)
		o.Close()
		if err := o.Run(t.Context(), l); err != nil {
			t.Fatal(err)
		}
		if got := l.types(); fmt.Sprint(got) != "[t.a t.b]" {
			t.Errorf("written %v, want the two good events", got)
		}
		if s := o.Stats(); s.Shed != 1 || s.Written != 2 {
			t.Errorf("stats %+v", s)
		}
	})
}

func TestEmitStampsTimeAndProvenance(t *testing.T) {
	clock, err := body.NewClock()
	if err != nil {
		t.Fatal(err)
	}
	o := NewOutlet(Source{Channel: "camera.front", Clock: clock, Privacy: ledger.Sensitive, Trust: ledger.Medium}, 4)
	at := hal.MonoNow().Add(-2 * time.Second)
	if !o.Emit("camera.motion_started", at, 42, map[string]any{"zone": "door"}) {
		t.Fatal("shed")
	}
	o.Emit("t.x", 0, 0, func() {}) // a payload CBOR cannot hold
	q := <-o.q
	ev := q.ev
	want := clock.Stamp(at)
	switch {
	case ev.OccurredAt != want.UTC.UnixNano(), ev.MonotonicNS != int64(at), ev.ClockDomain != clock.Domain():
		t.Errorf("time %d/%d/%q, want %d/%d/%q", ev.OccurredAt, ev.MonotonicNS, ev.ClockDomain, want.UTC.UnixNano(), at, clock.Domain())
	case ev.ObservedAt < ev.OccurredAt+int64(2*time.Second)-int64(time.Millisecond):
		t.Errorf("observed_at %d is not about 2 s after occurred_at %d", ev.ObservedAt, ev.OccurredAt)
	case ev.ClockUncertaintyMS != want.UncertaintyMS() || ev.ClockUncertaintyMS == 0:
		t.Errorf("uncertainty %d ms, want %d", ev.ClockUncertaintyMS, want.UncertaintyMS())
	case ev.SourceSequence != 42, ev.ChannelID != "camera.front", ev.Provenance != ledger.Observed,
		ev.Privacy != ledger.Sensitive, ev.Trust != ledger.Medium:
		t.Errorf("envelope %+v", ev)
	}
	var p map[string]string
	if err := ledger.UnmarshalPayload(ev.Payload, &p); err != nil || p["zone"] != "door" {
		t.Errorf("payload %v %v", p, err)
	}
	if s := o.Stats(); s.Shed != 1 || s.Failures != 1 {
		t.Errorf("a payload that cannot be encoded: %+v, want shed and a failure", s)
	}
}

// A sensed event waits for its commit at most GroupCommit from when its
// channel handed it over, against the real ledger: the events that come
// while the channel's first append is held join its commit, rather than
// wait for it and then a whole GroupCommit of their own (20 s here,
// before); one that comes later starts a group of its own.
func TestGroupedEventsJoinTheHeldCommit(t *testing.T) {
	const group, poll = 15 * time.Second, 100 * time.Millisecond
	synctest.Test(t, func(t *testing.T) {
		s, err := ledger.Open(ledger.Options{Path: t.TempDir() + "/ledger.db", AgentID: ledger.UUID{1}, BodyID: ledger.UUID{2}, GroupCommit: group})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		o := NewOutlet(Source{Channel: "camera.front"}, 0)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- o.Run(ctx, s) }()
		// committed waits for n motion events on disk (a reader sees
		// them at once; the uplink, which reads the outbox, only once on
		// disk) and says how long that took from since, to the poll's
		// period.
		committed := func(n int, since time.Time) time.Duration {
			for {
				rows, err := s.OutboxNext(0, 100)
				if err != nil {
					t.Fatal(err)
				}
				if len(rows) >= n {
					return time.Since(since)
				}
				time.Sleep(poll)
			}
		}
		first := time.Now()
		o.Emit("camera.motion_started", 0, 1, nil)
		time.Sleep(5 * time.Second)
		o.Emit("camera.motion_started", 0, 2, nil)
		time.Sleep(5 * time.Second) // the first is held yet
		third := time.Now()
		o.Emit("camera.motion_started", 0, 3, nil)
		if took := committed(3, first); took > group+poll {
			t.Errorf("the three events committed %v after the first came, want them in the first's commit at %v", took, group)
		}
		if took := time.Since(third); took > group-10*time.Second+poll {
			t.Errorf("the third event committed %v after it came: it did not join the held commit", took)
		}
		// One that comes after the commit starts a group of its own.
		fourth := time.Now()
		o.Emit("camera.motion_started", 0, 4, nil)
		if took := committed(4, fourth); took < group-poll || took > group+poll {
			t.Errorf("the fourth event committed %v after it came, want %v", took, group)
		}
		o.Close()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if st := o.Stats(); st.Written != 4 || st.Queued != 4 {
			t.Errorf("stats %+v, want 4 queued and written", st)
		}
	})
}

// A grouped append the ledger refuses is written again event by event:
// only the invalid event is shed, and what was queued after it is
// written too.
func TestRefusedGroupedAppendIsWrittenAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := ledger.Open(ledger.Options{Path: t.TempDir() + "/ledger.db", AgentID: ledger.UUID{1}, BodyID: ledger.UUID{2}, GroupCommit: 15 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		o := NewOutlet(Source{Channel: "camera.front"}, 0)
		o.Emit("camera.motion_started", 0, 1, nil)
		o.Put(ledger.Event{Type: "camera.motion_started", ChannelID: strings.Repeat("x", 4096)}) // invalid: an id that long
		o.Emit("camera.motion_started", 0, 2, nil)
		done := make(chan error, 1)
		go func() { done <- o.Run(t.Context(), s) }()
		synctest.Wait()
		o.Emit("camera.motion_started", 0, 3, nil) // queued behind the refused append
		o.Close()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if st := o.Stats(); st.Written != 3 || st.Shed != 1 || st.Failures == 0 || st.Waiting != 0 {
			t.Errorf("stats %+v, want 3 written, 1 shed, the failure counted and none waiting", st)
		}
		evs, err := s.Events(ledger.Filter{Types: []string{"camera.motion_started"}})
		if err != nil || len(evs) != 3 {
			t.Fatalf("%d motion events in the ledger (%v), want 3", len(evs), err)
		}
		for i, e := range evs {
			if e.Event.SourceSequence != uint64(i+1) {
				t.Errorf("event %d of the ledger is the outlet's %d: the channel's order is lost", i+1, e.Event.SourceSequence)
			}
		}
	})
}

// A ledger that closes under a running outlet takes nothing more: the
// outlet sheds what it holds and Run ends with ErrClosed, not retrying
// for ever.
func TestOutletEndsWhenTheLedgerCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := ledger.Open(ledger.Options{Path: t.TempDir() + "/ledger.db", AgentID: ledger.UUID{1}, BodyID: ledger.UUID{2}, GroupCommit: 15 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		o := NewOutlet(Source{Channel: "camera.front"}, 0)
		done := make(chan error, 1)
		go func() { done <- o.Run(t.Context(), s) }()
		o.Emit("camera.motion_started", 0, 1, nil)
		synctest.Wait()
		if err := s.Close(); err != nil { // commits what it holds
			t.Fatal(err)
		}
		o.Emit("camera.motion_started", 0, 2, nil)
		if err := <-done; !errors.Is(err, ledger.ErrClosed) {
			t.Fatalf("Run: %v, want ErrClosed", err)
		}
		if st := o.Stats(); st.Written != 1 || st.Shed != 1 {
			t.Errorf("stats %+v, want 1 written (before the close) and 1 shed", st)
		}
	})
}
