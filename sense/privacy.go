package sense

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/ledger"
)

// PrivacyType is the event of every change of the body's privacy state
// (an audit record): PrivacyChanged.
const PrivacyType = "privacy.changed"

// Pause is a pause of the cameras and microphones someone asked for.
type Pause struct {
	By string `cbor:"by" json:"by"` // the subject of who asked
	// Kind is who asked: admin (a local administrator) or agent.
	Kind   string `cbor:"kind" json:"kind"`
	Reason string `cbor:"reason,omitempty" json:"reason,omitempty"`
	// UntilNS is the ledger's running time it ends at; 0: until a local
	// administrator resumes sensing.
	UntilNS int64 `cbor:"until_ns,omitempty" json:"until_running_ns,omitempty"`
}

// PrivacyState is whether the body's cameras and microphones are let go,
// and why.
type PrivacyState struct {
	// Paused: every camera and microphone is let go (closed, not read);
	// their channels are paused.
	Paused bool `cbor:"paused" json:"paused"`
	// Switch: the hardware privacy switch is on (nothing overrides it);
	// HasSwitch: the board has one.
	Switch    bool    `cbor:"switch" json:"switch"`
	HasSwitch bool    `cbor:"has_switch" json:"has_switch"`
	Pauses    []Pause `cbor:"pauses,omitempty" json:"pauses,omitempty"`
	// Devices are the channels it lets go (camera.front, audio.mic).
	Devices []string `cbor:"devices" json:"devices"`
	// Why says why it is paused, for people.
	Why string `cbor:"why,omitempty" json:"why,omitempty"`
}

// PrivacyChanged is the payload of privacy.changed: the state after the
// change, what changed, and how long letting the devices go took.
type PrivacyChanged struct {
	PrivacyState
	Cause string `cbor:"cause" json:"cause"`
	By    string `cbor:"by,omitempty" json:"by,omitempty"`
	// ReleasedUS is how long pausing the devices took, in microseconds,
	// on a change to paused.
	ReleasedUS int64 `cbor:"released_us,omitempty" json:"released_us,omitempty"`
}

// Limits of a pause.
const (
	MaxPause       = 7 * 24 * time.Hour
	maxPauseReason = 256
	// resumeRetry is how often a device that could not be opened again
	// after a pause is tried again.
	resumeRetry = 5 * time.Second
)

// Errors of privacy.
var (
	// ErrPauseInvalid: a pause's duration or reason is out of bounds.
	ErrPauseInvalid = errors.New("privacy: invalid pause")
	// ErrNotLocal: only a local administrator resumes sensing.
	ErrNotLocal = errors.New("privacy: only a local administrator resumes sensing")
)

// PrivacyDevice is a camera or microphone the privacy state lets go: its
// channel id and the stream.
type PrivacyDevice struct {
	ID string
	P  hal.Pauser
}

// PrivacyConfig is what a Privacy watches and drives.
type PrivacyConfig struct {
	Devices []PrivacyDevice
	// Switch is the board's privacy switch, on at Active; nil: none.
	Switch hal.LineIn
	Active hal.Level
	// Registry gets each device's channel paused with why, and enabled
	// again.
	Registry *body.Registry
	// Ledger records every change; Running is its running clock, which
	// a pause's duration is counted on.
	Ledger  Ledger
	Running func() time.Duration
	Log     *slog.Logger
}

// Privacy is the body's privacy state: the hardware switch, and pauses a
// local administrator or an agent asked for. While the switch is on or
// any pause lasts, every camera and microphone is paused in hal (its
// device closed, nothing read), its channel paused in the registry with
// the reason (so the policy refuses captures, privacy_paused), and the
// change recorded (privacy.changed) and told to whoever watches (the
// indicator, the uplink, the agent through the ledger). Nothing
// overrides the switch. A local administrator may pause for a time and
// resume; an agent may pause (more privacy) but never resume. Pauses
// outlive a restart (the projection "privacy"); the switch is read
// again at start.
//
// Its methods are safe for concurrent use; changes are serialised.
type Privacy struct {
	cfg PrivacyConfig

	mu     sync.Mutex // serialises changes; guards what follows
	st     PrivacyState
	failed map[string]bool // devices whose Resume failed, tried again
	watch  []func(PrivacyState)
	wake   chan struct{} // the pauses changed: Run's timer is set again
}

