package sense

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/ledger"
	"github.com/tobe-body/tobe-body/sense/motion"
	"github.com/tobe-body/tobe-body/sense/sound"
)

// Group is the sense channels a body runs: each reads one stream the
// devices opened and writes events to the ledger through its outlet. Make
// it with NewGroup, Start it, and Stop it after halting the devices.
type Group struct {
	log   *slog.Logger
	reg   *body.Registry
	clock *body.Clock

	// Cameras and Mic are the channels that read them, for a monitor
	// and for the speaker's verification; set by NewGroup, read-only.
	Cameras []GroupCamera
	Mic     *GroupMic
	// Privacy lets the cameras and the microphone go while the privacy
	// switch is on or a pause lasts; set by NewGroup, read-only.
	Privacy *Privacy

	// Envs are the environment sensors' channels, each with what it
	// measures; Controls the channels of the controls people press (GPIO
	// buttons and control input devices, never an activity device); set
	// by NewGroup, read-only.
	Envs     []GroupEnv
	Controls []GroupControl

	outlets map[string]*Outlet
	// every is each summarising channel's period, by channel id.
	every   map[string]time.Duration
	runs    []senseRun
	self    *SelfChannel
	hotplug []*HotplugChannel
	// indicator shows the privacy state on an output; nil: none.
	indicator *Indicator

	readers sync.WaitGroup // the channels' readers
	writers sync.WaitGroup // the outlets' writers
	abort   context.CancelFunc
}

// CameraZones are the cameras' channel ids, each with the names of its
// zones.
func (g *Group) CameraZones() map[string][]string {
	out := map[string][]string{}
	for _, c := range g.Cameras {
		out[c.ID] = c.Zones
	}
	return out
}

// GroupControl is a control's channel: a GPIO button (Keys false: it
// says gpio.changed, gpio.long_press and gpio.double_press) or an input
// device of the control role (Keys: input.pressed, input.released and
// input.rotated, naming the key).
type GroupControl struct {
	ID   string
	Keys bool
}

// GroupEnv is an environment sensor's channel and what it measures.
type GroupEnv struct {
	ID  string
	Has hal.EnvQuantities
}

// Every is each channel's summary period, by channel id: how often a
// camera says camera.summary, the microphone audio.level, an environment
// sensor env.reading and the self-state channel samples, whatever
// happens. A channel that does not summarise is not in it.
func (g *Group) Every() map[string]time.Duration { return maps.Clone(g.every) }

// drainTime bounds how long a stopping daemon waits for the outlets to
// write what they hold (a failing ledger would hold them forever).
const drainTime = 3 * time.Second

type senseRun struct {
	id  string
	run func(context.Context) error
}

// GroupCamera is a camera and the channel that reads it.
type GroupCamera struct {
	ID  string
	Cam hal.Camera
	Ch  *CameraChannel
	// Privacy is the class of what it sees.
	Privacy ledger.Privacy
	// Zones are the names of the zones its motion is reported in: the
	// configured ones, or motion.WholeFrame when none is.
	Zones []string
}

// GroupMic is the microphone and the channel that reads it.
type GroupMic struct {
	ID  string
	Mic hal.AudioCapture
	Ch  *MicChannel
	// Privacy is the class of what it hears; Ring how much of it the
	// channel keeps in memory for a clip.
	Privacy ledger.Privacy
	Ring    time.Duration
}

// DefaultRing is how much a microphone channel keeps of what it heard,
// in memory, unless the config says otherwise (ring_s).
const DefaultRing = 10 * time.Second

// GroupConfig is what a group needs besides the devices.
type GroupConfig struct {
	Sense    config.Sense
	DataDir  string
	Clock    *body.Clock
	Registry *body.Registry
	Log      *slog.Logger
	// The board's thermal zones and throttle source, for self-state.
	Zones                        []string
	ThrottleSource, ThrottlePath string
	// Outbox counts the events waiting for the uplink; nil: none.
	Outbox func() (uint64, error)
	// Running is the ledger's running clock, which a pause is counted
	// on, and Pauses the pauses the ledger kept (RestoredPauses).
	Running func() time.Duration
	Pauses  []Pause
	// Evidence keeps the motion snapshots the config asks for; nil: none
	// is kept.
	Evidence Keeper
	// Indicator is the output that shows whether the cameras and
	// microphones are open (on), capturing (blinking) or paused (off);
	// nil: none.
	Indicator hal.LineOut
}

