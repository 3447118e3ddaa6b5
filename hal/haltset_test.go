package hal

import (
	"errors"
	"slices"
	"testing"
)

// fakeOut is an output for HaltSet's tests: in a group, or alone.
type fakeOut struct {
	name   string
	level  Level
	halted bool
	group  *fakeGroup
	err    error // of Halt and ReadBack
}

func (o *fakeOut) Name() string { return o.name }
func (o *fakeOut) Safe() Level  { return Low }
func (o *fakeOut) Rearm() error { o.halted = false; return nil }
func (o *fakeOut) Out(l Level) error {
	if o.halted {
		return ErrHalted
	}
	o.level = l
	return nil
}

func (o *fakeOut) Halt() error {
	o.halted, o.level = true, Low
	return o.err
}

func (o *fakeOut) ReadBack() (Level, error) { return o.level, o.err }

// groupedOut is a fakeOut its group halts.
type groupedOut struct{ *fakeOut }

func (o groupedOut) Group() OutputGroup { return o.group }

// fakeGroup notes each call: the names it was given.
type fakeGroup struct {
	calls [][]string
	quiet bool // notes nothing (a note allocates)
	err   error
}

func (g *fakeGroup) HaltOutputs(outs []LineOut, rep []HaltedOutput) {
	var names []string
	for i, o := range outs {
		f := o.(groupedOut)
		f.halted, f.level = true, Low
		if !g.quiet {
			names = append(names, f.name)
		}
		rep[i] = HaltedOutput{Name: f.name, ReadBack: f.level, Err: g.err}
	}
	if !g.quiet {
		g.calls = append(g.calls, names)
	}
}

func TestHaltSet(t *testing.T) {
	g1, g2 := &fakeGroup{}, &fakeGroup{err: errors.New("line b2: broken")}
	mk := func(name string, g *fakeGroup) LineOut {
		f := &fakeOut{name: name, level: High, group: g}
		if g == nil {
			return f
		}
		return groupedOut{f}
	}
	alone := &fakeOut{name: "alone", level: High, err: errors.New("unreadable")}
	outs := []LineOut{mk("a1", g1), mk("b1", g2), mk("solo", nil), mk("a2", g1), alone, mk("b2", g2)}
	s := NewHaltSet(outs)
	if s.Groups() != 4 {
		t.Errorf("%d groups, want 4: two groups and two alone", s.Groups())
	}
	rep := make([]HaltedOutput, len(outs))
	s.Halt(rep)
	if want := [][]string{{"a1", "a2"}}; !slices.EqualFunc(g1.calls, want, slices.Equal) {
		t.Errorf("group 1 called with %v, want %v: one call for its two outputs", g1.calls, want)
	}
	if want := [][]string{{"b1", "b2"}}; !slices.EqualFunc(g2.calls, want, slices.Equal) {
		t.Errorf("group 2 called with %v, want %v", g2.calls, want)
	}
	for i, h := range rep {
		if h.Name != outs[i].Name() {
			t.Errorf("report %d is %s's, want %s's: in the order given", i, h.Name, outs[i].Name())
		}
		wantErr := outs[i].Name() == "b1" || outs[i].Name() == "b2" || outs[i].Name() == "alone"
		if (h.Err != nil) != wantErr {
			t.Errorf("%s: error %v", h.Name, h.Err)
		}
		if h.Err == nil && h.ReadBack != Low {
			t.Errorf("%s read back %v", h.Name, h.ReadBack)
		}
	}
	if err := outs[2].Out(High); !errors.Is(err, ErrHalted) {
		t.Errorf("an output alone, after the set's halt: %v, want ErrHalted", err)
	}
	if h := rep[4]; h.Err == nil || h.Err.Error() != "unreadable; read back: unreadable" {
		t.Errorf("an output whose halt and read-back fail: %v", h.Err)
	}
	// Made ahead, a halt allocates nothing when nothing fails.
	g2.err, alone.err = nil, nil
	g1.quiet, g2.quiet = true, true
	if n := testing.AllocsPerRun(100, func() { s.Halt(rep) }); n > 0 {
		t.Errorf("Halt allocates %.0f times", n)
	}
}
