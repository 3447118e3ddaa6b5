package act

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/haltest"
)

// rig is an e-stop on fake pins: a normally-closed main line (pulled up,
// low while closed, high = stop), an optional second channel, a reset
// button (active low), a relay and an LED, and a runner and a lease table
// that record when they were called.
type rig struct {
	chip                *haltest.Chip
	main, second, reset *haltest.LineIn
	relay, led          *haltest.LineOut
	relayOut, ledOut    hal.LineOut
	e                   *EStop
	runner              *fakeRunner
	start               time.Time
	base                hal.Mono
	cancel              context.CancelFunc
	done                chan error
}

type fakeRunner struct {
	mu     sync.Mutex
	e      *EStop
	outs   []*haltest.LineOut
	calls  []string
	unsafe []string // outputs not yet safe, or latch not yet set, when called
}

func (f *fakeRunner) check(what string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, what)
	if !f.e.Latched() {
		f.unsafe = append(f.unsafe, what+": latch not set")
	}
	for _, o := range f.outs {
		if o.Level() != o.Safe() {
			f.unsafe = append(f.unsafe, what+": "+o.Name()+" not safe")
		}
	}
}

func (f *fakeRunner) CancelAll(r Reason) []string {
	f.check("cancel " + string(r))
	return []string{"act-1", "act-2"}
}

func (f *fakeRunner) RevokeAll(r Reason) int {
	f.check("revoke " + string(r))
	return 3
}

func newRig(t *testing.T, second bool) *rig {
	t.Helper()
	r := &rig{chip: haltest.NewChip("c"), start: time.Now(), base: hal.MonoNow()}
	r.main = r.chip.AddIn("ESTOP", hal.Low)
	r.reset = r.chip.AddIn("RESET", hal.High)
	r.relay = r.chip.AddOut("RELAY1")
	r.led = r.chip.AddOut("LED")
	cfg := EStopConfig{MainStop: hal.High, ResetActive: hal.Low, Now: r.now}
	var err error
	if cfg.Main, err = r.chip.In("ESTOP", hal.InConfig{Edge: hal.BothEdges}); err != nil {
		t.Fatal(err)
	}
	if cfg.Reset, err = r.chip.In("RESET", hal.InConfig{Edge: hal.BothEdges}); err != nil {
		t.Fatal(err)
	}
	if second {
		r.second = r.chip.AddIn("ESTOP2", hal.Low)
		if cfg.Second, err = r.chip.In("ESTOP2", hal.InConfig{Edge: hal.BothEdges}); err != nil {
			t.Fatal(err)
		}
		cfg.SecondStop = hal.High
	}
	if r.relayOut, err = r.chip.Out("RELAY1", hal.OutConfig{Safe: hal.Low}); err != nil {
		t.Fatal(err)
	}
	if r.ledOut, err = r.chip.Out("LED", hal.OutConfig{Safe: hal.High}); err != nil {
		t.Fatal(err)
	}
	cfg.Outputs = []hal.LineOut{r.relayOut, r.ledOut}
	if r.e, err = NewEStop(cfg); err != nil {
		t.Fatal(err)
	}
	r.runner = &fakeRunner{e: r.e, outs: []*haltest.LineOut{r.relay, r.led}}
	r.e.SetRunner(r.runner, r.runner)
	return r
}

// now is the bubble's clock on the monotonic scale (synctest moves it).
func (r *rig) now() hal.Mono { return r.base.Add(time.Since(r.start)) }

func (r *rig) run(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan error, 1)
	go func() { r.done <- r.e.Run(ctx) }()
}

func (r *rig) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	if err := <-r.done; err != nil {
		t.Fatal(err)
	}
}

// drive turns the outputs on, as actions would.
func (r *rig) drive(t *testing.T) {
	t.Helper()
	if err := r.relayOut.Out(hal.High); err != nil {
		t.Fatal(err)
	}
	if err := r.ledOut.Out(hal.Low); err != nil {
		t.Fatal(err)
	}
}

