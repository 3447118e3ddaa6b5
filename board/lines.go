package board

import (
	"time"

	"github.com/tobe-body/tobe-body/hal"
)

// Roles of the e-stop's lines, in LineSpec.Role.
const (
	RoleEStop       = "estop"
	RoleEStopSecond = "estop-second"
	RoleEStopReset  = "estop-reset"
)

// resetDebounce filters contact bounce of the reset button; its press
// length is judged on top of this.
const resetDebounce = 20 * time.Millisecond

// LineSpec is one GPIO line a profile names and how it is requested.
type LineSpec struct {
	Kind string // "estop", "gpio-in" or "gpio-out"
	Name string // main, second or reset for the e-stop; the profile's name otherwise
	Role string // an e-stop role, an input's role (button, sensor, feedback), or an output's kind (relay, led, buzzer)
	Line string // the line's name on the chip
	// In is set for inputs, Out for outputs.
	In  *hal.InConfig
	Out *hal.OutConfig
	// Active is the level that means stop, pressed or on (inputs).
	Active hal.Level
}

// Lines lists the profile's GPIO lines: the e-stop's first, then the
// inputs, then the outputs. Both the device check and the daemon request
// lines from this one list.
func (p *Profile) Lines() []LineSpec {
	if p.GPIO == nil {
		return nil
	}
	var out []LineSpec
	in := func(kind, name, role, line string, cfg hal.InConfig, active hal.Level) {
		out = append(out, LineSpec{Kind: kind, Name: name, Role: role, Line: line, In: &cfg, Active: active})
	}
	if e := p.EStop; e != nil {
		in("estop", "main", RoleEStop, e.Line, hal.InConfig{Pull: e.Pull.HAL(), Edge: hal.BothEdges, Debounce: time.Duration(e.DebounceMS) * time.Millisecond}, e.StopLevel.HAL())
		if s := e.Second; s != nil {
			in("estop", "second", RoleEStopSecond, s.Line, hal.InConfig{Pull: s.Pull.HAL(), Edge: hal.BothEdges}, s.StopLevel.HAL())
		}
		if r := e.Reset; r != nil {
			in("estop", "reset", RoleEStopReset, r.Line, hal.InConfig{Pull: r.Pull.HAL(), Edge: hal.BothEdges, Debounce: resetDebounce}, r.Active.HAL())
		}
	}
	for _, l := range p.GPIO.Inputs {
		in("gpio-in", l.Name, l.Role, l.Line, hal.InConfig{Pull: l.Pull.HAL(), Edge: hal.BothEdges, Debounce: l.Debounce()}, l.Active.HAL())
	}
	for _, o := range p.GPIO.Outputs {
		out = append(out, LineSpec{Kind: "gpio-out", Name: o.Name, Role: o.Kind, Line: o.Line, Out: &hal.OutConfig{Safe: o.Safe.HAL()}})
	}
	return out
}

// Timing is the e-stop's timing as the profile gives it: the second
// channel's discrepancy window and the reset button's accepted press;
// zero where the profile has none.
type Timing struct {
	Discrepancy, MinPress, MaxPress time.Duration
}

// EStopTiming is the profile's e-stop timing.
func (p *Profile) EStopTiming() Timing {
	var t Timing
	if e := p.EStop; e != nil && e.Second != nil {
		t.Discrepancy = time.Duration(e.Second.DiscrepancyMS) * time.Millisecond
	}
	if e := p.EStop; e != nil && e.Reset != nil {
		t.MinPress, t.MaxPress = time.Duration(e.Reset.MinPressMS)*time.Millisecond, time.Duration(e.Reset.MaxPressMS)*time.Millisecond
	}
	return t
}

// Feedback names, by output, the input the profile wires as its
// feedback (a relay's auxiliary contact).
func (p *Profile) Feedback() map[string]string {
	fb := map[string]string{}
	if p.GPIO != nil {
		for _, in := range p.GPIO.Inputs {
			if in.FeedbackOf != "" {
				fb[in.FeedbackOf] = in.Name
			}
		}
	}
	return fb
}
