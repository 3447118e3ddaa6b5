package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/board"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/audio"
	v4l2 "github.com/tobe-body/tobe-body/hal/camera"
	"github.com/tobe-body/tobe-body/hal/gpio"
	"github.com/tobe-body/tobe-body/hal/input"
	"github.com/tobe-body/tobe-body/hal/probe"
	"github.com/tobe-body/tobe-body/hal/sim"
	"github.com/tobe-body/tobe-body/ledger"
	"github.com/tobe-body/tobe-body/sense"
)

// statusReply is what the daemon answers to "status". It holds nothing
// secret: no config values beyond names and paths.
type statusReply struct {
	Body      string    `json:"body"`
	BodyID    string    `json:"body_id"`
	AgentID   string    `json:"agent_id"`
	Board     string    `json:"board"`
	BoardDesc string    `json:"board_description"`
	BoardFrom string    `json:"board_source"`
	BoardWhy  string    `json:"board_chosen_by"`
	Drivers   string    `json:"drivers"`
	Version   string    `json:"version"`
	PID       int       `json:"pid"`
	DataDir   string    `json:"data_dir"`
	Config    []string  `json:"config_layers"`
	StartedAt time.Time `json:"started_at"`
	UptimeS   float64   `json:"uptime_s"`
	// Safety is "normal", or "latched: why" when the body must not act
	// (its ledger was damaged or cannot be written).
	Safety   string         `json:"safety"`
	Ledger   ledgerStatus   `json:"ledger"`
	Channels []body.Channel `json:"channels"`
	// Self is the latest self-state sample.
	Self *body.SelfState `json:"self,omitempty"`
	// Events counts, per sense channel, what it queued, shed and wrote.
	Events map[string]sense.OutletStats `json:"events,omitempty"`
	// EStop is the e-stop's state; nil on a board without one.
	EStop *act.EStopStatus `json:"estop,omitempty"`
}

type ledgerStatus struct {
	Path        string `json:"path"`
	Events      int    `json:"events"`
	LastSeq     uint64 `json:"last_seq"`
	OutboxRows  uint64 `json:"outbox_rows"`
	OutboxBytes uint64 `json:"outbox_bytes"`
	Error       string `json:"error,omitempty"`
}

// resolveBoard picks the profile named by the config, or detects it.
func resolveBoard(name string) (*board.Profile, string, error) {
	set, err := board.LoadSet(board.UserDir)
	if err != nil {
		return nil, "", err
	}
	if name != "" && name != "auto" {
		p, err := set.Get(name)
		return p, "configured (board " + strconv.Quote(name) + ")", err
	}
	p, why, err := set.Detect(board.ReadMachine("/"))
	return p, "detected: " + why, err
}

// driversFor returns the driver set a profile asks for.
func driversFor(p *board.Profile, seed uint64) (hal.Drivers, board.Finder) {
	if p.Drivers == "sim" {
		return sim.New(seed).Drivers(), nil
	}
	return hal.Drivers{Name: "linux", OpenChip: gpio.Open, OpenCamera: v4l2.Open, OpenCapture: audio.OpenCapture, OpenPlayback: audio.OpenPlayback,
		OpenInput: input.Open, WatchInputs: input.Watch}, probe.Finder{Root: "/"}
}

// clockEvery is how often the monotonic-to-UTC offset and the clock's
// sync state are measured again.
const clockEvery = time.Minute

