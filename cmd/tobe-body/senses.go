package main

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/tobe-body/tobe-body/board"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/ledger"
	"github.com/tobe-body/tobe-body/sense"
	"github.com/tobe-body/tobe-body/sense/motion"
	"github.com/tobe-body/tobe-body/sense/sound"
)

// senses are the sense channels the daemon runs: each reads one stream the
// devices opened and writes events to the ledger through its outlet.
type senses struct {
	log   *slog.Logger
	reg   *body.Registry
	clock *body.Clock

	outlets map[string]*sense.Outlet
	runs    []senseRun
	self    *sense.SelfChannel
	hotplug []*sense.HotplugChannel
	cams    []senseCamera
	mic     *senseMic
	snaps   []sense.Snapshots // snapshot directories to sweep

	readers sync.WaitGroup // the channels' readers
	writers sync.WaitGroup // the outlets' writers
	abort   context.CancelFunc
}

// drainTime bounds how long a stopping daemon waits for the outlets to
// write what they hold (a failing ledger would hold them forever).
const drainTime = 3 * time.Second

type senseRun struct {
	id  string
	run func(context.Context) error
}

type senseCamera struct {
	id  string
	cam hal.Camera
	ch  *sense.CameraChannel
}

type senseMic struct {
	id  string
	mic hal.AudioCapture
	ch  *sense.MicChannel
}

// noLedger stands in when the ledger could not be opened: every write
// fails, so outlets retry, fill and shed, and say so in their counts.
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
}

// newSenses makes the channels for what ds opened.
func newSenses(ds *devices, p *board.Profile, cfg config.Sense, dataDir string, clock *body.Clock, store *ledger.Store, reg *body.Registry, log *slog.Logger) *senses {
	s := &senses{log: log, reg: reg, clock: clock, outlets: map[string]*sense.Outlet{}}
	outletWith := func(id, kind, privacy string) *sense.Outlet {
		d := channelDefaults[kind]
		if pc, ok := privacyClasses[privacy]; ok {
			d.privacy = pc
		}
		o := sense.NewOutlet(sense.Source{Channel: id, Clock: clock, Trust: d.trust, Privacy: d.privacy}, cfg.Queue)
		s.outlets[id] = o
		return o
	}
	outlet := func(id, kind string) *sense.Outlet { return outletWith(id, kind, "") }
	// Motion detection is the body's CPU-heavy work: it runs below
	// GOMAXPROCS, so the e-stop's reader finds a free P.
	heavy := sense.NewCPU(sense.HeavyWorkers())
	for _, c := range ds.cams {
		cc := cfg.Cameras[strings.TrimPrefix(c.id, "camera.")]
		var snaps sense.Snapshots
		if sn := cc.Snapshots; sn != nil && sn.Enabled {
			snaps = sense.Snapshots{Dir: filepath.Join(dataDir, "evidence", c.id), TTL: time.Duration(cmp.Or(sn.TTLHours, 24)) * time.Hour, Width: cmp.Or(sn.Width, 160)}
			s.snaps = append(s.snaps, snaps)
		}
		ch, err := sense.NewCameraChannel(outletWith(c.id, "camera", cc.Privacy), c.cam, motionConfig(cc), snaps, s.cameraState(c.id))
		if err != nil {
			s.fail(c.id, err)
			continue
		}
		ch.SetCPU(heavy)
		s.cams = append(s.cams, senseCamera{id: c.id, cam: c.cam, ch: ch})
		s.runs = append(s.runs, senseRun{c.id, ch.Run})
	}
	if ds.mic != nil {
		mc := cfg.Microphones[strings.TrimPrefix(ds.micID, "audio.")]
		ch, err := sense.NewMicChannel(outletWith(ds.micID, "audio", mc.Privacy), ds.mic, soundConfig(mc))
		if err != nil {
			s.fail(ds.micID, err)
		} else {
			s.mic = &senseMic{id: ds.micID, mic: ds.mic, ch: ch}
			s.runs = append(s.runs, senseRun{ds.micID, ch.Run})
		}
	}
	for _, in := range ds.ins {
		switch in.role {
		case board.RoleEStop, board.RoleEStopSecond, board.RoleEStopReset:
			continue // the e-stop's, not a sense channel's
		}
		c, err := sense.NewLineChannel(outlet(in.id, "gpio"), in.line, sense.LineConfig{Active: in.active, Button: in.role == "button",
			LongPress: ms(cfg.Buttons.LongPressMS), DoublePress: ms(cfg.Buttons.DoublePressMS)})
		if err != nil {
			s.fail(in.id, err)
			continue
		}
		s.runs = append(s.runs, senseRun{in.id, c.Run})
	}
	for _, d := range ds.inputs {
		role := sense.Activity
		if d.role == string(sense.Control) {
			role = sense.Control
		}
		c, err := sense.NewInputChannel(outlet(d.id, string(role)), d.dev, sense.InputConfig{Role: role, Window: time.Duration(cfg.Inputs.ActivityWindowS) * time.Second})
		if err != nil {
			s.fail(d.id, err)
			continue
		}
		s.runs = append(s.runs, senseRun{d.id, c.Run})
	}
	named := map[string]bool{}
	for _, d := range ds.inputs {
		named[d.dev.Info().Path] = true
	}
	for _, h := range ds.hotplug {
		c, err := sense.NewHotplugChannel(outlet(h.id, "activity"), h.w, h.open, func(p string) bool { return named[p] },
			sense.InputConfig{Window: time.Duration(cfg.Inputs.ActivityWindowS) * time.Second})
		if err != nil {
			s.fail(h.id, err)
			continue
		}
		s.hotplug = append(s.hotplug, c)
		s.runs = append(s.runs, senseRun{h.id, c.Run})
	}

	sampler := &body.Sampler{Root: "/", DataDir: dataDir, Zones: p.Thermal.Zones,
		ThrottleSource: p.Thermal.Throttle.Source, ThrottlePath: p.Thermal.Throttle.Path,
		Clock: clock, Registry: reg, Shed: s.shed, Limits: limits(cfg.Self)}
	if store != nil {
		sampler.Outbox = func() (uint64, error) {
			st, err := store.Stats()
			return st.OutboxRows, err
		}
	}
	const selfID = "body.self"
	if err := reg.Register(body.Channel{ID: selfID, Kind: "self-state", Device: "the body's own state", Driver: string(board.Loaded), State: body.Enabled, Health: "ok"}); err != nil {
		log.Error("channel not registered", "channel", selfID, "err", err)
	}
	s.self = sense.NewSelfChannel(outlet(selfID, "self"), sampler, time.Duration(cfg.Self.IntervalS)*time.Second)
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
	return s
}

