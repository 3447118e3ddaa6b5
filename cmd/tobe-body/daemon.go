package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/tobe-body/tobe-body/board"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/probe"
	"github.com/tobe-body/tobe-body/hal/sim"
)

// statusReply is what the daemon answers to "status". It holds nothing
// secret: no config values beyond names and paths.
type statusReply struct {
	Body      string         `json:"body"`
	BodyID    string         `json:"body_id"`
	AgentID   string         `json:"agent_id"`
	Board     string         `json:"board"`
	BoardDesc string         `json:"board_description"`
	BoardFrom string         `json:"board_source"`
	BoardWhy  string         `json:"board_chosen_by"`
	Drivers   string         `json:"drivers"`
	Version   string         `json:"version"`
	PID       int            `json:"pid"`
	DataDir   string         `json:"data_dir"`
	Config    []string       `json:"config_layers"`
	StartedAt time.Time      `json:"started_at"`
	UptimeS   float64        `json:"uptime_s"`
	Channels  []body.Channel `json:"channels"`
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
	return hal.Drivers{Name: "linux"}, probe.Finder{Root: "/"}
}

func runDaemon(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c common
	fs := newFlagSet("run", stderr, &c, false)
	if err := parse(fs, args, 0); err != nil {
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
	if cfg.MQTT.Enabled {
		log.Warn("mqtt.enabled is set but this build has no MQTT uplink yet; nothing is forwarded", "broker", cfg.MQTT.Broker)
	}

	drivers, finder := driversFor(profile, cfg.Sim.Seed)
	reg := body.NewRegistry(time.Now)
	ds := openDevices(profile, drivers, finder, reg, log)
	reg.Seal()
	defer func() {
		if err := ds.close(); err != nil {
			log.Error("closing devices", "err", err)
		}
	}()

	sock := filepath.Join(cfg.DataDir, adminSocket)
	ln, err := listenAdmin(sock)
	if err != nil {
		return err
	}
	status := func() any {
		return statusReply{
			Body: cfg.Body.Name, BodyID: id.BodyID, AgentID: id.AgentID,
			Board: profile.Name, BoardDesc: profile.Description, BoardFrom: profile.Source, BoardWhy: why,
			Drivers: drivers.Name, Version: version, PID: os.Getpid(), DataDir: cfg.DataDir, Config: cfg.Layers,
			StartedAt: started.UTC(), UptimeS: time.Since(started).Seconds(), Channels: reg.Snapshot(),
		}
	}
	admin := newAdminServer(ln, log, map[string]func() any{"status": status})
	admin.serve()
	defer func() {
		admin.close()
		os.Remove(sock)
	}()

	mctx, stopReaders := context.WithCancel(ctx)
	mon := newMonitor(ds, reg, log, stdout)
	mon.start(mctx)
	defer func() {
		stopReaders()
		ds.halt() // unblocks readers waiting on a device
		mon.wait()
	}()

	chans := reg.Snapshot()
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
