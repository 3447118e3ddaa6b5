//go:build lab

package act

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/board"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/gpio"
	"github.com/tobe-body/tobe-body/hal/gpio/gpiosim"
	"github.com/tobe-body/tobe-body/ledger"
	"github.com/tobe-body/tobe-body/sense/motion"
	"github.com/tobe-body/tobe-body/sense/motion/motiontest"
)

// The e-stop against gpio-sim in the lab VM (scripts/lab/run.sh makes the
// chip tobe-lab with the lab profile's lines). The lines are requested as
// the daemon requests them, from the lab profile: ESTOP and ESTOP2 pulled
// up, normally closed, stop when high; RESET pulled up, pressed when low;
// the four outputs at their safe levels. gpio-sim applies a requested
// pull to the simulated line, so a freshly requested ESTOP reads open
// until the test closes its contact by writing pull-down to the sim.
//
// Assertions are on behaviour (latch, levels, records, refusals); the
// latencies are logged, never asserted: under emulation only their ratio
// to a bare reader's in the same run means anything.

var admin = Principal{Kind: LocalAdmin, Subject: "admin:uid=0"}

// simLine is one line of the lab's gpio-sim chip: its pull drives it from
// outside (an edge for a requested input), its value reads what the body
// drove.
type simLine = gpiosim.Line

func simAttrs(t *testing.T, line string) simLine {
	t.Helper()
	l, err := gpiosim.Find("tobe-lab", line)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// labRunner stands for the runner and the lease table: one invocation
// running and five queued. It notes each call and whether the latch was
// set and every output at its safe level (read through gpio-sim) by then.
type labRunner struct {
	e       *EStop
	outs    map[string]simLine
	safe    map[string]string
	inspect bool // read the outputs through gpio-sim when called

	mu       sync.Mutex
	calls    []string
	problems []string
}

var labInvocations = []string{"inv-running-1", "inv-queued-1", "inv-queued-2", "inv-queued-3", "inv-queued-4", "inv-queued-5"}

func (f *labRunner) note(what string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, what)
	if !f.inspect {
		return
	}
	if !f.e.Latched() {
		f.problems = append(f.problems, what+": latch not set")
	}
	for name, s := range f.outs {
		if v, err := s.Value(); err != nil || v != f.safe[name] {
			f.problems = append(f.problems, fmt.Sprintf("%s: %s at %q (%v), safe is %s", what, name, v, err, f.safe[name]))
		}
	}
}

func (f *labRunner) CancelAll(r Reason) []string {
	f.note("cancel " + string(r))
	return slices.Clone(labInvocations)
}

func (f *labRunner) RevokeAll(r Reason) int {
	f.note("revoke " + string(r))
	return 2
}

func (f *labRunner) take() (calls, problems []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	calls, problems = f.calls, f.problems
	f.calls, f.problems = nil, nil
	return calls, problems
}

// labRig is an e-stop on gpio-sim lines, built as the daemon builds it.
type labRig struct {
	e      *EStop
	chip   hal.Chip
	outs   map[string]hal.LineOut // by line name
	sims   map[string]simLine     // ESTOP, ESTOP2, RESET and the outputs
	safe   map[string]string      // the outputs' safe levels as gpio-sim shows them
	runner *labRunner
	check  Check

	pending []Record // read from the e-stop, not yet matched
	seen    []string // every record's type, for messages
}

