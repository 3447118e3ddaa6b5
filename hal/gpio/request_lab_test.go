//go:build lab

package gpio

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/gpio/gpiosim"
	"github.com/tobe-body/tobe-body/hal/probe"
)

// Outputs held in one request of the kernel's, against gpio-sim: the lab
// makes a second chip, tobe-lab2, whose line HOGGED the kernel holds.
// These run in both of the lab's builds of the package: with cgo (the
// latch in C, the tripwire's) and without (the latch in Go).

// valueOn reads what a line of a gpio-sim chip is driven to.
func valueOn(t *testing.T, chip, line string) string {
	t.Helper()
	l, err := gpiosim.Find(chip, line)
	if err != nil {
		t.Fatal(err)
	}
	v, err := l.Value()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func openLabel(t *testing.T, label string) *Chip {
	t.Helper()
	c, err := Open(label)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*Chip)
}

// fds counts the process's open descriptors, after the runtime's poller
// has made its own.
func fds(t *testing.T) int {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	w.Close()
	d, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(d)
}

// free checks that no consumer holds the lines of c.
func free(t *testing.T, c *Chip, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if err := (probe.Finder{Root: "/"}).Line(c.path, l); err != nil {
			t.Errorf("after Close: %v", err)
		}
	}
}

func reqOf(o hal.LineOut) *outRequest { return o.(*lineOut).req }

// haltAll halts outs as the e-stop's goroutine does, through a HaltSet
// that must group them in groups calls, and returns the set and its
// report.
func haltAll(t *testing.T, outs []hal.LineOut, groups int) (*hal.HaltSet, []hal.HaltedOutput) {
	t.Helper()
	set := hal.NewHaltSet(outs)
	if set.Groups() != groups {
		t.Errorf("%d groups for %d requests", set.Groups(), groups)
	}
	rep := make([]hal.HaltedOutput, len(outs))
	set.Halt(rep)
	return set, rep
}

