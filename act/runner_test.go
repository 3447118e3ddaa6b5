package act

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/haltest"
	"github.com/tobe-body/tobe-body/ledger"
)

// bench is a runner on fake pins with a real ledger: a relay (R2, with a
// feedback contact) and an LED (R1), an e-stop, a lease table, and a
// grant for agent:pi on gpio.*.
type bench struct {
	r          *Runner
	store      *ledger.Store
	estop      *rig
	relay, led *haltest.LineOut
	fb         *haltest.LineIn
	reg        *body.Registry
	agent      Principal
	health     body.Degradation
}

func newBench(t *testing.T) *bench {
	t.Helper()
	b := &bench{estop: newRig(t, false), health: body.LevelNormal,
		agent: Principal{Kind: AgentSession, Subject: "agent:pi", Session: "s1", Trust: ledger.High}}
	b.store = openTestLedger(t, filepath.Join(t.TempDir(), "ledger.db"))
	b.estop.e.Check()
	b.relay, b.led = b.estop.relay, b.estop.led
	b.fb = b.estop.chip.AddIn("RELAY1_FB", hal.Low)
	fb, err := b.estop.chip.In("RELAY1_FB", hal.InConfig{})
	if err != nil {
		t.Fatal(err)
	}
	b.reg = body.NewRegistry(time.Now)
	for _, id := range []string{"gpio.relay1", "gpio.led"} {
		b.reg.Register(body.Channel{ID: id, Kind: "gpio-out", State: body.Enabled})
	}
	set, pulse := NewGPIOActions([]*GPIOOutput{
		{Name: "relay1", Channel: "gpio.relay1", Line: b.estop.relayOut, Risk: R2, Feedback: fb, FeedbackActive: hal.High, MaxOn: time.Minute},
		{Name: "led", Channel: "gpio.led", Line: b.estop.ledOut, Risk: R1},
	}, nil)
	grants := []Grant{{ID: "g1", Subject: "agent:pi", Capability: "gpio.*", Scope: "gpio.*", By: "admin:uid=0", ByTrust: ledger.Max}}
	b.r = NewRunner(Environment{EStop: b.estop.e, Registry: b.reg, Health: func() body.Degradation { return b.health },
		Grants: func() []Grant { return grants }, Leases: NewLeaseTable(time.Minute)}, b.store)
	b.estop.e.SetRunner(b.r, b.r.env.Leases)
	for _, a := range []Action{set, pulse} {
		if err := b.r.Register(a); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

func (b *bench) types(t *testing.T, actionID string) []string {
	t.Helper()
	return actionTypes(t, b.store, actionID)
}

// actionTypes lists the types of the records of one invocation, in order.
func actionTypes(t *testing.T, store *ledger.Store, actionID string) []string {
	t.Helper()
	evs, err := store.Events(ledger.Filter{Types: []string{"action."}})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		if e.AggregateID == "action:"+actionID {
			out = append(out, e.Type)
		}
	}
	return out
}

func TestRunnerLifecycle(t *testing.T) {
	b := newBench(t)
	// The feedback contact follows the relay, as a good relay's does.
	res := b.r.Submit(context.Background(), Invocation{Principal: b.agent, Capability: "gpio.set", Target: "gpio.led", Params: map[string]string{"state": "on"}})
	if res.Status != Succeeded || res.Verification == nil || res.Verification.Result != "verified" || b.led.Level() != hal.Low {
		t.Fatalf("led on: %+v %+v", res, res.Verification)
	}
	if got := strings.Join(b.types(t, res.ActionID), " "); got != "action.proposed action.running action.succeeded" {
		t.Errorf("recorded %s", got)
	}
	for _, tc := range []struct {
		name   string
		inv    Invocation
		prep   func()
		status Status
		reason Reason
		detail string
	}{
		{"no grant for another principal", Invocation{Principal: Principal{Kind: MQTTCommand, Subject: "mqtt:home", Trust: ledger.High}, Capability: "gpio.set", Target: "gpio.led", Params: map[string]string{"state": "on"}}, nil, Refused, ReasonNoGrant, ""},
		{"unknown capability", Invocation{Principal: b.agent, Capability: "door.open", Target: "door"}, nil, Refused, ReasonUnknownCapability, `no channel offers "door.open"`},
		{"bad params", Invocation{Principal: b.agent, Capability: "gpio.set", Target: "gpio.led", Params: map[string]string{"state": "maybe"}}, nil, Refused, ReasonInvalidRequest, `params.state "maybe"`},
		{"set on an output with a maximum on-time", Invocation{Principal: b.agent, Capability: "gpio.set", Target: "gpio.relay1", Params: map[string]string{"state": "on"}}, nil, Refused, ReasonInvalidRequest, "use gpio.pulse"},
		{"health degraded: nothing above R1", Invocation{Principal: b.agent, Capability: "gpio.pulse", Target: "gpio.relay1", Params: map[string]string{"duration_ms": "10"}}, func() { b.health = body.LevelDegraded }, Refused, ReasonHealthDegraded, ""},
		{"a dead relay fails its verification", Invocation{Principal: b.agent, Capability: "gpio.pulse", Target: "gpio.relay1", Params: map[string]string{"duration_ms": "10"}}, func() { b.health = body.LevelNormal; b.fb.Set(hal.High, hal.MonoNow()) }, Failed, "", "feedback RELAY1_FB reads high"},
		{"a duration_ms no duration holds", Invocation{Principal: b.agent, Capability: "gpio.pulse", Target: "gpio.led", Params: map[string]string{"duration_ms": "9223372036855"}}, nil, Refused, ReasonInvalidRequest, "at most 9223372036854"},
		{"shadow mode records only", Invocation{Principal: b.agent, Capability: "gpio.set", Target: "gpio.led", Mode: Shadow, Params: map[string]string{"state": "off"}}, nil, Succeeded, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.prep != nil {
				tc.prep()
			}
			res := b.r.Submit(context.Background(), tc.inv)
			if res.Status != tc.status || res.Reason != tc.reason || !strings.Contains(res.Detail, tc.detail) {
				t.Errorf("got %s %s %q, want %s %s %q", res.Status, res.Reason, res.Detail, tc.status, tc.reason, tc.detail)
			}
			recs := b.types(t, res.ActionID)
			if len(recs) < 2 || recs[0] != "action.proposed" || recs[len(recs)-1] != "action."+string(tc.status) {
				t.Errorf("recorded %v", recs)
			}
		})
	}
}

