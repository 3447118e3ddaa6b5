package act

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/tobe-body/tobe-body/hal"
)

// GPIOOutput is an output the body owns, as the action channels see it.
// Invocations name it by Channel, its registry id ("gpio.relay1"), which
// is also what grants scope.
type GPIOOutput struct {
	// Name is the profile's name ("relay1"); Channel its registry id
	// ("gpio.relay1").
	Name, Channel string
	Line          hal.LineOut
	// Risk of driving it: R2 for a relay (an external side effect), R1 for
	// an LED or a buzzer.
	Risk Risk
	// Feedback, when set, is an input that follows the output (a relay's
	// auxiliary contact): verification reads it, not only the line.
	Feedback       hal.LineIn
	FeedbackActive hal.Level
	// MaxOn bounds how long the output may stay on (away from its safe
	// level) in one go; MinInterval how soon it may change again.
	MaxOn, MinInterval time.Duration
}

// gpioOutputs is what gpio.set and gpio.pulse share: the outputs by name
// and when each last changed.
type gpioOutputs struct {
	outs map[string]*GPIOOutput

	mu   sync.Mutex
	last map[string]time.Time
	now  func() time.Time
}

func newGPIOOutputs(outs []*GPIOOutput, now func() time.Time) *gpioOutputs {
	g := &gpioOutputs{outs: map[string]*GPIOOutput{}, last: map[string]time.Time{}, now: now}
	for _, o := range outs {
		g.outs[o.Channel] = o
	}
	return g
}

func (g *gpioOutputs) get(target string) (*GPIOOutput, error) {
	o, ok := g.outs[target]
	if !ok {
		names := make([]string, 0, len(g.outs))
		for n := range g.outs {
			names = append(names, n)
		}
		return nil, fmt.Errorf("no output %q (outputs: %q)", target, names)
	}
	return o, nil
}

// change notes a change of target, refusing one sooner than MinInterval.
func (g *gpioOutputs) change(o *GPIOOutput) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	if last, ok := g.last[o.Name]; ok && o.MinInterval > 0 && now.Sub(last) < o.MinInterval {
		return fmt.Errorf("%s changed %v ago; its minimum interval is %v", o.Name, now.Sub(last).Round(time.Millisecond), o.MinInterval)
	}
	g.last[o.Name] = now
	return nil
}

func onLevel(o *GPIOOutput) hal.Level { return !o.Line.Safe() }

// parseState reads params["state"]: "on" (away from the safe level) or
// "off" (the safe level).
func parseState(o *GPIOOutput, params map[string]string) (hal.Level, error) {
	switch params["state"] {
	case "on":
		return onLevel(o), nil
	case "off":
		return o.Line.Safe(), nil
	}
	return false, fmt.Errorf(`params.state %q: want "on" or "off"`, params["state"])
}

// verifyLevel reads the line back and, with a feedback input, waits up to
// a moment for the feedback to follow.
func verifyLevel(ctx context.Context, o *GPIOOutput, want hal.Level) Verification {
	got, err := o.Line.ReadBack()
	if err != nil {
		return Verification{Result: "unknown", Evidence: fmt.Sprintf("%s could not be read back: %v", o.Name, err)}
	}
	if got != want {
		return Verification{Result: "failed", Evidence: fmt.Sprintf("%s read back %s, want %s", o.Name, levelName(got), levelName(want))}
	}
	if o.Feedback == nil {
		return Verification{Result: "verified", Evidence: fmt.Sprintf("%s read back %s", o.Name, levelName(got))}
	}
	wantFB := o.FeedbackActive
	if want == o.Line.Safe() {
		wantFB = !wantFB
	}
	// A contact follows its coil within tens of milliseconds.
	ctx, cancel := context.WithTimeout(ctx, feedbackWait)
	defer cancel()
	var fb hal.Level
	for {
		fb, err = o.Feedback.Read()
		if err == nil && fb == wantFB {
			return Verification{Result: "verified", Evidence: fmt.Sprintf("%s read back %s; feedback %s reads %s", o.Name, levelName(got), o.Feedback.Name(), levelName(fb))}
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return Verification{Result: "unknown", Evidence: fmt.Sprintf("feedback %s could not be read: %v", o.Feedback.Name(), err)}
			}
			return Verification{Result: "failed", Evidence: fmt.Sprintf("%s read back %s but its feedback %s reads %s (a welded or dead relay?)", o.Name, levelName(got), o.Feedback.Name(), levelName(fb))}
		case <-time.After(20 * time.Millisecond): // polling a contact that takes milliseconds to move
		}
	}
}

