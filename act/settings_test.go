package act

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/hal"
)

// The runner under each setting the config gives it: safety rules, rate
// limits per capability, capability and channel modes, and per-output risk
// and limits.
func TestRunnerSettings(t *testing.T) {
	pulse := func(target, ms string) Invocation {
		return Invocation{Capability: "gpio.pulse", Target: target, Params: map[string]string{"duration_ms": ms}}
	}
	set := func(target, state string) Invocation {
		return Invocation{Capability: "gpio.set", Target: target, Params: map[string]string{"state": state}}
	}
	type try struct {
		inv    Invocation
		admin  bool
		mode   Mode
		status Status
		reason Reason
		detail string
	}
	for _, tc := range []struct {
		name  string
		env   func(*Environment, *body.Registry)
		outs  func(relay, led *GPIOOutput)
		tries []try
	}{
		{"forbidden on one output, for administrators too", func(e *Environment, _ *body.Registry) {
			e.Rules = SafetyRules{Forbidden: []ForbiddenRule{{Capability: "gpio.*", Scope: "gpio.led"}}}
		}, nil, []try{
			{inv: set("gpio.led", "on"), status: Refused, reason: ReasonSafetyRule, detail: "gpio.* on gpio.led"},
			{inv: set("gpio.led", "on"), admin: true, status: Refused, reason: ReasonSafetyRule},
			{inv: pulse("gpio.relay1", "5"), status: Succeeded},
		}},
		{"forbid R3 with a relay raised to R3", func(e *Environment, _ *body.Registry) { e.Rules = SafetyRules{ForbidR3: true} },
			func(relay, _ *GPIOOutput) { relay.Risk = R3 }, []try{
				{inv: pulse("gpio.relay1", "5"), status: Refused, reason: ReasonSafetyRule, detail: "R3 is forbidden"},
				{inv: set("gpio.led", "on"), status: Succeeded},
			}},
		{"a relay raised to R3 needs an approval", nil, func(relay, _ *GPIOOutput) { relay.Risk = R3 }, []try{
			{inv: pulse("gpio.relay1", "5"), status: Refused, reason: ReasonRiskExceedsTrust, detail: "R3 needs max trust"},
		}},
		{"rate limit per capability", func(e *Environment, _ *body.Registry) {
			l, err := NewLimiter(RateLimits{Default: RateLimit{Burst: 20, PerSecond: 10}, ByCapability: map[string]RateLimit{"gpio.set": {Burst: 2, PerSecond: 0.001}}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			e.Limiter = l
		}, nil, []try{
			{inv: set("gpio.led", "on"), status: Succeeded},
			{inv: set("gpio.led", "off"), status: Succeeded},
			{inv: set("gpio.led", "on"), status: Refused, reason: ReasonRateLimited},
			{inv: set("gpio.led", "on"), admin: true, status: Succeeded}, // its own bucket
			{inv: pulse("gpio.led", "5"), status: Succeeded},             // another capability
		}},
		{"capability in shadow", func(e *Environment, _ *body.Registry) {
			e.CapabilityModes = map[string]body.State{"gpio.pulse": body.Shadow}
		}, nil, []try{
			{inv: pulse("gpio.led", "5"), status: Refused, reason: ReasonChannelShadow},
			{inv: pulse("gpio.led", "5"), mode: Shadow, status: Succeeded, detail: ""},
			{inv: set("gpio.led", "on"), status: Succeeded},
		}},
		{"capability disabled", func(e *Environment, _ *body.Registry) {
			e.CapabilityModes = map[string]body.State{"gpio.set": body.Disabled}
		}, nil, []try{
			{inv: set("gpio.led", "on"), admin: true, status: Refused, reason: ReasonChannelDisabled, detail: "the config has gpio.set disabled"},
			{inv: pulse("gpio.led", "5"), status: Succeeded},
		}},
		{"channel disabled and in shadow through the registry", func(_ *Environment, reg *body.Registry) {
			reg.Set("gpio.led", body.Disabled, "")
			reg.Set("gpio.relay1", body.Shadow, "")
		}, nil, []try{
			{inv: set("gpio.led", "on"), status: Refused, reason: ReasonChannelDisabled, detail: "the channel is disabled"},
			{inv: pulse("gpio.relay1", "5"), status: Refused, reason: ReasonChannelShadow},
			{inv: pulse("gpio.relay1", "5"), mode: Shadow, status: Succeeded},
		}},
		{"maximum on-time", nil, func(_, led *GPIOOutput) { led.MaxOn = 50 * time.Millisecond }, []try{
			{inv: pulse("gpio.led", "51"), status: Refused, reason: ReasonInvalidRequest, detail: "led may stay on at most 50ms"},
			{inv: set("gpio.led", "on"), status: Refused, reason: ReasonInvalidRequest, detail: "use gpio.pulse"},
			{inv: set("gpio.led", "off"), status: Succeeded},
			{inv: pulse("gpio.led", "5"), status: Succeeded},
		}},
		{"minimum interval", nil, func(_, led *GPIOOutput) { led.MinInterval = time.Hour }, []try{
			{inv: set("gpio.led", "on"), status: Succeeded},
			{inv: set("gpio.led", "off"), status: Failed, detail: "its minimum interval is 1h0m0s"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBench(t)
			b.fb.Set(hal.Low, hal.MonoNow())
			env := b.r.env
			if tc.env != nil {
				tc.env(&env, b.reg)
			}
			var relay, led *GPIOOutput
			relay = &GPIOOutput{Name: "relay1", Channel: "gpio.relay1", Line: b.estop.relayOut, Risk: R2}
			led = &GPIOOutput{Name: "led", Channel: "gpio.led", Line: b.estop.ledOut, Risk: R1}
			if tc.outs != nil {
				tc.outs(relay, led)
			}
			r := NewRunner(env, b.store)
			s, p := NewGPIOActions([]*GPIOOutput{relay, led}, nil)
			r.Register(s)
			r.Register(p)
			for i, tr := range tc.tries {
				inv := tr.inv
				inv.Principal, inv.Mode = b.agent, tr.mode
				if tr.admin {
					inv.Principal = localAdmin
				}
				res := r.Submit(context.Background(), inv)
				if res.Status != tr.status || res.Reason != tr.reason || !strings.Contains(res.Detail, tr.detail) {
					t.Errorf("try %d %s %s: got %s %s %q, want %s %s %q", i, inv.Capability, inv.Target, res.Status, res.Reason, res.Detail, tr.status, tr.reason, tr.detail)
				}
			}
		})
	}
}

// The admission limit per principal comes from act.rate_limits.per_principal,
// its defaults from the config's.
func TestSettingsAdmission(t *testing.T) {
	for _, tc := range []struct {
		name, act string
		want      RateLimit
	}{
		{"the defaults", `{}`, RateLimit{Burst: 30, PerSecond: 2}},
		{"configured", `{"rate_limits": {"per_principal": {"burst": 3, "per_second": 0.5}}}`, RateLimit{Burst: 3, PerSecond: 0.5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSettings(actFrom(t, tc.act), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if s.Admission != tc.want {
				t.Errorf("got %+v, want %+v", s.Admission, tc.want)
			}
		})
	}
}
