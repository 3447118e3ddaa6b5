// Package main is startupbench, the Go half of scripts/bench/startup.sh.
//
//	startupbench fill DIR [-events N] [-actions N] [-grants N] [-trips N] [-holds N]
//	startupbench start [-runs R] [-log FILE] -- COMMAND ARGS...
//	startupbench exec [-runs R] -- COMMAND ARGS...
//	startupbench budget DIR -disk-budget-mb N
//
// fill writes a body's data directory, an identity and a ledger, with the
// ledger options the daemon opens it with, holding a year of history (or
// -years of it): N
// events in all, of them the actions' records (a proposal and a success
// each, the way the runner writes them), the grants (a tenth revoked
// within half an hour, one in a hundred given without expiry and in
// force at the end, the rest given for a day, as the README's grant add
// --expires 24h, and recorded expired by the daemon's sweep), e-stop
// trips each with its reset, people's holds each
// with its release, spread over the year, and the rest sense events in the
// last six days (older telemetry would have been deleted by retention).
// Besides the N, what feeds the world model of the sim board over the
// last -world-days days (365), written through the daemon's deriver:
// retention deletes the sensed events older than their week, and the
// model's records of them stay, as on a body a year old. It
// is written through a clock that moves with the history, so ingest times
// and the ledger's running clock are of their moment, and retention is run
// at the end,
// as it would have run; nothing is delivered (this build has no uplink),
// so the outbox holds what the ledger keeps of it. With -daily, once a
// day of the history retention runs, a home server takes everything in
// the outbox (acknowledged), and the archive's pass runs: events kept for
// ever older than the config's audit_keep_days move into the archive, and
// its oldest segments go when the files are over disk_budget_mb, as on a
// body that ran those years with an uplink.
//
// budget opens the ledger in DIR with the daemon's options and a disk
// budget of N MiB, runs the archive's pass (which deletes the oldest
// segments while the files are over it) and says what it deleted and what
// the files take then.
//
// start runs COMMAND R times (the daemon, `tobe-body run ...`) with
// NOTIFY_SOCKET set to a socket it listens on, and measures the time from
// starting it to its READY=1, its peak resident memory then (VmHWM: the
// file pages it mapped count as well as its heap) and its anonymous
// resident memory then (RssAnon: the heap and stacks, what the file does
// not give back); then stops it with SIGINT. exec runs COMMAND R times to its end and
// measures its time and peak resident memory (the kernel's maxrss). Each
// prints one line per run and the medians.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/control/world"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/ledger"
	"github.com/tobe-body/tobe-body/scripts/bench/simworld"
	"github.com/tobe-body/tobe-body/sense"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "startupbench:", err)
		os.Exit(1)
	}
}

var errUsage = errors.New("usage: startupbench fill DIR [flags] | start [-runs R] [-log FILE] -- COMMAND [ARG...] | exec [-runs R] -- COMMAND [ARG]")

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) < 1 {
		return errUsage
	}
	switch args[0] {
	case "fill":
		return fill(ctx, args[1:], out)
	case "start":
		return measure(args[1:], true, out)
	case "exec":
		return measure(args[1:], false, out)
	case "budget":
		return budget(ctx, args[1:], out)
	}
	return errUsage
}

// kinds of slot in the history.
const (
	kSense uint8 = iota
	kProposed
	kSucceeded
	kGrantAdded
	kGrantRevoked
	kGrantExpired
	kTrip
	kReset
	kTakeover
	kRelease
	// What feeds the world model over the whole year (deleted by
	// retention after its week, what the model made of it kept).
	kCamSummary
	kMicLevel
	kAir
	kMotionStarted
	kMotionEnded
	kVoiceStarted
	kVoiceEnded
)

// slot is one event of the history: when, what, and which of its kind.
type slot struct {
	at   int64
	kind uint8
	n    int32
}