// newLabRig requests the lab profile's e-stop lines and outputs, closes
// both e-stop contacts, leaves RESET released (or holds it pressed when
// resetHeld), checks the wiring and runs the e-stop until the test ends.
func newLabRig(t *testing.T, resetHeld bool) *labRig {
	t.Helper()
	set, err := board.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	p, err := set.Get("lab")
	if err != nil {
		t.Fatal(err)
	}
	chip, err := gpio.Open(p.GPIO.Chip)
	if err != nil {
		t.Fatal(err)
	}
	r := &labRig{chip: chip, outs: map[string]hal.LineOut{}, sims: map[string]simLine{}, safe: map[string]string{}}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			chip.Close()
		}
	})
	cfg := EStopConfig{}
	// The outputs together, as board.Walk claims them: one request.
	var outReqs []hal.OutRequest
	for _, l := range p.Lines() {
		if l.Kind == "gpio-out" {
			outReqs = append(outReqs, hal.OutRequest{Line: l.Line, Config: *l.Out})
		}
	}
	outs, errs := chip.Outs(outReqs)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for _, l := range p.Lines() {
		switch l.Kind {
		case "estop":
			in, err := chip.In(l.Line, *l.In)
			if err != nil {
				t.Fatal(err)
			}
			switch l.Role {
			case board.RoleEStop:
				cfg.Main, cfg.MainStop = in, l.Active
			case board.RoleEStopSecond:
				cfg.Second, cfg.SecondStop = in, l.Active
			case board.RoleEStopReset:
				cfg.Reset, cfg.ResetActive = in, l.Active
			}
			r.sims[l.Line] = simAttrs(t, l.Line)
		case "gpio-out":
			o := outs[len(cfg.Outputs)]
			cfg.Outputs = append(cfg.Outputs, o)
			r.outs[l.Line] = o
			r.sims[l.Line] = simAttrs(t, l.Line)
			r.safe[l.Line] = "0"
			if l.Out.Safe == hal.High {
				r.safe[l.Line] = "1"
			}
		}
	}
	if cfg.Main == nil || cfg.Second == nil || cfg.Reset == nil || len(cfg.Outputs) != 4 {
		t.Fatalf("the lab profile's e-stop: %+v", cfg)
	}
	cfg.Discrepancy = time.Duration(p.EStop.Second.DiscrepancyMS) * time.Millisecond
	cfg.MinPress = time.Duration(p.EStop.Reset.MinPressMS) * time.Millisecond
	cfg.MaxPress = time.Duration(p.EStop.Reset.MaxPressMS) * time.Millisecond
	if r.e, err = NewEStop(cfg); err != nil {
		t.Fatal(err)
	}
	r.runner = &labRunner{e: r.e, outs: map[string]simLine{}, safe: r.safe, inspect: true}
	for name := range r.outs {
		r.runner.outs[name] = r.sims[name]
	}
	r.e.SetRunner(r.runner, r.runner)

	// The contacts: both e-stop channels closed, the reset button up (or
	// held down since before the body started).
	r.pull(t, "ESTOP", false)
	r.pull(t, "ESTOP2", false)
	r.pull(t, "RESET", !resetHeld)
	time.Sleep(100 * time.Millisecond) // past RESET's debounce
	r.check = r.e.Check()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.e.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("e-stop run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("the e-stop did not stop")
		}
		stopped = true
		chip.Close()
	})
	return r
}

func (r *labRig) pull(t *testing.T, line string, high bool) {
	t.Helper()
	if err := r.sims[line].SetPull(high); err != nil {
		t.Fatal(err)
	}
}

func (r *labRig) level(t *testing.T, line string) string {
	t.Helper()
	v, err := r.sims[line].Value()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// next waits up to d for the e-stop's next record of type typ; records
// of other types before it are passed over.
func (r *labRig) next(t *testing.T, typ string, d time.Duration) Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		for i, rec := range r.pending {
			if rec.Type == typ {
				r.pending = r.pending[i+1:]
				return rec
			}
		}
		recs, err := r.e.Records(ctx)
		if err != nil {
			t.Fatalf("no %s record within %v; records so far %v", typ, d, r.seen)
		}
		for _, rec := range recs {
			r.seen = append(r.seen, rec.Type)
		}
		r.pending = append(r.pending, recs...)
	}
}

// waitFor polls cond every millisecond for up to d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(time.Millisecond)
	}
}

// healthy waits until the e-stop has seen both channels closed and no
// wiring fault.
func (r *labRig) healthy(t *testing.T) {
	t.Helper()
	waitFor(t, 10*time.Second, "both channels ok, no wiring fault", func() bool {
		s := r.e.Status()
		return s.Main == "ok" && s.Second == "ok" && s.Fault == ""
	})
}

// opened waits until the e-stop has taken in that ESTOP is open. Its
// record of the trip comes first (the outputs first, then the rest), so
// a test that closes ESTOP at the record and then waits for healthy()
// could see the main line "ok" from before the trip, and a reset then
// race the watcher noting the stop (seen under emulation: a reset
// refused, "the e-stop line still says stop", with ESTOP closed).
func (r *labRig) opened(t *testing.T, lines ...string) {
	t.Helper()
	if len(lines) == 0 {
		lines = []string{"ESTOP"}
	}
	for _, l := range lines {
		waitFor(t, 10*time.Second, "the e-stop sees "+l+" open", func() bool {
			s := r.e.Status()
			return map[string]string{"ESTOP": s.Main, "ESTOP2": s.Second}[l] == "stop"
		})
	}
}

