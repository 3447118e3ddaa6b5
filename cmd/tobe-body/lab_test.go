//go:build lab

package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/admin"
	"github.com/tobe-body/tobe-body/board"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/cmd/tobe-body/internal/cli"
	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/gpio/gpiosim"
	"github.com/tobe-body/tobe-body/ledger"
)

// E6 of RELIABILITY.md in the lab VM (scripts/lab/run.sh): `tobe-body run
// --board lab` runs as a process of its own (this test binary started
// again as the command, see TestMain) on gpio-sim's chip tobe-lab, with
// its data on the VM's ext4 disk (LAB_DISK). The test kills it with
// SIGKILL and starts it again. Outputs are observed through gpio-sim's
// value attribute, the e-stop contacts are worked through their pull
// attribute, and the body is asked through its admin socket, as
// `tobe-body status`, `do`, `estop` and `ledger` ask it.
//
// Two things of gpio-sim shape what is seen:
//   - A line nobody holds reads its pull: when the kernel releases the
//     killed body's lines, an output falls to the sim's pull, as a pin
//     set back to input floats to its resistor. Some outputs here get a
//     pull-up (a driver stage that switches on when its input floats), so
//     that the restarted body's request is visible: the line reads high
//     until the body requests it at its safe level.
//   - The body requests ESTOP and ESTOP2 with their pull-up, which
//     gpio-sim applies to the simulated line: every start reads the
//     contacts open and latches ("the e-stop line is open") until the test
//     closes them (pull-down) and resets as a local administrator. A real
//     normally-closed contact holds the line low against the pull-up. The
//     e-stop's status keeps the first reason it latched for, so a latch
//     kept from before the kill is told apart from this one.
//
// Timings are logged, not asserted: under emulation they mean little.

// labSim is one gpio-sim line: its pull drives it from outside, its
// value reads what is on it.
type labSim = gpiosim.Line

// labLines are the lab board's gpio-sim lines by name, and its outputs'
// safe levels as the value attribute shows them ("0" or "1").
type labLines struct {
	sims map[string]labSim
	outs []string          // output line names, in the profile's order
	safe map[string]string // by output line name
}

func newLabLines(t *testing.T) *labLines {
	t.Helper()
	set, err := board.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	p, err := set.Get("lab")
	if err != nil {
		t.Fatal(err)
	}
	l := &labLines{sims: map[string]labSim{}, safe: map[string]string{}}
	for _, line := range p.Lines() {
		sim, err := gpiosim.Find(p.GPIO.Chip, line.Line)
		if err != nil {
			t.Fatal(err)
		}
		l.sims[line.Line] = sim
		if line.Out != nil {
			l.outs = append(l.outs, line.Line)
			l.safe[line.Line] = "0"
			if line.Out.Safe == hal.High {
				l.safe[line.Line] = "1"
			}
		}
	}
	for _, want := range []string{"ESTOP", "ESTOP2", "RESET", "RELAY1", "RELAY2", "LED", "BUZZER"} {
		if _, ok := l.sims[want]; !ok {
			t.Fatalf("the lab profile has no line %s", want)
		}
	}
	return l
}

func (l *labLines) pull(t *testing.T, line string, high bool) {
	t.Helper()
	if err := l.sims[line].SetPull(high); err != nil {
		t.Fatal(err)
	}
}

func (l *labLines) read(t *testing.T, line string) string {
	t.Helper()
	v, err := l.sims[line].Value()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// levels reads every output: "RELAY1=0 RELAY2=1 ...".
func (l *labLines) levels(t *testing.T) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, o := range l.outs {
		m[o] = l.read(t, o)
	}
	return m
}

// floatHigh are the outputs given a pull-up, so that a released line
// reads high (unsafe) and the restarted body's request shows.
var floatHigh = []string{"RELAY2", "LED"}

// setPulls gives the outputs of floatHigh a pull-up and the others a
// pull-down. A held output keeps what the body drives.
func (l *labLines) setPulls(t *testing.T) {
	t.Helper()
	for _, o := range l.outs {
		l.pull(t, o, slices.Contains(floatHigh, o))
	}
}