func fill(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("fill", flag.ContinueOnError)
	events := fs.Int("events", 1_000_000, "events in all")
	actions := fs.Int("actions", 250_000, "finished actions (two records each)")
	grants := fs.Int("grants", 1000, "grants: a tenth revoked within half an hour, one in a hundred without expiry, the rest given for a day and recorded expired (one record more each but the last)")
	trips := fs.Int("trips", 100, "e-stop trips, each with its reset")
	holds := fs.Int("holds", 50, "people's holds, each with its release")
	seed := fs.Uint64("seed", 1, "random seed")
	years := fs.Int("years", 1, "years of history")
	daily := fs.Bool("daily", false, "once a day of the history: retention, the outbox delivered, the archive's pass")
	budgetMB := fs.Int("disk-budget-mb", -1, "the ledger's disk budget (-1: the config's default)")
	worldDays := fs.Int("world-days", 365, "days of what feeds the world model (the sim board's rooms and air), besides the events: a camera summary and a sound summary every 7.5 minutes (the rate at which they mark a room seen), the air every 5 minutes, 75 motions and 75 voices a day")
	if len(args) < 1 {
		return errUsage
	}
	dir := args[0]
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	revoked, permanent := *grants/10, *grants/100
	expired := *grants - revoked - permanent
	audit := 2**actions + *grants + revoked + expired + 2**trips + 2**holds
	if audit > *events {
		return fmt.Errorf("%d audit records do not fit in %d events", audit, *events)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, "ledger.db")); err == nil {
		return fmt.Errorf("%s has a ledger already", dir)
	}
	end := time.Now()
	year := int64(*years) * int64(365*24*time.Hour)
	id, _, err := body.LoadIdentity(dir, end.Add(-time.Duration(year)))
	if err != nil {
		return err
	}

	// The history's slots, in time order.
	rng := rand.New(rand.NewPCG(*seed, 0))
	from := end.UnixNano() - year
	anytime := func() int64 { return from + rng.Int64N(year-int64(time.Hour)) }
	slots := make([]slot, 0, *events)
	add := func(at int64, k uint8, n int) { slots = append(slots, slot{at, k, int32(n)}) }
	for i := range *actions {
		at := anytime()
		add(at, kProposed, i)
		add(at+int64(20*time.Millisecond), kSucceeded, i)
	}
	for i := range *grants {
		at := anytime()
		add(at, kGrantAdded, i)
		switch {
		case i < revoked:
			add(at+rng.Int64N(int64(30*time.Minute)), kGrantRevoked, i)
		case i < revoked+expired:
			// The daemon's sweep finds it within a minute; one given in
			// the history's last day is still in force at its end.
			if exp := at + int64(grantFor) + rng.Int64N(int64(time.Minute)); exp < end.UnixNano() {
				add(exp, kGrantExpired, i)
			}
		}
	}
	for i := range *trips {
		at := anytime()
		add(at, kTrip, i)
		add(at+int64(2*time.Minute), kReset, i)
	}
	for i := range *holds {
		at := anytime()
		add(at, kTakeover, i)
		add(at+int64(30*time.Second), kRelease, i)
	}
	recent := int64(6 * 24 * time.Hour)
	for i := 0; len(slots) < *events; i++ {
		add(end.UnixNano()-recent+rng.Int64N(recent-int64(time.Minute)), kSense, i)
	}
	for day := 0; day < *worldDays; day++ {
		d0 := end.UnixNano() - int64(day+1)*int64(24*time.Hour)
		for t := int64(0); t < int64(24*time.Hour); t += int64(450 * time.Second) {
			add(d0+t, kCamSummary, day)
			add(d0+t+int64(time.Second), kMicLevel, day)
		}
		for t := int64(0); t < int64(24*time.Hour); t += int64(5 * time.Minute) {
			add(d0+t+int64(2*time.Second), kAir, day)
		}
		for i := 0; i < 75; i++ {
			at := d0 + rng.Int64N(int64(24*time.Hour-2*time.Minute))
			add(at, kMotionStarted, i)
			add(at+int64(time.Minute), kMotionEnded, i)
			at = d0 + rng.Int64N(int64(24*time.Hour-2*time.Minute))
			add(at, kVoiceStarted, i)
			add(at+int64(20*time.Second), kVoiceEnded, i)
		}
	}
	slices.SortStableFunc(slots, func(a, b slot) int { return cmp.Compare(a.at, b.at) })

	// The daemon's ledger options, on a clock that moves with the
	// history.
	cfg := config.Default().Ledger
	if *budgetMB >= 0 {
		cfg.DiskBudgetMB = *budgetMB
	}
	var clock atomic.Int64
	clock.Store(from)
	opts, err := body.LedgerOptions(cfg, dir, id, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})), awareness.Projections()...)
	if err != nil {
		return err
	}
	opts.Now = func() time.Time { return time.Unix(0, clock.Load()) }
	// The world model the daemon keeps on the sim board with its
	// defaults: its events are derived as the daemon derives them.
	wm, err := simworld.Model()
	if err != nil {
		return err
	}
	opts.Derivers = []ledger.Deriver{&world.Deriver{Model: wm}}
	store, err := ledger.Open(opts)
	if err != nil {
		return err
	}
	defer store.Close()
	// The acknowledgements of the outbox do not wait for company: a day
	// of history takes a moment here.
	store.Hurry()

	h := newHistory(*actions, *grants, revoked+expired)
	started := time.Now()
	// A commit holds at most 2000 events and at most a minute of the
	// history: the ledger's running clock is read once a commit, and the
	// world model judges its expiries and seen marks by it, as the
	// daemon's commits (every telemetry_commit_ms at most) let it.
	const batch, window = 2000, int64(time.Minute)
	evs := make([]ledger.Event, 0, batch)
	written, reported := 0, 0
	day := int64(24 * time.Hour)
	nextDay := from + day
	var archived ledger.ArchiveResult
	for i := 0; i < len(slots); {
		if *daily && slots[i].at >= nextDay {
			clock.Store(nextDay)
			nextDay += day
			res, err := dailyPass(ctx, store)
			if err != nil {
				return err
			}
			archived.Segments += res.Segments
			archived.Events += res.Events
			archived.Keys += res.Keys
			archived.Deleted = append(archived.Deleted, res.Deleted...)
		}
		evs = evs[:0]
		j := i
		for ; j < len(slots) && j-i < batch && slots[j].at-slots[i].at < window; j++ {
			e, err := h.event(slots[j])
			if err != nil {
				return err
			}
			evs = append(evs, e)
		}
		clock.Store(slots[j-1].at)
		if _, err := store.Append(ctx, evs...); err != nil {
			return err
		}
		written += len(evs)
		if written/100_000 > reported {
			reported = written / 100_000
			fmt.Fprintf(out, "  %d events written in %v\n", written, time.Since(started).Round(time.Second))
		}
		i = j
	}
	// Retention ran on the body now and then: it finds nothing of the
	// last six days old enough, and dedupe keys live as long as their
	// events (the actions' for ever).
	clock.Store(time.Now().UnixNano())
	res, err := store.Retain(ctx)
	if err != nil {
		return err
	}
	st, err := store.Stats()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "filled %s: %d events (last seq %d), %d MB, outbox %d rows; retention deleted %d events, %d dedupe keys; %v\n",
		dir, st.Events, st.LastSeq, st.FileBytes>>20, st.OutboxRows, res.Events, res.InboxKeys, time.Since(started).Round(time.Second))
	if *daily {
		a := st.Archive
		fmt.Fprintf(out, "archive: %d segments written, %d events, %d past keys; %d deletions over the budget; kept %d segments of %d MB; disk %d MB of a budget of %d MB\n",
			archived.Segments, archived.Events, a.PastKeys, len(archived.Deleted), a.Segments, a.Bytes>>20, a.DiskBytes>>20, a.DiskBudget>>20)
	}
	return nil
}

