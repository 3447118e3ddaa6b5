package act

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/tobe-body/tobe-body/hal"
)

// The light channel: the board's own LEDs (a Pi's ACT and PWR) the body
// took over, by their channel ids ("light.act"), each an output whose
// safe level is off, halted by the e-stop like every output.
//
//	light.on     switch it on, verified by reading the brightness back
//	light.off    switch it off, verified the same way
//	light.blink  period_ms and count: on for half of each period, off
//	             for the other half, count times, ending off; cut short
//	             (the e-stop, a timeout, the session's end) it goes off
//	             at once; verified off afterwards
//
// All are R1 (a light tells a person something; it moves nothing), and
// share the outputs' limits (min_interval_s between changes) with gpio.*
// only where an output is both, which a board LED is not.

// Limits of light.blink.
const (
	minBlinkPeriod = 100 * time.Millisecond
	maxBlinkPeriod = 10 * time.Second
	maxBlinks      = 100
)

// LightSwitch is light.on or light.off.
type LightSwitch struct {
	g  *gpioOutputs
	on bool
}

// LightBlink is light.blink.
type LightBlink struct{ g *gpioOutputs }

// NewLightActions makes light.on, light.off and light.blink over the
// lights (Risk R1 where it is not set).
func NewLightActions(lights []*GPIOOutput, now func() time.Time) (on, off *LightSwitch, blink *LightBlink) {
	if now == nil {
		now = time.Now
	}
	for _, l := range lights {
		if l.Risk == 0 {
			l.Risk = R1
		}
	}
	g := newGPIOOutputs(lights, now)
	return &LightSwitch{g, true}, &LightSwitch{g, false}, &LightBlink{g}
}

func (a *LightSwitch) level(o *GPIOOutput) hal.Level {
	if a.on {
		return onLevel(o)
	}
	return o.Line.Safe()
}

func (a *LightSwitch) name() string {
	if a.on {
		return "light.on"
	}
	return "light.off"
}

func (a *LightSwitch) Capability() Capability {
	return Capability{Name: a.name(), Risk: R1, Reversible: true, Verify: "read-back of the LED's brightness", Shared: true}
}

// RiskOf is the light's own risk.
func (a *LightSwitch) RiskOf(target string) Risk { return riskOf(a.g, target) }
func (a *LightBlink) RiskOf(target string) Risk  { return riskOf(a.g, target) }

// Targets are the lights, by channel id.
func (a *LightSwitch) Targets() []string { return a.g.targets() }
func (a *LightBlink) Targets() []string  { return a.g.targets() }

// Params: light.on and light.off take none.
func (a *LightSwitch) Params() []Param { return nil }

// Params of light.blink.
func (a *LightBlink) Params() []Param {
	return []Param{
		{Name: "period_ms", Type: "integer", Min: bound(float64(minBlinkPeriod.Milliseconds())), Max: bound(float64(maxBlinkPeriod.Milliseconds())), Required: true,
			Description: "one blink: on for half of it, off for the other half, in milliseconds"},
		{Name: "count", Type: "integer", Min: bound(1), Max: bound(maxBlinks), Required: true, Description: "how many blinks; the light ends off"},
	}
}

func (a *LightSwitch) Channel(target string, params map[string]string) (string, error) {
	o, err := a.g.get(target)
	if err != nil {
		return "", err
	}
	if len(params) > 0 {
		return "", fmt.Errorf("%s takes no params", a.name())
	}
	if a.on && o.MaxOn > 0 {
		return "", fmt.Errorf("%s may stay on at most %v: use light.blink", o.Name, o.MaxOn)
	}
	return o.Channel, nil
}