// labConfig is the body's config in the lab: the VM's data disk is 64
// MiB, below the default low-disk mark, which would leave the body
// degraded and refuse the relays (R2).
const labConfig = `{"version": 1, "monitor": {"quiet": true}, "sense": {"self": {"disk_low_mb": 8, "disk_critical_mb": 2}}}`

// labData makes a data directory on the lab's disk, with the lab
// board's I²C sensor and LED there for the body (labDevices).
func labData(t *testing.T) (data, cfg string) {
	t.Helper()
	labDevices(t)
	return labDir(t)
}

// labDir makes a data directory on the lab's disk and the config.
func labDir(t *testing.T) (data, cfg string) {
	t.Helper()
	root := os.Getenv("LAB_DISK")
	if root == "" {
		t.Log("LAB_DISK is not set: the data directory is in the initramfs, where fsync reaches no disk")
		root = t.TempDir()
	}
	dir, err := os.MkdirTemp(root, "e6-")
	if err != nil {
		t.Fatal(err)
	}
	// The disk is small and each ledger has its journal (8 MiB).
	t.Cleanup(func() { os.RemoveAll(dir) })
	cfg = filepath.Join(dir, "config.json")
	if err := os.WriteFile(cfg, []byte(labConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "data"), cfg
}

// labBody is one `tobe-body run --board lab` process.
type labBody struct {
	data, cfg, sock, log string
	cmd                  *exec.Cmd
	started              time.Time
	exited               chan struct{}
	err                  error // of Wait, once exited is closed
}

// startBody starts the daemon on the lab board. It does not wait for it:
// see ready.
func startBody(t *testing.T, data, cfg string) *labBody {
	t.Helper()
	return startBodyOn(t, "lab", data, cfg)
}

// startBodyOn starts the daemon on a board.
func startBodyOn(t *testing.T, board, data, cfg string) *labBody {
	t.Helper()
	b := &labBody{data: data, cfg: cfg, sock: filepath.Join(data, cli.AdminSocket), exited: make(chan struct{})}
	logf, err := os.CreateTemp(t.TempDir(), "daemon-*.log")
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close() // the child has its own copy
	b.log = logf.Name()
	b.cmd = exec.Command(os.Args[0], "run", "--board", board, "--data", data, "--config", cfg)
	b.cmd.Env = append(os.Environ(), "TOBE_BODY_TEST_MAIN=1")
	b.cmd.Stdout, b.cmd.Stderr = logf, logf
	b.started = time.Now()
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		b.err = b.cmd.Wait()
		close(b.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-b.exited:
		default:
			b.cmd.Process.Kill()
			<-b.exited
		}
		if t.Failed() {
			out, _ := os.ReadFile(b.log)
			t.Logf("the daemon (pid %d) wrote:\n%s", b.cmd.Process.Pid, out)
		}
	})
	return b
}