func budget(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("budget", flag.ContinueOnError)
	mb := fs.Int("disk-budget-mb", 0, "the budget")
	if len(args) < 1 {
		return errUsage
	}
	dir := args[0]
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *mb <= 0 {
		return errors.New("budget: want -disk-budget-mb N")
	}
	cfg := config.Default().Ledger
	cfg.DiskBudgetMB = *mb
	id, _, err := body.LoadIdentity(dir, time.Now())
	if err != nil {
		return err
	}
	opts, err := body.LedgerOptions(cfg, dir, id, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})), awareness.Projections()...)
	if err != nil {
		return err
	}
	store, err := ledger.Open(opts)
	if err != nil {
		return err
	}
	defer store.Close()
	st, err := store.ArchiveStats()
	if err != nil {
		return err
	}
	before := st.DiskBytes
	res, err := store.Archive(ctx)
	if err != nil {
		return err
	}
	var events, segments uint64
	for _, d := range res.Deleted {
		events, segments = events+d.Events, segments+d.To-d.From+1
	}
	if st, err = store.ArchiveStats(); err != nil {
		return err
	}
	fmt.Fprintf(out, "budget %d MiB: %d MiB before; %d segments deleted (%d events) in %d deletions, each recorded; %d MiB after (%d segments kept)\n",
		*mb, before>>20, segments, events, len(res.Deleted), st.DiskBytes>>20, st.Segments)
	return nil
}

