package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/ledger"
)

// stuckNote is the file, in the data directory, that says the watchdog
// found the last run stuck: the next start comes back latched, and the
// note goes when the e-stop is reset.
const stuckNote = "watchdog.stuck"

// watched is a part of the body the watchdog asks to answer: the main
// loop, the ledger's writer, the e-stop. ask returns a channel the part
// closes when it answered.
type watched struct {
	name   string
	ask    func() <-chan struct{}
	asked  time.Time
	answer <-chan struct{}
}

// watchdog pings systemd's watchdog (WATCHDOG=1) while the body makes
// progress. At each turn it looks whether every part answered the
// question it was asked at the turn before, asks again those that did,
// and pings only when all did: a deadlock anywhere among them stops the
// pings, and systemd kills and restarts the body WatchdogSec after the
// last one. A part that has not answered for stall is stuck: stuck is
// called once with why (the e-stop trips, so the outputs are safe now
// rather than at the restart, and the note is left), and there is no
// ping after it.
type watchdog struct {
	every, stall time.Duration
	parts        []*watched
	stuck        func(why string)
	notify       func(string) error
	log          *slog.Logger
}

// watchdogTiming is the watchdog's turn and stall bound for systemd's
// WATCHDOG_USEC: four turns and two turns of it. ok is false when the
// unit has no watchdog.
func watchdogTiming(usec string) (every, stall time.Duration, ok bool) {
	n, err := strconv.ParseInt(usec, 10, 64)
	if err != nil || n <= 0 {
		return 0, 0, false
	}
	w := time.Duration(n) * time.Microsecond
	return w / 4, w / 2, true
}

// Run turns until ctx ends or a part is stuck.
func (w *watchdog) Run(ctx context.Context) {
	t := time.NewTicker(w.every)
	defer t.Stop()
	now := time.Now()
	for _, p := range w.parts {
		p.answer, p.asked = p.ask(), now
	}
	for {
		select {
		case <-ctx.Done():
			return
		case now = <-t.C:
		}
		all := true
		var stuck []string
		for _, p := range w.parts {
			select {
			case <-p.answer:
				p.answer, p.asked = p.ask(), now
				continue
			default:
			}
			all = false
			if waited := now.Sub(p.asked); waited >= w.stall {
				stuck = append(stuck, fmt.Sprintf("%s has not answered for %v", p.name, waited.Round(time.Millisecond)))
			}
		}
		if len(stuck) > 0 {
			why := strings.Join(stuck, "; ")
			w.log.Error("watchdog: the body is stuck; no more pings: systemd restarts it", "why", why)
			w.notify("STATUS=stuck: " + why)
			w.stuck(why)
			return
		}
		if all {
			if err := w.notify("WATCHDOG=1"); err != nil {
				w.log.Warn("watchdog ping", "err", err)
			}
		}
	}
}

// startWatchdog runs the watchdog over the main loop (probes) and what
// start registered, when systemd watches the body (WATCHDOG_USEC).
func (d *daemon) startWatchdog(dataDir string, probes chan chan struct{}) {
	every, stall, ok := watchdogTiming(os.Getenv("WATCHDOG_USEC"))
	// As sd_watchdog_enabled: WATCHDOG_PID, when set, names the process
	// meant (the variables may be inherited by another).
	if p := os.Getenv("WATCHDOG_PID"); !ok || (p != "" && p != strconv.Itoa(os.Getpid())) {
		return
	}
	main := &watched{name: "the main loop", ask: func() <-chan struct{} {
		c := make(chan struct{})
		select {
		case probes <- c:
		default: // the last question is still there: c is never answered
		}
		return c
	}}
	w := &watchdog{every: every, stall: stall, parts: append([]*watched{main}, d.watched...), notify: sdNotify, log: d.log,
		stuck: func(why string) {
			// The note first: a trip waits for the e-stop, which may be
			// what is stuck.
			note := filepath.Join(dataDir, stuckNote)
			if err := body.WriteFileAtomic(note, []byte(why+"\n"), 0o640); err != nil {
				d.log.Error("watchdog: the note for the next start", "err", err)
			}
			if d.trip != nil {
				d.trip("watchdog: " + why)
			}
		}}
	d.log.Info("watchdog", "ping_every", every, "stuck_after", stall, "watching", len(w.parts))
	d.spawn("watchdog", w.Run)
}

// watch adds a part for the watchdog to ask.
func (d *daemon) watch(name string, ask func() <-chan struct{}) {
	d.watched = append(d.watched, &watched{name: name, ask: ask})
}

// stuckLastRun reads the watchdog's note: why the last run was stuck, or
// "" when it was not.
func stuckLastRun(dataDir string) string {
	b, err := os.ReadFile(filepath.Join(dataDir, stuckNote))
	if err != nil {
		return ""
	}
	why := strings.TrimSpace(string(b))
	if why == "" {
		why = "(no reason written)"
	}
	return why
}

// clearsStuckNote is the e-stop's journal that removes the watchdog's
// note once a reset of the latch it set is on record.
type clearsStuckNote struct {
	act.Journal
	path string
	log  *slog.Logger
}

func (j clearsStuckNote) Append(ctx context.Context, evs ...ledger.Event) ([]ledger.Result, error) {
	res, err := j.Journal.Append(ctx, evs...)
	if err == nil && slices.ContainsFunc(evs, func(e ledger.Event) bool { return e.Type == act.EventEStopReset }) {
		if rerr := os.Remove(j.path); rerr == nil {
			j.log.Info("watchdog: the e-stop was reset; its note is gone", "file", j.path)
		}
	}
	return res, err
}