// waitFor polls cond until it holds or within has passed; cond says what
// it saw, for the failure.
func waitFor(t *testing.T, what string, within time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, saw := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s; last saw %s", within, what, saw)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// status asks the body how it is.
func (b *labBody) status(t *testing.T) (awareness.Status, error) {
	return admin.Call(t.Context(), &admin.Client{Path: b.sock}, awareness.OpStatus, awareness.None{})
}

// ready waits until this process answers on the admin socket (after its
// e-stop check and its recovery of actions) and returns its status and
// how long after its start that was.
func (b *labBody) ready(t *testing.T) (awareness.Status, time.Duration) {
	t.Helper()
	var st awareness.Status
	waitFor(t, "the daemon to answer on its admin socket", 2*time.Minute, func() (bool, string) {
		select {
		case <-b.exited:
			out, _ := os.ReadFile(b.log)
			t.Fatalf("the daemon exited before it was ready: %v\n%s", b.err, out)
		default:
		}
		var err error
		st, err = b.status(t)
		return err == nil && st.PID == b.cmd.Process.Pid, fmt.Sprint(err)
	})
	return st, time.Since(b.started)
}

// cli runs a tobe-body command against this body.
func (b *labBody) cli(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(t.Context(), append(args, "--socket", b.sock), nil, &out, &out)
	return out.String(), err
}

func (b *labBody) estop(t *testing.T) act.EStopStatus {
	t.Helper()
	st, err := admin.Call(t.Context(), &admin.Client{Path: b.sock}, awareness.OpEStopStatus, awareness.None{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// arm closes both e-stop contacts, waits until the body reads them
// closed, resets the latch as a local administrator, and waits for a
// self-state that lets relays act.
// startWithOutputOn starts the body on the lab's lines, waits until it
// answers, resets the e-stop that the contacts' pull-ups tripped at its
// start, and turns the output target on.
func startWithOutputOn(t *testing.T, target string) (*labLines, *labBody) {
	t.Helper()
	l := newLabLines(t)
	l.setPulls(t)
	data, cfg := labData(t)
	b := startBody(t, data, cfg)
	b.ready(t)
	b.arm(t, l)
	if out, err := b.cli(t, "do", "gpio.set", target, "state=on"); err != nil {
		t.Fatalf("%s on: %v\n%s", target, err, out)
	}
	return l, b
}

func (b *labBody) arm(t *testing.T, l *labLines) {
	t.Helper()
	l.pull(t, "ESTOP", false)
	l.pull(t, "ESTOP2", false)
	waitFor(t, "the body to read the e-stop contacts closed", 10*time.Second, func() (bool, string) {
		st := b.estop(t)
		return st.Main == "ok" && st.Second == "ok", fmt.Sprintf("%+v", st)
	})
	if out, err := b.cli(t, "estop", "reset"); err != nil || !strings.Contains(out, "e-stop    armed") {
		t.Fatalf("estop reset: %v\n%s", err, out)
	}
	waitFor(t, "the reset in the ledger", 10*time.Second, func() (bool, string) {
		return len(b.events(t, "estop.reset")) > 0, "no estop.reset yet"
	})
	waitFor(t, "a self-state below degraded", 30*time.Second, func() (bool, string) {
		st, err := b.status(t)
		if err != nil || st.Self == nil {
			return false, fmt.Sprint(err, " no self-state yet")
		}
		return st.Self.Level < body.LevelDegraded, fmt.Sprintf("%s %q", st.Self.Level, st.Self.Why)
	})
}

// kill9 kills the body with SIGKILL and waits for the kernel to reap it.
func (b *labBody) kill9(t *testing.T) {
	t.Helper()
	if err := b.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the killed daemon was not reaped")
	}
	ws, ok := b.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the daemon ended with %v, not by SIGKILL", b.err)
	}
}

// events reads the ledger's events of the types given through the body,
// following the replies' cursor to the end.
func (b *labBody) events(t *testing.T, types ...string) []ledger.EventView {
	t.Helper()
	var out []ledger.EventView
	in := awareness.EventsIn{Types: types, Limit: 10000}
	for {
		reply, err := admin.Call(t.Context(), &admin.Client{Path: b.sock, Timeout: 30 * time.Second}, awareness.OpEvents, in)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, reply.Events...)
		if !reply.More {
			return out
		}
		in.After = reply.LastSeq
	}
}

// field digs into an event's payload: field(e, "invocation", "idempotency_key").
func field(e ledger.EventView, path ...string) any {
	var v any = e.Payload
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// submit asks the runner through the admin socket, as `tobe-body do`.
func (b *labBody) submit(t *testing.T, req awareness.DoIn) (act.Result, error) {
	return admin.Call(t.Context(), &admin.Client{Path: b.sock, Timeout: time.Minute}, awareness.OpDo, req)
}

// outputWatch samples the outputs' value attributes from a goroutine and
// keeps every change.
type outputWatch struct {
	t0   time.Time
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	changes map[string][]change
	errs    []error
}

type change struct {
	at time.Duration // since t0
	v  string
}

func (l *labLines) watch(t *testing.T) *outputWatch {
	w := &outputWatch{t0: time.Now(), stop: make(chan struct{}), done: make(chan struct{}), changes: map[string][]change{}}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			for _, o := range l.outs {
				v, err := l.sims[o].Value()
				w.mu.Lock()
				if err != nil {
					w.errs = append(w.errs, err)
				} else if c := w.changes[o]; len(c) == 0 || c[len(c)-1].v != v {
					w.changes[o] = append(c, change{at: time.Since(w.t0), v: v})
				}
				w.mu.Unlock()
			}
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(w.end)
	return w
}

func (w *outputWatch) end() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// safeFrom stops the watch and checks every output: once it read its
// safe level it never left it. It returns when each first read safe
// (since the watch began), and the latest of those.
func (w *outputWatch) safeFrom(t *testing.T, l *labLines) (map[string]time.Duration, time.Duration) {
	t.Helper()
	w.end()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.errs) > 0 {
		t.Errorf("reading the outputs: %v", errors.Join(w.errs...))
	}
	first := map[string]time.Duration{}
	var latest time.Duration
	for _, o := range l.outs {
		cs := w.changes[o]
		i := slices.IndexFunc(cs, func(c change) bool { return c.v == l.safe[o] })
		if i < 0 {
			t.Errorf("%s never read its safe level %s: %v", o, l.safe[o], cs)
			continue
		}
		if i+1 < len(cs) {
			t.Errorf("%s read safe (%s) at %v, then left it: %v", o, l.safe[o], cs[i].at, cs[i+1:])
		}
		first[o] = cs[i].at
		latest = max(latest, cs[i].at)
	}
	return first, latest
}

// restart starts the body again on the same data with the outputs
// watched from before the start, waits until it answers and checks that
// every output went to its safe level and stayed there. It logs what the
// lines did and how long each step took.
func restart(t *testing.T, l *labLines, old *labBody) (*labBody, awareness.Status, *outputWatch) {
	t.Helper()
	w := l.watch(t)
	b := startBody(t, old.data, old.cfg)
	st, took := b.ready(t)
	t.Logf("restarted: pid %d answers %v after its start", st.PID, took.Round(time.Millisecond))
	// Requested at start, so safe by now: the outputs that float high read
	// their safe level from the body's request on.
	for _, o := range l.outs {
		if v := l.read(t, o); v != l.safe[o] {
			t.Errorf("%s reads %s once the restarted body answers; safe is %s", o, v, l.safe[o])
		}
	}
	return b, st, w
}

// logSafe stops the watch, asserts, and logs when each output read safe.
func logSafe(t *testing.T, l *labLines, w *outputWatch, b *labBody) {
	t.Helper()
	first, latest := w.safeFrom(t, l)
	started := b.started.Sub(w.t0)
	var parts []string
	for _, o := range l.outs {
		at := "safe before the start (its pull)"
		if slices.Contains(floatHigh, o) {
			at = fmt.Sprintf("safe %v after the start", (first[o] - started).Round(time.Millisecond))
		}
		parts = append(parts, o+": "+at)
	}
	t.Logf("outputs after the restart: %s; every output safe %v after the start, and none left its safe level", strings.Join(parts, ", "), (latest - started).Round(time.Millisecond))
}

// TestLabKillWithAnOutputOnAndAnActionRunning: a relay on and a pulse
// running when the body is killed. After the restart every output is at
// its safe level from its request on, the pulse is recorded unknown and
// not run again, and a repeat of it with the same idempotency key
// returns that record and does nothing.
func TestLabKillWithAnOutputOnAndAnActionRunning(t *testing.T) {
	l := newLabLines(t)
	l.setPulls(t)
	data, cfg := labData(t)
	b := startBody(t, data, cfg)
	st, took := b.ready(t)
	t.Logf("first start: answers %v after its start; e-stop latched %v (%s)", took.Round(time.Millisecond), st.EStop.Latched, st.EStop.Why)
	b.arm(t, l)

	out, err := b.cli(t, "do", "gpio.set", "gpio.relay2", "state=on")
	if err != nil || !strings.Contains(out, " succeeded") || !strings.Contains(out, "verified: verified: relay2 read back high") {
		t.Fatalf("relay2 on: %v\n%s", err, out)
	}
	if v := l.read(t, "RELAY2"); v != "1" {
		t.Fatalf("RELAY2 reads %s at the sim after gpio.set on", v)
	}

	// A pulse of 20 s on the buzzer: running when the body dies.
	const key = "e6-pulse"
	pulse := awareness.DoIn{Capability: "gpio.pulse", Target: "gpio.buzzer", Params: map[string]string{"duration_ms": "20000"}, IdempotencyKey: key}
	pulseDone := make(chan error, 1)
	go func() {
		_, err := b.submit(t, pulse)
		pulseDone <- err
	}()
	var actionID string
	waitFor(t, "the pulse to be running", 30*time.Second, func() (bool, string) {
		if l.read(t, "BUZZER") != "1" {
			return false, "BUZZER low"
		}
		for _, e := range b.events(t, "action.running") {
			if field(e, "invocation", "idempotency_key") == key {
				actionID = strings.TrimPrefix(e.AggregateID, "action:")
				return true, ""
			}
		}
		return false, "no action.running with its key"
	})
	before := l.levels(t)

	b.kill9(t)
	after := l.levels(t)
	if err := <-pulseDone; err == nil {
		t.Error("the pulse's call returned no error though the body was killed")
	}
	// The kernel released the lines: each reads its pull now.
	for _, o := range l.outs {
		want := "0"
		if slices.Contains(floatHigh, o) {
			want = "1"
		}
		if after[o] != want {
			t.Errorf("%s reads %s after the kill; its pull is %s", o, after[o], want)
		}
	}
	t.Logf("outputs before the kill %v, after it %v: released lines read their pull (RELAY2 and LED pulled up, so unsafe until the body comes back)", before, after)

	b, st, w := restart(t, l, b)
	t.Logf("after the restart the e-stop is latched %v (%s): the lab's contacts read open at every start", st.EStop.Latched, st.EStop.Why)

	// The pulse: recorded unknown by this start, never running again.
	var mine []ledger.EventView
	for _, e := range b.events(t, "action.") {
		if e.AggregateID == "action:"+actionID {
			mine = append(mine, e)
		}
	}
	var types []string
	for _, e := range mine {
		types = append(types, e.Type)
	}
	if !slices.Equal(types, []string{"action.proposed", "action.running", "action.unknown"}) {
		t.Errorf("the pulse's records: %v, want proposed, running, unknown", types)
	} else if d, _ := field(mine[2], "result", "detail").(string); !strings.Contains(d, "not run again") {
		t.Errorf("its unknown record says %q", d)
	}

	// Armed again, the same request (the same key) returns the record
	// and does nothing.
	b.arm(t, l)
	res, err := b.submit(t, pulse)
	if err != nil || res.Status != act.Unknown || !res.Repeat || res.ActionID != actionID {
		t.Errorf("the pulse repeated with its key: %+v %v; want the recorded unknown of %s", res, err, actionID)
	}
	if v := l.read(t, "RELAY2"); v != "0" {
		t.Errorf("RELAY2 reads %s: nothing resumes after a restart", v)
	}
	logSafe(t, l, w, b)
	b.kill9(t)
}

// TestLabKillWhileLatchedStartsLatched: the e-stop trips, its contact
// closes again without a reset, the body is killed: it comes back
// latched for that reason, refuses every action with estop_latched, and
// its outputs are safe from their request on.
func TestLabKillWhileLatchedStartsLatched(t *testing.T) {
	l, b := startWithOutputOn(t, "gpio.relay2")

	l.pull(t, "ESTOP", true) // the button pressed: the contact opens
	// The trip after the reset the start needed: the start's own trip is
	// in the ledger too, and a kill before this one is written would
	// leave the ledger saying reset.
	waitFor(t, "the trip in the ledger", 10*time.Second, func() (bool, string) {
		tripped := false
		for _, e := range b.events(t, "estop.tripped", "estop.reset") {
			switch {
			case e.Type == "estop.reset":
				tripped = false
			case field(e, "cause") == "line_open":
				tripped = true
			}
		}
		return tripped, fmt.Sprintf("%+v", b.estop(t))
	})
	if v := l.read(t, "RELAY2"); v != "0" {
		t.Errorf("RELAY2 reads %s after the trip", v)
	}
	l.pull(t, "ESTOP", false) // released, not reset
	waitFor(t, "the contact read closed", 10*time.Second, func() (bool, string) {
		st := b.estop(t)
		return st.Main == "ok", fmt.Sprintf("%+v", st)
	})
	if st := b.estop(t); !st.Latched {
		t.Fatalf("unlatched by the contact closing: %+v", st)
	}

	b.kill9(t)
	t.Logf("outputs after the kill: %v", l.levels(t))
	b, st, w := restart(t, l, b)
	if st.EStop == nil || !st.EStop.Latched || !strings.Contains(st.EStop.Why, "it was latched when the body stopped") {
		t.Errorf("after the restart the e-stop is %+v; want latched because it was", st.EStop)
	}
	// Closed contacts do not clear it; the status still says why.
	l.pull(t, "ESTOP", false)
	l.pull(t, "ESTOP2", false)
	waitFor(t, "the contacts read closed", 10*time.Second, func() (bool, string) {
		st := b.estop(t)
		return st.Main == "ok" && st.Second == "ok", fmt.Sprintf("%+v", st)
	})
	if st := b.estop(t); !st.Latched || !strings.Contains(st.Why, "it was latched when the body stopped") {
		t.Errorf("with the contacts closed: %+v; want still latched", st)
	}
	refusedAll(t, b)
	logSafe(t, l, w, b)
	b.kill9(t)
}

// refusedAll asks for every capability the body offers, on an output
// that floats high, and wants each refused with estop_latched.
func refusedAll(t *testing.T, b *labBody) {
	t.Helper()
	cs, err := admin.Call(t.Context(), &admin.Client{Path: b.sock}, awareness.OpCapabilities, awareness.None{})
	if err != nil {
		t.Fatal(err)
	}
	caps := cs.Capabilities
	reqs := map[string]awareness.DoIn{
		"gpio.set":    {Capability: "gpio.set", Target: "gpio.led", Params: map[string]string{"state": "on"}},
		"gpio.pulse":  {Capability: "gpio.pulse", Target: "gpio.relay2", Params: map[string]string{"duration_ms": "500"}},
		"body.notify": {Capability: "body.notify", Target: "home", Params: map[string]string{"message": "e6"}},
		"light.on":    {Capability: "light.on", Target: "light.status"},
		"light.off":   {Capability: "light.off", Target: "light.status"},
		"light.blink": {Capability: "light.blink", Target: "light.status", Params: map[string]string{"period_ms": "200", "count": "2"}},
		// Keeping what the camera sees is refused as anything else is.
		"camera.snapshot": {Capability: "camera.snapshot", Target: "camera.front"},
		"audio.clip":      {Capability: "audio.clip", Target: "audio.mic", Params: map[string]string{"before_ms": "500"}},
	}
	var names []string
	for _, c := range caps {
		names = append(names, fmt.Sprintf("%s %s", c.Name, c.Risk))
		req, ok := reqs[c.Name]
		if !ok {
			t.Errorf("no request here for capability %s (%s)", c.Name, c.Risk)
			continue
		}
		res, err := b.submit(t, req)
		if awareness.ReasonOf(err) != act.ReasonEStopLatched || res.Status != act.Refused || res.Reason != act.ReasonEStopLatched {
			t.Errorf("%s while latched: %+v %v; want refused, estop_latched", c.Name, res, err)
		}
	}
	t.Logf("refused with estop_latched: %s", strings.Join(names, ", "))
	out, err := b.cli(t, "do", "gpio.set", "gpio.relay2", "state=on")
	if err == nil || !strings.Contains(out, "refused (estop_latched)") {
		t.Errorf("do gpio.set relay2 while latched: %v\n%s", err, out)
	}
}

// TestLabDamagedLedgerStartsLatched: the body is killed and its ledger's
// first 64 KiB then read as erased flash (all ones), as when a card loses
// an erase block under a write: bbolt's two meta pages are gone. The body
// keeps the file aside, starts a new ledger, comes up latched because
// whether it was latched is unknown, and permits nothing.
func TestLabDamagedLedgerStartsLatched(t *testing.T) {
	l, b := startWithOutputOn(t, "gpio.led")
	data := b.data
	b.kill9(t)

	path := filepath.Join(data, body.LedgerFile)
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := f.Stat()
	n := min(fi.Size(), 64<<10)
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xff}, int(n)), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	t.Logf("ledger of %d bytes: its first %d bytes overwritten with 0xff", fi.Size(), n)

	b, st, w := restart(t, l, b)
	if !strings.HasPrefix(st.Safety, "latched: the ledger was damaged") {
		t.Errorf("safety %q", st.Safety)
	}
	if st.EStop == nil || !st.EStop.Latched || !strings.Contains(st.EStop.Why, "the ledger was damaged") {
		t.Errorf("the e-stop after a damaged ledger: %+v; want latched for it", st.EStop)
	}
	// The file and its journal, kept aside together.
	if moved, _ := filepath.Glob(path + ".corrupt.*"); len(moved) != 2 || moved[0]+".journal" != moved[1] {
		t.Errorf("the damaged file and its journal were not kept aside: %v", moved)
	}
	l.pull(t, "ESTOP", false)
	l.pull(t, "ESTOP2", false)
	waitFor(t, "the contacts read closed", 10*time.Second, func() (bool, string) {
		st := b.estop(t)
		return st.Main == "ok" && st.Second == "ok", fmt.Sprintf("%+v", st)
	})
	refusedAll(t, b)
	if evs := b.events(t, "ledger.recovered"); len(evs) != 1 {
		t.Errorf("ledger.recovered events: %d, want 1", len(evs))
	}
	t.Logf("safety: %s; e-stop: %s", st.Safety, st.EStop.Why)
	logSafe(t, l, w, b)
	b.kill9(t)
}