// dailyPass is what a day of the daemon and its home server do besides
// appending: retention, the outbox delivered and acknowledged, the
// archive's pass.
func dailyPass(ctx context.Context, store *ledger.Store) (ledger.ArchiveResult, error) {
	if _, err := store.Retain(ctx); err != nil {
		return ledger.ArchiveResult{}, err
	}
	for after := uint64(0); ; {
		items, err := store.OutboxNext(after, 10000)
		if err != nil {
			return ledger.ArchiveResult{}, err
		}
		if len(items) == 0 {
			break
		}
		seqs := make([]uint64, len(items))
		for i, it := range items {
			seqs[i] = it.Seq
		}
		if err := store.OutboxAck(seqs...); err != nil {
			return ledger.ArchiveResult{}, err
		}
		after = seqs[len(seqs)-1]
	}
	return store.Archive(ctx)
}

// history makes the events of the slots.
type history struct {
	actionIDs, grantIDs []string
	expiring            int // the grants given for a day: the first ones
}

// grantFor is how long a grant is given for (as the README's grant add
// --expires 24h).
const grantFor = 24 * time.Hour

func newHistory(actions, grants, expiring int) *history {
	h := &history{actionIDs: make([]string, actions), grantIDs: make([]string, grants), expiring: expiring}
	for i := range h.actionIDs {
		h.actionIDs[i] = ledger.NewID().String()
	}
	for i := range h.grantIDs {
		h.grantIDs[i] = ledger.NewID().String()
	}
	return h
}

// grantAdded, grantRevoked and grantExpired are act's grant payloads.
type grantAdded struct {
	ID         string `cbor:"id"`
	Subject    string `cbor:"subject"`
	Capability string `cbor:"capability"`
	Scope      string `cbor:"scope"`
	Expires    string `cbor:"expires,omitempty"`
	By         string `cbor:"by"`
	Reason     string `cbor:"reason,omitempty"`
}

type grantRevoked struct {
	ID     string `cbor:"id"`
	By     string `cbor:"by"`
	Reason string `cbor:"reason,omitempty"`
}

type grantExpired struct {
	ID     string `cbor:"id"`
	By     string `cbor:"by"`
	Synced bool   `cbor:"synced,omitempty"`
}