// TestLabSharedRequest: four outputs in one request (one descriptor),
// each driven, read back, halted and rearmed on its own without
// disturbing the others; halted together by their group in one write;
// and after Close every line is free, every descriptor closed, and each
// output says it is closed.
func TestLabSharedRequest(t *testing.T) {
	base := fds(t)
	c := openLabel(t, "tobe-lab")
	names := []string{"RELAY1", "RELAY2", "LED", "BUZZER"}
	safe := []hal.Level{hal.Low, hal.Low, hal.High, hal.Low}
	var reqs []hal.OutRequest
	for i, n := range names {
		reqs = append(reqs, hal.OutRequest{Line: n, Config: hal.OutConfig{Safe: safe[i]}})
	}
	outs, errs := c.Outs(reqs)
	for i, err := range errs {
		if err != nil || outs[i] == nil {
			t.Fatalf("%s: %v", names[i], err)
		}
		if reqOf(outs[i]) != reqOf(outs[0]) {
			t.Errorf("%s is not in %s's request", names[i], names[0])
		}
		if v, want := valueOn(t, "tobe-lab", names[i]), levelBit(safe[i]); v != string(rune('0'+want)) {
			t.Errorf("%s at %s after the request, want its safe %d", names[i], v, want)
		}
	}
	if n := fds(t) - base; n != 1 {
		t.Errorf("%d descriptors for one request of four outputs", n)
	}
	want := func(vals string) {
		t.Helper()
		for i, n := range names {
			if v := valueOn(t, "tobe-lab", n); v != vals[i:i+1] {
				t.Errorf("%s at %s, want %s (lines %v want %s)", n, v, vals[i:i+1], names, vals)
			}
		}
	}
	// One line at a time.
	if err := outs[0].Out(hal.High); err != nil {
		t.Fatal(err)
	}
	if err := outs[2].Out(hal.Low); err != nil {
		t.Fatal(err)
	}
	want("1000")
	if l, err := outs[0].ReadBack(); err != nil || l != hal.High {
		t.Errorf("RELAY1 reads back %v %v", l, err)
	}
	if l, err := outs[1].ReadBack(); err != nil || l != hal.Low {
		t.Errorf("RELAY2 reads back %v %v", l, err)
	}
	if err := outs[0].Halt(); err != nil {
		t.Fatal(err)
	}
	want("0000")
	if err := outs[0].Out(hal.High); !errors.Is(err, hal.ErrHalted) || !strings.Contains(err.Error(), "RELAY1") {
		t.Errorf("RELAY1 after its Halt: %v, want ErrHalted naming it", err)
	}
	if err := outs[1].Out(hal.High); err != nil {
		t.Errorf("RELAY2, not halted, refused: %v", err)
	}
	want("0100")
	if err := outs[0].Rearm(); err != nil {
		t.Fatal(err)
	}
	if err := outs[0].Out(hal.High); err != nil {
		t.Fatal(err)
	}
	if err := outs[3].Out(hal.High); err != nil {
		t.Fatal(err)
	}
	want("1101")

	// Together: one group, halted in one write and read in one read.
	set, rep := haltAll(t, outs, 1)
	for i, h := range rep {
		if h.Name != names[i] || h.Err != nil || h.ReadBack != safe[i] {
			t.Errorf("halted %d: %+v, want %s at %v", i, h, names[i], safe[i])
		}
		if err := outs[i].Out(hal.High); !errors.Is(err, hal.ErrHalted) {
			t.Errorf("%s after the group's halt: %v, want ErrHalted", names[i], err)
		}
	}
	want("0010")
	for _, o := range outs {
		if err := o.Rearm(); err != nil {
			t.Fatal(err)
		}
	}
	if err := outs[1].Out(hal.High); err != nil {
		t.Fatal(err)
	}
	if err := c.Halt(); err != nil {
		t.Fatal(err)
	}
	want("0010")

	// Released: every line free, the descriptor closed, the outputs closed.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	free(t, c, names...)
	if n := fds(t); n != base {
		t.Errorf("%d descriptors after Close, %d before", n, base)
	}
	if err := outs[0].Out(hal.High); !errors.Is(err, hal.ErrClosed) {
		t.Errorf("Out after Close: %v, want ErrClosed", err)
	}
	if _, err := outs[0].ReadBack(); !errors.Is(err, hal.ErrClosed) {
		t.Errorf("ReadBack after Close: %v, want ErrClosed", err)
	}
	if err := outs[0].Halt(); err != nil {
		t.Errorf("Halt after Close: %v (a closed line was left safe)", err)
	}
	set.Halt(rep)
	for _, h := range rep {
		if !errors.Is(h.Err, hal.ErrClosed) || !strings.Contains(h.Err.Error(), h.Name) {
			t.Errorf("a closed output halted: %+v, want ErrClosed naming it", h)
		}
	}
}