// noLedger stands in when the ledger could not be opened.
type noLedger struct{}

func (noLedger) Append(context.Context, ...ledger.Event) ([]ledger.Result, error) {
	return nil, errors.New("the ledger is not open")
}

// Trust and privacy of what each kind of channel reports, until the
// config says otherwise: the body's own measurements and controls a
// person presses on the device are trusted more than what a camera or a
// microphone picks up from anyone nearby.
var channelDefaults = map[string]struct {
	trust   ledger.Level
	privacy ledger.Privacy
}{
	"gpio":     {ledger.High, ledger.Internal},
	"control":  {ledger.High, ledger.Internal},
	"activity": {ledger.Medium, ledger.Sensitive},
	"camera":   {ledger.Low, ledger.Sensitive},
	"audio":    {ledger.Low, ledger.Sensitive},
	"self":     {ledger.High, ledger.Internal},
	"env":      {ledger.High, ledger.Internal},
}

// NewGroup makes the channels for what ds opened, and the self-state
// channel, registering it.
func NewGroup(ds *body.Devices, gc GroupConfig) *Group {
	cfg, dataDir, clock, reg, log := gc.Sense, gc.DataDir, gc.Clock, gc.Registry, gc.Log
	s := &Group{log: log, reg: reg, clock: clock, outlets: map[string]*Outlet{}, every: map[string]time.Duration{}}
	outletWith := func(id, kind, privacy string) *Outlet {
		d := channelDefaults[kind]
		if pc, ok := privacyClasses[privacy]; ok {
			d.privacy = pc
		}
		o := NewOutlet(Source{Channel: id, Clock: clock, Trust: d.trust, Privacy: d.privacy}, cfg.Queue)
		s.outlets[id] = o
		return o
	}
	outlet := func(id, kind string) *Outlet { return outletWith(id, kind, "") }
	// Motion detection is the body's CPU-heavy work: it runs below
	// GOMAXPROCS, so the e-stop's reader finds a free P.
	heavy := NewCPU(HeavyWorkers())
	for _, c := range ds.Cams {
		cc := cfg.Cameras[body.ChannelName(c.ID)]
		var snaps Snapshots
		if sn := cc.Snapshots; sn != nil && sn.Enabled {
			if gc.Evidence == nil {
				log.Warn("motion snapshots are configured, but there is no evidence store (the ledger is not open): none is kept", "channel", c.ID)
			} else {
				snaps = Snapshots{Store: gc.Evidence, Lifetime: time.Duration(cmp.Or(sn.TTLHours, 24)) * time.Hour, Width: cmp.Or(sn.Width, 160),
					Config: "sense.cameras." + body.ChannelName(c.ID) + ".snapshots"}
			}
		}
		o := outletWith(c.ID, "camera", cc.Privacy)
		ch, err := NewCameraChannel(o, c.Cam, motionConfig(cc), snaps, s.onlineState(c.ID, "camera"))
		if err != nil {
			s.fail(c.ID, err)
			continue
		}
		ch.SetCPU(heavy)
		ch.SetSummary(time.Duration(cc.SummaryS) * time.Second)
		s.every[c.ID] = ch.Summary()
		s.Cameras = append(s.Cameras, GroupCamera{ID: c.ID, Cam: c.Cam, Ch: ch, Zones: ch.Zones(), Privacy: o.Source().Privacy})
		s.runs = append(s.runs, senseRun{c.ID, ch.Run})
	}
	if ds.Mic != nil {
		mc := cfg.Microphones[body.ChannelName(ds.MicID)]
		o := outletWith(ds.MicID, "audio", mc.Privacy)
		ch, err := NewMicChannel(o, ds.Mic, soundConfig(mc))
		if err != nil {
			s.fail(ds.MicID, err)
		} else {
			ring := DefaultRing
			if mc.RingS != nil {
				ring = time.Duration(*mc.RingS) * time.Second
			}
			ch.SetRing(ring)
			s.every[ds.MicID] = cmp.Or(soundConfig(mc).SummaryEvery, sound.DefaultSummaryEvery)
			s.Mic = &GroupMic{ID: ds.MicID, Mic: ds.Mic, Ch: ch, Privacy: o.Source().Privacy, Ring: ring}
			s.runs = append(s.runs, senseRun{ds.MicID, ch.Run})
		}
	}
	pc := PrivacyConfig{Registry: reg, Running: gc.Running, Log: log}
	for _, c := range s.Cameras {
		if pz, ok := c.Cam.(hal.Pauser); ok {
			pc.Devices = append(pc.Devices, PrivacyDevice{ID: c.ID, P: pz})
		}
	}
	if s.Mic != nil {
		if pz, ok := s.Mic.Mic.(hal.Pauser); ok {
			pc.Devices = append(pc.Devices, PrivacyDevice{ID: s.Mic.ID, P: pz})
		}
	}
	for _, in := range ds.Ins {
		if in.Role == PrivacyRole && pc.Switch == nil {
			pc.Switch, pc.Active = in.Line, in.Active
		}
	}
	s.Privacy = NewPrivacy(pc, gc.Pauses)
	// A camera or microphone the switch (or a pause kept from before)
	// keeps paused is let go now, not once the channels start.
	s.Privacy.Prepare()
	if gc.Indicator != nil {
		s.indicator = NewIndicator(gc.Indicator, log)
		s.Privacy.Watch(s.indicator.Privacy)
		for _, c := range s.Cameras {
			c.Ch.SetCapturing(s.indicator.Capture)
		}
		if s.Mic != nil {
			s.Mic.Ch.SetCapturing(s.indicator.Capture)
		}
	}
	for _, in := range ds.Ins {
		if in.EStop() || in.Role == PrivacyRole {
			continue // the e-stop's or the privacy switch's, not a sense channel's
		}
		c, err := NewLineChannel(outlet(in.ID, "gpio"), in.Line, LineConfig{Active: in.Active, Button: in.Role == "button",
			LongPress: ms(cfg.Buttons.LongPressMS), DoublePress: ms(cfg.Buttons.DoublePressMS)})
		if err != nil {
			s.fail(in.ID, err)
			continue
		}
		s.runs = append(s.runs, senseRun{in.ID, c.Run})
		if in.Role == "button" {
			s.Controls = append(s.Controls, GroupControl{ID: in.ID})
		}
	}
	for _, d := range ds.Inputs {
		role := Activity
		if d.Role == string(Control) {
			role = Control
		}
		c, err := NewInputChannel(outlet(d.ID, string(role)), d.Dev, InputConfig{Role: role, Window: time.Duration(cfg.Inputs.ActivityWindowS) * time.Second})
		if err != nil {
			s.fail(d.ID, err)
			continue
		}
		s.runs = append(s.runs, senseRun{d.ID, c.Run})
		if role == Control {
			s.Controls = append(s.Controls, GroupControl{ID: d.ID, Keys: true})
		}
	}
	named := map[string]bool{}
	for _, d := range ds.Inputs {
		named[d.Dev.Info().Path] = true
	}
	for _, h := range ds.Hotplug {
		c, err := NewHotplugChannel(outlet(h.ID, "activity"), h.Watcher, h.Open, func(p string) bool { return named[p] },
			InputConfig{Window: time.Duration(cfg.Inputs.ActivityWindowS) * time.Second})
		if err != nil {
			s.fail(h.ID, err)
			continue
		}
		s.hotplug = append(s.hotplug, c)
		s.runs = append(s.runs, senseRun{h.ID, c.Run})
	}

	for _, e := range ds.Envs {
		c, err := NewEnvChannel(outlet(e.ID, "env"), e.Dev, envConfig(cfg.Env), s.onlineState(e.ID, "environment sensor"))
		if err != nil {
			s.fail(e.ID, err)
			continue
		}
		s.Envs = append(s.Envs, GroupEnv{ID: e.ID, Has: e.Dev.Has()})
		s.every[e.ID] = c.cfg.Summary
		s.runs = append(s.runs, senseRun{e.ID, c.Run})
	}

	sampler := &body.Sampler{Root: "/", DataDir: dataDir, Zones: gc.Zones,
		ThrottleSource: gc.ThrottleSource, ThrottlePath: gc.ThrottlePath,
		Clock: clock, Registry: reg, Shed: s.shed, Limits: limits(cfg.Self), Outbox: gc.Outbox}
	const selfID = "body.self"
	if err := reg.Register(body.Channel{ID: selfID, Kind: "self-state", Device: "the body's own state", Driver: "Loaded", State: body.Enabled, Health: "ok"}); err != nil {
		log.Error("channel not registered", "channel", selfID, "err", err)
	}
	s.self = NewSelfChannel(outlet(selfID, "self"), sampler, time.Duration(cfg.Self.IntervalS)*time.Second)
	s.every[selfID] = time.Duration(cfg.Self.IntervalS) * time.Second
	s.self.Prime() // status has a sample from the start
	s.runs = append(s.runs, senseRun{selfID, s.self.Run})
	return s
}