func (h *history) event(s slot) (ledger.Event, error) {
	e := ledger.Event{OccurredAt: s.at, IngestedAt: s.at, Provenance: ledger.Observed, Trust: ledger.High, Privacy: ledger.Internal}
	var p any
	switch s.kind {
	case kProposed, kSucceeded:
		id := h.actionIDs[s.n]
		inv := act.Invocation{ActionID: id, IdempotencyKey: "k-" + id, Capability: "gpio.set", Target: "gpio.led",
			Params: map[string]string{"state": "on"}, Mode: act.Live}
		e.ChannelID, e.Provenance, e.AggregateID = inv.Capability, ledger.Told, "action:"+id
		if s.kind == kProposed {
			e.Type, e.DedupeKey = "action.proposed", "action:agent:pi:"+inv.IdempotencyKey
			p = map[string]any{"status": "proposed", "invocation": inv, "decision": map[string]string{"allow": "true"},
				"risk": "R1", "principal": "agent:pi", "session": "s1", "mode": "live"}
		} else {
			e.Type = "action.succeeded"
			p = map[string]any{"status": "succeeded", "invocation": inv, "result": act.Result{ActionID: id, Status: act.Succeeded,
				Receipt: "gpio.led on", Verification: &act.Verification{Result: "verified", Evidence: "LED reads back low (on)"}}}
		}
	case kGrantAdded:
		id := h.grantIDs[s.n]
		e.Type, e.Provenance, e.AggregateID, e.AggregateVersion = act.EventGrantAdded, ledger.Told, "grant:"+id, 1
		g := grantAdded{ID: id, Subject: "agent:pi", Capability: "gpio.*", Scope: "gpio.led", By: "admin:uid=0", Reason: "the lights"}
		if int(s.n) < h.expiring {
			g.Expires = time.Unix(0, s.at).Add(grantFor).UTC().Format(time.RFC3339Nano)
		}
		p = g
	case kGrantRevoked:
		id := h.grantIDs[s.n]
		e.Type, e.Provenance, e.AggregateID, e.AggregateVersion = act.EventGrantRevoked, ledger.Told, "grant:"+id, 2
		p = grantRevoked{ID: id, By: "admin:uid=0", Reason: "not any more"}
	case kGrantExpired:
		id := h.grantIDs[s.n]
		e.Type, e.AggregateID, e.AggregateVersion = act.EventGrantExpired, "grant:"+id, 2
		p = grantExpired{ID: id, By: act.ExpiredByWall, Synced: true}
	case kTrip:
		e.Type, e.ChannelID = "estop.tripped", act.EStopChannel
		p = act.Trip{Cause: "the e-stop line opened", LatencyNS: 41_000, AllSafe: true, Attention: "max",
			Outputs: []act.OutputState{{Name: "relay1", Safe: "low", ReadBack: "low"}, {Name: "led", Safe: "high", ReadBack: "high"}}}
	case kReset:
		e.Type, e.ChannelID = "estop.reset", act.EStopChannel
		p = act.ResetDone{By: "reset button", PressMS: 800}
	case kTakeover:
		e.Type, e.ChannelID = act.EventHumanTakeover, "gpio.button"
		p = map[string]any{"resource": "gpio.relay1", "control": "gpio.button", "epoch": uint64(s.n + 1), "end": "press_again",
			"cancelled": []string(nil), "renewed": false}
	case kRelease:
		e.Type, e.ChannelID = act.EventHumanReleased, "gpio.button"
		p = map[string]any{"resource": "gpio.relay1", "control": "gpio.button", "why": "pressed again"}
	case kCamSummary:
		e.Type, e.ChannelID, e.Trust = "camera.summary", "camera.front", ledger.Medium
		p = sense.CameraSummary{Zones: []string{"frame"}, Frames: 13500, OverS: 60}
	case kMicLevel:
		e.Type, e.ChannelID, e.Trust = "audio.level", "audio.mic", ledger.Medium
		p = sense.SoundLevel{RMS: -48, Peak: -40, Floor: -52, CoveredMS: 10000, PeriodMS: 10000}
	case kAir:
		t := 20 + 4*float64(s.at%int64(24*time.Hour))/float64(24*time.Hour)
		h := 45.0
		e.Type, e.ChannelID = "env.reading", "env.air"
		p = sense.EnvReading{Sensor: "air", Temperature: &t, Humidity: &h, Over: 300, Samples: 30}
	case kMotionStarted:
		e.Type, e.ChannelID, e.Trust, e.Privacy = "camera.motion_started", "camera.front", ledger.Medium, ledger.Sensitive
		p = sense.MotionStarted{Zone: "frame", Area: 0.05}
	case kMotionEnded:
		e.Type, e.ChannelID, e.Trust, e.Privacy = "camera.motion_ended", "camera.front", ledger.Medium, ledger.Sensitive
		p = sense.MotionEnded{Zone: "frame", DurationMS: 60000, Frames: 1800}
	case kVoiceStarted:
		e.Type, e.ChannelID, e.Trust, e.Privacy = "audio.voice_started", "audio.mic", ledger.Medium, ledger.Sensitive
		p = sense.Voice{SNR: 12}
	case kVoiceEnded:
		e.Type, e.ChannelID, e.Trust, e.Privacy = "audio.voice_ended", "audio.mic", ledger.Medium, ledger.Sensitive
		p = sense.Voice{SNR: 12, DurationMS: 20000}
	default:
		e.Provenance, e.Trust, e.SourceSequence = ledger.Observed, ledger.Medium, uint64(s.n)
		switch s.n % 4 {
		case 0:
			e.Type, e.ChannelID, e.Privacy = "camera.motion_started", "camera.front", ledger.Sensitive
			p = map[string]any{"zone": "door", "box": []float64{0.41, 0.22, 0.18, 0.35}, "area": 0.063}
		case 1:
			e.Type, e.ChannelID, e.Privacy = "camera.motion_ended", "camera.front", ledger.Sensitive
			p = map[string]any{"zone": "door", "duration_ms": 4200, "peak_area": 0.081}
		case 2:
			e.Type, e.ChannelID = "gpio.changed", "gpio.button"
			p = map[string]any{"line": "BUTTON", "active": s.n%8 == 2}
		default:
			e.Type, e.ChannelID = "audio.level", "audio.mic"
			p = map[string]any{"rms_dbfs": -42.5, "peak_dbfs": -30.1, "window_ms": 1000}
		}
	}
	var err error
	e.Payload, err = ledger.MarshalPayload(p)
	return e, err
}