// feedbackWait bounds how long verification waits for a feedback input
// to follow its output.
const feedbackWait = 500 * time.Millisecond

// GPIOSet is gpio.set: drive a named output on or off.
type GPIOSet struct{ g *gpioOutputs }

// GPIOPulse is gpio.pulse: drive a named output on for a while, then off.
type GPIOPulse struct{ g *gpioOutputs }

// NewGPIOActions makes gpio.set and gpio.pulse over the outputs.
func NewGPIOActions(outs []*GPIOOutput, now func() time.Time) (*GPIOSet, *GPIOPulse) {
	if now == nil {
		now = time.Now
	}
	g := newGPIOOutputs(outs, now)
	return &GPIOSet{g}, &GPIOPulse{g}
}

func (a *GPIOSet) Capability() Capability {
	return Capability{Name: "gpio.set", Risk: R2, Reversible: true, Verify: "read-back, and a feedback input where wired", Shared: true}
}

// RiskOf is the target's own risk: a relay is R2, an LED R1.
func (a *GPIOSet) RiskOf(target string) Risk   { return riskOf(a.g, target) }
func (a *GPIOPulse) RiskOf(target string) Risk { return riskOf(a.g, target) }

// Targets are the outputs, by channel id.
func (a *GPIOSet) Targets() []string   { return a.g.targets() }
func (a *GPIOPulse) Targets() []string { return a.g.targets() }