// TestTheProposalNamesItsCause: an invocation's cause is weighed by the
// policy (an inferred state with no observed evidence refuses R2, not
// R1) and named in its proposal's record, with what was weighed of it;
// an invocation without one records none.
func TestTheProposalNamesItsCause(t *testing.T) {
	b := newBench(t)
	inferred := &Observation{EventID: "ev-inferred", Trust: ledger.High, Provenance: ledger.Inferred}
	pulse := map[string]string{"duration_ms": "10"}
	for _, tc := range []struct {
		name   string
		inv    Invocation
		status Status
		reason Reason
		cause  *causeRecord
	}{
		{"R2 caused by an inferred state without evidence", Invocation{Principal: b.agent, Capability: "gpio.pulse", Target: "gpio.relay1", Params: pulse, CausedBy: inferred},
			Refused, ReasonInferredCause, &causeRecord{EventID: "ev-inferred", Provenance: "inferred", Observed: false, Trust: "high"}},
		{"R1 caused by an inferred state without evidence", Invocation{Principal: b.agent, Capability: "gpio.set", Target: "gpio.led", Params: map[string]string{"state": "on"}, CausedBy: inferred},
			Succeeded, "", &causeRecord{EventID: "ev-inferred", Provenance: "inferred", Observed: false, Trust: "high"}},
		{"R2 caused by an inferred state with observed evidence", Invocation{Principal: b.agent, Capability: "gpio.pulse", Target: "gpio.relay1", Params: pulse,
			CausedBy: &Observation{EventID: "ev-seen", Trust: ledger.Max, Provenance: ledger.Inferred, Observed: true}},
			Succeeded, "", &causeRecord{EventID: "ev-seen", Provenance: "inferred", Observed: true, Trust: "max"}},
		{"without a cause", Invocation{Principal: b.agent, Capability: "gpio.set", Target: "gpio.led", Params: map[string]string{"state": "off"}},
			Succeeded, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := b.r.Submit(t.Context(), tc.inv)
			if res.Status != tc.status || res.Reason != tc.reason {
				t.Fatalf("got %s %s (%s), want %s %s", res.Status, res.Reason, res.Detail, tc.status, orAllowed(tc.reason))
			}
			evs, err := b.store.Events(ledger.Filter{Types: []string{"action.proposed"}})
			if err != nil {
				t.Fatal(err)
			}
			var got *causeRecord
			found := false
			for _, e := range evs {
				if e.AggregateID != "action:"+res.ActionID {
					continue
				}
				found = true
				var p map[string]cbor.RawMessage
				if err := ledger.UnmarshalPayload(e.Payload, &p); err != nil {
					t.Fatal(err)
				}
				if raw, ok := p["caused_by"]; ok {
					got = new(causeRecord)
					if err := ledger.UnmarshalPayload(raw, got); err != nil {
						t.Fatalf("caused_by: %v", err)
					}
				}
			}
			switch {
			case !found:
				t.Fatal("no proposal recorded")
			case (got == nil) != (tc.cause == nil) || got != nil && *got != *tc.cause:
				t.Errorf("the proposal's caused_by: got %+v, want %+v", got, tc.cause)
			}
		})
	}
}