// measure runs the command after "--" runs times: to READY=1 with wait,
// or to its end.
func measure(args []string, wait bool, out io.Writer) error {
	fs := flag.NewFlagSet("measure", flag.ContinueOnError)
	runs := fs.Int("runs", 3, "runs")
	logPath := fs.String("log", "", "append the command's stderr to this file")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up on a run after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cmdline := fs.Args()
	if len(cmdline) == 0 {
		return errUsage
	}
	var ms, kib, anon []float64
	for i := range *runs {
		var took time.Duration
		var mem map[string]int64
		var err error
		if wait {
			took, mem, err = startOnce(cmdline, *logPath, *timeout)
		} else {
			took, mem, err = execOnce(cmdline, *timeout)
		}
		if err != nil {
			return fmt.Errorf("run %d of %q: %w", i+1, strings.Join(cmdline, " "), err)
		}
		fmt.Fprintf(out, "  run %d: %8.1f ms  peak %8d KiB  anon %8d KiB\n", i+1, float64(took.Microseconds())/1000, mem["VmHWM"], mem["RssAnon"])
		ms = append(ms, float64(took.Microseconds())/1000)
		kib = append(kib, float64(mem["VmHWM"]))
		anon = append(anon, float64(mem["RssAnon"]))
	}
	fmt.Fprintf(out, "median: %.1f ms %.0f KiB %.0f KiB\n", median(ms), median(kib), median(anon))
	return nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// startOnce starts the daemon, waits for READY=1 on its notify socket,
// reads its memory, and stops it.
func startOnce(cmdline []string, logPath string, timeout time.Duration) (time.Duration, map[string]int64, error) {
	dir, err := os.MkdirTemp("", "startupbench")
	if err != nil {
		return 0, nil, err
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		return 0, nil, err
	}
	defer conn.Close()
	cmd := exec.Command(cmdline[0], cmdline[1:]...)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sock)
	cmd.Stdout = io.Discard
	if logPath != "" {
		f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return 0, nil, err
		}
		defer f.Close()
		cmd.Stderr = f
	}
	ready := make(chan error, 1)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				ready <- err
				return
			}
			for _, line := range strings.Split(string(buf[:n]), "\n") {
				if line == "READY=1" {
					ready <- nil
					return
				}
			}
		}
	}()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() error {
		cmd.Process.Signal(syscall.SIGINT)
		select {
		case err := <-exited:
			return err
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
			return errors.New("did not stop within 30 s of SIGINT")
		}
	}
	var took time.Duration
	select {
	case err := <-ready:
		took = time.Since(start)
		if err != nil {
			stop()
			return 0, nil, err
		}
	case err := <-exited:
		return 0, nil, fmt.Errorf("exited before READY=1: %v", err)
	case <-time.After(timeout):
		stop()
		return 0, nil, errors.New("no READY=1")
	}
	mem, err := memory(cmd.Process.Pid)
	if err != nil {
		stop()
		return 0, nil, err
	}
	if err := stop(); err != nil {
		return 0, nil, fmt.Errorf("stopping: %w", err)
	}
	return took, mem, nil
}

// memory reads a process's VmHWM and RssAnon, in KiB.
func memory(pid int) (map[string]int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	mem := map[string]int64{}
	for _, line := range strings.Split(string(b), "\n") {
		name, v, _ := strings.Cut(line, ":")
		if name == "VmHWM" || name == "RssAnon" {
			if mem[name], err = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64); err != nil {
				return nil, fmt.Errorf("%s: %w", line, err)
			}
		}
	}
	if len(mem) != 2 {
		return nil, errors.New("no VmHWM or RssAnon in /proc/PID/status")
	}
	return mem, nil
}

// execOnce runs a command to its end; its VmHWM is the kernel's maxrss
// (RssAnon is not known after the end).
func execOnce(cmdline []string, timeout time.Duration) (time.Duration, map[string]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, cmdline[0], cmdline[1:]...)
	cmd.Stdout = io.Discard
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %s", err, stderr.String())
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0, nil, errors.New("no rusage")
	}
	return took, map[string]int64{"VmHWM": int64(ru.Maxrss)}, nil // int32 on 32-bit ARM
}
