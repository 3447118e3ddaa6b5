package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tobe-body/tobe-body/ledger"
)

func TestWatchdogTiming(t *testing.T) {
	for _, c := range []struct {
		usec         string
		every, stall time.Duration
		ok           bool
	}{
		{"10000000", 2500 * time.Millisecond, 5 * time.Second, true},
		{"3000000", 750 * time.Millisecond, 1500 * time.Millisecond, true},
		{"", 0, 0, false},
		{"0", 0, 0, false},
		{"-5", 0, 0, false},
		{"ten", 0, 0, false},
	} {
		every, stall, ok := watchdogTiming(c.usec)
		if every != c.every || stall != c.stall || ok != c.ok {
			t.Errorf("%q: %v %v %v, want %v %v %v", c.usec, every, stall, ok, c.every, c.stall, c.ok)
		}
	}
}

// part is a watched part that answers while it is not stuck.
type part struct {
	mu    sync.Mutex
	stuck bool
	held  []chan struct{}
}

func (p *part) ask() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := make(chan struct{})
	if p.stuck {
		p.held = append(p.held, c)
	} else {
		close(c)
	}
	return c
}

func (p *part) set(stuck bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stuck = stuck
	if !stuck {
		for _, c := range p.held {
			close(c)
		}
		p.held = nil
	}
}

// TestWatchdogPingsOnlyWhileEveryPartAnswers: with WatchdogSec 10 s the
// watchdog pings every 2.5 s while the parts answer; a part slow to
// answer (a write of 5 s) costs a ping, not the body; a part that never
// answers again is stuck 5 s after it was asked: the note and the trip,
// and no ping after it.
func TestWatchdogPingsOnlyWhileEveryPartAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var mu sync.Mutex
		var pings []time.Duration
		var stuckAt time.Duration
		var why string
		loop, writer := &part{}, &part{}
		w := &watchdog{every: 2500 * time.Millisecond, stall: 5 * time.Second,
			parts: []*watched{{name: "the main loop", ask: loop.ask}, {name: "the ledger's writer", ask: writer.ask}},
			log:   slog.New(slog.NewTextHandler(io.Discard, nil)),
			notify: func(s string) error {
				mu.Lock()
				defer mu.Unlock()
				if s == "WATCHDOG=1" {
					pings = append(pings, time.Since(start))
				}
				return nil
			},
			stuck: func(w string) { stuckAt, why = time.Since(start), w },
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := make(chan struct{})
		go func() { w.Run(ctx); close(done) }()

		// A slow write: the writer does not answer from 11 s to 16 s.
		time.Sleep(11 * time.Second)
		writer.set(true)
		time.Sleep(5 * time.Second)
		writer.set(false)
		// The main loop blocks at 21 s, for ever.
		time.Sleep(5 * time.Second)
		loop.set(true)
		<-done

		var got []float64
		for _, p := range pings {
			got = append(got, p.Seconds())
		}
		// A ping at each turn whose questions, asked at the turn before,
		// were answered: the one asked at 12.5 s was answered at 16 s, so
		// 15 s has no ping; the one asked at 22.5 s never is.
		want := []float64{2.5, 5, 7.5, 10, 12.5, 17.5, 20, 22.5}
		if !slices.Equal(got, want) {
			t.Fatalf("pings at %v s, want %v s", got, want)
		}
		// Unanswered from 22.5 s: stuck at 27.5 s, 5 s on. systemd
		// would kill it at 32.5 s, WatchdogSec after the last ping.
		if stuckAt != 27500*time.Millisecond || why != "the main loop has not answered for 5s" {
			t.Errorf("stuck at %v: %q", stuckAt, why)
		}
		loop.set(false)
	})
}