func (r *rig) records() []Record {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	recs, _ := r.e.Records(ctx)
	return recs
}

func types(recs []Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.Type)
	}
	return out
}

// E1: the line opens while actions run: latch, outputs safe and read
// back, then cancel, then revoke, then the record.
func TestTripOrderAndRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, false)
		if c := r.e.Check(); !c.Verified || c.Latched || c.Main != "ok" {
			t.Fatalf("check %+v", c)
		}
		r.run(t)
		r.drive(t)
		edge := r.now()
		r.main.Set(hal.High, edge)
		synctest.Wait()
		if !r.e.Latched() {
			t.Fatal("not latched")
		}
		if len(r.runner.unsafe) > 0 || !slices.Equal(r.runner.calls, []string{"cancel estop_latched", "revoke estop_latched"}) {
			t.Errorf("runner calls %q, problems %q: want cancel then revoke, each after the outputs were safe", r.runner.calls, r.runner.unsafe)
		}
		if r.relay.Level() != hal.Low || r.led.Level() != hal.High {
			t.Errorf("outputs relay %v led %v, want their safe levels", r.relay.Level(), r.led.Level())
		}
		if err := r.relayOut.Out(hal.High); !errors.Is(err, hal.ErrHalted) {
			t.Errorf("a write after the trip: %v, want ErrHalted", err)
		}
		recs := r.records()
		if got := types(recs); !slices.Equal(got, []string{"estop.checked", "estop.tripped"}) {
			t.Fatalf("records %v", got)
		}
		trip := recs[1].Payload.(Trip)
		if trip.Cause != "line_open" || trip.Edge != edge || !trip.AllSafe || len(trip.Outputs) != 2 ||
			trip.Outputs[0] != (OutputState{Name: "RELAY1", Safe: "low", ReadBack: "low"}) ||
			!slices.Equal(trip.Cancelled, []string{"act-1", "act-2"}) || trip.Leases != 3 || trip.Already {
			t.Errorf("trip %+v", trip)
		}
		r.stop(t)
	})
}

// A stuck output is reported, not hidden.
func TestTripReportsAStuckOutput(t *testing.T) {
	r := newRig(t, false)
	high := hal.High
	r.relay.Stick(&high)
	trip := r.e.Trip("requested by admin:uid=0", hal.MonoNow())
	if trip.AllSafe || trip.Outputs[0].ReadBack != "high" {
		t.Errorf("trip %+v, want RELAY1 read back high and not all safe", trip)
	}
}

// E2: the line closes again without a reset: still latched.
func TestLatchHoldsWhenTheLineCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, false)
		r.e.Check()
		r.run(t)
		r.main.Set(hal.High, r.now())
		time.Sleep(time.Second)
		r.main.Set(hal.Low, r.now())
		time.Sleep(10 * time.Second)
		if !r.e.Latched() || r.e.Status().Main != "ok" {
			t.Errorf("status %+v, want latched with a healthy line", r.e.Status())
		}
		r.stop(t)
	})
}

// E3 and E4: who may reset, and when.
func TestReset(t *testing.T) {
	admin := Principal{Kind: LocalAdmin, Subject: "admin:uid=0"}
	for _, tc := range []struct {
		name string
		by   Principal
		open bool // the line still says stop
		want string
	}{
		{"the agent", Principal{Kind: AgentSession, Subject: "agent:pi", Session: "s1"}, false, "reset_not_local"},
		{"MQTT", Principal{Kind: MQTTCommand, Subject: "mqtt:home"}, false, "reset_not_local"},
		{"a local rule", Principal{Kind: LocalRule, Subject: "rule:x"}, false, "reset_not_local"},
		{"an administrator, line still open", admin, true, "the e-stop line still says stop"},
		{"an administrator, line healthy", admin, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, false)
			r.e.Check()
			r.e.Trip("line_open", hal.MonoNow())
			if tc.open {
				r.main.Set(hal.High, hal.MonoNow())
			}
			r.records()
			err := r.e.Reset(tc.by)
			recs := r.records()
			if tc.want == "" {
				if err != nil || r.e.Latched() || !slices.Equal(types(recs), []string{"estop.reset"}) {
					t.Errorf("reset: %v, latched %v, records %v", err, r.e.Latched(), types(recs))
				}
				// Reset starts nothing: outputs stay safe, nothing is written.
				if r.relay.Level() != hal.Low || len(r.relay.Writes()) != 2 {
					t.Errorf("relay %v after %v writes", r.relay.Level(), r.relay.Writes())
				}
				if err := r.relayOut.Out(hal.High); err != nil {
					t.Errorf("after a reset the relay may be driven again: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrResetRefused) || !strings.Contains(err.Error(), tc.want) || !r.e.Latched() {
				t.Errorf("reset: %v, latched %v; want refused with %q", err, r.e.Latched(), tc.want)
			}
			if !slices.Equal(types(recs), []string{"estop.reset_refused"}) {
				t.Errorf("records %v, want the refusal recorded", types(recs))
			}
		})
	}
}

