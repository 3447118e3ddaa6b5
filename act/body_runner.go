package act

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/ledger"
)

// BodyParts are what a body's runner is built over.
type BodyParts struct {
	Devices *body.Devices
	// Feedback names, by output, the GPIO input that follows it (a
	// relay's auxiliary contact).
	Feedback map[string]string
	EStop    *EStop
	Registry *body.Registry
	// Health is the self-state's level now.
	Health  func() body.Degradation
	Journal Journal
	// Clock is the body's clock, which the policy judges grants and the
	// wall clock's synchronisation by; it is required.
	Clock    Clock
	Grants   *Grants // nil: none is in force
	Settings *Settings
	DataDir  string
	// Mic verifies what the speaker plays; nil: nothing can.
	Mic *Mic
	// Evidence keeps what camera.snapshot and audio.clip capture through
	// the Lenses and Ears; nil: no capture is offered.
	Evidence Keeper
	Lenses   []*Lens
	Ears     []*Ear
	// SnapshotMaxWidth and SnapshotMaxBytes bound a snapshot; 0: the
	// defaults.
	SnapshotMaxWidth, SnapshotMaxBytes int
	// Extra are capabilities added beside the body's own (tests).
	Extra []Action
}

// NewBodyRunner builds the runner over the outputs the devices opened:
// gpio.set and gpio.pulse, light.on, light.off and light.blink on the
// board's own LEDs, each output at its kind's risk unless the
// settings raise it, with their limits per output, each verified by
// read-back and by its feedback input where one is wired, and a
// simulated twin of each for simulation mode; audio.tone and audio.play
// on the speaker, verified through the microphone where there is one;
// body.notify when the journal is the ledger; camera.snapshot and
// audio.clip on the lenses and ears, when there is an evidence store. Safety rules, rate limits
// (the admission limit per principal among them) and capability modes
// come from the settings; the e-stop cancels
// through it. A rate limiter or a capability that cannot be set up, and a
// missing Clock, are errors.
func NewBodyRunner(b BodyParts) (*Runner, error) {
	s, ds := b.Settings, b.Devices
	if b.Clock == nil {
		return nil, errors.New("act: a body's runner needs the body's clock")
	}
	var outs, lights []*GPIOOutput
	limit := func(g *GPIOOutput) {
		if st, ok := s.Outputs[g.Name]; ok {
			if st.Raised {
				g.Risk = st.Risk
			}
			g.MaxOn, g.MinInterval = st.Config.MaxOn(), st.Config.MinInterval()
		}
	}
	for _, l := range ds.Lights {
		g := &GPIOOutput{Name: l.Name, Channel: l.ID, Line: l.LED, Risk: R1}
		limit(g)
		lights = append(lights, g)
	}
	for _, o := range ds.Outs {
		g := &GPIOOutput{Name: o.Name, Channel: o.ID, Line: o.Line, Risk: OutputRisk(o.Kind)}
		limit(g)
		for _, in := range ds.Ins {
			if fb, ok := b.Feedback[o.Name]; ok && in.ID == body.ChannelID("gpio-in", fb) {
				g.Feedback, g.FeedbackActive = in.Line, in.Active
			}
		}
		outs = append(outs, g)
	}
	limiter, err := NewLimiter(s.Limits, nil)
	if err != nil {
		return nil, fmt.Errorf("act.rate_limits: %w", err)
	}
	admission, err := NewAdmission(s.Admission, nil)
	if err != nil {
		return nil, fmt.Errorf("act.rate_limits.per_principal: %w", err)
	}
	env := Environment{EStop: b.EStop, Registry: b.Registry, Leases: s.Leases, Rules: s.Rules, CapabilityModes: s.CapModes,
		Limiter: limiter, Admission: admission, Health: b.Health, Clock: b.Clock}
	if b.Grants != nil {
		env.Grants = b.Grants.All
	}
	r := NewRunner(env, b.Journal)
	actions := gpioActions(outs)
	if len(lights) > 0 {
		actions = append(actions, lightActions(lights)...)
	}
	if ds.Speaker != nil {
		name := body.ChannelName(ds.SpeakerID)
		c := s.Speaker(name)
		spk := &Speaker{Name: name, Channel: ds.SpeakerID, Out: ds.Speaker, Clips: cmp.Or(c.ClipsDir, filepath.Join(b.DataDir, "clips")),
			MaxLevel: DefaultMaxLevel, MaxClip: time.Duration(c.MaxClipMS) * time.Millisecond, Mic: b.Mic}
		if c.MaxLevelDBFS != nil {
			spk.MaxLevel = *c.MaxLevelDBFS
		}
		tone, play := NewAudioActions([]*Speaker{spk})
		actions = append(actions, tone, play)
	}
	if store, ok := b.Journal.(*ledger.Store); ok {
		actions = append(actions, NewNotify(store))
	}
	if b.Evidence != nil && len(b.Lenses) > 0 {
		actions = append(actions, NewCameraSnapshot(b.Lenses, b.Evidence, b.SnapshotMaxWidth, b.SnapshotMaxBytes))
	}
	if b.Evidence != nil && len(b.Ears) > 0 {
		actions = append(actions, NewAudioClip(b.Ears, b.Evidence))
	}
	for _, a := range append(actions, b.Extra...) {
		if err := r.Register(a); err != nil {
			return nil, err
		}
	}
	if err := registerSimulated(r, outs, gpioActions); err != nil {
		return nil, fmt.Errorf("the GPIO outputs' simulated twins: %w", err)
	}
	if err := registerSimulated(r, lights, lightActions); err != nil {
		return nil, fmt.Errorf("the lights' simulated twins: %w", err)
	}
	if b.EStop != nil {
		b.EStop.SetRunner(r, s.Leases)
	}
	return r, nil
}

// EStopTiming is the board's timing of the e-stop's second channel and
// reset button; zero values keep the defaults.
type EStopTiming struct {
	Discrepancy, MinPress, MaxPress time.Duration
}

// NewBodyEStop builds the e-stop over the lines the devices opened: it
// halts every output, the board's LEDs it took and the speaker. It returns nil when the board has
// no e-stop line (then nothing above R0 may act).
func NewBodyEStop(ds *body.Devices, t EStopTiming) (*EStop, error) {
	cfg := EStopConfig{Discrepancy: t.Discrepancy, MinPress: t.MinPress, MaxPress: t.MaxPress}
	for _, in := range ds.Ins {
		switch in.EStopLine() {
		case "main":
			cfg.Main, cfg.MainStop = in.Line, in.Active
		case "second":
			cfg.Second, cfg.SecondStop = in.Line, in.Active
		case "reset":
			cfg.Reset, cfg.ResetActive = in.Line, in.Active
		}
	}
	if cfg.Main == nil {
		return nil, nil
	}
	for _, o := range ds.Outs {
		cfg.Outputs = append(cfg.Outputs, o.Line)
	}
	for _, l := range ds.Lights {
		cfg.Outputs = append(cfg.Outputs, l.LED)
	}
	if ds.Speaker != nil {
		cfg.Speakers = append(cfg.Speakers, ds.Speaker)
	}
	return NewEStop(cfg)
}

// noJournal stands in when the ledger could not be opened: nothing whose
// record cannot be written runs.
type noJournal struct{}

func (noJournal) Append(context.Context, ...ledger.Event) ([]ledger.Result, error) {
	return nil, errors.New("the ledger is not open")
}

// NoJournal is the journal of a body whose ledger could not be opened:
// every append fails, so nothing whose record cannot be written runs.
var NoJournal Journal = noJournal{}