func (a *LightSwitch) Do(ctx context.Context, inv *Invocation) (string, error) {
	o, err := a.g.get(inv.Target)
	if err != nil {
		return "", err
	}
	if err := a.g.change(o); err != nil {
		return "", err
	}
	if err := o.Line.Out(a.level(o)); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s switched %s", o.Name, onOff(a.on)), nil
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

func (a *LightSwitch) Verify(ctx context.Context, inv *Invocation) Verification {
	o, err := a.g.get(inv.Target)
	if err != nil {
		return Verification{Result: "unknown", Evidence: err.Error()}
	}
	return verifyLevel(ctx, o, a.level(o))
}

// Compensate switches a light that did not follow light.on off again.
func (a *LightSwitch) Compensate(ctx context.Context, inv *Invocation) (string, error) {
	return (&GPIOSet{a.g}).Compensate(ctx, inv)
}

func (a *LightBlink) Capability() Capability {
	return Capability{Name: "light.blink", Risk: R1, Reversible: true, Verify: "read-back of the LED's brightness, off, afterwards", Shared: true}
}

// blinks reads period_ms and count.
func blinks(o *GPIOOutput, params map[string]string) (period time.Duration, count int, err error) {
	ms, err := strconv.ParseInt(params["period_ms"], 10, 64)
	if err != nil || ms < minBlinkPeriod.Milliseconds() || ms > maxBlinkPeriod.Milliseconds() {
		return 0, 0, fmt.Errorf("params.period_ms %q: want %d to %d milliseconds", params["period_ms"], minBlinkPeriod.Milliseconds(), maxBlinkPeriod.Milliseconds())
	}
	n, err := strconv.Atoi(params["count"])
	if err != nil || n < 1 || n > maxBlinks {
		return 0, 0, fmt.Errorf("params.count %q: want 1 to %d blinks", params["count"], maxBlinks)
	}
	for k := range params {
		if k != "period_ms" && k != "count" {
			return 0, 0, fmt.Errorf("params.%s: light.blink takes period_ms and count", k)
		}
	}
	period = time.Duration(ms) * time.Millisecond
	if o.MaxOn > 0 && period/2 > o.MaxOn {
		return 0, 0, fmt.Errorf("params.period_ms %d: %s may stay on at most %v", ms, o.Name, o.MaxOn)
	}
	return period, n, nil
}

func (a *LightBlink) Channel(target string, params map[string]string) (string, error) {
	o, err := a.g.get(target)
	if err != nil {
		return "", err
	}
	if _, _, err := blinks(o, params); err != nil {
		return "", err
	}
	return o.Channel, nil
}

// Duration is how long the blinking lasts: the runner refuses one that
// would not finish within the invocation's timeout.
func (a *LightBlink) Duration(inv *Invocation) (time.Duration, string, error) {
	o, err := a.g.get(inv.Target)
	if err != nil {
		return 0, "", err
	}
	p, n, err := blinks(o, inv.Params)
	if err != nil {
		return 0, "", err
	}
	return p * time.Duration(n), fmt.Sprintf("params.period_ms %d × params.count %d", p.Milliseconds(), n), nil
}

// Do blinks; cut short, it switches the light off at once.
func (a *LightBlink) Do(ctx context.Context, inv *Invocation) (string, error) {
	o, err := a.g.get(inv.Target)
	if err != nil {
		return "", err
	}
	p, n, err := blinks(o, inv.Params)
	if err != nil {
		return "", err
	}
	if err := a.g.change(o); err != nil {
		return "", err
	}
	wait := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for i := 0; i < 2*n; i++ {
		l := o.Line.Safe()
		if i%2 == 0 {
			l = onLevel(o)
		}
		if err := o.Line.Out(l); err != nil {
			return fmt.Sprintf("%s blinked %d of %d times", o.Name, i/2, n), errors.Join(err, backToSafe(o))
		}
		if !wait(p / 2) {
			return fmt.Sprintf("%s blinked %d of %d times, cut short", o.Name, i/2, n), errors.Join(context.Cause(ctx), backToSafe(o))
		}
	}
	return fmt.Sprintf("%s blinked %d times, %v apart", o.Name, n, p), nil
}

func (a *LightBlink) Verify(ctx context.Context, inv *Invocation) Verification {
	o, err := a.g.get(inv.Target)
	if err != nil {
		return Verification{Result: "unknown", Evidence: err.Error()}
	}
	return verifyLevel(ctx, o, o.Line.Safe())
}