// E3: the reset button: only a press of 350 ms to 2 s, accepted on release
// with a healthy line, clears the latch; a button held at start is an
// error.
func TestResetButton(t *testing.T) {
	for _, tc := range []struct {
		name        string
		heldAtStart bool
		press       time.Duration
		open        bool
		cleared     bool
		refusal     string
	}{
		{"a press of 1 s", false, time.Second, false, true, ""},
		{"a press of 50 ms", false, 50 * time.Millisecond, false, false, "a press of 50ms"},
		{"a press of 5 s", false, 5 * time.Second, false, false, "a press of 5s"},
		{"a good press with the line open", false, time.Second, true, false, "still says stop"},
		{"held at start", true, time.Second, false, false, "held when the body started"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, false)
				if tc.heldAtStart {
					r.reset.Set(hal.Low, r.now())
					<-mustNext(t, r.reset)
				}
				r.e.Check()
				r.e.Trip("line_open", r.now())
				if tc.open {
					r.main.Set(hal.High, r.now())
					<-mustNext(t, r.main)
				}
				r.run(t)
				synctest.Wait() // the watchers have read the lines
				r.records()
				if !tc.heldAtStart {
					r.reset.Set(hal.Low, r.now())
				}
				time.Sleep(tc.press)
				r.reset.Set(hal.High, r.now())
				synctest.Wait()
				recs := r.records()
				if r.e.Latched() == tc.cleared {
					t.Errorf("latched %v after %v, records %v", r.e.Latched(), tc.press, types(recs))
				}
				if tc.refusal != "" {
					if len(recs) != 1 || recs[0].Type != "estop.reset_refused" || !strings.Contains(recs[0].Payload.(ResetRefused).Detail, tc.refusal) {
						t.Errorf("records %+v, want a refusal saying %q", recs, tc.refusal)
					}
				}
				r.stop(t)
			})
		})
	}
}

// mustNext drains one queued edge the rig made before the e-stop watches.
func mustNext(t *testing.T, l *haltest.LineIn) <-chan hal.EdgeEvent {
	t.Helper()
	c := make(chan hal.EdgeEvent, 1)
	e, err := l.WaitForEdge(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c <- e
	return c
}

// E5: a broken wire floats the line to its stop level: a trip like any
// other. Two channels that disagree longer than the window are a wiring
// fault that blocks the reset until they agree.
func TestTwoChannels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, true)
		r.e.Check()
		r.run(t)
		// The second channel's wire breaks: it floats to stop, the main
		// channel stays closed.
		r.second.Set(hal.High, r.now())
		synctest.Wait()
		if !r.e.Latched() {
			t.Fatal("the second channel alone did not trip")
		}
		time.Sleep(time.Second)
		synctest.Wait()
		st := r.e.Status()
		if st.Fault == "" || !strings.Contains(st.Fault, "disagree for more than 200ms") {
			t.Errorf("status %+v, want a wiring fault", st)
		}
		if got := types(r.records()); !slices.Equal(got, []string{"estop.checked", "estop.tripped", "estop.wiring_fault"}) {
			t.Errorf("records %v", got)
		}
		admin := Principal{Kind: LocalAdmin, Subject: "admin:uid=0"}
		if err := r.e.Reset(admin); err == nil || !strings.Contains(err.Error(), "still says stop") {
			t.Errorf("reset with one channel open: %v", err)
		}
		// Repaired: both agree again; the fault clears, the latch does not.
		r.second.Set(hal.Low, r.now())
		synctest.Wait()
		if st := r.e.Status(); st.Fault != "" || !st.Latched {
			t.Errorf("after the repair: %+v, want no fault and still latched", st)
		}
		if err := r.e.Reset(admin); err != nil || r.e.Latched() {
			t.Errorf("reset after the repair: %v", err)
		}
		r.stop(t)
	})
}