// TestLabOutputsSafeBeforeTheLedgerIsRead: the restarted body holds its
// outputs at their safe levels before it reads its ledger, whose check at
// open reads every page and takes as long as the file is big. The test
// holds the ledger file's lock when the body starts, as a `tobe-body
// ledger verify` run while the body was down would: the outputs that
// float high read safe while the body waits for the lock, and once it is
// released the ledger opens and the body starts normally.
func TestLabOutputsSafeBeforeTheLedgerIsRead(t *testing.T) {
	l, b := startWithOutputOn(t, "gpio.relay2")
	data, cfg := b.data, b.cfg
	b.kill9(t)

	f, err := os.OpenFile(filepath.Join(data, body.LedgerFile), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	w := l.watch(t)
	b = startBody(t, data, cfg)
	waitFor(t, "every output safe while the ledger is locked", time.Minute, func() (bool, string) {
		lv := l.levels(t)
		for _, o := range l.outs {
			if lv[o] != l.safe[o] {
				return false, fmt.Sprint(lv)
			}
		}
		return true, ""
	})
	held := time.Since(b.started)
	if err := unix.Flock(int(f.Fd()), unix.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	st, took := b.ready(t)
	if st.Safety != "normal" {
		t.Errorf("safety %q: the ledger did not open once its lock was let go, so the outputs were held only after it gave up", st.Safety)
	}
	t.Logf("outputs safe %v after the start with the ledger locked; the body answered %v after its start", held.Round(time.Millisecond), took.Round(time.Millisecond))
	logSafe(t, l, w, b)
	b.kill9(t)
}
