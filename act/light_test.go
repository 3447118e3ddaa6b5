package act

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/ledger"
)

// lightBench is a runner with the light channel over one LED, light.act,
// that the bench's e-stop halts (its relay line stands for the LED: an
// output whose safe level is off).
func lightBench(t *testing.T) (*bench, *Runner) {
	t.Helper()
	b := newBench(t)
	b.reg.Register(body.Channel{ID: "light.act", Kind: "led", State: body.Enabled})
	grants := []Grant{{ID: "g-light", Subject: "agent:pi", Capability: "light.*", Scope: "light.*", By: "admin:uid=0", ByTrust: ledger.Max}}
	env := b.r.env
	env.Grants = func() []Grant { return grants }
	r := NewRunner(env, b.store)
	on, off, blink := NewLightActions([]*GPIOOutput{{Name: "act", Channel: "light.act", Line: b.estop.relayOut}}, nil)
	for _, a := range []Action{on, off, blink} {
		if err := r.Register(a); err != nil {
			t.Fatal(err)
		}
	}
	b.estop.e.SetRunner(r, env.Leases)
	return b, r
}

func TestLightChannel(t *testing.T) {
	b, r := lightBench(t)
	submit := func(capability string, params map[string]string) Result {
		return r.Submit(context.Background(), Invocation{Principal: b.agent, Capability: capability, Target: "light.act", Params: params})
	}
	res := submit("light.on", nil)
	if res.Status != Succeeded || res.Verification.Result != "verified" || b.relay.Level() != hal.High {
		t.Fatalf("light.on: %+v, LED %v", res, b.relay.Level())
	}
	res = submit("light.off", nil)
	if res.Status != Succeeded || res.Verification.Result != "verified" || b.relay.Level() != hal.Low {
		t.Fatalf("light.off: %+v, LED %v", res, b.relay.Level())
	}
	before := len(b.relay.Writes())
	res = submit("light.blink", map[string]string{"period_ms": "100", "count": "3"})
	if res.Status != Succeeded || res.Verification.Result != "verified" || !strings.Contains(res.Verification.Evidence, "read back low") {
		t.Fatalf("light.blink: %+v", res)
	}
	if got, want := b.relay.Writes()[before:], []hal.Level{hal.High, hal.Low, hal.High, hal.Low, hal.High, hal.Low}; !slices.Equal(got, want) {
		t.Errorf("blinking wrote %v, want %v", got, want)
	}
	// A light that does not follow: stuck on, light.off is not verified.
	high := hal.High
	b.relay.Stick(&high)
	if res := submit("light.off", nil); res.Status != Failed || res.Verification.Result != "failed" {
		t.Errorf("light.off of a stuck LED: %+v", res)
	}
	b.relay.Stick(nil)
}

func TestLightParamsRefused(t *testing.T) {
	b, r := lightBench(t)
	for _, c := range []struct {
		capability string
		params     map[string]string
		says       string
	}{
		{"light.blink", map[string]string{"period_ms": "50", "count": "3"}, `params.period_ms "50": want 100 to 10000 milliseconds`},
		{"light.blink", map[string]string{"period_ms": "20000", "count": "3"}, `params.period_ms "20000"`},
		{"light.blink", map[string]string{"period_ms": "500", "count": "0"}, `params.count "0": want 1 to 100 blinks`},
		{"light.blink", map[string]string{"period_ms": "500", "count": "101"}, `params.count "101"`},
		{"light.blink", map[string]string{"period_ms": "500"}, `params.count ""`},
		{"light.blink", map[string]string{"period_ms": "500", "count": "2", "colour": "red"}, "params.colour: light.blink takes period_ms and count"},
		{"light.on", map[string]string{"state": "on"}, "light.on takes no params"},
		{"light.blink", map[string]string{"period_ms": "10000", "count": "100"}, "does not fit in the action's timeout"},
	} {
		res := r.Submit(context.Background(), Invocation{Principal: b.agent, Capability: c.capability, Target: "light.act", Params: c.params})
		if res.Status != Refused || !strings.Contains(res.Detail, c.says) {
			t.Errorf("%s %v: %+v, want refused saying %q", c.capability, c.params, res, c.says)
		}
	}
	if res := r.Submit(context.Background(), Invocation{Principal: b.agent, Capability: "light.on", Target: "light.pwr"}); res.Status != Refused {
		t.Errorf("a light the body did not take: %+v", res)
	}
	if b.relay.Level() != hal.Low {
		t.Error("a refused request switched the light")
	}
}

// The e-stop halts a blinking light at once, off, and cancels the blink.
func TestEStopStopsABlink(t *testing.T) {
	b, r := lightBench(t)
	done := make(chan Result, 1)
	go func() {
		done <- r.Submit(context.Background(), Invocation{Principal: b.agent, Capability: "light.blink", Target: "light.act",
			Params: map[string]string{"period_ms": "1000", "count": "20"}})
	}()
	for b.relay.Level() != hal.High {
		time.Sleep(time.Millisecond) // the runner's goroutine switching it on
	}
	trip := b.estop.e.Trip("line_open", hal.MonoNow())
	res := <-done
	if res.Status != Cancelled || res.Reason != ReasonEStopLatched || b.relay.Level() != hal.Low {
		t.Errorf("blink after the trip: %+v, LED %v", res, b.relay.Level())
	}
	if len(trip.Cancelled) != 1 || trip.Cancelled[0] != res.ActionID || !trip.AllSafe {
		t.Errorf("the trip: cancelled %v (want %s), all safe %v", trip.Cancelled, res.ActionID, trip.AllSafe)
	}
	if again := r.Submit(context.Background(), Invocation{Principal: b.agent, Capability: "light.on", Target: "light.act"}); again.Status != Refused || again.Reason != ReasonEStopLatched {
		t.Errorf("light.on while latched: %+v", again)
	}
}
