package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/control/world"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/ledger"
	"github.com/tobe-body/tobe-body/scripts/bench/simworld"
)

// With fakeDaemon set, the test binary plays a daemon: it says READY=1
// on NOTIFY_SOCKET and waits for SIGINT.
const fakeDaemon = "STARTUPBENCH_FAKE_DAEMON"

func TestMain(m *testing.M) {
	if os.Getenv(fakeDaemon) != "" {
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGINT)
		c, err := net.Dial("unixgram", os.Getenv("NOTIFY_SOCKET"))
		if err != nil {
			os.Exit(3)
		}
		c.Write([]byte("STATUS=starting\nREADY=1"))
		<-stop
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// What feeds the world model over ten days: retention deleted what is
// older than a week, what the model made of it is kept, and the model
// answers what the room was nine days ago.
func TestFillKeepsTheWorldsHistory(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if err := run(t.Context(), []string{"fill", dir, "-events", "2000", "-actions", "100", "-grants", "10", "-trips", "1", "-holds", "1", "-world-days", "10"}, &out); err != nil {
		t.Fatal(err)
	}
	s := openFilled(t, dir, slog.New(slog.DiscardHandler))
	if r, err := s.Verify(t.Context()); err != nil || !r.OK() {
		t.Errorf("verify: %+v %v", r, err)
	}
	old, err := s.Events(ledger.Filter{Types: []string{"camera.summary"}, Limit: 1})
	if err != nil || len(old) == 0 || time.Since(old[0].Occurred()) > 9*24*time.Hour {
		t.Errorf("the oldest camera summary kept: %+v %v; want retention to have deleted the older ones", old, err)
	}
	m, _ := simworld.Model()
	r := &world.Reader{Store: s, Model: m}
	h, err := r.History("room.front", time.Now().Add(-10*24*time.Hour), time.Now().Add(-8*24*time.Hour), 0)
	if err != nil || len(h.Changes) < 50 {
		t.Errorf("the room's changes nine days ago: %d, %v; want the model's history kept", len(h.Changes), err)
	}
}

// A small history, as the daemon would find it: every projection in
// place (nothing to build at open), the counts right, and the state it
// restores what the history says.
func TestFill(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	err := run(t.Context(), []string{"fill", dir, "-events", "3000", "-actions", "400", "-grants", "20", "-trips", "3", "-holds", "2", "-world-days", "0"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "filled "+dir+": ") {
		t.Errorf("printed %q", out.String())
	}
	var log bytes.Buffer
	s := openFilled(t, dir, slog.New(slog.NewTextHandler(&log, nil)))
	if strings.Contains(log.String(), "built") || strings.Contains(log.String(), "counted") {
		t.Errorf("the fill left something for the daemon to do at open: %s", log.String())
	}
	if r, err := s.Verify(t.Context()); err != nil || !r.OK() {
		t.Errorf("verify: %+v %v", r, err)
	}
	st, _ := s.Stats()
	// The world model's records of the trips' outputs besides the 3000.
	derived, _ := s.Events(ledger.Filter{Types: []string{"world."}, Limit: 100_000})
	if st.Events != 3000+len(derived) || len(derived) == 0 || st.Aggregates != 400+20 {
		t.Errorf("stats %+v, %d of the world model", st, len(derived))
	}
	if latched, err := act.LatchedAtStop(s); latched || err != nil {
		t.Errorf("latched %v %v: every trip was reset", latched, err)
	}
	if held, err := act.HeldAtStop(s); len(held) != 0 || err != nil {
		t.Errorf("held %v %v: every hold was released", held, err)
	}
	clock, err := body.NewClock()
	if err != nil {
		t.Fatal(err)
	}
	g, err := act.LoadGrants(s, clock)
	if err != nil {
		t.Fatal(err)
	}
	revoked := 0
	for _, gr := range g.All() {
		if gr.Revoked {
			revoked++
		}
	}
	if len(g.All()) != 20 || revoked != 2 {
		t.Errorf("%d grants, %d revoked; want 20 and 2", len(g.All()), revoked)
	}
	if ids, err := act.NewRunner(act.Environment{}, s).Recover(t.Context(), s); len(ids) != 0 || err != nil {
		t.Errorf("recovered %v %v: every action finished", ids, err)
	}
}

func TestStartAndExec(t *testing.T) {
	t.Setenv(fakeDaemon, "1")
	var out bytes.Buffer
	if err := run(context.Background(), []string{"start", "-runs", "2", "--", os.Args[0]}, &out); errors.Is(err, syscall.ENOEXEC) {
		t.Skip("this test binary cannot start itself here (another architecture's binary under qemu-user)")
	} else if err != nil {
		t.Fatal(err)
	}
	if strings.Count(out.String(), "  run ") != 2 || !strings.Contains(out.String(), "median: ") {
		t.Errorf("start printed %q", out.String())
	}
	out.Reset()
	if err := run(context.Background(), []string{"exec", "-runs", "1", "--", "true"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "median: ") {
		t.Errorf("exec printed %q", out.String())
	}
	if err := run(context.Background(), []string{"exec", "--", "false"}, &out); err == nil {
		t.Error("a command that failed was measured")
	}
	if err := run(context.Background(), nil, &out); err != errUsage {
		t.Errorf("no arguments: %v", err)
	}
}

// openFilled opens a filled DIR's ledger as the daemon would, with the
// identity the fill made, and closes it when the test ends.
func openFilled(t *testing.T, dir string, log *slog.Logger) *ledger.Store {
	t.Helper()
	id, created, err := body.LoadIdentity(dir, time.Now())
	if err != nil || created {
		t.Fatalf("identity %+v created %v: %v", id, created, err)
	}
	opts, err := body.LedgerOptions(config.Default().Ledger, dir, id, log, awareness.Projections()...)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ledger.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