// hookedIn runs after once, right after its next Read: the line changes
// between a read and what the reader does with it.
type hookedIn struct {
	hal.LineIn
	after func()
}

func (l *hookedIn) Read() (hal.Level, error) {
	v, err := l.LineIn.Read()
	if f := l.after; f != nil {
		l.after = nil
		f()
	}
	return v, err
}

// hookedOut runs after once, inside its next Rearm.
type hookedOut struct {
	hal.LineOut
	after func()
}

func (o *hookedOut) Rearm() error {
	err := o.LineOut.Rearm()
	if f := o.after; f != nil {
		o.after = nil
		f()
	}
	return err
}

// E3: a stop that comes while a reset is under way wins. Either the reset
// had read the lines before the line opened (it is refused), or it was
// already clearing the latch when the trip began (the trip latches again
// after it); in both the body ends latched.
func TestResetRacingAStop(t *testing.T) {
	admin := Principal{Kind: LocalAdmin, Subject: "admin:uid=0"}
	t.Run("the line opens after the reset read it", func(t *testing.T) {
		r := newRig(t, false)
		main := &hookedIn{LineIn: r.e.cfg.Main}
		r.e.cfg.Main = main
		r.e.Check()
		r.e.Trip("line_open", hal.MonoNow())
		main.after = func() {
			r.main.Set(hal.High, hal.MonoNow())
			r.e.Trip("line_open", hal.MonoNow()) // as the watcher does on that edge
		}
		err := r.e.Reset(admin)
		if err == nil || !r.e.Latched() {
			t.Errorf("reset: %v, latched %v: a stop during the reset must win", err, r.e.Latched())
		}
	})
	t.Run("the line opens while the reset clears the latch", func(t *testing.T) {
		r := newRig(t, false)
		relay := &hookedOut{LineOut: r.relayOut}
		r.e.cfg.Outputs[0] = relay
		r.e.Check()
		r.e.Trip("line_open", hal.MonoNow())
		done := make(chan Trip, 1)
		relay.after = func() {
			go func() { done <- r.e.Trip("line_open", hal.MonoNow()) }()
			time.Sleep(20 * time.Millisecond) // the trip waits for the reset to finish
		}
		if err := r.e.Reset(admin); err != nil {
			t.Fatal(err)
		}
		trip := <-done
		if !r.e.Latched() || !trip.AllSafe || trip.Already {
			t.Errorf("latched %v after a trip that came during the reset: %+v", r.e.Latched(), trip)
		}
	})
}

// A line that cannot be read at start trips, and the e-stop is not
// verified: nothing above R0 may act.
func TestUnreadableLineAtStart(t *testing.T) {
	r := newRig(t, false)
	r.main.Fail(errors.New("EIO"))
	c := r.e.Check()
	if c.Verified || !c.Latched || !strings.HasPrefix(c.Main, "unreadable") || r.e.Verified() {
		t.Errorf("check %+v", c)
	}
	if err := r.e.Reset(Principal{Kind: LocalAdmin, Subject: "admin"}); err == nil || !strings.Contains(err.Error(), string(ReasonEStopUnverified)) {
		t.Errorf("reset with an unreadable line: %v", err)
	}
}