var privacyClasses = map[string]ledger.Privacy{"public": ledger.Public, "internal": ledger.Internal, "sensitive": ledger.Sensitive, "restricted": ledger.Restricted}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// motionConfig maps a camera's config to the detector's; absent fields
// keep the detector's defaults, which are the schema's.
func motionConfig(c config.Camera) motion.Config {
	m := motion.Config{}
	for _, z := range c.Zones {
		mz := motion.Zone{Name: z.Name}
		for _, pt := range z.Polygon {
			mz.Polygon = append(mz.Polygon, motion.Point{X: pt[0], Y: pt[1]})
		}
		m.Zones = append(m.Zones, mz)
	}
	if c.Sensitivity != nil {
		m.Sensitivity = *c.Sensitivity
	}
	if c.MinArea != nil {
		m.MinArea = *c.MinArea
	}
	if c.MaxFPS != nil {
		m.MaxFPS = *c.MaxFPS
	}
	return m
}

func soundConfig(c config.Microphone) sound.Config {
	s := sound.Config{SummaryEvery: time.Duration(c.SummaryS) * time.Second}
	if c.LoudDBFS != nil {
		s.LoudDBFS = *c.LoudDBFS
	}
	if c.VoiceSNRDB != nil {
		s.VoiceSNR = *c.VoiceSNRDB
	}
	s.Voice = sound.VoiceDetector(c.VoiceDetector)
	if c.VoiceHangoverMS != nil {
		s.Hangover = time.Duration(*c.VoiceHangoverMS) * time.Millisecond
	}
	return s
}