// latch trips the e-stop by opening ESTOP, then closes it again: latched
// with a healthy line.
func (r *labRig) latch(t *testing.T) {
	t.Helper()
	r.pull(t, "ESTOP", true)
	r.next(t, "estop.tripped", 10*time.Second)
	r.opened(t)
	r.pull(t, "ESTOP", false)
	r.healthy(t)
	if !r.e.Latched() {
		t.Fatal("not latched")
	}
	r.runner.take()
}

// E1 (and E2, E4 in passing) on gpio-sim: the e-stop line opens while one
// action runs and five wait. Twice: first ESTOP alone, then both contacts
// of the two-channel button.
func TestLabEStopTrip(t *testing.T) {
	r := newLabRig(t, false)
	if c := r.check; !c.Verified || c.Latched || c.Main != "ok" || c.Second != "ok" || c.Reset != "released" {
		t.Fatalf("wiring check %+v", c)
	}
	r.next(t, "estop.checked", time.Second)
	for round, lines := range [][]string{{"ESTOP"}, {"ESTOP", "ESTOP2"}} {
		// Actions have the relay and the LED on.
		for _, name := range []string{"RELAY1", "LED"} {
			if err := r.outs[name].Out(hal.High); err != nil {
				t.Fatal(err)
			}
			if v := r.level(t, name); v != "1" {
				t.Fatalf("round %d: %s driven high reads %s on the sim", round, name, v)
			}
		}
		r.runner.take()
		before := hal.MonoNow()
		for _, l := range lines {
			r.pull(t, l, true) // the contact opens
		}
		rec := r.next(t, "estop.tripped", 10*time.Second)
		after := hal.MonoNow()
		trip := rec.Payload.(Trip)
		if !r.e.Latched() {
			t.Fatalf("round %d: not latched", round)
		}
		for name, safe := range r.safe {
			if v := r.level(t, name); v != safe {
				t.Errorf("round %d: %s is %s on the sim after the trip, safe is %s", round, name, v, safe)
			}
		}
		// With both contacts open, whichever channel's watcher runs first
		// trips; the other's edge is a stop again.
		causes := map[string]bool{"line_open": true, "second_open": len(lines) == 2}
		if !causes[trip.Cause] || !trip.AllSafe || trip.Already || len(trip.Outputs) != 4 {
			t.Errorf("round %d: trip %+v", round, trip)
		}
		for _, o := range trip.Outputs {
			if o.ReadBack != o.Safe || o.Err != "" || r.safe[o.Name] != map[string]string{"low": "0", "high": "1"}[o.Safe] {
				t.Errorf("round %d: output %+v", round, o)
			}
		}
		// The edge time is the kernel's timestamp of the edge: after the
		// pull was written, before the outputs were safe.
		if trip.Edge <= before || trip.Edge >= trip.Safe || trip.Safe >= after || rec.At != trip.Edge ||
			trip.LatencyNS != int64(trip.Safe.Sub(trip.Edge)) {
			t.Errorf("round %d: edge %v safe %v latency %v, record at %v; pull written at %v, record read at %v",
				round, trip.Edge, trip.Safe, time.Duration(trip.LatencyNS), rec.At, before, after)
		}
		if !slices.Equal(trip.Cancelled, labInvocations) || trip.Leases != 2 {
			t.Errorf("round %d: cancelled %q, leases %d", round, trip.Cancelled, trip.Leases)
		}
		calls, problems := r.runner.take()
		if len(calls) < 2 || calls[0] != "cancel estop_latched" || calls[1] != "revoke estop_latched" || len(problems) > 0 {
			t.Errorf("round %d: runner calls %q, problems %q: want cancel, then revoke, each after the latch and every output safe", round, calls, problems)
		}
		if len(lines) == 2 {
			// The second contact's edge is a stop again: outputs safe
			// again, nothing new latched.
			again := r.next(t, "estop.stop_again", 10*time.Second).Payload.(Trip)
			if !again.Already || !again.AllSafe {
				t.Errorf("round %d: the second contact's stop %+v", round, again)
			}
		}
		// Latched: a write is refused at the line.
		if err := r.outs["RELAY1"].Out(hal.High); !errors.Is(err, hal.ErrHalted) {
			t.Errorf("round %d: a write while latched: %v, want ErrHalted", round, err)
		}
		if v := r.level(t, "RELAY1"); v != "0" {
			t.Errorf("round %d: RELAY1 %s after a refused write", round, v)
		}
		// E2: the contacts close again; still latched.
		r.opened(t, lines...)
		for _, l := range lines {
			r.pull(t, l, false)
		}
		r.healthy(t)
		if !r.e.Latched() {
			t.Fatalf("round %d: the latch let go when the line closed", round)
		}
		// E4: the agent cannot reset.
		if err := r.e.Reset(Principal{Kind: AgentSession, Subject: "agent:pi", Session: "s1"}); !errors.Is(err, ErrResetRefused) || !r.e.Latched() {
			t.Errorf("round %d: the agent's reset: %v, latched %v", round, err, r.e.Latched())
		}
		if p := r.next(t, "estop.reset_refused", time.Second).Payload.(ResetRefused); p.Reason != ReasonResetNotLocal {
			t.Errorf("round %d: refusal %+v", round, p)
		}
		// A local administrator resets; that starts nothing.
		if err := r.e.Reset(admin); err != nil || r.e.Latched() {
			t.Fatalf("round %d: reset: %v, latched %v", round, err, r.e.Latched())
		}
		r.next(t, "estop.reset", time.Second)
		for name, safe := range r.safe {
			if v := r.level(t, name); v != safe {
				t.Errorf("round %d: %s is %s after the reset, want it left at its safe %s", round, name, v, safe)
			}
		}
	}
	if s := r.e.Status(); s.Trips != 2 || s.Latched {
		t.Errorf("status %+v, want 2 trips and not latched", s)
	}
}