func (g *gpioOutputs) targets() []string {
	out := make([]string, 0, len(g.outs))
	for id := range g.outs {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

func riskOf(g *gpioOutputs, target string) Risk {
	if o, err := g.get(target); err == nil {
		return o.Risk
	}
	return R3
}

func (a *GPIOSet) Channel(target string, params map[string]string) (string, error) {
	o, err := a.g.get(target)
	if err != nil {
		return "", err
	}
	if _, err := parseState(o, params); err != nil {
		return "", err
	}
	if o.MaxOn > 0 && params["state"] == "on" {
		return "", fmt.Errorf("%s may stay on at most %v: use gpio.pulse", o.Name, o.MaxOn)
	}
	return o.Channel, nil
}

func (a *GPIOSet) Do(ctx context.Context, inv *Invocation) (string, error) {
	o, err := a.g.get(inv.Target)
	if err != nil {
		return "", err
	}
	l, err := parseState(o, inv.Params)
	if err != nil {
		return "", err
	}
	if err := a.g.change(o); err != nil {
		return "", err
	}
	if err := o.Line.Out(l); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s driven %s", o.Name, levelName(l)), nil
}

func (a *GPIOSet) Verify(ctx context.Context, inv *Invocation) Verification {
	o, err := a.g.get(inv.Target)
	if err != nil {
		return Verification{Result: "unknown", Evidence: err.Error()}
	}
	l, _ := parseState(o, inv.Params)
	return verifyLevel(ctx, o, l)
}

// Compensate drives the output back to its safe level after a failed set
// (the line or its feedback did not follow) and reads it back. An e-stop
// that halted the line already did.
func (a *GPIOSet) Compensate(ctx context.Context, inv *Invocation) (string, error) {
	o, err := a.g.get(inv.Target)
	if err != nil {
		return "", err
	}
	if err := o.Line.Out(o.Line.Safe()); err != nil && !errors.Is(err, hal.ErrHalted) {
		return "", fmt.Errorf("%s could not be driven back to its safe level: %w", o.Name, err)
	}
	got, err := o.Line.ReadBack()
	if err != nil {
		return "", fmt.Errorf("%s could not be read back: %w", o.Name, err)
	}
	if got != o.Line.Safe() {
		return "", fmt.Errorf("%s reads %s after it was driven back to %s", o.Name, levelName(got), levelName(o.Line.Safe()))
	}
	return fmt.Sprintf("%s driven back to its safe level, read back %s", o.Name, levelName(got)), nil
}

func (a *GPIOPulse) Capability() Capability {
	return Capability{Name: "gpio.pulse", Risk: R2, Reversible: true, Verify: "read-back at the safe level afterwards", Shared: true}
}

// maxPulseMS is the longest duration_ms a time.Duration holds.
const maxPulseMS = int64(math.MaxInt64 / time.Millisecond)

// pulseLength reads params.duration_ms, refusing one longer than the
// output's MaxOn.
func pulseLength(o *GPIOOutput, params map[string]string) (time.Duration, error) {
	ms, err := strconv.ParseInt(params["duration_ms"], 10, 64)
	if err != nil || ms <= 0 || ms > maxPulseMS {
		return 0, fmt.Errorf("params.duration_ms %q: want a positive number of milliseconds, at most %d", params["duration_ms"], maxPulseMS)
	}
	d := time.Duration(ms) * time.Millisecond
	if o.MaxOn > 0 && d > o.MaxOn {
		return 0, fmt.Errorf("params.duration_ms %d: %s may stay on at most %v", ms, o.Name, o.MaxOn)
	}
	return d, nil
}

func (a *GPIOPulse) Channel(target string, params map[string]string) (string, error) {
	o, err := a.g.get(target)
	if err != nil {
		return "", err
	}
	if _, err := pulseLength(o, params); err != nil {
		return "", err
	}
	return o.Channel, nil
}

// Duration is how long the pulse keeps the output on: the runner refuses
// one that would not finish within the invocation's timeout.
func (a *GPIOPulse) Duration(inv *Invocation) (time.Duration, string, error) {
	o, err := a.g.get(inv.Target)
	if err != nil {
		return 0, "", err
	}
	d, err := pulseLength(o, inv.Params)
	if err != nil {
		return 0, "", err
	}
	return d, fmt.Sprintf("params.duration_ms %d", d.Milliseconds()), nil
}

// Do drives the output on, waits, and drives it off; cancelled (the
// e-stop, a timeout, the session's end) it drives it off at once.
func (a *GPIOPulse) Do(ctx context.Context, inv *Invocation) (string, error) {
	o, err := a.g.get(inv.Target)
	if err != nil {
		return "", err
	}
	d, err := pulseLength(o, inv.Params)
	if err != nil {
		return "", err
	}
	if err := a.g.change(o); err != nil {
		return "", err
	}
	if err := o.Line.Out(onLevel(o)); err != nil {
		return "", err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	var cut error
	select {
	case <-t.C:
	case <-ctx.Done():
		cut = context.Cause(ctx)
	}
	off := backToSafe(o)
	if cut != nil {
		return fmt.Sprintf("%s pulsed, cut short", o.Name), errors.Join(cut, off)
	}
	return fmt.Sprintf("%s on for %v", o.Name, d), off
}

// backToSafe drives o back to its safe level, after a pulse or a blink
// or when one is cut short; a line the e-stop halted is safe already.
func backToSafe(o *GPIOOutput) error {
	if err := o.Line.Out(o.Line.Safe()); err != nil && !errors.Is(err, hal.ErrHalted) {
		return err
	}
	return nil
}

func (a *GPIOPulse) Verify(ctx context.Context, inv *Invocation) Verification {
	o, err := a.g.get(inv.Target)
	if err != nil {
		return Verification{Result: "unknown", Evidence: err.Error()}
	}
	return verifyLevel(ctx, o, o.Line.Safe())
}