func envConfig(c config.Env) EnvConfig {
	ec := EnvConfig{Every: time.Duration(c.IntervalS) * time.Second, Summary: time.Duration(c.SummaryS) * time.Second}
	for _, t := range c.Thresholds {
		th := EnvThreshold{Quantity: t.Quantity, Hysteresis: t.Hysteresis}
		switch {
		case t.Above != nil:
			th.Value, th.Above = *t.Above, true
		case t.Below != nil:
			th.Value = *t.Below
		}
		ec.Thresholds = append(ec.Thresholds, th)
	}
	return ec
}

func limits(c config.SelfState) body.Limits {
	l := body.DefaultLimits
	l.HotC, l.CriticalC = c.HotC, c.CriticalC
	l.DiskLowBytes, l.DiskCriticalBytes = uint64(c.DiskLowMB)<<20, uint64(c.DiskCriticalMB)<<20
	return l
}

// onlineState marks a channel offline while its device does not answer
// (a camera its driver reopens, a sensor that stopped answering), and
// enabled again when it does; what names the device in the log.
func (s *Group) onlineState(id, what string) func(online bool, err error) {
	return func(online bool, err error) {
		state, health := body.Enabled, "ok"
		if !online {
			state, health = body.Offline, err.Error()
			s.log.Warn(what+" offline", "channel", id, "err", err)
		} else {
			s.log.Info(what+" back", "channel", id)
		}
		if serr := s.reg.Set(id, state, health); serr != nil {
			s.log.Error("channel state", "channel", id, "err", serr)
		}
	}
}