// TestWatchdogNoteLatchesTheNextStart: the note the watchdog leaves is
// read at the next start, and removed once a reset is on record.
func TestWatchdogNoteLatchesTheNextStart(t *testing.T) {
	dir := t.TempDir()
	if why := stuckLastRun(dir); why != "" {
		t.Fatalf("no note: %q", why)
	}
	path := filepath.Join(dir, stuckNote)
	if err := os.WriteFile(path, []byte("the ledger's writer has not answered for 5s\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if why := stuckLastRun(dir); why != "the ledger's writer has not answered for 5s" {
		t.Fatalf("the note read: %q", why)
	}
	store, err := ledger.Open(ledger.Options{Path: filepath.Join(dir, "ledger.db"), AgentID: ledger.UUID{1}, BodyID: ledger.UUID{2}})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	j := clearsStuckNote{Journal: store, path: path, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ev := func(typ string) ledger.Event {
		return ledger.Event{Type: typ, ChannelID: "estop.main", Provenance: ledger.Observed}
	}
	if _, err := j.Append(t.Context(), ev("estop.tripped")); err != nil {
		t.Fatal(err)
	}
	if stuckLastRun(dir) == "" {
		t.Fatal("a trip removed the note")
	}
	if _, err := j.Append(t.Context(), ev("estop.tripped"), ev("estop.reset")); err != nil {
		t.Fatal(err)
	}
	if why := stuckLastRun(dir); why != "" {
		t.Fatalf("the note after a reset: %q", why)
	}
}

// TestWatchdogPingsSystemd: the body as a process under a notify socket
// and WATCHDOG_USEC, as systemd runs it: READY=1, then WATCHDOG=1 at
// every turn (a quarter of WatchdogSec), and STOPPING=1 on SIGTERM.
func TestWatchdogPingsSystemd(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cmd, stdout, stderr := startProcessEnv(t, []string{"NOTIFY_SOCKET=" + sock, "WATCHDOG_USEC=4000000"},
		"run", "--board", "sim", "--data", filepath.Join(dir, "data"))
	go io.Copy(io.Discard, stdout)
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	var got []string
	buf := make([]byte, 4096)
	conn.SetReadDeadline(time.Now().Add(2 * time.Minute))
	for pings := 0; pings < 3; {
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("after %q: %v\n%s", got, err, stderr)
		}
		msg := string(buf[:n])
		got = append(got, msg)
		if msg == "WATCHDOG=1" {
			pings++
		}
	}
	if !strings.HasPrefix(got[0], "READY=1\n") {
		t.Errorf("the first notification %q, want READY=1 first", got[0])
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for {
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("no STOPPING=1 after SIGTERM: %v (got %q)\n%s", err, got, stderr)
		}
		if string(buf[:n]) == "STOPPING=1" {
			break
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v\n%s", err, stderr)
	}
	if !strings.Contains(stderr.String(), "watchdog ping_every=1s stuck_after=2s watching=3") {
		t.Errorf("the watchdog's line, with the main loop, the ledger's writer and the e-stop watched:\n%s", stderr)
	}
}

// TestWatchdogNoteThroughTheDaemon: a body whose last run the watchdog
// stopped starts latched, saying why; a reset removes the note, and the
// next start is armed.
func TestWatchdogNoteThroughTheDaemon(t *testing.T) {
	d := startDaemon(t, "")
	cfg := filepath.Join(filepath.Dir(d.data), "config.json")
	d.stop(t)
	note := filepath.Join(d.data, stuckNote)
	if err := os.WriteFile(note, []byte("the main loop has not answered for 5s\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	d = startDaemonIn(t, d.data, cfg)
	out, _ := runCmd(t, "estop", "status", "--data", d.data)
	if !strings.Contains(out, "LATCHED: latched at start: the watchdog stopped the last run: the main loop has not answered for 5s") {
		t.Fatalf("after a run the watchdog stopped:\n%s", out)
	}
	if out, err := runCmd(t, "estop", "reset", "--data", d.data); err != nil {
		t.Fatalf("reset: %v\n%s", err, out)
	}
	// The reset's record is written by the e-stop's recorder, then the
	// note goes.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(note); errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the note is still there a minute after the reset")
		}
	}
	d.stop(t)
	d = startDaemonIn(t, d.data, cfg)
	defer d.stop(t)
	if out, _ := runCmd(t, "estop", "status", "--data", d.data); !strings.Contains(out, "e-stop    armed") {
		t.Errorf("after the reset and a restart:\n%s", out)
	}
}
