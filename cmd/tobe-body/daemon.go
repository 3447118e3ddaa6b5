package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/user"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/admin"
	"github.com/tobe-body/tobe-body/awareness/agent"
	"github.com/tobe-body/tobe-body/awareness/control/gate"
	"github.com/tobe-body/tobe-body/awareness/control/sched"
	"github.com/tobe-body/tobe-body/awareness/control/wait"
	"github.com/tobe-body/tobe-body/awareness/control/world"
	"github.com/tobe-body/tobe-body/board"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/body/evidence"
	"github.com/tobe-body/tobe-body/body/uplink"
	"github.com/tobe-body/tobe-body/cmd/tobe-body/internal/cli"
	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/ledger"
	"github.com/tobe-body/tobe-body/sense"
)

// testActions are capabilities a test adds to the daemon's runner; no
// board has an R3 capability, and the approval commands need one to be
// tested whole. Nil outside tests.
var testActions []act.Action

// daemon is the body while it runs: it starts its components in one
// explicit order (start) and stops them in the reverse order (stop).
// Every component's stop is pushed when it starts; every goroutine it
// owns is started by spawn, which pushes its cancel-and-join.
type daemon struct {
	log     *slog.Logger
	started time.Time
	stops   []func()
	// What the watchdog asks besides the main loop, and what trips the
	// e-stop when it finds the body stuck (nil without an e-stop).
	watched []*watched
	trip    func(cause string)
	// fault, in a build with the labfaults tag, blocks the main loop.
	fault <-chan struct{}
}

// onStop pushes what stops a component that started.
func (d *daemon) onStop(f func()) { d.stops = append(d.stops, f) }

// spawn runs f in a goroutine until its own context ends; stopping it
// cancels that context and waits for f to return. The goroutine, and
// every one it starts, carries the profiler label part=name, so a
// goroutine profile names the part each belongs to.
func (d *daemon) spawn(name string, f func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { pprof.Do(ctx, pprof.Labels("part", name), f) })
	d.onStop(func() {
		cancel()
		wg.Wait()
	})
}

// stop stops everything that started, the last started first.
func (d *daemon) stop() {
	for i := len(d.stops) - 1; i >= 0; i-- {
		d.stops[i]()
	}
	d.stops = nil
}

func runDaemon(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	var c cli.Common
	fs := cli.NewFlagSet("run", stderr, &c, false)
	if _, err := cli.Parse(fs, args, 0); err != nil {
		return err
	}
	cfg, err := c.LoadConfig()
	if err != nil {
		return err
	}
	d := &daemon{log: body.NewLogger(stderr, cfg.Log.Format, cfg.Log.SlogLevel(), os.Getenv), started: time.Now()}
	defer d.stop()
	mon, err := d.start(ctx, cfg, stdout)
	if err != nil {
		return err
	}
	d.heapProfile()
	probes := make(chan chan struct{}, 1)
	d.startWatchdog(cfg.DataDir, probes)
	return d.loop(ctx, cfg.Monitor.Interval(), cfg.Monitor.Prints(isTerminal(stdout)), mon, probes)
}

// start brings the body up, in this order: the data directory's lock and
// identity; the devices (outputs at their safe levels before anything
// reads the ledger); the ledger; the sense channels; the e-stop, its
// latch restored and its watcher running; the act settings, the grants
// and the runner, with what was left running recorded; the people's
// controls; the readers; the operation table on the admin socket; then
// the agent's socket and the gate; once ready, the check of the ledger's
// every page. Each phase returns what the next ones need.
func (d *daemon) start(ctx context.Context, cfg *config.Loaded, stdout io.Writer) (*sense.Monitor, error) {
	h, err := d.openHost(cfg)
	if err != nil {
		return nil, err
	}
	wm, err := worldModel(h.profile, &cfg.Config)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	rec := d.openLedger(cfg, h, wm)
	d.startWorld(ctx, rec.store, rec.deriver, d.log)
	relay, err := d.startUplink(cfg.MQTT, cfg.Ledger, h.id, rec.store, d.log)
	if err != nil {
		return nil, err
	}
	senses, err := d.startSenses(ctx, cfg, h, rec)
	if err != nil {
		return nil, err
	}
	estop, err := d.startEStop(cfg, h, rec)
	if err != nil {
		return nil, err
	}
	a, err := d.startAct(cfg, h, rec, senses, estop)
	if err != nil {
		return nil, err
	}
	watch, err := d.restoreControls(ctx, a, rec.store)
	if err != nil {
		return nil, err
	}
	mon, startSeq := d.startReaders(h, rec.store, senses, estop, watch, stdout)
	if err := d.startStates(relay, rec.store, estop, senses, a, cfg, h, rec.world, startSeq); err != nil {
		return nil, err
	}
	srv, err := d.serveAdmin(cfg, h, rec, relay, senses, estop, a, startSeq)
	if err != nil {
		return nil, err
	}
	if err := d.startAgentAndGate(cfg, srv, a.runner, rec.store); err != nil {
		return nil, err
	}
	d.ready(cfg, h, rec.store, srv.sock)
	d.checkLedger(rec.store, estop)
	return mon, nil
}

