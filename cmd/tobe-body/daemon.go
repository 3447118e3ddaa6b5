package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
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
	"github.com/tobe-body/tobe-body/board"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/audio"
	v4l2 "github.com/tobe-body/tobe-body/hal/camera"
	"github.com/tobe-body/tobe-body/hal/gpio"
	"github.com/tobe-body/tobe-body/hal/i2c"
	"github.com/tobe-body/tobe-body/hal/input"
	"github.com/tobe-body/tobe-body/hal/led"
	"github.com/tobe-body/tobe-body/hal/probe"
	"github.com/tobe-body/tobe-body/hal/sim"
	"github.com/tobe-body/tobe-body/ledger"
	"github.com/tobe-body/tobe-body/sense"
)

// adminSocket is the admin socket's name in the data directory.
const adminSocket = "admin.sock"

// resolveBoard picks the board's profile (cfg.Board) and applies the
// config's choice of the LEDs the body takes (act.leds).
func resolveBoard(cfg *config.Config) (*board.Profile, string, error) {
	p, why, err := board.Resolve(cfg.Board)
	if err != nil {
		return nil, "", err
	}
	p, err = p.TakeLEDs(cfg.Act.LEDs)
	return p, why, err
}

// driversFor returns the driver set a profile asks for.
func driversFor(p *board.Profile, seed uint64) (hal.Drivers, board.Finder) {
	if p.Drivers == "sim" {
		return sim.New(seed).Drivers(), nil
	}
	return hal.Drivers{Name: "linux", OpenChip: gpio.Open, OpenCamera: v4l2.Open, OpenCapture: audio.OpenCapture, OpenPlayback: audio.OpenPlayback,
		OpenInput: input.Open, WatchInputs: input.Watch, OpenI2C: i2c.Open, OpenLED: led.Open}, probe.Finder{Root: "/"}
}

// projections are the ledger projections the body keeps: the act
// package's (the e-stop's latch, the people's holds, actions, grants) and
// the control plane's (work items, wait conditions, the gate's).
func projections() []ledger.Projection { return awareness.Projections() }

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
// cancels that context and waits for f to return.
func (d *daemon) spawn(f func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { f(ctx) })
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
	var c common
	fs := newFlagSet("run", stderr, &c, false)
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	cfg, err := c.loadConfig()
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
	return d.loop(ctx, cfg.Monitor, mon, probes)
}

