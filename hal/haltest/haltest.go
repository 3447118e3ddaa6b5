// Package haltest has fakes of the hal contracts for unit tests of the
// packages that consume them. A fake does exactly what the test tells it:
// it pushes the edges, frames, samples and events the test gives it,
// remembers what was driven and played, and can be made to fail. Fakes are
// safe for concurrent use, and every blocking method returns on Halt or
// when its context is done.
package haltest

import (
	"context"
	"fmt"
	"sync"

	"github.com/tobe-body/tobe-body/hal"
)

// halter is the Halt/Close bookkeeping the fakes share.
type halter struct {
	once sync.Once
	ch   chan struct{}
}

func newHalter() halter { return halter{ch: make(chan struct{})} }

func (h *halter) Halt() error {
	h.once.Do(func() { close(h.ch) })
	return nil
}

func (h *halter) halted() bool {
	select {
	case <-h.ch:
		return true
	default:
		return false
	}
}

// wait receives from c unless ctx is done or the fake is halted.
func wait[T any](ctx context.Context, h *halter, c <-chan T) (T, error) {
	var zero T
	select {
	case v := <-c:
		return v, nil
	case <-h.ch:
		return zero, hal.ErrHalted
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// Chip is a fake GPIO chip. Lines exist once added with AddIn or AddOut.
type Chip struct {
	label string

	mu   sync.Mutex
	ins  map[string]*LineIn
	outs map[string]*LineOut
	held map[string]bool
}

// NewChip returns an empty chip with the given label.
func NewChip(label string) *Chip {
	return &Chip{label: label, ins: map[string]*LineIn{}, outs: map[string]*LineOut{}, held: map[string]bool{}}
}

// AddIn adds an input line at level l and returns it for the test to drive.
func (c *Chip) AddIn(name string, l hal.Level) *LineIn {
	c.mu.Lock()
	defer c.mu.Unlock()
	in := &LineIn{name: name, level: l, halter: newHalter(), edges: make(chan hal.EdgeEvent, 64)}
	c.ins[name] = in
	return in
}

// AddOut adds an output line and returns it for the test to inspect.
func (c *Chip) AddOut(name string) *LineOut {
	c.mu.Lock()
	defer c.mu.Unlock()
	o := &LineOut{name: name, writes: make([]hal.Level, 0, 2*keepWrites)}
	c.outs[name] = o
	return o
}

func (c *Chip) Label() string { return c.label }

func (c *Chip) claim(name string) error {
	if c.held[name] {
		return fmt.Errorf("haltest: line %q is held by consumer %q: %w", name, "test", hal.ErrBusy)
	}
	c.held[name] = true
	return nil
}

// In hands out the input line added as name.
func (c *Chip) In(name string, cfg hal.InConfig) (hal.LineIn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	in, ok := c.ins[name]
	if !ok {
		return nil, fmt.Errorf("haltest: chip %s has no input %q: %w", c.label, name, hal.ErrAbsent)
	}
	if err := c.claim(name); err != nil {
		return nil, err
	}
	in.mu.Lock()
	in.cfg = cfg
	in.mu.Unlock()
	return in, nil
}

// Out hands out the output line added as name, driven to cfg.Safe.
func (c *Chip) Out(name string, cfg hal.OutConfig) (hal.LineOut, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.outs[name]
	if !ok {
		return nil, fmt.Errorf("haltest: chip %s has no output %q: %w", c.label, name, hal.ErrAbsent)
	}
	if err := c.claim(name); err != nil {
		return nil, err
	}
	o.mu.Lock()
	o.safe, o.halted = cfg.Safe, false
	o.mu.Unlock()
	return o, o.Out(cfg.Safe)
}

// Outs claims the lines one by one: a fake has no request to share.
func (c *Chip) Outs(reqs []hal.OutRequest) ([]hal.LineOut, []error) { return hal.OutEach(c, reqs) }

// Halt drives every output handed out to its safe level and latches it;
// inputs go on reporting.
func (c *Chip) Halt() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var first error
	for name := range c.held {
		if o, ok := c.outs[name]; ok {
			if err := o.Halt(); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

// Close halts every line and frees them.
func (c *Chip) Close() error {
	err := c.Halt()
	c.mu.Lock()
	for name := range c.held {
		if in, ok := c.ins[name]; ok {
			in.Halt()
		}
	}
	c.held = map[string]bool{}
	c.mu.Unlock()
	return err
}

// LineIn is a fake input line.
type LineIn struct {
	name string
	halter
	edges chan hal.EdgeEvent

	mu    sync.Mutex
	cfg   hal.InConfig
	level hal.Level
	seq   uint64
	err   error
}

func (l *LineIn) Name() string { return l.name }

// Set changes the level as of t and queues the edge for WaitForEdge.
func (l *LineIn) Set(v hal.Level, t hal.Mono) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if v == l.level {
		return
	}
	l.level = v
	l.seq++
	e := hal.EdgeEvent{Line: l.name, Level: v, Time: t, Seq: l.seq, Edge: hal.FallingEdge}
	if v == hal.High {
		e.Edge = hal.RisingEdge
	}
	for { // full: the oldest edge is lost, as in the kernel's buffer; Seq shows the gap
		select {
		case l.edges <- e:
			return
		default:
		}
		select {
		case <-l.edges:
		default:
		}
	}
}

// Fail makes Read return err from now on; nil heals the line.
func (l *LineIn) Fail(err error) {
	l.mu.Lock()
	l.err = err
	l.mu.Unlock()
}

func (l *LineIn) Read() (hal.Level, error) {
	if l.halted() {
		return hal.Low, hal.ErrHalted
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.level, l.err
}

func (l *LineIn) WaitForEdge(ctx context.Context) (hal.EdgeEvent, error) {
	return wait(ctx, &l.halter, l.edges)
}

// LineOut is a fake output line that records what it was driven to.
type LineOut struct {
	name string

	mu     sync.Mutex
	safe   hal.Level
	level  hal.Level
	writes []hal.Level
	stuck  *hal.Level
	err    error
	halts  int
	halted bool
}

func (o *LineOut) Name() string { return o.name }

func (o *LineOut) Safe() hal.Level {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.safe
}

func (o *LineOut) Out(v hal.Level) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return o.err
	}
	if o.halted {
		return fmt.Errorf("haltest: line %q: %w", o.name, hal.ErrHalted)
	}
	o.level = v
	o.record(v)
	return nil
}

// keepWrites is how many of its last writes a line remembers.
const keepWrites = 1024

// record remembers a write without allocating: the history is trimmed to
// its last keepWrites before it would outgrow its array, so a fake's
// bookkeeping never costs an e-stop's Halt an allocation.
func (o *LineOut) record(v hal.Level) {
	if len(o.writes) == cap(o.writes) && len(o.writes) >= 2*keepWrites {
		n := copy(o.writes, o.writes[len(o.writes)-keepWrites:])
		o.writes = o.writes[:n]
	}
	o.writes = append(o.writes, v)
}

// Rearm lifts the latch of Halt.
func (o *LineOut) Rearm() error {
	o.mu.Lock()
	o.halted = false
	o.mu.Unlock()
	return nil
}

func (o *LineOut) ReadBack() (hal.Level, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stuck != nil {
		return *o.stuck, nil
	}
	return o.level, nil
}

// Halt drives the safe level even when Out is failing: a fake of a line
// whose writes fail still records that the halt was attempted.
func (o *LineOut) Halt() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.halts++
	o.halted = true
	if o.err != nil {
		return o.err
	}
	o.level = o.safe
	o.record(o.safe)
	return nil
}

// Level is what the line was last driven to.
func (o *LineOut) Level() hal.Level {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.level
}

// Writes lists the levels driven, in order: the last 1,024 at least.
func (o *LineOut) Writes() []hal.Level {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]hal.Level(nil), o.writes...)
}

// Halts counts Halt calls.
func (o *LineOut) Halts() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.halts
}

// Stick makes ReadBack return l whatever is driven; nil clears it.
func (o *LineOut) Stick(l *hal.Level) {
	o.mu.Lock()
	o.stuck = l
	o.mu.Unlock()
}

// Fail makes Out and Halt return err; nil heals the line.
func (o *LineOut) Fail(err error) {
	o.mu.Lock()
	o.err = err
	o.mu.Unlock()
}