// host is what the body stands on: its data directory, locked; its
// identity; the board, its devices and their channels; the clock.
type host struct {
	dataDir string
	id      body.Identity
	profile *board.Profile
	why     string // how the profile was chosen
	drivers hal.Drivers
	reg     *body.Registry
	ds      *body.Devices
	clock   *body.Clock
}

// openHost takes the data directory (made if need be, refused when
// another user could change it, locked against a second daemon), loads
// or makes the identity, resolves the board and opens its devices, and
// makes the body's clock.
func (d *daemon) openHost(cfg *config.Loaded) (*host, error) {
	log := d.log
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	if err := checkDataDir(cfg.DataDir); err != nil {
		return nil, err
	}
	release, err := lockData(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	d.onStop(release)
	h := &host{dataDir: cfg.DataDir}
	id, created, err := body.LoadIdentity(cfg.DataDir, d.started)
	if err != nil {
		return nil, err
	}
	h.id = id
	if created {
		log.Info("new identity", "body_id", id.BodyID, "agent_id", id.AgentID, "file", filepath.Join(cfg.DataDir, body.IdentityFile))
	}
	if h.profile, h.why, err = cli.ResolveBoard(&cfg.Config); err != nil {
		return nil, err
	}
	var finder board.Finder
	h.drivers, finder = cli.DriversFor(h.profile, cfg.Sim)
	h.reg = body.NewRegistry(time.Now)
	h.ds = body.OpenDevices(h.profile, h.drivers, finder, h.reg, log)
	d.onStop(func() {
		if err := h.ds.Close(); err != nil {
			log.Error("closing devices", "err", err)
		}
	})
	// The body's clock: monotonic times to UTC, the boot, whether the
	// wall clock is synchronised; measured again every minute and at once
	// when the wall clock is set, each setting recorded with its size.
	if h.clock, err = body.NewClock(); err != nil {
		return nil, err
	}
	return h, nil
}

// ledgerOpened is the ledger as the body opened it.
type ledgerOpened struct {
	store   *ledger.Store // nil: it could not be opened
	opts    ledger.Options
	safety  string               // what the status says: "normal", or why the body is latched
	world   *world.Model         // the entities the ledger's deriver keeps
	deriver *world.Deriver       // the deriver that keeps them
	stepped <-chan time.Duration // the wall clock's steps, for the grants
	// evidence is the evidence store; nil when the ledger (or the store)
	// could not be opened.
	evidence *evidence.Store
}

// openLedger opens the ledger. If it cannot be opened the body still
// senses and answers, but latched safe: nothing that acts may run
// without its record. The clock's steps are watched from here on.
func (d *daemon) openLedger(cfg *config.Loaded, h *host, wm *world.Model) *ledgerOpened {
	log := d.log
	rec := &ledgerOpened{safety: "normal", world: wm}
	var err error
	rec.opts, err = body.LedgerOptions(cfg.Ledger, cfg.DataDir, h.id, log, awareness.Projections()...)
	if err == nil {
		// What the body senses becomes what it knows of its
		// surroundings in the same transaction.
		rec.deriver = &world.Deriver{Model: wm}
		rec.opts.Derivers = []ledger.Deriver{rec.deriver}
		rec.opts.RetainEvery = time.Duration(cfg.Ledger.RetentionIntervalMin) * time.Minute
		rec.opts.Stamp = h.clock.LedgerStamp // audit records carry the boot, the monotonic time and the uncertainty
		// With no uplink nothing is queued for one; one that starts gets
		// the backlog asked for, not the whole history.
		rec.opts.NoOutbox = !cfg.MQTT.Enabled
		rec.opts.OutboxBacklog = time.Duration(cfg.MQTT.BacklogH) * time.Hour
		rec.store, err = ledger.Open(rec.opts)
	}
	store := rec.store
	switch {
	case err != nil:
		rec.safety = "latched: the ledger cannot be opened: " + err.Error()
		log.Error("ledger unavailable; starting latched safe", "err", err)
	case store.Damage() != nil:
		rec.safety = "latched: " + store.Damage().Error()
	default:
		log.Info("ledger open", "path", rec.opts.Path, "closed_cleanly", store.ClosedCleanly())
	}
	if store != nil {
		d.onStop(func() {
			if err := store.Close(); err != nil {
				log.Warn("ledger close: the next start reads the whole file", "err", err)
			}
		})
		d.watch("the ledger's writer", store.Alive)
	}
	d.fault = d.labFaults(store)
	// Each step is logged and recorded, and handed on to the grants,
	// whose expiries it may have reached.
	stepped := make(chan time.Duration, 1)
	rec.stepped = stepped
	d.spawn("clock", body.ClockSteps{Clock: h.clock, Store: store, Log: log, Stepped: stepped}.Run)
	return rec
}

// startSenses makes the sense channels (not yet reading) and the
// notify channel, seals the registry, and records that the body started.
func (d *daemon) startSenses(ctx context.Context, cfg *config.Loaded, h *host, rec *ledgerOpened) (*sense.Group, error) {
	store, profile := rec.store, h.profile
	gc := sense.GroupConfig{Sense: cfg.Sense, DataDir: cfg.DataDir, Clock: h.clock, Registry: h.reg, Log: d.log,
		Zones: profile.Thermal.Zones, ThrottleSource: profile.Thermal.Throttle.Source, ThrottlePath: profile.Thermal.Throttle.Path}
	if store != nil {
		gc.Outbox = func() (uint64, error) {
			st, err := store.Stats()
			return st.OutboxRows, err
		}
		// Pauses of sensing outlive a restart; their ends are on the
		// ledger's running clock.
		gc.Running = store.Running
		pauses, err := sense.RestoredPauses(store)
		if err != nil {
			d.log.Error("the pauses of sensing cannot be read: sensing starts paused until a local administrator resumes it", "err", err)
			pauses = []sense.Pause{{By: "body", Kind: "admin", Reason: "the pauses kept in the ledger could not be read"}}
		}
		gc.Pauses = pauses
		rec.evidence = d.openEvidence(cfg.Evidence, cfg.DataDir, store)
		if rec.evidence != nil {
			gc.Evidence = rec.evidence
		}
		if err := h.reg.Register(body.Channel{ID: "body.notify", Kind: "notify", Device: "events for the home server and the agent",
			Driver: string(board.Loaded), State: body.Enabled, Health: "ok"}); err != nil {
			return nil, fmt.Errorf("channel body.notify: %w", err)
		}
	}
	if id := cfg.Sense.Privacy.Indicator; id != "" {
		out, err := h.ds.TakeOutput(id)
		if err != nil {
			return nil, fmt.Errorf("config: sense.privacy.indicator: %w", err)
		}
		gc.Indicator = out
		if err := h.reg.Set(id, body.Enabled, "the privacy indicator: the body's own, no action drives it"); err != nil {
			d.log.Warn("channel state", "channel", id, "err", err)
		}
	}
	senses := sense.NewGroup(h.ds, gc)
	h.reg.Seal()
	if store != nil {
		p, _ := ledger.MarshalPayload(map[string]any{"board": profile.Name, "drivers": h.drivers.Name, "version": version,
			"channels": len(h.reg.Snapshot()), "safety": rec.safety})
		if _, err := store.Append(ctx, ledger.Event{Type: "body.started", Provenance: ledger.Observed, Payload: p}); err != nil {
			d.log.Error("ledger append", "err", err)
		}
	}
	return senses, nil
}

// startEStop starts the e-stop, watching from here on: its latch
// survives a restart, and act says why it starts latched (the cmd reads
// only the watchdog's note). Nil without an e-stop line. (A file as
// Close left it was opened with a quick check: the rest of it is read
// once the body is ready, checkLedger, and damage found then latches the
// e-stop as damage found at open would have.)
func (d *daemon) startEStop(cfg *config.Loaded, h *host, rec *ledgerOpened) (*act.EStop, error) {
	log, store := d.log, rec.store
	estop, err := act.NewBodyEStop(h.ds, act.EStopTiming(h.profile.EStopTiming()))
	if err != nil {
		return nil, err
	}
	if estop != nil {
		if why := act.WhyLatchedAtStart(store, stuckLastRun(cfg.DataDir)); why != "" {
			estop.LatchAtStart(why)
		}
		c := estop.Check()
		log.Info("e-stop checked", "verified", c.Verified, "latched", c.Latched, "main", c.Main, "why", c.Why)
		// The recorder first, so it stops after the watcher and writes
		// what the watcher did to the last.
		var j act.Journal
		if store != nil {
			j = clearsStuckNote{Journal: store, path: filepath.Join(cfg.DataDir, stuckNote), log: log}
		}
		d.spawn("e-stop recorder", func(ctx context.Context) { act.RecordEStop(ctx, estop, j, h.clock, log) })
		d.spawn("e-stop", func(ctx context.Context) {
			if err := estop.Run(ctx); err != nil {
				log.Error("e-stop watcher", "err", err)
			}
		})
		d.watch("the e-stop", estop.Alive)
		d.trip = func(cause string) { estop.TripNow(cause) }
	} else {
		log.Warn("this board has no e-stop line: nothing above read-only may act")
	}
	return estop, nil
}

// checkLedger reads every page of the ledger's file in the background,
// once the body is up: on an old ledger that is hundreds of megabytes
// through the page cache, which the start does not wait for or share the
// disk with. Damage it finds trips the e-stop; the next start moves the
// file aside.
func (d *daemon) checkLedger(store *ledger.Store, estop *act.EStop) {
	if store == nil {
		return
	}
	log := d.log
	d.spawn("ledger check", func(ctx context.Context) {
		err := store.CheckAll(ctx)
		switch {
		case errors.Is(err, ledger.ErrDamaged):
			log.Error("the ledger is damaged; the next start moves it aside", "err", err)
			if estop != nil {
				estop.TripNow("the ledger is damaged: " + err.Error())
			}
		case err != nil && ctx.Err() == nil:
			log.Warn("the ledger's check did not finish", "err", err)
		}
	})
}

// acting is what acts: the act section as checked, the grants (nil when
// they cannot be read), the runner and the clock it reads.
type acting struct {
	settings *act.Settings
	grants   *act.Grants
	runner   *act.Runner
	clock    act.Clock
	evidence *evidence.Store // nil without a ledger
}

// startAct checks the act section against this board and its channels,
// loads the grants and starts the runner, the only path to side effects,
// and the grants' expiries.
func (d *daemon) startAct(cfg *config.Loaded, h *host, rec *ledgerOpened, senses *sense.Group, estop *act.EStop) (*acting, error) {
	log, store := d.log, rec.store
	acts, err := act.NewSettings(cfg.Act, body.FactsOf(h.profile), h.reg)
	if err != nil {
		return nil, err
	}
	a := &acting{settings: acts, clock: h.clock}
	journal := act.NoJournal
	if store != nil {
		journal = store
		if a.grants, err = act.LoadGrants(store, h.clock); err != nil {
			log.Error("grants cannot be read: none is in force and the grant calls are refused", "err", err)
			a.grants = nil
		}
		a.evidence = rec.evidence
	}
	parts := act.BodyParts{Devices: h.ds, Feedback: h.profile.Feedback(), EStop: estop, Registry: h.reg,
		Health: func() body.Degradation {
			if st, ok := senses.Self(); ok {
				return st.Level
			}
			return body.LevelCritical
		},
		Journal: journal, Clock: h.clock, Grants: a.grants, Settings: acts, DataDir: cfg.DataDir, Mic: speakerMic(h.ds, senses), Extra: testActions}
	if a.evidence != nil {
		parts.Evidence, parts.Lenses, parts.Ears = a.evidence, lenses(senses), ears(senses)
		parts.SnapshotMaxWidth, parts.SnapshotMaxBytes = cfg.Evidence.SnapshotMaxWidth, cfg.Evidence.SnapshotMaxKB<<10
	}
	a.runner, err = act.NewBodyRunner(parts)
	if err != nil {
		return nil, err
	}
	if err := acts.CheckCapabilities(a.runner); err != nil {
		return nil, err
	}
	d.spawn("runner", a.runner.Run) // what waits for approval too long expires
	if grants := a.grants; grants != nil {
		// Expiries are found every minute and right after a step of the
		// wall clock, and each is recorded once (grant.expired).
		d.spawn("grants", func(ctx context.Context) {
			grants.Run(ctx, time.Minute, rec.stepped, func(gs []act.Grant, err error) {
				for _, g := range gs {
					log.Warn("grant expired", "id", g.ID, "subject", g.Subject, "by", g.ExpiredBy, "early", g.EndedEarly)
				}
				if err != nil {
					log.Error("a grant's expiry could not be recorded", "err", err)
				}
			})
		})
	}
	return a, nil
}

// restoreControls starts the people's controls: a press takes their
// resources over, and a hold survives a restart. What was left running
// when the body stopped is recorded unknown, never run again. Nothing of
// it without a ledger (a nil watch).
func (d *daemon) restoreControls(ctx context.Context, a *acting, store *ledger.Store) (*act.TakeoverWatch, error) {
	if store == nil {
		return nil, nil
	}
	log := d.log
	tk, err := act.NewTakeover(a.settings.Controls, a.settings.Leases, a.runner, store, func(err error) { log.Error("a person's control", "err", err) })
	if err != nil {
		return nil, err
	}
	d.onStop(func() { tk.Close() })
	watch := act.NewTakeoverWatch(tk, log)
	held, err := act.HeldAtStop(store)
	if err != nil {
		log.Error("the people's holds cannot be read: every one is taken as in force", "err", err)
		held = tk.Controls()
	}
	for _, ctrl := range held {
		if err := tk.Resume(ctrl); err != nil {
			log.Error("a person's hold not resumed", "control", ctrl, "err", err)
		} else {
			log.Warn("a person's hold from before the restart is in force", "control", ctrl)
		}
	}
	if ids, err := a.runner.Recover(ctx, store); err != nil {
		log.Error("actions left running could not be reconciled", "err", err)
	} else if len(ids) > 0 {
		log.Warn("actions left running when the body stopped are marked unknown, not run again", "actions", ids)
	}
	return watch, nil
}

// startReaders starts the readers: what the body sees goes to the ledger
// from here, after startSeq, its last event now. The senses stop after
// their devices halt (that unblocks readers waiting on a device), and
// write what they saw before the body says it stopped.
func (d *daemon) startReaders(h *host, store *ledger.Store, senses *sense.Group, estop *act.EStop, watch *act.TakeoverWatch, stdout io.Writer) (*sense.Monitor, uint64) {
	var startSeq uint64
	var sink sense.Ledger
	if store != nil {
		if st, err := store.Stats(); err == nil {
			startSeq = st.LastSeq
		}
		sink = store // what the body senses shares commits (ledger.telemetry_commit_ms): sense.GroupedLedger
		d.onStop(func() {
			p, _ := ledger.MarshalPayload(map[string]any{"uptime_s": time.Since(d.started).Seconds()})
			if _, err := store.Append(context.Background(), ledger.Event{Type: "body.stopped", Provenance: ledger.Observed, Payload: p}); err != nil {
				d.log.Error("ledger append", "err", err)
			}
		})
	}
	rctx, stopReaders := context.WithCancel(context.Background())
	senses.Start(rctx, sink)
	d.onStop(func() {
		stopReaders()
		h.ds.Halt()
		senses.Stop()
	})
	var estopLine func() string
	if estop != nil {
		estopLine = func() string { return estop.Status().String() }
	}
	mon := sense.NewMonitor(h.ds, senses, estopLine, stdout)
	if store != nil {
		d.spawn("monitor", func(ctx context.Context) { mon.Follow(ctx, store, startSeq) })
		d.spawn("takeover", func(ctx context.Context) {
			watch.Start(ctx, store, startSeq)
			<-ctx.Done()
			watch.Wait()
		})
	}
	return mon, startSeq
}

// serving is what answers outside the body: the operation table, on the
// admin socket at sock, and what the agent is told (the observer) and
// when (the gate: nil without a ledger).
type serving struct {
	table    *awareness.Table
	observer *awareness.Observer
	gate     *gate.Gate
	parts    *awareness.Parts
	sock     string
}

// serveAdmin makes the operation table, the gate and the observer, takes
// the broker's commands through the table and runs the relay, and serves
// the table on the admin socket, last: the sockets stop taking calls
// first.
func (d *daemon) serveAdmin(cfg *config.Loaded, h *host, rec *ledgerOpened, relay *uplink.Relay, senses *sense.Group, estop *act.EStop, a *acting, startSeq uint64) (*serving, error) {
	log, store := d.log, rec.store
	parts := &awareness.Parts{Info: awareness.Status{Body: cfg.Body.Name, BodyID: h.id.BodyID, AgentID: h.id.AgentID,
		Board: h.profile.Name, BoardDesc: h.profile.Description, BoardFrom: h.profile.Source, BoardWhy: h.why,
		Drivers: h.drivers.Name, Version: version, DataDir: cfg.DataDir, Config: cfg.Layers, Safety: rec.safety,
		Ledger: awareness.LedgerStatus{Path: rec.opts.Path}},
		Started: d.started, Registry: h.reg, Self: senses.Self, Senses: senses.Stats, EStop: estop, Runner: a.runner, Grants: a.grants, Store: store, Relay: relay,
		World: rec.world, Evidence: a.evidence, Privacy: senses.Privacy}
	// What the agent is told, and when: the observation rules are the
	// gate's default rules, their texts the observations' words.
	observer, err := awareness.NewObserver(append(slices.Clone(cfg.Agent.Observations.Rules), awareness.DefaultObservationRules...))
	if err != nil {
		return nil, fmt.Errorf("config: agent.observations.rules: %w", err)
	}
	// The control plane's gate: what the agent's wait conditions want of
	// what the body records, and whether it is worth waking the agent.
	var gt *gate.Gate
	if store != nil {
		classes := ledger.DefaultClasses()
		if rec.opts.Classes != nil {
			classes = *rec.opts.Classes
		}
		if gt, err = gate.FromConfig(store, cfg.Gate, observer.Defaults(), classes); err != nil {
			return nil, err
		}
		gt.Log, gt.From = log, startSeq
		parts.StaleAfter = time.Duration(cfg.Gate.StaleAfterS) * time.Second
		if err := gt.Load(); err != nil {
			log.Error("the gate cannot read its state: no wait condition is matched, and the default rules alone say what the agent is told", "err", err)
		}
		parts.Pool = gt.Pool
	}
	table, err := parts.Table()
	if err != nil {
		return nil, err
	}
	if err := d.runUplink(relay, table, cfg.MQTT, log); err != nil {
		return nil, err
	}
	sock := filepath.Join(cfg.DataDir, cli.AdminSocket)
	ln, err := admin.Listen(sock)
	if err != nil {
		return nil, err
	}
	d.onStop(func() { os.Remove(sock) })
	srv := &admin.Server{Table: table, Resolve: a.settings.Admins.Resolve, Log: log}
	d.spawn("admin socket", func(ctx context.Context) { srv.Serve(ctx, ln) })
	return &serving{table: table, observer: observer, gate: gt, parts: parts, sock: sock}, nil
}

// startAgentAndGate starts the agent socket, the MCP server `tobe-body
// stdio` bridges to, when agent.enabled; then the gate, the one path by
// which what the body records reaches the agents (its wakes, in the
// observer's words), and its scheduler.
//
// Each connection to the agent socket is a session of the runner's (E7):
// a silent one is ended and its connection closed, and every end is
// recorded.
func (d *daemon) startAgentAndGate(cfg *config.Loaded, s *serving, runner *act.Runner, store *ledger.Store) error {
	log, observer, gt := d.log, s.observer, s.gate
	var hub *agent.Hub
	if cfg.Agent.Enabled {
		rules, err := agent.NewRules(cfg.Agent.Principals)
		if err != nil {
			return fmt.Errorf("config: %w", err)
		}
		oc := cfg.Agent.Observations
		hub = &agent.Hub{Batch: time.Duration(oc.BatchMS) * time.Millisecond, Queue: oc.Queue}
		if gt != nil {
			// What the gate told, read again from its records, in the
			// observer's words: an agent that was away misses nothing.
			hub.Replay = func(after uint64, limit int, fn func(awareness.Observation)) (uint64, bool, error) {
				return gt.Woken(after, limit, func(d gate.Decision, e ledger.Stored) { fn(observer.Woken(d, e)) })
			}
		}
		gid := -1
		if g := cfg.Agent.SocketGroup; g != "" {
			grp, err := user.LookupGroup(g)
			if err != nil {
				return fmt.Errorf("config: agent.socket_group: no group %q on this body", g)
			}
			gid, _ = strconv.Atoi(grp.Gid)
		}
		path := filepath.Join(cfg.DataDir, agent.SocketName)
		ln, err := agent.Listen(path, gid)
		if err != nil {
			return err
		}
		record := func(ev ledger.Event) {
			if store == nil {
				return
			}
			if _, err := store.Append(context.Background(), ev); err != nil {
				log.Error("ledger append", "type", ev.Type, "err", err)
			}
		}
		srv := &agent.Server{Table: s.table, Caps: runner, Rules: rules, Hub: hub, Store: store, Registry: s.parts.Registry, Record: record, Log: log, Version: version}
		srv.Sessions = act.NewSessions(runner, time.Duration(cfg.Agent.HeartbeatMS)*time.Millisecond, func(e act.SessionEnd) {
			srv.Ended(e)
			p, err := ledger.MarshalPayload(e)
			if err == nil {
				record(ledger.Event{Type: act.EventSessionEnded, ChannelID: "agent", Provenance: ledger.Observed, Payload: p})
			}
		})
		d.spawn("agent sessions", func(ctx context.Context) { srv.Sessions.Run(ctx) })
		d.spawn("agent socket", func(ctx context.Context) { srv.Serve(ctx, ln) })
		d.onStop(func() { os.Remove(path) })
		if len(cfg.Agent.Principals) == 0 {
			log.Info("agent socket: no agent.principals, so every peer is refused", "socket", path)
		}
	}
	if gt != nil {
		// The gate's wakes and questions go to the agents' sessions; the
		// scheduler wakes work items, marks stale ones and ends expired
		// conditions.
		if hub != nil {
			// Every wake and question, of a condition, a hard rule or a
			// default rule: the gate is the one that pushes.
			gt.Push = func(dec gate.Decision, e ledger.Stored) { hub.Publish(observer.Woken(dec, e)) }
		}
		d.spawn("gate", func(ctx context.Context) {
			if err := gt.Run(ctx); err != nil && ctx.Err() == nil {
				log.Error("the gate stopped", "err", err)
			}
		})
		gt.Capture = waitCapture(runner, s.parts.Evidence)
		sc := &sched.Scheduler{Store: store, StaleAfter: s.parts.StaleAfter, Every: time.Duration(cfg.Gate.TickS) * time.Second, Log: log}
		d.spawn("scheduler", sc.Run)
	}
	return nil
}

// ready says the body started, in the log and to systemd.
func (d *daemon) ready(cfg *config.Loaded, h *host, store *ledger.Store, sock string) {
	d.log.Info("body started", "body", cfg.Body.Name, "board", h.profile.Name, "drivers", h.drivers.Name,
		"channels", len(h.reg.Snapshot()), "data", cfg.DataDir, "socket", sock, "config", cfg.Layers)
	if err := sdNotify("READY=1\nSTATUS=running on " + h.profile.Name); err != nil {
		d.log.Warn("systemd notify", "err", err)
	}
	if store != nil {
		// Stopping starts here (the last registered stops first): from now
		// on nothing waits for company in the ledger, so the last of what
		// the body sensed, and the uplink's last acknowledgements, do not
		// wait out ledger.telemetry_commit_ms.
		d.onStop(store.Hurry)
	}
}

// openEvidence opens the evidence store under the data directory and
// ends its pieces as their lifetimes end; nil (and no capture offered)
// when it cannot be opened.
func (d *daemon) openEvidence(c config.Evidence, dataDir string, store *ledger.Store) *evidence.Store {
	log := d.log
	ev, err := evidence.Open(context.Background(), evidence.Options{Dir: filepath.Join(dataDir, "evidence"), Ledger: store,
		Lifetimes: map[evidence.Kind]time.Duration{evidence.Snapshot: time.Duration(c.SnapshotLifetimeMin) * time.Minute, evidence.Clip: time.Duration(c.ClipLifetimeMin) * time.Minute},
		MaxBytes:  int64(c.MaxMB) << 20, OnRevoke: evidence.OnRevoke(c.OnRevoke), Log: log})
	if err != nil {
		log.Error("the evidence store cannot be opened: no capture is offered", "err", err)
		return nil
	}
	d.spawn("evidence", func(ctx context.Context) {
		ev.Run(ctx, func(ended []evidence.Item, err error) {
			for _, it := range ended {
				log.Info("evidence expired", "id", it.ID, "source", it.Source, "kind", it.Kind)
			}
			if err != nil {
				log.Error("evidence past its lifetime could not be ended; trying again", "err", err)
			}
		})
	})
	return ev
}

// lenses are the cameras camera.snapshot takes through: each camera
// channel, the one reader of its camera.
func lenses(g *sense.Group) []*act.Lens {
	var out []*act.Lens
	for _, c := range g.Cameras {
		zones := map[string][4]float64{}
		for _, z := range c.Zones {
			if b, ok := c.Ch.ZoneBox(z); ok {
				zones[z] = b
			}
		}
		ch := c.Ch
		out = append(out, &act.Lens{Channel: c.ID, Privacy: c.Privacy, Grab: ch.Grab, Zones: zones,
			Motion: func() ([4]float64, bool) {
				m, ok := ch.LastMotion()
				return m.Box, ok
			}})
	}
	return out
}

// ears are the microphones audio.clip listens through: the microphone
// channel, its one reader.
func ears(g *sense.Group) []*act.Ear {
	if g.Mic == nil {
		return nil
	}
	return []*act.Ear{{Channel: g.Mic.ID, Privacy: g.Mic.Privacy, Ring: g.Mic.Ring, Clip: g.Mic.Ch.Clip}}
}

// waitCapture takes the evidence a wait condition asks for when it wakes:
// its capture on the channel of the event that matched, through the
// runner as the principal that added the condition, under that
// principal's grants now (a revoked grant refuses it), once per
// condition and event (the idempotency key).
func waitCapture(r *act.Runner, ev *evidence.Store) func(context.Context, wait.Condition, *ledger.Stored) (*gate.Evidence, error) {
	return func(ctx context.Context, c wait.Condition, e *ledger.Stored) (*gate.Evidence, error) {
		if ev == nil {
			return nil, errors.New("the evidence store is not open")
		}
		a := c.Evidence
		res := r.Submit(ctx, act.Invocation{Principal: act.Principal{Kind: act.PrincipalKind(a.Kind), Subject: a.By, Trust: a.Trust},
			Capability: a.Capability, Target: e.ChannelID, Params: maps.Clone(a.Params), IdempotencyKey: "wait:" + c.ID + ":" + e.ID.String(),
			Note: fmt.Sprintf("wait condition %s matched event %s", c.ID, e.ID)})
		if res.Status != act.Succeeded || res.Evidence == "" {
			return nil, fmt.Errorf("%s on %s %s (%s): %s", a.Capability, e.ChannelID, res.Status, res.Reason, res.Detail)
		}
		it, ok, err := ev.Lookup(res.Evidence)
		if err != nil || !ok {
			return nil, fmt.Errorf("evidence %s was kept and is gone: %v", res.Evidence, err)
		}
		return &gate.Evidence{ID: it.ID, SHA256: it.SHA256, MediaType: it.MediaType, Seq: it.Seq}, nil
	}
}

// speakerMic is what verifies the speaker: the microphone channel's taps
// when that channel runs (it is the microphone's one reader), else the
// capture itself; nil without a microphone.
func speakerMic(ds *body.Devices, g *sense.Group) *act.Mic {
	switch {
	case g.Mic != nil:
		ch := g.Mic.Ch
		return &act.Mic{Name: g.Mic.ID, Listen: func() (act.Listening, error) { return ch.Listen(), nil }}
	case ds.Mic != nil:
		return act.CaptureMic(ds.MicID, ds.Mic)
	}
	return nil
}

// loop is the daemon's main loop: it prints what the body sees each
// interval (when it prints), and answers the watchdog's questions
// (probes) while it keeps turning, until ctx ends.
func (d *daemon) loop(ctx context.Context, interval time.Duration, prints bool, mon *sense.Monitor, probes <-chan chan struct{}) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			d.log.Info("stopping", "uptime", time.Since(d.started).Round(time.Millisecond))
			sdNotify("STOPPING=1")
			return nil
		case now := <-tick.C:
			if !prints {
				mon.Reset()
			} else {
				mon.Print(now.Sub(d.started), now.Sub(last))
			}
			last = now
		case p := <-probes:
			close(p)
		case <-d.fault:
			d.log.Warn("lab fault: the main loop blocks for ever")
			select {}
		}
	}
}