func runDaemon(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c common
	fs := newFlagSet("run", stderr, &c, false)
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	cfg, err := c.loadConfig()
	if err != nil {
		return err
	}
	log := body.NewLogger(stderr, cfg.Log.Format, cfg.Log.SlogLevel(), os.Getenv)
	started := time.Now()

	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	release, err := lockData(cfg.DataDir)
	if err != nil {
		return err
	}
	defer release()

	id, created, err := body.LoadIdentity(cfg.DataDir, started)
	if err != nil {
		return err
	}
	if created {
		log.Info("new identity", "body_id", id.BodyID, "agent_id", id.AgentID, "file", filepath.Join(cfg.DataDir, body.IdentityFile))
	}
	profile, why, err := resolveBoard(cfg.Board)
	if err != nil {
		return err
	}
	// The devices first: every output is requested at its safe level, so
	// after a crash the lines are held safe again before the ledger's
	// check at open, which reads every page, however long that takes.
	drivers, finder := driversFor(profile, cfg.Sim.Seed)
	reg := body.NewRegistry(time.Now)
	ds := openDevices(profile, drivers, finder, reg, log)
	// The ledger. If it cannot be opened the body still senses and answers,
	// but latched safe: nothing that acts may run without its record.
	safety := "normal"
	var store *ledger.Store
	lopts, err := ledgerOptions(cfg.Ledger, cfg.DataDir, id, log)
	if err == nil {
		lopts.RetainEvery = time.Duration(cfg.Ledger.RetentionIntervalMin) * time.Minute
		store, err = ledger.Open(lopts)
	}
	switch {
	case err != nil:
		safety = "latched: the ledger cannot be opened: " + err.Error()
		log.Error("ledger unavailable; starting latched safe", "err", err)
	case store.Damage() != nil:
		safety = "latched: " + store.Damage().Error()
	}
	if store != nil {
		defer store.Close()
	}
	if cfg.MQTT.Enabled {
		log.Warn("mqtt.enabled is set but this build has no MQTT uplink yet; nothing is forwarded", "broker", cfg.MQTT.Broker)
	}

	clock, err := body.NewClock()
	if err != nil {
		return err
	}
	sn := newSenses(ds, profile, cfg.Sense, cfg.DataDir, clock, store, reg, log)
	if store != nil {
		if err := reg.Register(body.Channel{ID: "body.notify", Kind: "notify", Device: "events for the home server and the agent",
			Driver: string(board.Loaded), State: body.Enabled, Health: "ok"}); err != nil {
			log.Error("channel not registered", "channel", "body.notify", "err", err)
		}
	}
	reg.Seal()
	estop, err := newEStop(ds, profile)
	if err != nil {
		return err
	}
	if estop != nil {
		// The latch survives a restart, and a ledger that cannot be read
		// means starting latched. A damaged one was moved aside and a new
		// one started: whether the latch was set is in the file that could
		// not be read, so it counts as set.
		switch latched, err := act.LatchedAtStop(store); {
		case err != nil:
			estop.LatchAtStart("the ledger cannot be read: " + err.Error())
		case store.Damage() != nil:
			estop.LatchAtStart(store.Damage().Error())
		case latched:
			estop.LatchAtStart("it was latched when the body stopped")
		}
		c := estop.Check()
		log.Info("e-stop checked", "verified", c.Verified, "latched", c.Latched, "main", c.Main, "why", c.Why)
	} else {
		log.Warn("this board has no e-stop line: nothing above read-only may act")
	}
	defer func() {
		if err := ds.close(); err != nil {
			log.Error("closing devices", "err", err)
		}
	}()
	// The config's act section, checked against this board and its
	// channels; channel modes go into the registry, where the policy
	// reads them.
	acts, err := newActSettings(cfg.Act, profile, reg)
	if err != nil {
		return err
	}

	sock := filepath.Join(cfg.DataDir, adminSocket)
	ln, err := listenAdmin(sock)
	if err != nil {
		return err
	}
	status := func(context.Context, json.RawMessage) (any, error) {
		st := statusReply{
			Body: cfg.Body.Name, BodyID: id.BodyID, AgentID: id.AgentID,
			Board: profile.Name, BoardDesc: profile.Description, BoardFrom: profile.Source, BoardWhy: why,
			Drivers: drivers.Name, Version: version, PID: os.Getpid(), DataDir: cfg.DataDir, Config: cfg.Layers,
			StartedAt: started.UTC(), UptimeS: time.Since(started).Seconds(), Safety: safety, Channels: reg.Snapshot(),
			Ledger: ledgerStatus{Path: lopts.Path},
		}
		st.Events = sn.stats()
		if estop != nil {
			es := estop.Status()
			st.EStop = &es
		}
		if self, ok := sn.self.Last(); ok {
			st.Self = &self
		}
		if store == nil {
			st.Ledger.Error = "not open"
		} else if ls, err := store.Stats(); err != nil {
			st.Ledger.Error = err.Error()
		} else {
			st.Ledger.Events, st.Ledger.LastSeq, st.Ledger.OutboxRows, st.Ledger.OutboxBytes = ls.Events, ls.LastSeq, ls.OutboxRows, ls.OutboxBytes
		}
		return st, nil
	}
	methods := map[string]method{"status": status}
	for name, m := range estopMethods(estop) {
		methods[name] = m
	}
	var grants *act.Grants
	if store != nil {
		for name, m := range ledgerMethods(store) {
			methods[name] = m
		}
		if grants, err = act.LoadGrants(store, time.Now); err != nil {
			log.Error("grants cannot be read: none is in force and the grant calls are refused", "err", err)
		}
	}
	for name, m := range grantMethods(grants) {
		methods[name] = m
	}
	// The runner: the only path to side effects. What was left running
	// when the body stopped is recorded unknown, never run again.
	runner := newRunner(ds, profile, estop, sn, reg, store, grants, acts, cfg.DataDir)
	if err := acts.checkCapabilities(runner); err != nil {
		return err
	}
	// The people's controls: a press takes their resources over.
	var watch *takeoverWatch
	if store != nil {
		tk, err := act.NewTakeover(acts.controls, acts.leases, runner, store, func(err error) { log.Error("a person's control", "err", err) })
		if err != nil {
			return err
		}
		defer tk.Close()
		watch = newTakeoverWatch(tk, log)
		// A person's hold survives a restart.
		held, err := act.HeldAtStop(store)
		if err != nil {
			// Not knowing, every person's control holds its resources.
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
	}
	if store != nil {
		if ids, err := runner.Recover(ctx, store); err != nil {
			log.Error("actions left running could not be reconciled", "err", err)
		} else if len(ids) > 0 {
			log.Warn("actions left running when the body stopped are marked unknown, not run again", "actions", ids)
		}
	}
	for name, m := range runnerMethods(runner) {
		methods[name] = m
	}
	for name, m := range approvalMethods(runner) {
		methods[name] = m
	}
	gateMethods(methods)
	admin := newAdminServer(ln, log, methods)
	admin.who = acts.admins.resolve
	admin.serve()
	defer func() {
		admin.close()
		os.Remove(sock)
	}()

	chans := reg.Snapshot()
	if store != nil {
		p, _ := ledger.MarshalPayload(map[string]any{"board": profile.Name, "drivers": drivers.Name, "version": version,
			"channels": len(chans), "safety": safety})
		if _, err := store.Append(ctx, ledger.Event{Type: "body.started", Provenance: ledger.Observed, Payload: p}); err != nil {
			log.Error("ledger append", "err", err)
		}
	}
	var startSeq uint64
	var sink sense.Ledger
	if store != nil {
		if st, err := store.Stats(); err == nil {
			startSeq = st.LastSeq
		}
		sink = store
	}
	mctx, stopReaders := context.WithCancel(ctx)
	mon := newMonitor(ds, sn, estop, reg, log, stdout)
	if store != nil {
		mon.follow(mctx, store, startSeq)
		watch.start(mctx, store, startSeq)
	}
	sn.start(mctx, sink)
	// The approval queue: what waits too long expires, and what the
	// e-stop cancelled while it waited is recorded.
	var approvalsWG sync.WaitGroup
	approvalsWG.Add(1)
	go func() {
		defer approvalsWG.Done()
		runner.Run(mctx)
	}()
	var estopWG sync.WaitGroup
	if estop != nil {
		estopWG.Add(2)
		go func() {
			defer estopWG.Done()
			if err := estop.Run(mctx); err != nil {
				log.Error("e-stop watcher", "err", err)
			}
		}()
		go func() {
			defer estopWG.Done()
			estopRecorder(mctx, estop, store, clock, log)
		}()
	}
	defer func() {
		stopReaders()
		ds.halt() // unblocks readers waiting on a device
		sn.stop() // what the channels saw is written before the body says it stopped
		estopWG.Wait()
		approvalsWG.Wait()
		mon.wait()
		if watch != nil {
			watch.wait()
		}
		if store != nil {
			p, _ := ledger.MarshalPayload(map[string]any{"uptime_s": time.Since(started).Seconds()})
			if _, err := store.Append(context.Background(), ledger.Event{Type: "body.stopped", Provenance: ledger.Observed, Payload: p}); err != nil {
				log.Error("ledger append", "err", err)
			}
		}
	}()

	log.Info("body started", "body", cfg.Body.Name, "board", profile.Name, "drivers", drivers.Name,
		"channels", len(chans), "data", cfg.DataDir, "socket", sock, "config", cfg.Layers)
	if err := sdNotify("READY=1\nSTATUS=running on " + profile.Name); err != nil {
		log.Warn("systemd notify", "err", err)
	}

	return loop(ctx, cfg.Monitor, mon, started, log)
}

// loop is the daemon's main loop: it prints what the body sees and pings
// the systemd watchdog while it keeps turning, until ctx ends.
func loop(ctx context.Context, m config.Monitor, mon *monitor, started time.Time, log *slog.Logger) error {
	tick := time.NewTicker(m.Interval())
	defer tick.Stop()
	var watchdog <-chan time.Time
	if usec, err := strconv.Atoi(os.Getenv("WATCHDOG_USEC")); err == nil && usec > 0 {
		wt := time.NewTicker(time.Duration(usec) * time.Microsecond / 2)
		defer wt.Stop()
		watchdog = wt.C
	}
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			log.Info("stopping", "uptime", time.Since(started).Round(time.Millisecond))
			sdNotify("STOPPING=1")
			return nil
		case now := <-tick.C:
			if m.Quiet {
				mon.reset()
			} else {
				mon.print(now.Sub(started), now.Sub(last))
			}
			last = now
		case <-watchdog:
			sdNotify("WATCHDOG=1")
		}
	}
}