func limits(c config.SelfState) body.Limits {
	l := body.DefaultLimits
	l.HotC, l.CriticalC = c.HotC, c.CriticalC
	l.DiskLowBytes, l.DiskCriticalBytes = uint64(c.DiskLowMB)<<20, uint64(c.DiskCriticalMB)<<20
	return l
}

// cameraState marks a camera's channel offline while its driver reopens
// it, and enabled again when frames come.
func (s *senses) cameraState(id string) sense.CameraState {
	return func(online bool, err error) {
		state, health := body.Enabled, "ok"
		if !online {
			state, health = body.Offline, err.Error()
			s.log.Warn("camera offline", "channel", id, "err", err)
		} else {
			s.log.Info("camera back", "channel", id)
		}
		if serr := s.reg.Set(id, state, health); serr != nil {
			s.log.Error("channel state", "channel", id, "err", serr)
		}
	}
}

func (s *senses) fail(id string, err error) {
	s.log.Error("sense channel not started", "channel", id, "err", err)
	if serr := s.reg.Set(id, body.Error, err.Error()); serr != nil {
		s.log.Error("channel state", "channel", id, "err", serr)
	}
}

// shed sums what every outlet shed.
func (s *senses) shed() uint64 {
	var n uint64
	for _, o := range s.outlets {
		n += o.Stats().Shed
	}
	return n
}

// start runs every channel and its outlet's writer.
func (s *senses) start(ctx context.Context, l sense.Ledger) {
	if l == nil {
		l = noLedger{}
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
	s.readers.Add(1)
	go func() {
		defer s.readers.Done()
		s.clock.Run(ctx, clockEvery)
	}()
	if len(s.snaps) > 0 {
		s.readers.Add(1)
		go func() {
			defer s.readers.Done()
			s.sweep(ctx)
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

// stop waits for the readers (the caller has cancelled their context and
// halted the devices), then lets the outlets write what they hold.
func (s *senses) stop() {
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

func (s *senses) waiting() int {
	n := 0
	for _, o := range s.outlets {
		n += o.Stats().Waiting
	}
	return n
}

// stats lists each outlet's counts, for status.
func (s *senses) stats() map[string]sense.OutletStats {
	out := map[string]sense.OutletStats{}
	for id, o := range s.outlets {
		out[id] = o.Stats()
	}
	return out
}

// sweep deletes expired snapshots every few minutes until ctx ends.
func (s *senses) sweep(ctx context.Context) {
	t := time.NewTicker(5 * time.Minute)
	defer t.Stop()
	for {
		for _, sn := range s.snaps {
			if n, err := sense.SweepSnapshots(sn.Dir, sn.TTL, time.Now()); err != nil {
				s.log.Warn("snapshot sweep", "dir", sn.Dir, "err", err)
			} else if n > 0 {
				s.log.Info("snapshots expired", "dir", sn.Dir, "removed", n)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
