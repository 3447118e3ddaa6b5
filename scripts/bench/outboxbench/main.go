// Package main is outboxbench, the figures of the outbox's budget (issue
// "MQTT uplink", point 7): the outbox's size after a body's actions with
// no uplink configured, and with an uplink whose broker is down for the
// whole run, side by side in one run, each into a fresh ledger opened
// with the daemon's options (config defaults: 100,000 rows, 64 MiB,
// audit rows given up after 7 days of running).
//
//	go run ./scripts/bench/outboxbench [-actions 250000] [-every 1m] [-sense 4] [-max-rows N]
//
// Each action is two audit records (proposed and succeeded) with a
// payload of about 200 bytes, -every apart on the ledger's clock, with
// -sense telemetry events between two actions. -max-rows sets the
// outbox's budget of rows in place of the config's (scripts/bench/outbox.sh's
// short form: a small budget, so a short run goes over it too). Prints
// figure lines (scripts/bench/lib.sh): the outbox with the broker down
// against its budget, and the append rate with the broker down (the
// outbox over its budget) against the rate of a third run whose budget
// nothing reaches (A2: at least 0.8x the rate under budget), and against
// the rate with no outbox at all (no goal: the outbox's own cost).
// Figures of a shared machine: read the times as such; the sizes are what
// they are.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/ledger"
	"github.com/tobe-body/tobe-body/scripts/bench/figure"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "outboxbench:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("outboxbench", flag.ContinueOnError)
	actions := fs.Int("actions", 250_000, "actions (two audit records each)")
	every := fs.Duration("every", time.Minute, "the ledger's running time between two actions")
	sense := fs.Int("sense", 4, "telemetry events between two actions")
	maxRows := fs.Int("max-rows", 0, "the outbox's budget of rows (0: the config's)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rates := map[string]float64{}
	for _, mode := range []string{"no uplink", "uplink, broker down", underBudget} {
		rate, err := one(mode, *actions, *every, *sense, *maxRows)
		if err != nil {
			return fmt.Errorf("%s: %w", mode, err)
		}
		rates[mode] = rate
	}
	over := math.Round(rates["uplink, broker down"])
	for _, f := range []figure.Figure{
		{Name: "outbox.broker_down.append_rate", Value: over, Unit: "events/s", Peer: math.Round(rates[underBudget]), Vs: "under-budget",
			Goal: figure.Goal{Of: "ratio", Op: ">=", N: 0.8}},
		{Name: "outbox.broker_down.append_rate_vs_none", Value: over, Unit: "events/s", Peer: math.Round(rates["no uplink"]), Vs: "no-outbox"},
	} {
		if err := figure.Print(os.Stdout, f); err != nil {
			return err
		}
	}
	return nil
}

// underBudget is the mode whose outbox keeps every row: a budget no run
// reaches, the rate A2 holds the run over its budget to.
const underBudget = "uplink, under budget"