// NewPrivacy makes the privacy state over cfg's devices, with the pauses
// restored (those whose end passed are dropped). Nothing is paused until
// Start reads the switch.
func NewPrivacy(cfg PrivacyConfig, restored []Pause) *Privacy {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Running == nil {
		cfg.Running = func() time.Duration { return 0 }
	}
	p := &Privacy{cfg: cfg, failed: map[string]bool{}, wake: make(chan struct{}, 1)}
	p.st.HasSwitch = cfg.Switch != nil
	for _, d := range cfg.Devices {
		p.st.Devices = append(p.st.Devices, d.ID)
	}
	p.st.Pauses = slices.Clone(restored)
	return p
}

// Watch calls fn with the state at every change, and once now (call
// before Start). fn runs with the state's lock held: it must not call
// back into p, and should be quick.
func (p *Privacy) Watch(fn func(PrivacyState)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.watch = append(p.watch, fn)
	fn(p.clone())
}

// State is the privacy state now.
func (p *Privacy) State() PrivacyState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.clone()
}

func (p *Privacy) clone() PrivacyState {
	st := p.st
	st.Pauses, st.Devices = slices.Clone(st.Pauses), slices.Clone(st.Devices)
	return st
}

// Start reads the switch and applies the state (the devices paused when
// it is on or a restored pause lasts), before the sense channels read;
// l records every change from now on (nil: none is recorded).
func (p *Privacy) Start(ctx context.Context, l Ledger) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cfg.Ledger = l
	p.readSwitch()
	// Recorded when it starts paused; a body that starts sensing says so
	// in body.started.
	p.apply(ctx, "the body started", "", p.st.Switch || len(p.st.Pauses) > 0)
}

// Prepare reads the switch and, when it is on or a restored pause lasts,
// pauses the devices now, as soon as they are opened: Start records it
// later, once the ledger is there.
func (p *Privacy) Prepare() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.readSwitch()
	if p.st.Switch || len(p.st.Pauses) > 0 {
		ledger := p.cfg.Ledger
		p.cfg.Ledger = nil // nothing is recorded yet
		p.apply(context.Background(), "", "", false)
		p.cfg.Ledger = ledger
	}
}

// readSwitch reads the switch; p.mu is held. A switch that cannot be
// read is taken as on.
func (p *Privacy) readSwitch() {
	if p.cfg.Switch == nil {
		return
	}
	l, err := p.cfg.Switch.Read()
	if err != nil {
		p.cfg.Log.Error("the privacy switch cannot be read: the cameras and microphones stay paused", "err", err)
	}
	p.st.Switch = err != nil || l == p.cfg.Active
}

// Run watches the switch and the pauses' ends until ctx is done.
func (p *Privacy) Run(ctx context.Context) {
	var wg sync.WaitGroup
	if p.cfg.Switch != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.watchSwitch(ctx)
		}()
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-t.C:
			p.mu.Lock()
			p.apply(ctx, "", "", false)
			p.retryResume()
			p.mu.Unlock()
		case <-p.wake:
		}
		t.Reset(p.nextWake())
	}
}

// nextWake is how long until the next pause ends, or a failed resume
// is tried again (a minute at most).
func (p *Privacy) nextWake() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	wait := time.Minute
	if len(p.failed) > 0 {
		wait = resumeRetry
	}
	now := p.cfg.Running()
	for _, pa := range p.st.Pauses {
		if pa.UntilNS > 0 {
			wait = min(wait, max(time.Duration(pa.UntilNS)-now, 0)+time.Millisecond)
		}
	}
	return wait
}