func (s *Group) fail(id string, err error) {
	s.log.Error("sense channel not started", "channel", id, "err", err)
	if serr := s.reg.Set(id, body.Error, err.Error()); serr != nil {
		s.log.Error("channel state", "channel", id, "err", serr)
	}
}

// shed sums what every outlet shed.
func (s *Group) shed() uint64 {
	var n uint64
	for _, o := range s.outlets {
		n += o.Stats().Shed
	}
	return n
}

// PrivacyRole is the role of the board input that is the privacy switch.
const PrivacyRole = "privacy"

// Start runs every channel and its outlet's writer; l nil means the
// ledger is not open (every write fails, so outlets retry, fill and shed,
// and say so in their counts). The privacy switch is read first: a
// camera or microphone it keeps paused is never read.
func (s *Group) Start(ctx context.Context, l Ledger) {
	if l == nil {
		l = noLedger{}
	}
	s.Privacy.Start(ctx, l)
	s.readers.Add(1)
	go func() {
		defer s.readers.Done()
		s.Privacy.Run(ctx)
	}()
	if s.indicator != nil {
		s.readers.Add(1)
		go func() {
			defer s.readers.Done()
			s.indicator.Run(ctx)
		}()
	}
	// The writers outlive ctx: a stopping daemon closes the outlets and
	// lets them drain (see stop).
	wctx, abort := context.WithCancel(context.WithoutCancel(ctx))
	s.abort = abort
	for _, o := range s.outlets {
		s.writers.Add(1)
		go func() {
			defer s.writers.Done()
			o.Run(wctx, l)
		}()
	}
	for _, r := range s.runs {
		s.readers.Add(1)
		go func() {
			defer s.readers.Done()
			err := r.run(ctx)
			if err == nil || ctx.Err() != nil {
				return
			}
			s.log.Error("sense channel stopped", "channel", r.id, "err", err)
			state := body.Error
			if errors.Is(err, hal.ErrAbsent) {
				state = body.Offline
			}
			if serr := s.reg.Set(r.id, state, err.Error()); serr != nil {
				s.log.Error("channel state", "channel", r.id, "err", serr)
			}
			if o := s.outlets[r.id]; o != nil {
				o.Close() // nothing more will come from it
			}
		}()
	}
}

// Stop waits for the readers (the caller has cancelled their context and
// halted the devices), then lets the outlets write what they hold.
func (s *Group) Stop() {
	for _, h := range s.hotplug {
		h.Halt()
	}
	s.readers.Wait()
	for _, o := range s.outlets {
		o.Close()
	}
	drained := make(chan struct{})
	go func() { s.writers.Wait(); close(drained) }()
	t := time.NewTimer(drainTime)
	defer t.Stop()
	select {
	case <-drained:
	case <-t.C:
		s.log.Warn("events still queued at stop are not written", "after", drainTime, "queued", s.waiting())
		s.abort()
		<-drained
	}
	if s.abort != nil {
		s.abort()
	}
}

func (s *Group) waiting() int {
	n := 0
	for _, o := range s.outlets {
		n += o.Stats().Waiting
	}
	return n
}

// Stats lists each outlet's counts, for status.
func (s *Group) Stats() map[string]OutletStats {
	out := map[string]OutletStats{}
	for id, o := range s.outlets {
		out[id] = o.Stats()
	}
	return out
}

// Self is the latest self-state sample.
func (s *Group) Self() (body.SelfState, bool) { return s.self.Last() }