// E3 on gpio-sim: the reset button. Only a press of 350 ms to 2 s, taken
// on release with a healthy line, clears the latch. The press durations
// are a simulated button's, held with time.Sleep; the margins are wide
// because the VM's timing is coarse.
func TestLabEStopResetButton(t *testing.T) {
	for _, tc := range []struct {
		name     string
		press    time.Duration
		held     bool // RESET held down since before the e-stop watched it
		open     bool // ESTOP still open
		accepted bool
		refusal  string
	}{
		{name: "a press of 1 s", press: time.Second, accepted: true},
		{name: "a press of 50 ms", press: 50 * time.Millisecond, refusal: "a press of"},
		{name: "a press of 5 s", press: 5 * time.Second, refusal: "a press of"},
		{name: "a good press with ESTOP open", press: time.Second, open: true, refusal: "still says stop"},
		{name: "held at start", press: time.Second, held: true, refusal: "held when the body started"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newLabRig(t, tc.held)
			if want := map[bool]string{false: "released", true: "held at start: ignored until released"}[tc.held]; r.check.Reset != want {
				t.Errorf("wiring check %+v, want reset %q", r.check, want)
			}
			if tc.open {
				r.pull(t, "ESTOP", true)
				r.next(t, "estop.tripped", 10*time.Second)
			} else {
				r.latch(t)
			}
			if !tc.held {
				r.pull(t, "RESET", false) // pressed
			}
			time.Sleep(tc.press)
			if !r.e.Latched() {
				t.Fatal("cleared before the button was released")
			}
			r.pull(t, "RESET", true) // released
			if tc.accepted {
				rec := r.next(t, "estop.reset", 10*time.Second)
				p := rec.Payload.(ResetDone)
				if r.e.Latched() || p.By != "reset button" {
					t.Errorf("latched %v, reset %+v", r.e.Latched(), p)
				}
				t.Logf("accepted: a press of %d ms", p.PressMS)
				for name, safe := range r.safe {
					if v := r.level(t, name); v != safe {
						t.Errorf("%s is %s after the reset, want it left at its safe %s", name, v, safe)
					}
				}
				return
			}
			p := r.next(t, "estop.reset_refused", 10*time.Second).Payload.(ResetRefused)
			if !strings.Contains(p.Detail, tc.refusal) || p.By != "reset button" {
				t.Errorf("refusal %+v, want one saying %q", p, tc.refusal)
			}
			t.Logf("refused: %s", p.Detail)
			if !r.e.Latched() {
				t.Error("the latch let go")
			}
		})
	}
}