// watchSwitch follows the switch's edges.
func (p *Privacy) watchSwitch(ctx context.Context) {
	for {
		e, err := p.cfg.Switch.WaitForEdge(ctx)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, hal.ErrHalted) {
				p.cfg.Log.Error("the privacy switch cannot be watched: the cameras and microphones are paused", "err", err)
				p.mu.Lock()
				p.st.Switch = true
				p.apply(ctx, "the privacy switch cannot be watched: "+err.Error(), "", false)
				p.mu.Unlock()
			}
			return
		}
		on := e.Level == p.cfg.Active
		p.mu.Lock()
		if on != p.st.Switch {
			p.st.Switch = on
			cause := "the privacy switch was turned off"
			if on {
				cause = "the privacy switch was turned on"
			}
			p.apply(ctx, cause, "", false)
		}
		p.mu.Unlock()
	}
}

// Pause pauses sensing for by (a subject; kind admin or agent) for d (0:
// until a local administrator resumes), with reason. A pause of by
// replaces its earlier one. It returns the state after it.
func (p *Privacy) Pause(ctx context.Context, by, kind, reason string, d time.Duration) (PrivacyState, error) {
	if d < 0 || d > MaxPause {
		return PrivacyState{}, fmt.Errorf("%w: for %v: want 0 (until resumed) up to %v", ErrPauseInvalid, d, MaxPause)
	}
	if len(reason) > maxPauseReason {
		return PrivacyState{}, fmt.Errorf("%w: a reason of %d bytes, more than %d", ErrPauseInvalid, len(reason), maxPauseReason)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	pa := Pause{By: by, Kind: kind, Reason: reason}
	if d > 0 {
		pa.UntilNS = int64(p.cfg.Running() + d)
	}
	p.st.Pauses = slices.DeleteFunc(p.st.Pauses, func(o Pause) bool { return o.By == by })
	p.st.Pauses = append(p.st.Pauses, pa)
	cause := "paused by " + by
	if d > 0 {
		cause += " for " + d.String()
	}
	if err := p.apply(ctx, cause, by, true); err != nil {
		return p.clone(), err
	}
	p.poke()
	return p.clone(), nil
}

// Resume ends every pause (never the switch) for a local administrator
// (local: the caller is one; anyone else is refused with ErrNotLocal).
// While the switch is on, sensing stays paused.
func (p *Privacy) Resume(ctx context.Context, by string, local bool) (PrivacyState, error) {
	if !local {
		return p.State(), ErrNotLocal
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.st.Pauses) == 0 {
		return p.clone(), nil
	}
	p.st.Pauses = nil
	err := p.apply(ctx, "resumed by "+by, by, true)
	p.poke()
	return p.clone(), err
}

func (p *Privacy) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// apply drops the pauses that ended, pauses or resumes the devices when
// the state changes, and records it (always when force is set, else only
// when it changed); p.mu is held. The devices are let go before
// anything is recorded: the ledger never holds the switch up.
func (p *Privacy) apply(ctx context.Context, cause, by string, force bool) error {
	now := p.cfg.Running()
	ended := slices.DeleteFunc(slices.Clone(p.st.Pauses), func(pa Pause) bool { return pa.UntilNS == 0 || time.Duration(pa.UntilNS) > now })
	if len(ended) > 0 {
		p.st.Pauses = slices.DeleteFunc(p.st.Pauses, func(pa Pause) bool { return pa.UntilNS != 0 && time.Duration(pa.UntilNS) <= now })
		var who []string
		for _, pa := range ended {
			who = append(who, pa.By)
		}
		if cause == "" {
			cause = "the pause of " + strings.Join(who, ", ") + " ended"
		}
		force = true
	}
	paused := p.st.Switch || len(p.st.Pauses) > 0
	why := p.why()
	changed := paused != p.st.Paused || why != p.st.Why
	if !changed && !force {
		return nil
	}
	var released time.Duration
	switch {
	case paused && !p.st.Paused:
		t0 := time.Now()
		for _, d := range p.cfg.Devices {
			if err := d.P.Pause(); err != nil {
				p.cfg.Log.Error("a device could not be let go for privacy", "channel", d.ID, "err", err)
			}
		}
		released = time.Since(t0)
		p.failed = map[string]bool{}
	case !paused && p.st.Paused:
		for _, d := range p.cfg.Devices {
			if err := d.P.Resume(); err != nil {
				p.failed[d.ID] = true
				p.cfg.Log.Warn("a device could not be opened again after a pause; trying again", "channel", d.ID, "err", err)
			}
		}
	}
	p.st.Paused, p.st.Why = paused, why
	if changed {
		p.setChannels(p.cfg.Devices)
	}
	for _, fn := range p.watch {
		fn(p.clone())
	}
	if cause == "" {
		cause = "unchanged"
	}
	pc := PrivacyChanged{PrivacyState: p.clone(), Cause: cause, By: by, ReleasedUS: released.Microseconds()}
	level := "info"
	if paused {
		level = "paused"
	}
	p.cfg.Log.Info("privacy", "state", level, "cause", cause, "why", why, "released", released)
	return p.record(ctx, pc)
}

// retryResume tries again to open what a resume could not; p.mu is held.
func (p *Privacy) retryResume() {
	if p.st.Paused {
		return
	}
	for _, d := range p.cfg.Devices {
		if !p.failed[d.ID] {
			continue
		}
		if err := d.P.Resume(); err == nil {
			delete(p.failed, d.ID)
			p.cfg.Log.Info("a device paused for privacy is open again", "channel", d.ID)
			p.setChannels([]PrivacyDevice{d})
		}
	}
}

// setChannels sets the channels of devs: paused with why, or enabled
// (offline while it could not be opened again); p.mu is held.
func (p *Privacy) setChannels(devs []PrivacyDevice) {
	if p.cfg.Registry == nil {
		return
	}
	for _, d := range devs {
		state, health := body.Enabled, "ok"
		switch {
		case p.st.Paused:
			state, health = body.Paused, p.st.Why
		case p.failed[d.ID]:
			state, health = body.Offline, "could not be opened again after a pause for privacy"
		}
		if err := p.cfg.Registry.Set(d.ID, state, health); err != nil && !errors.Is(err, body.ErrTransition) {
			p.cfg.Log.Error("channel state", "channel", d.ID, "err", err)
		}
	}
}

// why says why sensing is paused, "" when it is not; p.mu is held.
func (p *Privacy) why() string {
	var parts []string
	if p.st.Switch {
		parts = append(parts, "the privacy switch is on")
	}
	for _, pa := range p.st.Pauses {
		s := "paused by " + pa.By
		if pa.Reason != "" {
			s += " (" + pa.Reason + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// record appends privacy.changed; p.mu is held.
func (p *Privacy) record(ctx context.Context, pc PrivacyChanged) error {
	if p.cfg.Ledger == nil {
		return nil
	}
	payload, err := ledger.MarshalPayload(pc)
	if err != nil {
		return err
	}
	_, err = p.cfg.Ledger.Append(context.WithoutCancel(ctx), ledger.Event{ID: ledger.NewID(), Type: PrivacyType, ChannelID: "body.privacy",
		Provenance: ledger.Observed, Trust: ledger.High, Privacy: ledger.Internal, Payload: payload})
	if err != nil {
		p.cfg.Log.Error("privacy.changed could not be recorded", "err", err)
		return fmt.Errorf("privacy: the change is in force but could not be recorded: %w", err)
	}
	return nil
}

// PrivacyProjection is the projection "privacy": the pauses in force as
// the last privacy.changed left them, which a restart restores
// (RestoredPauses).
func PrivacyProjection() ledger.Projection { return privacyProjection{} }

const privacyProj = "privacy"

type privacyProjection struct{}

func (privacyProjection) Name() string    { return privacyProj }
func (privacyProjection) Types() []string { return []string{PrivacyType} }

func (privacyProjection) Apply(kv ledger.KV, e *ledger.Event) error {
	var pc PrivacyChanged
	if ledger.UnmarshalPayload(e.Payload, &pc) != nil {
		return nil
	}
	v, err := ledger.MarshalPayload(pc.Pauses)
	if err != nil {
		return err
	}
	return kv.Put([]byte("pauses"), v)
}

// RestoredPauses are the pauses the projection keeps.
func RestoredPauses(store *ledger.Store) ([]Pause, error) {
	var out []Pause
	err := store.ReadProjection(privacyProj, func(kv ledger.ReadKV) error {
		v := kv.Get([]byte("pauses"))
		if v == nil {
			return nil
		}
		return ledger.UnmarshalPayload(v, &out)
	})
	return out, err
}
