package act

import "slices"

// Param describes one parameter of a capability, so that a transport can
// show a caller what a request takes (the agent's tool schemas). A
// request still carries its params as strings; the action's Channel is
// what checks them, and a Param never loosens that.
type Param struct {
	Name        string
	Description string
	// Type is "string", "integer" or "number".
	Type string
	// Enum lists the only values, when there are few.
	Enum []string
	// Min and Max bound a number, when set.
	Min, Max *float64
	// Required: a request without it is refused.
	Required bool
}

// Described is an Action that says what its params are and what its
// targets are on this body (an optional capability, found by type
// assertion).
type Described interface {
	Params() []Param
	Targets() []string
}

func bound(v float64) *float64 { return &v }

// Params of gpio.set.
func (a *GPIOSet) Params() []Param {
	return []Param{{Name: "state", Type: "string", Enum: []string{"on", "off"}, Required: true,
		Description: "on drives the output away from its safe level, off back to it"}}
}

// Params of gpio.pulse.
func (a *GPIOPulse) Params() []Param {
	return []Param{{Name: "duration_ms", Type: "integer", Min: bound(1), Max: bound(float64(maxPulseMS)), Required: true,
		Description: "how long the output is on, in milliseconds (at most the output's max_on_s)"}}
}

// Params of audio.tone.
func (a *AudioTone) Params() []Param {
	return []Param{
		{Name: "freq_hz", Type: "integer", Min: bound(minToneHz), Max: bound(maxToneHz), Required: true, Description: "the tone's frequency in hertz"},
		{Name: "ms", Type: "integer", Min: bound(minToneMS), Max: bound(maxToneMS), Required: true, Description: "how long it sounds, in milliseconds"},
		{Name: "level_dbfs", Type: "number", Min: bound(minToneDBFS), Max: bound(0), Description: "its level in dBFS (at most the speaker's max_level_dbfs)"},
	}
}

// Params of audio.play.
func (a *AudioPlay) Params() []Param {
	return []Param{{Name: "clip", Type: "string", Required: true,
		Description: "a WAV file in the speaker's clips directory, by its path there (chime.wav)"}}
}

// Targets of audio.tone: the speakers, by channel id.
func (a *AudioTone) Targets() []string { return a.g.targets() }

// Targets of audio.play: the speakers, by channel id.
func (a *AudioPlay) Targets() []string { return a.g.targets() }

func (g *speakers) targets() []string {
	out := make([]string, 0, len(g.outs))
	for n := range g.outs {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Params of body.notify.
func (n *Notify) Params() []Param {
	return []Param{
		{Name: "message", Type: "string", Required: true, Description: "what to tell the home server and the agents (UTF-8, a few sentences)"},
		{Name: "attention", Type: "string", Enum: []string{"low", "medium", "high"}, Description: "how urgently (medium when not given; max is the e-stop's alone)"},
	}
}

// Targets of body.notify: "home".
func (n *Notify) Targets() []string { return []string{"home"} }

// Describe is what runner's capability name takes: its params and
// targets, or false when its action does not say.
func (r *Runner) Describe(name string) (params []Param, targets []string, ok bool) {
	r.mu.Lock()
	a := r.actions[name]
	r.mu.Unlock()
	d, ok := a.(Described)
	if !ok {
		return nil, nil, false
	}
	return d.Params(), d.Targets(), true
}