// E5 on gpio-sim: the second channel's wire breaks (its pull takes it to
// the stop level) while the main one stays closed. That trips; held in
// disagreement past the 100 ms window it is a wiring fault, and no reset
// is taken until both channels agree again.
func TestLabEStopTwoChannels(t *testing.T) {
	r := newLabRig(t, false)
	r.pull(t, "ESTOP2", true)
	trip := r.next(t, "estop.tripped", 10*time.Second).Payload.(Trip)
	if trip.Cause != "second_open" || !trip.AllSafe || !r.e.Latched() {
		t.Fatalf("trip %+v, latched %v", trip, r.e.Latched())
	}
	time.Sleep(300 * time.Millisecond)
	f := r.next(t, "estop.wiring_fault", 10*time.Second).Payload.(map[string]string)
	if !strings.Contains(f["fault"], "disagree for more than 100ms") || r.e.Status().Fault == "" {
		t.Errorf("wiring fault %q, status %+v", f, r.e.Status())
	}
	if err := r.e.Reset(admin); !errors.Is(err, ErrResetRefused) || !r.e.Latched() {
		t.Errorf("an administrator's reset during the fault: %v", err)
	}
	r.next(t, "estop.reset_refused", time.Second)
	// The reset button is refused as well.
	r.pull(t, "RESET", false)
	time.Sleep(time.Second)
	r.pull(t, "RESET", true)
	if p := r.next(t, "estop.reset_refused", 10*time.Second).Payload.(ResetRefused); p.By != "reset button" || !r.e.Latched() {
		t.Errorf("the button's reset during the fault: %+v", p)
	}
	// Repaired: the channels agree again; the fault clears, the latch stays.
	r.pull(t, "ESTOP2", false)
	r.next(t, "estop.wiring_ok", 10*time.Second)
	r.healthy(t)
	if !r.e.Latched() {
		t.Fatal("the repair cleared the latch")
	}
	if err := r.e.Reset(admin); err != nil || r.e.Latched() {
		t.Errorf("reset after the repair: %v, latched %v", err, r.e.Latched())
	}
	r.next(t, "estop.reset", time.Second)
}

// bareEdge is one event the bare reader read: the kernel's timestamp and
// when read(2) returned.
type bareEdge struct {
	edge, returned hal.Mono
	seq            uint32
	err            error
}

// bareReader reads a line's edges with a blocking read(2) on a goroutine
// locked to its thread: the least a Go program can do to see an edge.
type bareReader struct {
	line  *gpiosim.Edges
	edges chan bareEdge
	quit  atomic.Bool
}

func startBareReader(t *testing.T, line simLine) *bareReader {
	t.Helper()
	l, err := line.RequestEdges("bare-reader")
	if err != nil {
		t.Fatal(err)
	}
	b := &bareReader{line: l, edges: make(chan bareEdge, 64)}
	go func() {
		runtime.LockOSThread()
		defer close(b.edges)
		for {
			e, err := l.Read() // blocks in the kernel
			now := hal.MonoNow()
			if b.quit.Load() {
				return
			}
			b.edges <- bareEdge{edge: e.Time, returned: now, seq: e.Seq, err: err}
			if err != nil {
				return
			}
		}
	}()
	return b
}

// stop wakes the reader with one more edge and releases the line.
func (b *bareReader) stop(wake func()) {
	b.quit.Store(true)
	wake()
	for range b.edges {
	}
	b.line.Close()
}

// labLoad is what runs while the latency is measured: heavy goroutines
// detecting motion on 640x480 YUYV frames as fast as they can (a camera
// channel at full rate, and then some), and a ledger appending events one
// commit (and fsync) at a time.
type labLoad struct {
	stop    chan struct{}
	wg      sync.WaitGroup
	frames  atomic.Int64
	appends atomic.Int64
	errs    chan error
	start   time.Time

	// E8's agent requests and MQTT backlog (startAgents, startBacklog).
	offered, done, refused, acked atomic.Int64
	audio                         func() string // stops the audio load
}