// The same invocation sent 100 times at once acts once.
func TestRunnerIdempotency(t *testing.T) {
	b := newBench(t)
	var wg sync.WaitGroup
	results := make([]Result, 100)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = b.r.Submit(context.Background(), Invocation{Principal: b.agent, IdempotencyKey: "k-1", Capability: "gpio.set", Target: "gpio.led", Params: map[string]string{"state": "on"}})
		}()
	}
	wg.Wait()
	first, repeats := 0, 0
	for _, r := range results {
		if r.Status != Succeeded || r.ActionID != results[0].ActionID {
			t.Fatalf("result %+v differs from %+v", r, results[0])
		}
		if r.Repeat {
			repeats++
		} else {
			first++
		}
	}
	// The LED was requested at its safe level (one write), then driven on once.
	if w := b.led.Writes(); len(w) != 2 || first != 1 || repeats != 99 {
		t.Errorf("writes %v, %d first and %d repeats; want one side effect", w, first, repeats)
	}
}

// E1 with the runner: the e-stop cancels a running pulse; the relay is
// safe, the invocation is cancelled with reason estop, and new requests
// are refused.
func TestEStopCancelsARunningPulse(t *testing.T) {
	b := newBench(t)
	b.fb.Set(hal.High, hal.MonoNow()) // the relay's contact follows it
	done := make(chan Result, 1)
	go func() {
		done <- b.r.Submit(context.Background(), Invocation{Principal: b.agent, Capability: "gpio.pulse", Target: "gpio.relay1", Params: map[string]string{"duration_ms": "20000"}})
	}()
	for b.relay.Level() != hal.High {
		time.Sleep(time.Millisecond) // the runner's goroutine driving the relay
	}
	b.fb.Set(hal.Low, hal.MonoNow())
	trip := b.estop.e.Trip("line_open", hal.MonoNow())
	res := <-done
	if res.Status != Cancelled || res.Reason != ReasonEStopLatched || b.relay.Level() != hal.Low {
		t.Errorf("pulse after the trip: %+v, relay %v", res, b.relay.Level())
	}
	if len(trip.Cancelled) != 1 || trip.Cancelled[0] != res.ActionID {
		t.Errorf("the trip cancelled %v, want %s", trip.Cancelled, res.ActionID)
	}
	again := b.r.Submit(context.Background(), Invocation{Principal: b.agent, Capability: "gpio.set", Target: "gpio.led", Params: map[string]string{"state": "on"}})
	if again.Status != Refused || again.Reason != ReasonEStopLatched {
		t.Errorf("a request while latched: %+v", again)
	}
}

// E7: actions owned by a session stop when it ends; others go on.
func TestEndSessionStopsItsActions(t *testing.T) {
	b := newBench(t)
	b.fb.Set(hal.High, hal.MonoNow())
	done := make(chan Result, 1)
	go func() {
		done <- b.r.Submit(context.Background(), Invocation{Principal: b.agent, Capability: "gpio.pulse", Target: "gpio.relay1", Params: map[string]string{"duration_ms": "20000"}})
	}()
	for b.relay.Level() != hal.High {
		time.Sleep(time.Millisecond)
	}
	if ids := b.r.EndSession("another"); len(ids) != 0 {
		t.Errorf("another session's end cancelled %v", ids)
	}
	b.fb.Set(hal.Low, hal.MonoNow())
	ids := b.r.EndSession("s1")
	res := <-done
	if len(ids) != 1 || res.Status != Cancelled || res.Reason != "session_ended" || b.relay.Level() != hal.Low {
		t.Errorf("cancelled %v; %+v relay %v", ids, res, b.relay.Level())
	}
}

// A failing ledger: nothing whose record cannot be written runs.
func TestRunnerWithoutItsRecord(t *testing.T) {
	b := newBench(t)
	b.r.journal = failingJournal{}
	res := b.r.Submit(context.Background(), Invocation{Principal: b.agent, Capability: "gpio.set", Target: "gpio.led", Params: map[string]string{"state": "on"}})
	if res.Status != Refused || res.Reason != ReasonLedgerUnavailable || b.led.Level() != hal.High {
		t.Errorf("%+v, led %v: want refused and the LED untouched", res, b.led.Level())
	}
}

type failingJournal struct{}

func (failingJournal) Append(context.Context, ...ledger.Event) ([]ledger.Result, error) {
	return nil, errors.New("disk full")
}

