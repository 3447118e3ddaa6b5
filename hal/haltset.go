package hal

import "fmt"

// OutputGroup is outputs a driver halts together: one write drives them
// all safe and latches them, one read reads them all back (the lines of
// one request of the GPIO character device). A LineOut in one is Grouped.
type OutputGroup interface {
	// HaltOutputs halts outs, each of this group, as their Halt does, and
	// reads each back: rep[i] is outs[i]'s (len(rep) == len(outs)). An
	// output that cannot be halted or read back has its Err, naming it
	// (ErrClosed once its driver released it, which Halt alone takes for
	// done). It allocates nothing unless an output fails.
	HaltOutputs(outs []LineOut, rep []HaltedOutput)
}

// Grouped is a LineOut that its driver halts with others of its group.
type Grouped interface {
	LineOut
	Group() OutputGroup
}

// HaltSet halts a fixed set of outputs and reads them back in as few
// calls as their drivers allow: the outputs of one OutputGroup together,
// each other one by its Halt and ReadBack. Made ahead with NewHaltSet,
// its Halt allocates nothing unless an output fails, so a trip path may
// call it before anything else. One Halt at a time.
type HaltSet struct {
	outs   []LineOut
	groups []haltGroup
}

// haltGroup is the outputs of one group in the set: at, their places in
// the set's outputs; outs and rep, their own, for the group's call.
type haltGroup struct {
	g    OutputGroup // nil: one output, halted by itself
	at   []int
	outs []LineOut
	rep  []HaltedOutput
}

// NewHaltSet groups outs by their drivers' groups, in the order each
// group's first output comes.
func NewHaltSet(outs []LineOut) *HaltSet {
	s := &HaltSet{outs: outs}
	index := map[OutputGroup]int{}
	for i, o := range outs {
		var g OutputGroup
		if gr, ok := o.(Grouped); ok {
			g = gr.Group()
		}
		k, ok := index[g]
		if g == nil || !ok {
			k = len(s.groups)
			s.groups = append(s.groups, haltGroup{g: g})
			if g != nil {
				index[g] = k
			}
		}
		s.groups[k].at = append(s.groups[k].at, i)
		s.groups[k].outs = append(s.groups[k].outs, o)
	}
	for k := range s.groups {
		s.groups[k].rep = make([]HaltedOutput, len(s.groups[k].outs))
	}
	return s
}

// Outputs are the set's outputs, in the order NewHaltSet was given them.
func (s *HaltSet) Outputs() []LineOut { return s.outs }

// Groups is how many calls of a driver a Halt makes (each halting and
// reading back its outputs), for the record.
func (s *HaltSet) Groups() int { return len(s.groups) }

// Halt halts every output of the set and reads each back, group by group
// (every group driven safe before any is read back would need a second
// call per group; a group is one driver's, and its own read follows its
// own write). rep[i] is the i-th output's; len(rep) must be the set's.
func (s *HaltSet) Halt(rep []HaltedOutput) {
	if len(rep) != len(s.outs) {
		panic(fmt.Sprintf("hal: HaltSet.Halt: %d reports for %d outputs", len(rep), len(s.outs)))
	}
	for k := range s.groups {
		g := &s.groups[k]
		if g.g != nil {
			g.g.HaltOutputs(g.outs, g.rep)
		} else {
			g.rep[0] = HaltOne(g.outs[0])
		}
		for j, i := range g.at {
			rep[i] = g.rep[j]
		}
	}
}

// HaltOne halts o by its Halt and reads it back: what a group does for
// an output that has none.
func HaltOne(o LineOut) HaltedOutput {
	h := HaltedOutput{Name: o.Name()}
	if err := o.Halt(); err != nil {
		h.Err = err
	}
	l, err := o.ReadBack()
	switch {
	case err != nil && h.Err == nil:
		h.Err = err
	case err != nil:
		h.Err = fmt.Errorf("%w; read back: %w", h.Err, err)
	default:
		h.ReadBack = l
	}
	return h
}

// OutEach is Chip.Outs for a driver that claims its lines one by one.
func OutEach(c Chip, reqs []OutRequest) ([]LineOut, []error) {
	outs, errs := make([]LineOut, len(reqs)), make([]error, len(reqs))
	for i, r := range reqs {
		if outs[i], errs[i] = c.Out(r.Line, r.Config); errs[i] != nil {
			outs[i] = nil
		}
	}
	return outs, errs
}