func labFrames(t *testing.T) (hal.FrameFormat, [][]byte) {
	t.Helper()
	f := hal.FrameFormat{Pixel: hal.PixelYUYV, Width: 640, Height: 480, Stride: 1280}
	sc := motiontest.Scene{Format: f, Seed: 1, Noise: 4, Objects: []motiontest.Object{
		{From: 0, To: time.Hour, Start: [2]float64{-0.1, 0.5}, End: [2]float64{1.1, 0.5}, W: 0.15, H: 0.2, Luma: 230},
	}}
	frames := make([][]byte, 8)
	for i := range frames {
		frames[i] = make([]byte, sc.Bytes())
		sc.Render(frames[i], time.Duration(i)*time.Second/30, uint64(i))
	}
	return f, frames
}

func startLoad(t *testing.T, heavy int, f hal.FrameFormat, frames [][]byte, store *ledger.Store) *labLoad {
	t.Helper()
	l := &labLoad{stop: make(chan struct{}), errs: make(chan error, heavy+2), start: time.Now()}
	for range heavy {
		d, err := motion.New(motion.Config{}, f)
		if err != nil {
			t.Fatal(err)
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			fr := hal.NewFrame(f, nil, 0, 0, nil)
			out := make([]motion.Transition, 0, 8)
			base := hal.MonoNow()
			var err error
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				fr.Data, fr.Time = frames[i%len(frames)], base.Add(time.Duration(i)*time.Second/30)
				if out, err = d.Process(fr, out[:0]); err != nil {
					l.errs <- err
					return
				}
				l.frames.Add(1)
			}
		}()
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for i := 0; ; i++ {
			select {
			case <-l.stop:
				return
			default:
			}
			p, _ := ledger.MarshalPayload(map[string]any{"zone": "whole_frame", "n": i})
			ev := ledger.Event{Type: "camera.motion_started", ChannelID: "camera.front", Provenance: ledger.Observed, SourceSequence: uint64(i + 1), Payload: p}
			if _, err := store.Append(context.Background(), ev); err != nil {
				l.errs <- err
				return
			}
			l.appends.Add(1)
		}
	}()
	return l
}

// labAudioLoad starts E8's audio load, where the lab binary has PortAudio
// (estop_audio_lab_test.go), and returns what stops it; nil otherwise.
var labAudioLoad func(t *testing.T) func() string

// agentRate is E8's agent request rate.
const agentRate = 2000

// startAgents offers agentRate requests a second (gpio.set on the LED,
// on and off, as agent:pi under a grant) to a real runner over the rig's
// e-stop, from 8 sessions; each goes through policy, the ledger (one
// durable record per step) and the line. A tick the sessions cannot keep
// up with is offered and dropped, so the rate reported is what ran.
func (l *labLoad) startAgents(r *Runner) {
	ticks := make(chan int64, 64)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer close(ticks)
		// Offered by the clock, not by the ticks: a ticker under emulation
		// fires far less often than asked.
		tk := time.NewTicker(time.Millisecond)
		defer tk.Stop()
		start := time.Now()
		var n int64
		for {
			select {
			case <-l.stop:
				return
			case <-tk.C:
			}
			for due := int64(time.Since(start).Seconds() * agentRate); n < due; {
				n++
				l.offered.Add(1)
				select {
				case ticks <- n:
				default:
				}
			}
		}
	}()
	for s := range 8 {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			p := Principal{Kind: AgentSession, Subject: "agent:pi", Session: fmt.Sprintf("load%d", s), Trust: ledger.High}
			for n := range ticks {
				state := "on"
				if n%2 == 0 {
					state = "off"
				}
				res := r.Submit(context.Background(), Invocation{Principal: p, Capability: "gpio.set", Target: "gpio.led", Params: map[string]string{"state": state}})
				l.done.Add(1)
				if res.Status == Refused {
					l.refused.Add(1)
				}
			}
		}()
	}
}

// fillBacklog puts E8's MQTT backlog in the ledger's outbox: 100,000
// events nobody has sent.
func fillBacklog(t *testing.T, store *ledger.Store) {
	t.Helper()
	const backlog, batch = 100_000, 1000
	for i := 0; i < backlog; i += batch {
		evs := make([]ledger.Event, batch)
		for j := range evs {
			p, _ := ledger.MarshalPayload(map[string]any{"n": i + j})
			evs[j] = ledger.Event{Type: "gpio.changed", ChannelID: "gpio.button", Provenance: ledger.Observed, SourceSequence: uint64(i + j + 1), Payload: p}
		}
		if _, err := store.Append(context.Background(), evs...); err != nil {
			t.Fatal(err)
		}
	}
}