// E1 with fake pins: edge to every output safe and read back, over 1,000
// trips. A figure, not a pass/fail: see BenchmarkEStopTrip.
func TestTripLatencyFakePins(t *testing.T) {
	lat := measureTrips(t, benchTrips(1000))
	t.Logf("e-stop latency with fake pins, edge -> outputs safe and read back, %d trips: p50 %v p99 %v max %v",
		len(lat), lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1])
}

// benchTrips is how many trips a latency figure is taken over: n, or
// ESTOP_TRIPS where it is set (scripts/bench/estop.sh's short form).
func benchTrips(n int) int {
	if v, err := strconv.Atoi(os.Getenv("ESTOP_TRIPS")); err == nil && v > 0 {
		return v
	}
	return n
}

func measureTrips(tb testing.TB, n int) []time.Duration {
	r := newRig(tb.(*testing.T), false)
	r.e.SetRunner(nil, nil)
	r.e.Check()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.e.Run(ctx) }()
	var lat []time.Duration
	admin := Principal{Kind: LocalAdmin, Subject: "admin"}
	for range n {
		r.main.Set(hal.High, hal.MonoNow())
		var trip Trip
		for trip.Cause == "" {
			recs, _ := r.e.Records(context.Background())
			for _, rec := range recs {
				if tr, ok := rec.Payload.(Trip); ok {
					trip = tr
				}
			}
		}
		lat = append(lat, time.Duration(trip.LatencyNS))
		r.main.Set(hal.Low, hal.MonoNow())
		for r.e.Status().Main != "ok" {
			time.Sleep(10 * time.Microsecond) // the watcher's goroutine updating the level
		}
		if err := r.e.Reset(admin); err != nil {
			tb.Fatal(err)
		}
		r.records()
	}
	cancel()
	<-done
	slices.Sort(lat)
	return lat
}

// Two channels that disagree at start are a wiring fault once the window
// has passed, as they would be if they came to disagree later.
func TestDisagreementAtStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, true)
		r.second.Set(hal.High, r.now())
		<-mustNext(t, r.second)
		r.e.Check()
		r.run(t)
		time.Sleep(time.Second)
		synctest.Wait()
		if st := r.e.Status(); !st.Latched || st.Fault == "" {
			t.Errorf("status %+v, want latched with a wiring fault", st)
		}
		r.stop(t)
	})
}

// Stops with idempotency keys are recorded one by one while latched, so
// that each key is found again in its record, up to KeyedStopsAgain in a
// StopAgainEvery; past that they fold like any other, and say so.
func TestKeyedStopsWhileLatchedAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, false)
		r.e.Check()
		r.records()
		first := r.e.TripAsked(Ask{By: "agent:pi", Reason: "provider_error", Key: "k0", Note: "onward"})
		if !first.Recorded || first.Cause != "requested by agent:pi: provider_error" || first.Key != "k0" {
			t.Fatalf("the first keyed stop: %+v", first)
		}
		var recorded, folded int
		for i := range 100 {
			trip := r.e.TripAsked(Ask{By: "agent:pi", Key: fmt.Sprintf("k%d", i+1)})
			if !trip.AllSafe || !trip.Already {
				t.Fatalf("stop %d: %+v, want every output safe, latched already", i, trip)
			}
			if trip.Recorded {
				recorded++
			} else {
				folded++
			}
		}
		if recorded != KeyedStopsAgain+1 || folded != 100-KeyedStopsAgain-1 {
			t.Fatalf("of 100 keyed stops while latched, %d recorded and %d folded; want %d recorded (the first stop again, then %d keyed)",
				recorded, folded, KeyedStopsAgain+1, KeyedStopsAgain)
		}
		recs := r.records()
		if len(recs) != KeyedStopsAgain+2 {
			t.Fatalf("%d records, want the trip and %d stops again", len(recs), KeyedStopsAgain+1)
		}
		for i, rec := range recs {
			if tr := rec.Payload.(Trip); tr.Key != fmt.Sprintf("k%d", i) || tr.By != "agent:pi" {
				t.Errorf("record %d: %+v, want key k%d", i, tr, i)
			}
		}
		time.Sleep(StopAgainEvery)
		if trip := r.e.TripAsked(Ask{By: "agent:pi", Key: "later"}); !trip.Recorded || trip.Folded != 100-KeyedStopsAgain-1 {
			t.Fatalf("a minute later: %+v, want it recorded, folding the rest", trip)
		}
	})
}

