package main

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/tobe-body/tobe-body/board"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/ledger"
	"github.com/tobe-body/tobe-body/sense"
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
func newSenses(ds *devices, p *board.Profile, dataDir string, clock *body.Clock, store *ledger.Store, reg *body.Registry, log *slog.Logger) *senses {
	s := &senses{log: log, reg: reg, clock: clock, outlets: map[string]*sense.Outlet{}}
	outlet := func(id, kind string) *sense.Outlet {
		d := channelDefaults[kind]
		o := sense.NewOutlet(sense.Source{Channel: id, Clock: clock, Trust: d.trust, Privacy: d.privacy}, 0)
		s.outlets[id] = o
		return o
	}
	for _, in := range ds.ins {
		switch in.role {
		case board.RoleEStop, board.RoleEStopSecond, board.RoleEStopReset:
			continue // the e-stop's, not a sense channel's
		}
		c, err := sense.NewLineChannel(outlet(in.id, "gpio"), in.line, sense.LineConfig{Active: in.active, Button: in.role == "button"})
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
		c, err := sense.NewInputChannel(outlet(d.id, string(role)), d.dev, sense.InputConfig{Role: role})
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
		c, err := sense.NewHotplugChannel(outlet(h.id, "activity"), h.w, h.open, func(p string) bool { return named[p] }, sense.InputConfig{})
		if err != nil {
			s.fail(h.id, err)
			continue
		}
		s.hotplug = append(s.hotplug, c)
		s.runs = append(s.runs, senseRun{h.id, c.Run})
	}

	sampler := &body.Sampler{Root: "/", DataDir: dataDir, Zones: p.Thermal.Zones,
		ThrottleSource: p.Thermal.Throttle.Source, ThrottlePath: p.Thermal.Throttle.Path,
		Clock: clock, Registry: reg, Shed: s.shed, Limits: body.DefaultLimits}
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
	s.self = sense.NewSelfChannel(outlet(selfID, "self"), sampler, 0)
	s.self.Prime() // status has a sample from the start
	s.runs = append(s.runs, senseRun{selfID, s.self.Run})
	return s
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