// startUplink drains the outbox the way an uplink catching up on a
// backlog would: 100 events every 100 ms, read and acknowledged.
func (l *labLoad) startUplink(store *ledger.Store) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		var after uint64
		for {
			select {
			case <-l.stop:
				return
			case <-tk.C:
			}
			items, err := store.OutboxNext(after, 100)
			if err != nil {
				l.errs <- err
				return
			}
			seqs := make([]uint64, len(items))
			for i, it := range items {
				seqs[i] = it.Seq
			}
			if len(seqs) > 0 {
				after = seqs[len(seqs)-1]
				if err := store.OutboxAck(seqs...); err != nil {
					l.errs <- err
					return
				}
				l.acked.Add(int64(len(seqs)))
			}
		}
	}()
}

// end stops the load and says how much it did.
func (l *labLoad) end(t *testing.T) string {
	t.Helper()
	close(l.stop)
	l.wg.Wait()
	select {
	case err := <-l.errs:
		t.Errorf("load: %v", err)
	default:
	}
	s := time.Since(l.start).Seconds()
	out := fmt.Sprintf("%.1f frames/s, %.0f appends/s", float64(l.frames.Load())/s, float64(l.appends.Load())/s)
	if n := l.offered.Load(); n > 0 {
		out += fmt.Sprintf(", agent requests offered %.0f/s and run %.0f/s (%d refused)", float64(n)/s, float64(l.done.Load())/s, l.refused.Load())
	}
	if n := l.acked.Load(); n > 0 {
		out += fmt.Sprintf(", outbox drained %.0f/s", float64(n)/s)
	}
	if l.audio != nil {
		out += ", " + l.audio()
	}
	return out
}

type spread []time.Duration

func (s spread) String() string {
	s = slices.Clone(s)
	slices.Sort(s)
	q := func(p int) time.Duration { return s[(len(s)-1)*p/100].Round(time.Microsecond) }
	return fmt.Sprintf("p50 %v p99 %v max %v", q(50), q(99), s[len(s)-1].Round(time.Microsecond))
}

func (s spread) p99() time.Duration {
	s = slices.Clone(s)
	slices.Sort(s)
	return s[(len(s)-1)*99/100]
}