// TestLabRefusedLine: among outputs asked for together, a line the
// kernel holds (a hog), one another consumer holds, one that does not
// exist and one asked for twice are each refused with an error that
// names it and says why; the others are claimed, together, and nothing
// is left behind by the refusals.
func TestLabRefusedLine(t *testing.T) {
	base := fds(t)
	other := openLabel(t, "tobe-lab2")
	if _, err := other.Out("SPARE", hal.OutConfig{}); err != nil {
		t.Fatal(err)
	}
	c := openLabel(t, "tobe-lab2")
	outs, errs := c.Outs([]hal.OutRequest{{Line: "RELAY3"}, {Line: "HOGGED"}, {Line: "SPARE"}, {Line: "RELAY4", Config: hal.OutConfig{Safe: hal.High}}, {Line: "NOPE"}, {Line: "RELAY3"}})
	for i, w := range []struct {
		err  error
		says string
	}{
		{nil, ""},
		{hal.ErrBusy, `"lab-hog"`},
		{hal.ErrBusy, `"` + Consumer + `"`},
		{nil, ""},
		{hal.ErrAbsent, "NOPE"},
		{nil, "asked for twice"},
	} {
		switch {
		case w.err == nil && w.says == "":
			if errs[i] != nil || outs[i] == nil {
				t.Errorf("output %d: %v", i, errs[i])
			}
		case errs[i] == nil || outs[i] != nil:
			t.Errorf("output %d claimed, want refused", i)
		case w.err != nil && !errors.Is(errs[i], w.err), !strings.Contains(errs[i].Error(), w.says):
			t.Errorf("output %d: %v, want %v saying %s", i, errs[i], w.err, w.says)
		default:
			t.Logf("output %d refused: %v", i, errs[i])
		}
	}
	if outs[0] == nil || outs[3] == nil {
		t.FailNow()
	}
	if reqOf(outs[0]) != reqOf(outs[3]) {
		t.Error("RELAY3 and RELAY4 are not in one request")
	}
	if v := valueOn(t, "tobe-lab2", "RELAY3") + valueOn(t, "tobe-lab2", "RELAY4"); v != "01" {
		t.Errorf("RELAY3, RELAY4 at %s, want their safe 01", v)
	}
	if n := fds(t) - base; n != 2 {
		t.Errorf("%d descriptors for two requests (SPARE's and RELAY3's with RELAY4), want 2", n)
	}
	if err := outs[0].Out(hal.High); err != nil || valueOn(t, "tobe-lab2", "RELAY3") != "1" {
		t.Errorf("RELAY3 driven: %v", err)
	}
	c.Close()
	other.Close()
	free(t, c, "RELAY3", "RELAY4", "SPARE")
	if n := fds(t); n != base {
		t.Errorf("%d descriptors after Close, %d before", n, base)
	}
	if err := (probe.Finder{Root: "/"}).Line(c.path, "HOGGED"); !errors.Is(err, hal.ErrBusy) {
		t.Errorf("HOGGED: %v, want still held by its hog", err)
	}
}

// TestLabHaltSetTwoChips: outputs of two chips halted as the e-stop's
// goroutine halts them: a group per chip's request, each in one write
// and one read, every output safe and read back in the order given.
func TestLabHaltSetTwoChips(t *testing.T) {
	c1, c2 := openLabel(t, "tobe-lab"), openLabel(t, "tobe-lab2")
	o1, e1 := c1.Outs([]hal.OutRequest{{Line: "RELAY1"}, {Line: "RELAY2"}})
	o2, e2 := c2.Outs([]hal.OutRequest{{Line: "RELAY3"}, {Line: "RELAY4"}})
	if err := errors.Join(append(e1, e2...)...); err != nil {
		t.Fatal(err)
	}
	outs := []hal.LineOut{o1[0], o2[0], o1[1], o2[1]} // interleaved
	for _, o := range outs {
		if err := o.Out(hal.High); err != nil {
			t.Fatal(err)
		}
	}
	set, rep := haltAll(t, outs, 2)
	for i, h := range rep {
		if h.Name != outs[i].Name() || h.Err != nil || h.ReadBack != hal.Low {
			t.Errorf("halted %d: %+v, want %s low", i, h, outs[i].Name())
		}
	}
	for _, l := range [][2]string{{"tobe-lab", "RELAY1"}, {"tobe-lab", "RELAY2"}, {"tobe-lab2", "RELAY3"}, {"tobe-lab2", "RELAY4"}} {
		if v := valueOn(t, l[0], l[1]); v != "0" {
			t.Errorf("%s on %s at %s after the halt", l[1], l[0], v)
		}
	}
	// Made ahead, a halt of real lines allocates nothing: the e-stop's
	// goroutine may call it before anything else.
	if n := testing.AllocsPerRun(50, func() { set.Halt(rep) }); n > 0 {
		t.Errorf("a halt of two chips' outputs allocates %.0f times", n)
	}
	// One chip closed: its outputs say so, the other's are halted still.
	c2.Close()
	set.Halt(rep)
	for i, h := range rep {
		closed := i%2 == 1
		if closed != errors.Is(h.Err, hal.ErrClosed) || !closed && (h.Err != nil || h.ReadBack != hal.Low) {
			t.Errorf("halted %d with tobe-lab2 closed: %+v", i, h)
		}
	}
}