// E6's runner half: an invocation left running when the body stopped is
// not run again at start; it is recorded unknown.
func TestRecoverMarksUnfinishedUnknown(t *testing.T) {
	b := newBench(t)
	inv := Invocation{ActionID: "a-interrupted", IdempotencyKey: "k", Principal: b.agent, Capability: "gpio.set", Target: "gpio.relay1", Mode: Live}
	if err := b.r.record(context.Background(), &inv, Proposed, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.r.record(context.Background(), &inv, Running, nil); err != nil {
		t.Fatal(err)
	}
	done := b.r.Submit(context.Background(), Invocation{Principal: b.agent, Capability: "gpio.set", Target: "gpio.led", Params: map[string]string{"state": "on"}})
	writes := len(b.relay.Writes())
	ids, err := b.r.Recover(context.Background(), b.store)
	if err != nil || len(ids) != 1 || ids[0] != "a-interrupted" {
		t.Fatalf("recovered %v %v", ids, err)
	}
	if got := strings.Join(b.types(t, "a-interrupted"), " "); got != "action.proposed action.running action.unknown" {
		t.Errorf("recorded %s", got)
	}
	if got := b.types(t, done.ActionID); got[len(got)-1] != "action.succeeded" {
		t.Errorf("a finished action was touched: %v", got)
	}
	if len(b.relay.Writes()) != writes {
		t.Error("recovery drove an output")
	}
	if again, _ := b.r.Recover(context.Background(), b.store); len(again) != 0 {
		t.Errorf("a second recovery found %v", again)
	}
}

func TestNotify(t *testing.T) {
	b := newBench(t)
	if err := b.r.Register(NewNotify(b.store)); err != nil {
		t.Fatal(err)
	}
	b.reg.Register(body.Channel{ID: "body.notify", Kind: "notify", State: body.Enabled})
	res := b.r.Submit(context.Background(), Invocation{Principal: b.agent, Capability: "body.notify", Target: "home",
		Params: map[string]string{"message": "the parcel is at the door", "attention": "high"}})
	// agent:pi's grant covers gpio.* only.
	if res.Status != Refused || res.Reason != ReasonNoGrant {
		t.Errorf("without a grant: %+v", res)
	}
	admin := Principal{Kind: LocalAdmin, Subject: "admin:uid=0", Session: "admin", Trust: ledger.High}
	res = b.r.Submit(context.Background(), Invocation{Principal: admin, Capability: "body.notify", Target: "home",
		Params: map[string]string{"message": "the parcel is at the door", "attention": "high"}})
	if res.Status != Succeeded || res.Verification.Result != "verified" {
		t.Fatalf("notify: %+v %+v", res, res.Verification)
	}
	evs, err := b.store.Events(ledger.Filter{Types: []string{"body.notified"}})
	if err != nil || len(evs) != 1 {
		t.Fatalf("events %v %v", evs, err)
	}
	var n Notification
	if err := ledger.UnmarshalPayload(evs[0].Payload, &n); err != nil || n.Message != "the parcel is at the door" || n.Attention != "high" || n.ActionID != res.ActionID || n.By != "admin:uid=0" {
		t.Errorf("notification %+v %v", n, err)
	}
	for _, tc := range []struct {
		target string
		params map[string]string
		want   string
	}{
		{"agent", map[string]string{"message": "x"}, `target "agent"`},
		{"home", map[string]string{}, "params.message is empty"},
		{"home", map[string]string{"message": strings.Repeat("x", 2000)}, "more than 1024"},
		{"home", map[string]string{"message": "x", "attention": "max"}, `params.attention "max"`},
	} {
		res := b.r.Submit(context.Background(), Invocation{Principal: admin, Capability: "body.notify", Target: tc.target, Params: tc.params})
		if res.Status != Refused || res.Reason != ReasonInvalidRequest || !strings.Contains(res.Detail, tc.want) {
			t.Errorf("%s %v: %+v, want invalid_request %q", tc.target, tc.params, res, tc.want)
		}
	}
}

// A repeat after a restart (the runner's memory of the key is gone) is
// found through the ledger's dedupe key: the recorded result comes back,
// nothing is done again.
func TestRepeatAfterRestartActsOnce(t *testing.T) {
	b := newBench(t)
	inv := Invocation{Principal: b.agent, IdempotencyKey: "k-restart", Capability: "gpio.set", Target: "gpio.led", Params: map[string]string{"state": "on"}}
	first := b.r.Submit(context.Background(), inv)
	if first.Status != Succeeded {
		t.Fatalf("first: %+v", first)
	}
	writes := len(b.led.Writes())
	// A new runner on the same ledger, as after a restart.
	again := NewRunner(b.r.env, b.store)
	set, pulse := NewGPIOActions([]*GPIOOutput{{Name: "led", Channel: "gpio.led", Line: b.estop.ledOut, Risk: R1}}, nil)
	again.Register(set)
	again.Register(pulse)
	res := again.Submit(context.Background(), inv)
	if !res.Repeat || res.Status != Succeeded || res.ActionID != first.ActionID || len(b.led.Writes()) != writes {
		t.Errorf("repeat after restart: %+v (first %s), writes %d -> %d", res, first.ActionID, writes, len(b.led.Writes()))
	}
}

// stuckJournal is a ledger that stops answering when stuck is set: every
// Append waits for release. It says when an Append is waiting.
type stuckJournal struct {
	inner   Journal
	stuck   atomic.Bool
	waiting chan struct{}
	release chan struct{}
}

func (j *stuckJournal) Append(ctx context.Context, evs ...ledger.Event) ([]ledger.Result, error) {
	if j.stuck.Load() {
		j.waiting <- struct{}{}
		<-j.release
	}
	return j.inner.Append(ctx, evs...)
}

// E8's last clause: the e-stop never waits on the ledger. With a pulse
// running and a request stuck writing its record to a ledger that does
// not answer, a trip still makes every output safe and cancels both; the
// records follow when the ledger answers, and nothing acts after the trip.
func TestTripDoesNotWaitForTheLedger(t *testing.T) {
	b := newBench(t)
	j := &stuckJournal{inner: b.store, waiting: make(chan struct{}, 16), release: make(chan struct{})}
	b.r.journal = j
	b.fb.Set(hal.High, hal.MonoNow())
	pulse := make(chan Result, 1)
	go func() {
		pulse <- b.r.Submit(context.Background(), Invocation{Principal: b.agent, Capability: "gpio.pulse", Target: "gpio.relay1", Params: map[string]string{"duration_ms": "20000"}})
	}()
	for b.relay.Level() != hal.High {
		time.Sleep(time.Millisecond) // the runner's goroutine driving the relay
	}
	j.stuck.Store(true)
	led := make(chan Result, 1)
	go func() {
		led <- b.r.Submit(context.Background(), Invocation{Principal: b.agent, Capability: "gpio.set", Target: "gpio.led", Params: map[string]string{"state": "on"}})
	}()
	<-j.waiting // the LED's request is writing its record, and waits

	tripped := make(chan Trip, 1)
	go func() { tripped <- b.estop.e.Trip("line_open", hal.MonoNow()) }()
	var trip Trip
	select {
	case trip = <-tripped:
	case <-time.After(10 * time.Second):
		t.Fatal("the trip waited for the ledger")
	}
	if !trip.AllSafe || b.relay.Level() != hal.Low || b.led.Level() != b.estop.ledOut.Safe() || len(trip.Cancelled) == 0 {
		t.Errorf("trip %+v with the ledger stuck: relay %v led %v", trip, b.relay.Level(), b.led.Level())
	}
	close(j.release)
	if res := <-pulse; res.Status != Cancelled || res.Reason != ReasonEStopLatched {
		t.Errorf("the pulse: %+v", res)
	}
	if res := <-led; res.Status == Succeeded || b.led.Level() != b.estop.ledOut.Safe() {
		t.Errorf("the LED's request after the trip: %+v, led %v", res, b.led.Level())
	}
}

// Simulation mode runs against the simulated twin and never the hardware;
// without a twin it is refused, naming why; the e-stop refuses it too.
func TestSimulationNeverTouchesTheHardware(t *testing.T) {
	b := newBench(t)
	inv := func() Invocation {
		return Invocation{Principal: b.agent, Capability: "gpio.set", Target: "gpio.led", Params: map[string]string{"state": "on"}, Mode: Simulation}
	}
	res := b.r.Submit(context.Background(), inv())
	if res.Status != Refused || res.Reason != ReasonInvalidRequest || !strings.Contains(res.Detail, "no simulated driver") {
		t.Errorf("simulation without a twin: %+v", res)
	}
	twin := haltest.NewChip("twin")
	twinLED := twin.AddOut("LED")
	line, err := twin.Out("LED", hal.OutConfig{Safe: hal.High})
	if err != nil {
		t.Fatal(err)
	}
	set, _ := NewGPIOActions([]*GPIOOutput{{Name: "led", Channel: "gpio.led", Line: line, Risk: R1}}, nil)
	if err := b.r.RegisterSimulated(set); err != nil {
		t.Fatal(err)
	}
	if err := b.r.RegisterSimulated(set); err == nil {
		t.Error("a second twin of gpio.set was accepted")
	}
	safe := b.estop.ledOut.Safe()
	res = b.r.Submit(context.Background(), inv())
	if res.Status != Succeeded || res.Verification == nil || res.Verification.Result != "verified" {
		t.Errorf("simulation: %+v", res)
	}
	if b.led.Level() != safe || twinLED.Level() == hal.High {
		t.Errorf("after a simulated gpio.set on: hardware LED %v (safe %v), twin %v (safe high)", b.led.Level(), safe, twinLED.Level())
	}
	b.estop.e.Trip("requested by admin:uid=0", hal.MonoNow())
	if res := b.r.Submit(context.Background(), inv()); res.Status != Refused || res.Reason != ReasonEStopLatched {
		t.Errorf("simulation while latched: %+v", res)
	}
}

// A relay whose feedback contact does not follow its coil: the set fails
// verification, and the runner drives it back to safe: compensated, never
// succeeded. A stuck line that cannot be driven back stays failed.
func TestFailedSetIsCompensated(t *testing.T) {
	b := newBench(t)
	chip := haltest.NewChip("other")
	coil := chip.AddOut("COIL")
	chip.AddIn("COIL_FB", hal.Low) // a dead contact: never follows
	out, err := chip.Out("COIL", hal.OutConfig{Safe: hal.Low})
	if err != nil {
		t.Fatal(err)
	}
	fb, err := chip.In("COIL_FB", hal.InConfig{})
	if err != nil {
		t.Fatal(err)
	}
	b.reg.Register(body.Channel{ID: "gpio.coil", Kind: "gpio-out", State: body.Enabled})
	set, _ := NewGPIOActions([]*GPIOOutput{{Name: "coil", Channel: "gpio.coil", Line: out, Risk: R2, Feedback: fb, FeedbackActive: hal.High}}, nil)
	r := NewRunner(b.r.env, b.store)
	if err := r.Register(set); err != nil {
		t.Fatal(err)
	}
	on := Invocation{Principal: b.agent, Capability: "gpio.set", Target: "gpio.coil", Params: map[string]string{"state": "on"}}
	res := r.Submit(context.Background(), on)
	if res.Status != Compensated || !strings.Contains(res.Detail, "feedback COIL_FB reads low") || !strings.Contains(res.Detail, "compensated: coil driven back to its safe level, read back low") {
		t.Errorf("a set whose feedback did not follow: %+v", res)
	}
	if coil.Level() != hal.Low {
		t.Errorf("coil %v after compensation", coil.Level())
	}
	if got := b.types(t, res.ActionID); !slices.Equal(got, []string{"action.proposed", "action.running", "action.compensated"}) {
		t.Errorf("records %v", got)
	}
	high := hal.High
	coil.Stick(&high)
	if res = r.Submit(context.Background(), on); res.Status != Failed || !strings.Contains(res.Detail, "compensation failed: coil reads high") {
		t.Errorf("a stuck coil: %+v", res)
	}
}

// mqttHome is a second principal; leaseRunner grants it gpio.* too.
var mqttHome = Principal{Kind: MQTTCommand, Subject: "mqtt:home", Session: "mqtt", Trust: ledger.High}

// signalOut passes every write to its line and says on driven, without
// waiting, each level an action drove it to.
type signalOut struct {
	hal.LineOut
	driven chan hal.Level
}

func (o signalOut) Out(l hal.Level) error {
	err := o.LineOut.Out(l)
	if err == nil {
		select {
		case o.driven <- l:
		default:
		}
	}
	return err
}

// hookJournal runs before on each event it is given, and fails the
// append with what before returns.
type hookJournal struct {
	inner  Journal
	before func(ledger.Event) error
}

func (j hookJournal) Append(ctx context.Context, evs ...ledger.Event) ([]ledger.Result, error) {
	for _, e := range evs {
		if err := j.before(e); err != nil {
			return nil, err
		}
	}
	return j.inner.Append(ctx, evs...)
}

// leaseRunner is a runner on b's LED, e-stop and lease table, recording
// to j (b's ledger when nil), in which mqtt:home holds a grant on gpio.*
// beside agent:pi's; edit changes its environment. The e-stop cancels
// what it runs. The channel says when an action drove the LED.
func leaseRunner(t *testing.T, b *bench, j Journal, edit func(*Environment)) (*Runner, <-chan hal.Level) {
	t.Helper()
	env := b.r.env
	grants := append(slices.Clone(env.Grants()), Grant{ID: "g2", Subject: mqttHome.Subject, Capability: "gpio.*", Scope: "gpio.*", By: "admin:uid=0", ByTrust: ledger.Max})
	env.Grants = func() []Grant { return grants }
	if edit != nil {
		edit(&env)
	}
	if j == nil {
		j = b.store
	}
	r := NewRunner(env, j)
	led := signalOut{LineOut: b.estop.ledOut, driven: make(chan hal.Level, 1)}
	set, pulse := NewGPIOActions([]*GPIOOutput{{Name: "led", Channel: "gpio.led", Line: led, Risk: R1}}, nil)
	for _, a := range []Action{set, pulse} {
		if err := r.Register(a); err != nil {
			t.Fatal(err)
		}
	}
	b.estop.e.SetRunner(r, env.Leases)
	return r, led.driven
}

// However an invocation that took a lease ends, the lease ends with it:
// another principal's live request on the same target right after it is
// not refused lease_held.
func TestLeaseEndsWithTheInvocation(t *testing.T) {
	setOn := func(p Principal, m Mode) Invocation {
		return Invocation{Principal: p, Capability: "gpio.set", Target: "gpio.led", Params: map[string]string{"state": "on"}, Mode: m}
	}
	for _, tc := range []struct {
		name string
		// setup returns the journal (nil: the bench's ledger) and edits
		// the environment.
		setup func(b *bench) (Journal, func(*Environment))
		// first is the agent's invocation and how it ends.
		first        func(b *bench, r *Runner, driven <-chan hal.Level) Result
		status       Status
		reason       Reason
		detail       string
		then         func(t *testing.T, b *bench, r *Runner) // before mqtt:home asks
		untouchedLED bool
	}{
		{name: "the action ran", first: func(b *bench, r *Runner, _ <-chan hal.Level) Result {
			return r.Submit(context.Background(), setOn(b.agent, Live))
		}, status: Succeeded},
		{name: "shadow", first: func(b *bench, r *Runner, _ <-chan hal.Level) Result {
			return r.Submit(context.Background(), setOn(b.agent, Shadow))
		}, status: Succeeded, detail: "", untouchedLED: true},
		{name: "cancelled by the e-stop while it ran", first: func(b *bench, r *Runner, driven <-chan hal.Level) Result {
			done := make(chan Result, 1)
			go func() {
				done <- r.Submit(context.Background(), Invocation{Principal: b.agent, Capability: "gpio.pulse", Target: "gpio.led", Params: map[string]string{"duration_ms": "20000"}})
			}()
			<-driven // the pulse drove the LED on
			b.estop.e.Trip("line_open", hal.MonoNow())
			return <-done
		}, status: Cancelled, reason: ReasonEStopLatched, detail: "cancelled: estop_latched", then: resetEStop},
		{name: "the e-stop latched between the decision and the start", setup: func(b *bench) (Journal, func(*Environment)) {
			// The trip comes while the policy reads the body's health:
			// after it read the latch, before the lease is taken.
			var once sync.Once
			return nil, func(e *Environment) {
				e.Health = func() body.Degradation {
					once.Do(func() { b.estop.e.Trip("line_open", hal.MonoNow()) })
					return body.LevelNormal
				}
			}
		}, first: func(b *bench, r *Runner, _ <-chan hal.Level) Result {
			return r.Submit(context.Background(), setOn(b.agent, Live))
		}, status: Cancelled, reason: ReasonEStopLatched, detail: "the e-stop tripped before the action started", then: resetEStop, untouchedLED: true},
		{name: "the running record could not be written", setup: func(b *bench) (Journal, func(*Environment)) {
			var failed atomic.Bool
			return hookJournal{inner: b.store, before: func(e ledger.Event) error {
				if e.Type == "action.running" && failed.CompareAndSwap(false, true) {
					return errors.New("disk full")
				}
				return nil
			}}, nil
		}, first: func(b *bench, r *Runner, _ <-chan hal.Level) Result {
			return r.Submit(context.Background(), setOn(b.agent, Live))
		}, status: Refused, reason: ReasonLedgerUnavailable, detail: "disk full", untouchedLED: true,
			then: func(t *testing.T, b *bench, r *Runner) {
				// Nothing above R0 runs until a record is written again;
				// this refusal's own records are that write.
				if res := r.Submit(context.Background(), setOn(mqttHome, Live)); res.Status != Refused || res.Reason != ReasonLedgerUnavailable {
					t.Errorf("right after the failed record: got %s %s %q, want refused ledger_unavailable", res.Status, res.Reason, res.Detail)
				}
			}},
		{name: "the fencing check failed", setup: func(b *bench) (Journal, func(*Environment)) {
			// The ledger is slow: the lease lapses while the running
			// record is written.
			clock := &testClock{t: leaseT0}
			var slow atomic.Bool
			return hookJournal{inner: b.store, before: func(e ledger.Event) error {
					if e.Type == "action.running" && slow.CompareAndSwap(false, true) {
						clock.Add(b.r.env.LeaseTTL)
					}
					return nil
				}}, func(e *Environment) {
					e.Now = clock.Now
				}
		}, first: func(b *bench, r *Runner, _ <-chan hal.Level) Result {
			return r.Submit(context.Background(), setOn(b.agent, Live))
		}, status: Cancelled, reason: ReasonStaleEpoch, detail: "is over", untouchedLED: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBench(t)
			var j Journal
			var edit func(*Environment)
			if tc.setup != nil {
				j, edit = tc.setup(b)
			}
			r, driven := leaseRunner(t, b, j, edit)
			res := tc.first(b, r, driven)
			if res.Status != tc.status || res.Reason != tc.reason || !strings.Contains(res.Detail, tc.detail) {
				t.Fatalf("the agent's invocation: got %s %s %q, want %s %s %q", res.Status, res.Reason, res.Detail, tc.status, tc.reason, tc.detail)
			}
			if w := b.led.Writes(); tc.untouchedLED && slices.ContainsFunc(w, func(l hal.Level) bool { return l != b.estop.ledOut.Safe() }) {
				t.Errorf("LED writes %v: it was driven on", w)
			}
			if ls := r.env.Leases.Leases(r.env.Now()); len(ls) != 0 {
				t.Errorf("leases after the invocation: %+v, want none", ls)
			}
			if tc.then != nil {
				tc.then(t, b, r)
			}
			if res := r.Submit(context.Background(), setOn(mqttHome, Live)); res.Status != Succeeded {
				t.Errorf("mqtt:home right after: got %s %s %q, want succeeded", res.Status, res.Reason, res.Detail)
			}
		})
	}
}