// E1's latency under E8's load in the VM: 200 trips, each from the
// kernel's timestamp of ESTOP's edge to every output safe and read back,
// and, in the same loop and under the same load, 200 edges on BUTTON read
// by a bare blocking read(2), from the kernel's timestamp to the read
// returning. The load is motion detection as fast as it goes and a ledger
// appending one commit (and fsync) at a time, on the VM's disk when it has
// one. Three runs: idle for reference; the motion workers capped below
// GOMAXPROCS, as the body runs them; uncapped (as many as GOMAXPROCS), to
// show what the cap is for. Logged, not asserted; what is asserted is that
// every trip latched with every output safe and that no edge was missed.
func TestLabEStopLatency(t *testing.T) {
	const n = 200
	procs := runtime.GOMAXPROCS(0)
	f, frames := labFrames(t)
	dir, where := t.TempDir(), "in RAM"
	if d := os.Getenv("LAB_DISK"); d != "" {
		var err error
		if dir, err = os.MkdirTemp(d, "ledger"); err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		where = "on disk"
	}
	store, err := ledger.Open(ledger.Options{Path: filepath.Join(dir, "ledger.db"), AgentID: ledger.NewID(), BodyID: ledger.NewID(), Projections: Projections()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()

	r := newLabRig(t, false)
	fillBacklog(t, store)
	// E8's agents act through a real runner over the rig's e-stop and LED,
	// recording in the loaded ledger.
	reg := body.NewRegistry(time.Now)
	reg.Register(body.Channel{ID: "gpio.led", Kind: "gpio-out", State: body.Enabled})
	set, _ := NewGPIOActions([]*GPIOOutput{{Name: "led", Channel: "gpio.led", Line: r.outs["LED"], Risk: R1}}, nil)
	grants := []Grant{{ID: "g1", Subject: "agent:pi", Capability: "gpio.*", Scope: "gpio.*", By: "admin:uid=0", ByTrust: ledger.Max}}
	leases := NewLeaseTable(time.Minute)
	runner := NewRunner(Environment{EStop: r.e, Registry: reg, Leases: leases,
		Health: func() body.Degradation { return body.LevelNormal }, Grants: func() []Grant { return grants }}, store)
	if err := runner.Register(set); err != nil {
		t.Fatal(err)
	}
	r.e.SetRunner(runner, leases)
	t.Logf("estop path: %s", r.e.Status().Path)
	button := simAttrs(t, "BUTTON")
	if err := button.SetPull(false); err != nil {
		t.Fatal(err)
	}
	bare := startBareReader(t, button)
	high := false
	toggle := func() {
		high = !high
		if err := button.SetPull(high); err != nil {
			t.Fatal(err)
		}
	}
	defer bare.stop(toggle)
	var lastSeq uint32
	trips := 0

	for _, run := range []struct {
		name  string
		heavy int // motion workers; -1: no load at all
	}{
		{"idle", -1},
		{"capped", procs - 1},
		{"uncapped", procs},
	} {
		if run.heavy == 0 {
			t.Logf("estop latency: %s: not measured: GOMAXPROCS is %d, so no motion worker fits below it (boot the VM with LAB_SMP=2)", run.name, procs)
			continue
		}
		var load *labLoad
		if run.heavy > 0 {
			load = startLoad(t, run.heavy, f, frames, store)
			load.startAgents(runner)
			load.startUplink(store)
			if labAudioLoad != nil {
				load.audio = labAudioLoad(t)
			}
			time.Sleep(500 * time.Millisecond) // the load is running
		}
		var trip, tripW, edge, edgeW spread
		for i := range n {
			// The e-stop: ESTOP opens.
			written := hal.MonoNow()
			r.pull(t, "ESTOP", true)
			rec := r.next(t, "estop.tripped", 10*time.Second)
			tr := rec.Payload.(Trip)
			if !tr.AllSafe || !r.e.Latched() || tr.Edge < written {
				t.Fatalf("%s trip %d: %+v, latched %v", run.name, i, tr, r.e.Latched())
			}
			trips++
			trip = append(trip, time.Duration(tr.LatencyNS))
			tripW = append(tripW, tr.Safe.Sub(written))
			r.opened(t)
			r.pull(t, "ESTOP", false)
			r.healthy(t)
			if err := r.e.Reset(admin); err != nil {
				t.Fatalf("%s trip %d: reset: %v", run.name, i, err)
			}
			// The bare reader: BUTTON changes.
			written = hal.MonoNow()
			toggle()
			select {
			case e := <-bare.edges:
				if e.err != nil || e.edge < written {
					t.Fatalf("%s edge %d: %+v", run.name, i, e)
				}
				if lastSeq != 0 && e.seq != lastSeq+1 {
					t.Errorf("%s edge %d: sequence %d after %d: an edge was lost", run.name, i, e.seq, lastSeq)
				}
				lastSeq = e.seq
				edge = append(edge, e.returned.Sub(e.edge))
				edgeW = append(edgeW, e.returned.Sub(written))
			case <-time.After(10 * time.Second):
				t.Fatalf("%s edge %d: the bare reader saw nothing", run.name, i)
			}
			time.Sleep(time.Duration(i%7) * time.Millisecond) // no lockstep with the load
		}
		what, goal := "no load", "1.2"
		if load != nil {
			goal = "1.5"
			what = fmt.Sprintf("%d motion worker(s), a ledger %s with a 100k outbox backlog, agents at %d requests/s: %s", run.heavy, where, agentRate, load.end(t))
		}
		t.Logf("estop latency: %s (GOMAXPROCS %d; %s), %d trips: e-stop edge -> %d outputs safe and read back %v; bare read(2) edge -> returned %v; p99 ratio %.2f (goal <= %s); from the pull written: e-stop %v, bare %v",
			run.name, procs, what, n, len(r.outs), trip, edge, float64(trip.p99())/float64(edge.p99()), goal, tripW, edgeW)
	}
	if s := r.e.Status(); s.Trips != uint64(trips) {
		t.Errorf("%d trips counted for %d edges", s.Trips, trips)
	}
}