// The attack of a caller that asks to stop again and again (anyone may,
// and nothing limits it): every stop is obeyed, outputs made safe and
// read back each time, but while latched at most one a StopAgainEvery is
// recorded, the next record saying how many were folded, and the reset
// the rest; so the ledger does not grow with the asking.
func TestStopsWhileLatchedAreFolded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, false)
		r.e.Check()
		r.records()
		for i := range 1001 {
			trip := r.e.TripNow("requested by agent:pi")
			if !trip.AllSafe || trip.Already != (i > 0) {
				t.Fatalf("stop %d: %+v, want every output safe", i, trip)
			}
		}
		if got := types(r.records()); !slices.Equal(got, []string{"estop.tripped", "estop.stop_again"}) {
			t.Fatalf("after 1001 stops, records %v: want the trip and one stop again", got)
		}
		time.Sleep(StopAgainEvery)
		r.e.TripNow("requested by agent:pi")
		recs := r.records()
		if len(recs) != 1 || recs[0].Type != "estop.stop_again" || recs[0].Payload.(Trip).Folded != 999 {
			t.Fatalf("a minute later, records %+v: want one stop again that folded 999", recs)
		}
		for range 5 {
			r.e.TripNow("requested by agent:pi")
		}
		if err := r.e.Reset(Principal{Kind: LocalAdmin, Subject: "admin:uid=0"}); err != nil {
			t.Fatal(err)
		}
		recs = r.records()
		if len(recs) != 1 || recs[0].Type != "estop.reset" || recs[0].Payload.(ResetDone).StopsFolded != 5 {
			t.Fatalf("the reset's records %+v: want the reset, saying 5 were folded", recs)
		}
		// After a reset the next stop is a trip again, recorded.
		r.e.TripNow("requested by agent:pi")
		r.e.TripNow("requested by agent:pi")
		if got := types(r.records()); !slices.Equal(got, []string{"estop.tripped", "estop.stop_again"}) {
			t.Fatalf("after the reset, records %v", got)
		}
	})
}

// TestEStopAlive: the e-stop answers the watchdog while its locks are
// free, and not while one is held (a trip or a watcher that never
// returns); the question asked then is answered when it is released.
// (Not in a synctest bubble: a goroutine waiting for a mutex is not
// durably blocked there.)
func TestEStopAlive(t *testing.T) {
	r := newRig(t, false)
	r.run(t)
	defer func() { r.cancel(); <-r.done }()
	<-r.e.Alive()
	for _, m := range []*sync.Mutex{&r.e.tripMu, &r.e.mu, &r.e.recMu} {
		m.Lock()
		c := r.e.Alive()
		select {
		case <-c:
			t.Fatal("answered with a lock held")
		case <-time.After(50 * time.Millisecond):
		}
		m.Unlock()
		select {
		case <-c:
		case <-time.After(time.Minute):
			t.Fatal("not answered a minute after the lock was free")
		}
	}
}

// tripLine is a stop line whose driver has a tripwire over the outputs
// cover picks: on an edge to stop it halts them itself and reports them
// (report edits what it says, to test what the e-stop does with a report
// that lacks an output or tells a stuck one), as hal/gpio's thread does.
type tripLine struct {
	hal.LineIn
	cover   func([]hal.LineOut) []hal.LineOut
	report  func(*hal.HaltReport)
	stop    hal.Level
	covered []hal.LineOut
}

func (l *tripLine) ArmTrip(stop hal.Level, outs []hal.LineOut) ([]hal.LineOut, error) {
	l.stop, l.covered = stop, l.cover(outs)
	return l.covered, nil
}

func (l *tripLine) TripThread() string { return "a fake's" }