// resetEStop clears the latch a trip left, as a local administrator.
func resetEStop(t *testing.T, b *bench, _ *Runner) {
	t.Helper()
	if err := b.estop.e.Reset(localAdmin); err != nil {
		t.Fatalf("reset: %v", err)
	}
}

// The timeout bounds the action, not the records before it: a ledger
// slower than the timeout to write the running record does not time out
// a pulse that fits.
func TestTimeoutBoundsTheActionOnly(t *testing.T) {
	b := newBench(t)
	const timeout = 50 * time.Millisecond
	b.r.journal = hookJournal{inner: b.store, before: func(e ledger.Event) error {
		if e.Type == "action.running" {
			time.Sleep(2 * timeout) // a slow ledger, not a wait for anything
		}
		return nil
	}}
	res := b.r.Submit(context.Background(), Invocation{Principal: b.agent, Capability: "gpio.pulse", Target: "gpio.led", Params: map[string]string{"duration_ms": "1"}, Timeout: timeout})
	if res.Status != Succeeded {
		t.Errorf("a 1 ms pulse with a %v timeout behind a slow record: got %s %q, want succeeded", timeout, res.Status, res.Detail)
	}
}

// A pulse that cannot finish within its limits is refused up front,
// naming the limit and the value, and nothing is recorded as running:
// the output's MaxOn (checked by the channel) and the invocation's
// effective timeout (checked by the runner), each just inside and just
// outside.
func TestPulsesThatCannotFinishAreRefused(t *testing.T) {
	b := newBench(t)
	relay := &GPIOOutput{Name: "relay1", Channel: "gpio.relay1", Line: b.estop.relayOut, Risk: R2, MaxOn: 5 * time.Second}
	led := &GPIOOutput{Name: "led", Channel: "gpio.led", Line: b.estop.ledOut, Risk: R1} // no MaxOn, as a buzzer's by default
	r := NewRunner(b.r.env, b.store)
	set, pulse := NewGPIOActions([]*GPIOOutput{relay, led}, nil)
	for _, a := range []Action{set, pulse} {
		if err := r.Register(a); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name       string
		capability string
		target, ms string
		timeout    time.Duration
		mode       Mode // shadow where the request would be allowed: nothing waits for it
		detail     string
	}{
		{"far longer than the default timeout", "gpio.pulse", "gpio.led", "999999999", 0, Shadow,
			"params.duration_ms 999999999: lasts 277h46m39.999s, which does not fit in the action's timeout of 30s"},
		{"just inside the default timeout", "gpio.pulse", "gpio.led", "29999", 0, Shadow, ""},
		{"as long as the default timeout", "gpio.pulse", "gpio.led", "30000", 0, Shadow,
			"params.duration_ms 30000: lasts 30s, which does not fit in the action's timeout of 30s"},
		{"just inside a timeout given", "gpio.pulse", "gpio.led", "1999", 2 * time.Second, Shadow, ""},
		{"as long as a timeout given", "gpio.pulse", "gpio.led", "2000", 2 * time.Second, Shadow,
			"params.duration_ms 2000: lasts 2s, which does not fit in the action's timeout of 2s"},
		{"a timeout given longer than the default", "gpio.pulse", "gpio.led", "40000", time.Minute, Shadow, ""},
		{"refused live too, before it runs", "gpio.pulse", "gpio.led", "2000", 2 * time.Second, Live,
			"params.duration_ms 2000: lasts 2s, which does not fit in the action's timeout of 2s"},
		{"a negative timeout is the default", "gpio.pulse", "gpio.led", "30000", -time.Second, Shadow,
			"params.duration_ms 30000: lasts 30s, which does not fit in the action's timeout of 30s"},
		{"at the output's max_on", "gpio.pulse", "gpio.relay1", "5000", 0, Shadow, ""},
		{"just over the output's max_on", "gpio.pulse", "gpio.relay1", "5001", 0, Shadow,
			"params.duration_ms 5001: relay1 may stay on at most 5s"},
		{"far over the output's max_on", "gpio.pulse", "gpio.relay1", "999999999", 0, Shadow,
			"params.duration_ms 999999999: relay1 may stay on at most 5s"},
		{"within max_on, not within a shorter timeout", "gpio.pulse", "gpio.relay1", "4000", 3 * time.Second, Shadow,
			"params.duration_ms 4000: lasts 4s, which does not fit in the action's timeout of 3s"},
		{"gpio.set takes no time of its own", "gpio.set", "gpio.led", "", time.Nanosecond, Shadow, ""},
		{"a short pulse runs", "gpio.pulse", "gpio.led", "1", time.Minute, Live, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params := map[string]string{"duration_ms": tc.ms}
			if tc.capability == "gpio.set" {
				params = map[string]string{"state": "on"}
			}
			res := r.Submit(context.Background(), Invocation{Principal: b.agent, Capability: tc.capability, Target: tc.target, Params: params, Timeout: tc.timeout, Mode: tc.mode})
			recs := actionTypes(t, b.store, res.ActionID)
			if tc.detail == "" {
				if res.Status != Succeeded {
					t.Errorf("got %s %s %q, want succeeded", res.Status, res.Reason, res.Detail)
				}
				return
			}
			if res.Status != Refused || res.Reason != ReasonInvalidRequest || res.Detail != tc.detail {
				t.Errorf("got %s %s %q, want refused invalid_request %q", res.Status, res.Reason, res.Detail, tc.detail)
			}
			if !slices.Equal(recs, []string{"action.proposed", "action.refused"}) {
				t.Errorf("recorded %v, want proposed then refused", recs)
			}
		})
	}
	if w := b.relay.Writes(); len(w) != 1 {
		t.Errorf("relay writes %v: a refused or shadow pulse drove it", w)
	}
}