// start brings the body up, in this order: the data directory's lock and
// identity; the devices (outputs at their safe levels before anything
// reads the ledger); the ledger; the sense channels; the e-stop, its
// latch restored and its watcher running; the act settings, the grants
// and the runner, with what was left running recorded; the people's
// controls; the operation table on the admin socket; then the readers.
func (d *daemon) start(ctx context.Context, cfg *config.Loaded, stdout io.Writer) (*sense.Monitor, error) {
	log, started := d.log, d.started
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
	id, created, err := body.LoadIdentity(cfg.DataDir, started)
	if err != nil {
		return nil, err
	}
	if created {
		log.Info("new identity", "body_id", id.BodyID, "agent_id", id.AgentID, "file", filepath.Join(cfg.DataDir, body.IdentityFile))
	}
	profile, why, err := resolveBoard(&cfg.Config)
	if err != nil {
		return nil, err
	}
	drivers, finder := driversFor(profile, cfg.Sim.Seed)
	reg := body.NewRegistry(time.Now)
	ds := body.OpenDevices(profile, drivers, finder, reg, log)
	d.onStop(func() {
		if err := ds.Close(); err != nil {
			log.Error("closing devices", "err", err)
		}
	})

	// The body's clock: monotonic times to UTC, the boot, whether the
	// wall clock is synchronised; measured again every minute and at once
	// when the wall clock is set, each setting recorded with its size.
	clock, err := body.NewClock()
	if err != nil {
		return nil, err
	}

	// The ledger. If it cannot be opened the body still senses and
	// answers, but latched safe: nothing that acts may run without its
	// record.
	safety := "normal"
	var store *ledger.Store
	lopts, err := body.LedgerOptions(cfg.Ledger, cfg.DataDir, id, log, projections()...)
	if err == nil {
		lopts.RetainEvery = time.Duration(cfg.Ledger.RetentionIntervalMin) * time.Minute
		lopts.Stamp = clock.LedgerStamp // audit records carry the boot, the monotonic time and the uncertainty
		// With no uplink nothing is queued for one; one that starts gets
		// the backlog asked for, not the whole history.
		lopts.NoOutbox = !cfg.MQTT.Enabled
		lopts.OutboxBacklog = time.Duration(cfg.MQTT.BacklogH) * time.Hour
		store, err = ledger.Open(lopts)
	}
	switch {
	case err != nil:
		safety = "latched: the ledger cannot be opened: " + err.Error()
		log.Error("ledger unavailable; starting latched safe", "err", err)
	case store.Damage() != nil:
		safety = "latched: " + store.Damage().Error()
	default:
		log.Info("ledger open", "path", lopts.Path, "closed_cleanly", store.ClosedCleanly())
	}
	journal := act.NoJournal
	if store != nil {
		journal = store
		d.onStop(func() {
			if err := store.Close(); err != nil {
				log.Warn("ledger close: the next start reads the whole file", "err", err)
			}
		})
		d.watch("the ledger's writer", store.Alive)
	}
	d.fault = d.labFaults(store)
	// Each step is also handed on to the grants, whose expiries it may
	// have reached (a step while one waits is folded into it).
	stepped := make(chan time.Duration, 1)
	d.spawn(func(ctx context.Context) {
		clock.Run(ctx, time.Minute, func(st body.Step) {
			select {
			case stepped <- st.Size:
			default:
			}
			lvl := slog.LevelInfo
			if st.Size.Abs() >= time.Second {
				lvl = slog.LevelWarn
			}
			log.Log(ctx, lvl, "the wall clock was set", "by", st.Size, "from", st.Before, "to", st.After, "synced", st.Synced)
			if store == nil {
				return
			}
			if _, err := store.Append(ctx, clock.StepEvent(st)); err != nil {
				log.Error("ledger append", "type", body.EventClockStepped, "err", err)
			}
			// A step is when retention by the wall clock lost data; it
			// ages events by the ledger's running clock, which no step
			// moves: a pass now shows it, in the log.
			if st.Size.Abs() >= time.Second {
				res, err := store.Retain(ctx)
				log.Info("ledger retention after the clock step", "events", res.Events, "outbox_expired", res.OutboxExpired, "inbox_keys", res.InboxKeys, "err", err)
			}
		})
	})
	relay, err := d.startUplink(cfg.MQTT, cfg.Ledger, id, store, log)
	if err != nil {
		return nil, err
	}

	gc := sense.GroupConfig{Sense: cfg.Sense, DataDir: cfg.DataDir, Clock: clock, Registry: reg, Log: log,
		Zones: profile.Thermal.Zones, ThrottleSource: profile.Thermal.Throttle.Source, ThrottlePath: profile.Thermal.Throttle.Path}
	if store != nil {
		gc.Outbox = func() (uint64, error) {
			st, err := store.Stats()
			return st.OutboxRows, err
		}
		if err := reg.Register(body.Channel{ID: "body.notify", Kind: "notify", Device: "events for the home server and the agent",
			Driver: string(board.Loaded), State: body.Enabled, Health: "ok"}); err != nil {
			return nil, fmt.Errorf("channel body.notify: %w", err)
		}
	}
	senses := sense.NewGroup(ds, gc)
	reg.Seal()
	if store != nil {
		p, _ := ledger.MarshalPayload(map[string]any{"board": profile.Name, "drivers": drivers.Name, "version": version,
			"channels": len(reg.Snapshot()), "safety": safety})
		if _, err := store.Append(ctx, ledger.Event{Type: "body.started", Provenance: ledger.Observed, Payload: p}); err != nil {
			log.Error("ledger append", "err", err)
		}
	}

	// The e-stop, watching from here on: its latch survives a restart,
	// and a ledger that cannot be read means starting latched.
	estop, err := act.NewBodyEStop(ds, act.EStopTiming(profile.EStopTiming()))
	if err != nil {
		return nil, err
	}
	if estop != nil {
		// A damaged ledger was moved aside and a new one started: whether
		// the latch was set is in the file that could not be read, so it
		// counts as set.
		stuck := stuckLastRun(cfg.DataDir)
		switch latched, err := act.LatchedAtStop(store); {
		case err != nil:
			estop.LatchAtStart("the ledger cannot be read: " + err.Error())
		case store.Damage() != nil:
			estop.LatchAtStart(store.Damage().Error())
		case stuck != "":
			estop.LatchAtStart("the watchdog stopped the last run: " + stuck)
		case latched:
			estop.LatchAtStart("it was latched when the body stopped")
		}
		c := estop.Check()
		log.Info("e-stop checked", "verified", c.Verified, "latched", c.Latched, "main", c.Main, "why", c.Why)
		// The recorder first, so it stops after the watcher and writes
		// what the watcher did to the last.
		var j act.Journal
		if store != nil {
			j = clearsStuckNote{Journal: store, path: filepath.Join(cfg.DataDir, stuckNote), log: log}
		}
		d.spawn(func(ctx context.Context) { act.RecordEStop(ctx, estop, j, clock, log) })
		d.spawn(func(ctx context.Context) {
			if err := estop.Run(ctx); err != nil {
				log.Error("e-stop watcher", "err", err)
			}
		})
		d.watch("the e-stop", estop.Alive)
		d.trip = func(cause string) { estop.TripNow(cause) }
	} else {
		log.Warn("this board has no e-stop line: nothing above read-only may act")
	}

	// A file as Close left it was opened with a quick check: the rest of
	// it is read now, beside the body, and damage latches the e-stop as
	// damage found at open would have.
	if store != nil {
		d.spawn(func(ctx context.Context) {
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

	// The act section, checked against this board and its channels; the
	// grants; the runner, the only path to side effects.
	acts, err := act.NewSettings(cfg.Act, body.FactsOf(profile), reg)
	if err != nil {
		return nil, err
	}
	var grants *act.Grants
	if store != nil {
		if grants, err = act.LoadGrants(store, clock); err != nil {
			log.Error("grants cannot be read: none is in force and the grant calls are refused", "err", err)
			grants = nil
		}
	}
	runner, err := act.NewBodyRunner(act.BodyParts{Devices: ds, Feedback: profile.Feedback(), EStop: estop, Registry: reg,
		Health: func() body.Degradation {
			if st, ok := senses.Self(); ok {
				return st.Level
			}
			return body.LevelCritical
		},
		Journal: journal, Clock: clock, Grants: grants, Settings: acts, DataDir: cfg.DataDir, Mic: speakerMic(ds, senses), Extra: testActions})
	if err != nil {
		return nil, err
	}
	if err := acts.CheckCapabilities(runner); err != nil {
		return nil, err
	}
	d.spawn(runner.Run) // what waits for approval too long expires
	if grants != nil {
		// Expiries are found every minute and right after a step of the
		// wall clock, and each is recorded once (grant.expired).
		d.spawn(func(ctx context.Context) {
			grants.Run(ctx, time.Minute, stepped, func(gs []act.Grant, err error) {
				for _, g := range gs {
					log.Warn("grant expired", "id", g.ID, "subject", g.Subject, "by", g.ExpiredBy, "early", g.EndedEarly)
				}
				if err != nil {
					log.Error("a grant's expiry could not be recorded", "err", err)
				}
			})
		})
	}

	// The people's controls: a press takes their resources over, and a
	// hold survives a restart.
	var watch *act.TakeoverWatch
	if store != nil {
		tk, err := act.NewTakeover(acts.Controls, acts.Leases, runner, store, func(err error) { log.Error("a person's control", "err", err) })
		if err != nil {
			return nil, err
		}
		d.onStop(func() { tk.Close() })
		watch = act.NewTakeoverWatch(tk, log)
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
		// What was left running when the body stopped is recorded
		// unknown, never run again.
		if ids, err := runner.Recover(ctx, store); err != nil {
			log.Error("actions left running could not be reconciled", "err", err)
		} else if len(ids) > 0 {
			log.Warn("actions left running when the body stopped are marked unknown, not run again", "actions", ids)
		}
	}

	// The readers: what the body sees goes to the ledger from here.
	var startSeq uint64
	var sink sense.Ledger
	if store != nil {
		if st, err := store.Stats(); err == nil {
			startSeq = st.LastSeq
		}
		sink = store // what the body senses shares commits (ledger.telemetry_commit_ms): sense.GroupedLedger
		d.onStop(func() {
			p, _ := ledger.MarshalPayload(map[string]any{"uptime_s": time.Since(started).Seconds()})
			if _, err := store.Append(context.Background(), ledger.Event{Type: "body.stopped", Provenance: ledger.Observed, Payload: p}); err != nil {
				log.Error("ledger append", "err", err)
			}
		})
	}
	// The senses stop after their devices halt (that unblocks readers
	// waiting on a device), and write what they saw before the body says
	// it stopped.
	rctx, stopReaders := context.WithCancel(context.Background())
	senses.Start(rctx, sink)
	d.onStop(func() {
		stopReaders()
		ds.Halt()
		senses.Stop()
	})
	var estopLine func() string
	if estop != nil {
		estopLine = func() string { return estop.Status().String() }
	}
	mon := sense.NewMonitor(ds, senses, estopLine, stdout)
	if store != nil {
		d.spawn(func(ctx context.Context) { mon.Follow(ctx, store, startSeq) })
		d.spawn(func(ctx context.Context) {
			watch.Start(ctx, store, startSeq)
			<-ctx.Done()
			watch.Wait()
		})
	}

	if err := d.startStates(relay, store, estop, senses, actParts{grants, runner, clock}, cfg, profile, startSeq, log); err != nil {
		return nil, err
	}

	// The operation table on the admin socket, last: the sockets stop
	// taking calls first.
	parts := &awareness.Parts{Info: awareness.Status{Body: cfg.Body.Name, BodyID: id.BodyID, AgentID: id.AgentID,
		Board: profile.Name, BoardDesc: profile.Description, BoardFrom: profile.Source, BoardWhy: why,
		Drivers: drivers.Name, Version: version, DataDir: cfg.DataDir, Config: cfg.Layers, Safety: safety,
		Ledger: awareness.LedgerStatus{Path: lopts.Path}},
		Started: started, Registry: reg, Self: senses.Self, Senses: senses.Stats, EStop: estop, Runner: runner, Grants: grants, Store: store, Relay: relay}
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
		if lopts.Classes != nil {
			classes = *lopts.Classes
		}
		rules, err := gateRules(cfg.Gate, observer)
		if err != nil {
			return nil, err
		}
		np := cfg.Gate.NoisePool
		gt = &gate.Gate{Store: store, Sal: gate.NewSalience(rules), Pool: &gate.Pool{Per: np.Per, TTL: time.Duration(np.TTLS) * time.Second, MaxKeys: np.MaxKeys},
			Classes: classes, Log: log}
		parts.StaleAfter = time.Duration(cfg.Gate.StaleAfterS) * time.Second
		if err := gt.Load(); err != nil {
			log.Error("the gate cannot read its state: no wait condition is matched, and the observation rules alone say what the agent is told", "err", err)
			gt = nil
		} else {
			parts.Pool = gt.Pool
		}
	}
	table, err := parts.Table()
	if err != nil {
		return nil, err
	}
	if err := d.runUplink(relay, table, cfg.MQTT, log); err != nil {
		return nil, err
	}
	sock := filepath.Join(cfg.DataDir, adminSocket)
	ln, err := admin.Listen(sock)
	if err != nil {
		return nil, err
	}
	d.onStop(func() { os.Remove(sock) })
	srv := &admin.Server{Table: table, Resolve: acts.Admins.Resolve, Log: log}
	d.spawn(func(ctx context.Context) { srv.Serve(ctx, ln) })

	// The agent socket: the MCP server `tobe-body stdio` bridges to.
	var hub *agent.Hub
	if cfg.Agent.Enabled {
		if hub, err = d.startAgent(cfg, table, runner, store, observer, gt, startSeq, log); err != nil {
			return nil, err
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
		d.spawn(func(ctx context.Context) {
			if err := gt.Run(ctx); err != nil && ctx.Err() == nil {
				log.Error("the gate stopped", "err", err)
			}
		})
		sc := &sched.Scheduler{Store: store, StaleAfter: parts.StaleAfter, Every: time.Duration(cfg.Gate.TickS) * time.Second, Log: log}
		d.spawn(sc.Run)
	}

	log.Info("body started", "body", cfg.Body.Name, "board", profile.Name, "drivers", drivers.Name,
		"channels", len(reg.Snapshot()), "data", cfg.DataDir, "socket", sock, "config", cfg.Layers)
	if err := sdNotify("READY=1\nSTATUS=running on " + profile.Name); err != nil {
		log.Warn("systemd notify", "err", err)
	}
	if store != nil {
		// Stopping starts here (the last registered stops first): from now
		// on nothing waits for company in the ledger, so the last of what
		// the body sensed, and the uplink's last acknowledgements, do not
		// wait out ledger.telemetry_commit_ms.
		d.onStop(store.Hurry)
	}
	return mon, nil
}

// gateRules are the gate's rules from its config, with the observation
// rules as its default rules.
func gateRules(c config.Gate, observer *awareness.Observer) (gate.Rules, error) {
	s := func(n int) time.Duration { return time.Duration(n) * time.Second }
	trust, err := ledger.ParseLevel(c.MinTrust)
	if err != nil {
		return gate.Rules{}, fmt.Errorf("config: gate.min_trust: %w", err)
	}
	r := gate.Rules{
		Bands:           map[string]gate.Band{},
		NoveltyHalfLife: s(c.NoveltyHalfLifeS),
		Repeats:         c.NoveltyRepeats,
		MinTrust:        trust,
		ItemBudget:      gate.Budget{Max: c.ItemBudget.Max, Window: s(c.ItemBudget.WindowS)},
		Global:          gate.Budget{Max: c.GlobalBudget.Max, Window: s(c.GlobalBudget.WindowS)},
		Merge:           s(c.MergeS),
		AnswerWithin:    s(c.AnswerWithinS),
		Defaults:        observer.Defaults(),
	}
	for sel, b := range c.Bands {
		r.Bands[sel] = gate.Band(b)
	}
	for _, q := range c.Quiet {
		r.Quiet = append(r.Quiet, gate.Quiet{From: q.From, To: q.To})
	}
	if err := r.Check(); err != nil {
		return gate.Rules{}, fmt.Errorf("config: gate: %w", err)
	}
	return r, nil
}

// startAgent listens on the agent socket and serves it until the daemon
// stops, with each connection a session of the runner's (E7): a silent
// one is ended and its connection closed, and every end is recorded.
func (d *daemon) startAgent(cfg *config.Loaded, table *awareness.Table, runner *act.Runner, store *ledger.Store, observer *awareness.Observer,
	gt *gate.Gate, startSeq uint64, log *slog.Logger) (*agent.Hub, error) {
	rules, err := agent.NewRules(cfg.Agent.Principals)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	oc := cfg.Agent.Observations
	hub := &agent.Hub{Batch: time.Duration(oc.BatchMS) * time.Millisecond, Queue: oc.Queue}
	gid := -1
	if g := cfg.Agent.SocketGroup; g != "" {
		grp, err := user.LookupGroup(g)
		if err != nil {
			return nil, fmt.Errorf("config: agent.socket_group: no group %q on this body", g)
		}
		gid, _ = strconv.Atoi(grp.Gid)
	}
	path := filepath.Join(cfg.DataDir, agent.SocketName)
	ln, err := agent.Listen(path, gid)
	if err != nil {
		return nil, err
	}
	record := func(ev ledger.Event) {
		if store == nil {
			return
		}
		if _, err := store.Append(context.Background(), ev); err != nil {
			log.Error("ledger append", "type", ev.Type, "err", err)
		}
	}
	srv := &agent.Server{Table: table, Caps: runner, Rules: rules, Hub: hub, Record: record, Log: log, Version: version}
	srv.Sessions = act.NewSessions(runner, time.Duration(cfg.Agent.HeartbeatMS)*time.Millisecond, func(e act.SessionEnd) {
		srv.Ended(e)
		p, err := ledger.MarshalPayload(e)
		if err == nil {
			record(ledger.Event{Type: act.EventSessionEnded, ChannelID: "agent", Provenance: ledger.Observed, Payload: p})
		}
	})
	d.spawn(func(ctx context.Context) { srv.Sessions.Run(ctx) })
	d.spawn(func(ctx context.Context) { srv.Serve(ctx, ln) })
	if store != nil && gt == nil {
		// Without the gate (its state could not be read), what this run
		// records is observed for the agents by the rules alone.
		d.spawn(func(ctx context.Context) {
			store.Follow(ctx, ledger.Filter{After: startSeq}, func(e ledger.Stored) error {
				if o, ok := observer.Observe(e); ok {
					hub.Publish(o)
				}
				return nil
			})
		})
	}
	d.onStop(func() { os.Remove(path) })
	if len(cfg.Agent.Principals) == 0 {
		log.Info("agent socket: no agent.principals, so every peer is refused", "socket", path)
	}
	return hub, nil
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

// loop is the daemon's main loop: it prints what the body sees, and
// answers the watchdog's questions (probes) while it keeps turning, until
// ctx ends.
func (d *daemon) loop(ctx context.Context, m config.Monitor, mon *sense.Monitor, probes <-chan chan struct{}) error {
	tick := time.NewTicker(m.Interval())
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			d.log.Info("stopping", "uptime", time.Since(d.started).Round(time.Millisecond))
			sdNotify("STOPPING=1")
			return nil
		case now := <-tick.C:
			if m.Quiet {
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