func (l *tripLine) WaitForEdge(ctx context.Context) (hal.EdgeEvent, error) {
	e, err := l.LineIn.WaitForEdge(ctx)
	if err != nil || e.Level != l.stop {
		return e, err
	}
	rep := &hal.HaltReport{Outputs: make([]hal.HaltedOutput, len(l.covered))}
	for i, o := range l.covered {
		rep.Outputs[i] = hal.HaltOne(o)
	}
	rep.Safe = e.Time.Add(time.Millisecond)
	if l.report != nil {
		l.report(rep)
	}
	e.Halted = rep
	return e, nil
}

// What a tripwire halted and what the goroutine halted make one record:
// the outputs in the configuration's order, those of the driver's report
// counted ByDriver, the rest halted by the e-stop's own HaltSet, an
// output the report lacks halted all the same, a stuck read-back in the
// report not all safe, and a stop asked for (no edge, no report) halting
// every output from the goroutine.
func TestTripMergesTheTripwiresReport(t *testing.T) {
	for _, tc := range []struct {
		name     string
		report   func(*hal.HaltReport)
		byDriver int
		allSafe  bool
		relay    string
	}{
		{"the relay by the driver, the LED by the goroutine", nil, 1, true, "low"},
		{"a report without the relay", func(r *hal.HaltReport) { r.Outputs = nil }, 0, true, "low"},
		{"a report of a stuck relay", func(r *hal.HaltReport) { r.Outputs[0].ReadBack = hal.High }, 1, false, "high"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, false)
				r.e.cfg.Main = &tripLine{LineIn: r.e.cfg.Main, report: tc.report,
					cover: func(outs []hal.LineOut) []hal.LineOut { return outs[:1] }} // RELAY1
				r.e.Check()
				r.run(t)
				synctest.Wait()
				if p := r.e.Status().Path; !strings.Contains(p, "halts 1 of 2 outputs") {
					t.Errorf("path %q", p)
				}
				r.drive(t)
				edge := r.now()
				r.main.Set(hal.High, edge)
				synctest.Wait()
				recs := r.records()
				if got := types(recs); !slices.Equal(got, []string{"estop.checked", "estop.tripped"}) {
					t.Fatalf("records %v", got)
				}
				trip := recs[1].Payload.(Trip)
				want := []OutputState{{Name: "RELAY1", Safe: "low", ReadBack: tc.relay}, {Name: "LED", Safe: "high", ReadBack: "high"}}
				if !slices.Equal(trip.Outputs, want) || trip.ByDriver != tc.byDriver || trip.AllSafe != tc.allSafe {
					t.Errorf("trip outputs %+v, by driver %d, all safe %v; want %+v, %d, %v", trip.Outputs, trip.ByDriver, trip.AllSafe, want, tc.byDriver, tc.allSafe)
				}
				if r.relay.Level() != hal.Low || r.led.Level() != hal.High {
					t.Errorf("relay %v, LED %v: want both safe", r.relay.Level(), r.led.Level())
				}
				if tc.byDriver > 0 && trip.Safe < edge.Add(time.Millisecond) {
					t.Errorf("safe at %v, before the driver's report said (%v)", trip.Safe, edge.Add(time.Millisecond))
				}
				if len(r.runner.unsafe) > 0 {
					t.Errorf("runner called with %q", r.runner.unsafe)
				}
				// A stop asked for while armed: no report, every output by
				// the goroutine.
				r.main.Set(hal.Low, r.now())
				synctest.Wait()
				if err := r.e.Reset(Principal{Kind: LocalAdmin, Subject: "admin:uid=0"}); err != nil {
					t.Fatal(err)
				}
				r.drive(t)
				asked := r.e.TripNow("requested by admin:uid=0")
				if asked.ByDriver != 0 || !asked.AllSafe || len(asked.Outputs) != 2 || asked.Outputs[0].Name != "RELAY1" {
					t.Errorf("a stop asked for: %+v", asked)
				}
				r.stop(t)
			})
		})
	}
}