// one fills a fresh ledger in one mode and prints what it came to; it
// returns the rate of its appends, in events a second.
func one(mode string, actions int, every time.Duration, sense, maxRows int) (float64, error) {
	dir, err := os.MkdirTemp("", "outboxbench-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	start := time.Now()
	id, _, err := body.LoadIdentity(dir, start)
	if err != nil {
		return 0, err
	}
	cfg := config.Default().Ledger
	if maxRows > 0 {
		cfg.OutboxMaxRows = maxRows
	}
	if mode == underBudget {
		cfg.OutboxMaxRows, cfg.OutboxMaxMB = actions*(2+sense)*2, 1<<20
	}
	opts, err := body.LedgerOptions(cfg, dir, id, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})), awareness.Projections()...)
	if err != nil {
		return 0, err
	}
	opts.NoOutbox = mode == "no uplink"
	var clock atomic.Int64
	clock.Store(start.UnixNano())
	opts.Now = func() time.Time { return time.Unix(0, clock.Load()) }
	s, err := ledger.Open(opts)
	if err != nil {
		return 0, err
	}
	defer s.Close()
	params := map[string]any{"capability": "gpio.set", "target": "led", "params": map[string]string{"value": "1"},
		"principal": "agent:pi", "note": strings.Repeat("x", 120)}
	payload, err := ledger.MarshalPayload(params)
	if err != nil {
		return 0, err
	}
	const batch = 500 // actions a commit
	began := time.Now()
	for i := 0; i < actions; i += batch {
		var evs []ledger.Event
		for j := i; j < min(i+batch, actions); j++ {
			for k := range sense {
				evs = append(evs, ledger.Event{Type: "camera.motion_started", ChannelID: "camera.front", Provenance: ledger.Observed, SourceSequence: uint64(j*sense + k)})
			}
			evs = append(evs,
				ledger.Event{Type: "action.proposed", ChannelID: "gpio.led", Provenance: ledger.Observed, Payload: payload, SourceSequence: uint64(j)},
				ledger.Event{Type: "action.succeeded", ChannelID: "gpio.led", Provenance: ledger.Observed, Payload: payload, SourceSequence: uint64(j)})
		}
		clock.Add(int64(every) * int64(min(batch, actions-i)))
		if _, err := s.Append(context.Background(), evs...); err != nil {
			return 0, err
		}
	}
	took := time.Since(began)
	st, err := s.Stats()
	if err != nil {
		return 0, err
	}
	var notSent uint64
	for after := uint64(0); ; {
		evs, err := s.Events(ledger.Filter{After: after, Types: []string{"ledger.outbox_not_sent"}, Limit: 1000})
		if err != nil {
			return 0, err
		}
		if len(evs) == 0 {
			break
		}
		for _, e := range evs {
			var p map[string]any
			if err := ledger.UnmarshalPayload(e.Payload, &p); err != nil {
				return 0, errors.Join(errors.New("ledger.outbox_not_sent"), err)
			}
			if n, ok := p["rows"].(uint64); ok {
				notSent += n
			}
			after = e.Seq
		}
	}
	fi, err := os.Stat(filepath.Join(dir, body.LedgerFile))
	if err != nil {
		return 0, err
	}
	ran := time.Duration(actions) * every
	fmt.Printf("%-20s %d actions over %.0f days of running, %d telemetry events: outbox %d rows / %.1f MiB (budget %d rows / %d MiB); telemetry dropped %d; audit given up (not sent) %d; %d events in a %.0f MiB file; appended in %v (%.0f events/s)\n",
		mode+":", actions, ran.Hours()/24, actions*sense, st.OutboxRows, float64(st.OutboxBytes)/(1<<20), cfg.OutboxMaxRows, cfg.OutboxMaxMB,
		st.OutboxDropped, notSent, st.Events, float64(fi.Size())/(1<<20), took.Round(time.Millisecond), float64(st.Events)/took.Seconds())
	if mode == underBudget && (st.OutboxDropped > 0 || notSent > 0) {
		return 0, fmt.Errorf("the outbox under budget gave up rows (%d telemetry, %d audit)", st.OutboxDropped, notSent)
	}
	if mode == "uplink, broker down" {
		name := "outbox.broker_down."
		for _, f := range []figure.Figure{
			{Name: name + "rows", Value: float64(st.OutboxRows), Unit: "rows", Peer: figure.NoPeer(), Goal: figure.Goal{Of: "value", Op: "<=", N: float64(cfg.OutboxMaxRows)}},
			{Name: name + "size", Value: math.Round(float64(st.OutboxBytes)/(1<<20)*10) / 10, Unit: "MiB", Peer: figure.NoPeer(), Goal: figure.Goal{Of: "value", Op: "<=", N: float64(cfg.OutboxMaxMB)}},
		} {
			if err := figure.Print(os.Stdout, f); err != nil {
				return 0, err
			}
		}
	}
	return float64(st.Events) / took.Seconds(), nil
}
