package sim

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tobe-body/tobe-body/hal"
)

// line is one GPIO line of the sim chip. Its fields are guarded by Board.mu.
type line struct {
	name   string
	level  hal.Level  // held or driven level
	script uint64     // non-zero: a scripted button of that stream, active low
	mirror string     // non-zero: follows the named line (a feedback contact)
	stuck  *hal.Level // a fault: reads back this whatever is driven

	owner string // consumer holding the line, "" when free
	out   bool
	subs  []*lineIn // inputs watching this line or a line it mirrors
}

// change is a held level change queued for a listener.
type change struct {
	level hal.Level
	at    time.Duration
}

const edgeQueue = 64 // like the kernel's per-line event buffer

func (b *Board) levelLocked(l *line, t time.Duration) hal.Level {
	switch {
	case l.script != 0:
		down, _ := b.sc.pressed(l.script, b.sc.buttonPeriod(), t)
		return hal.Level(!down)
	case l.mirror != "":
		return b.levelLocked(b.lines[l.mirror], t)
	case l.stuck != nil:
		return *l.stuck
	}
	return l.level
}

// setLocked changes a held or driven level and tells the listeners.
func (b *Board) setLocked(l *line, v hal.Level) {
	b.changeLocked(l, func() { l.level = v })
}

// changeLocked applies mutate to l and tells the listeners of l and of the
// lines that mirror it whose level it changed.
func (b *Board) changeLocked(l *line, mutate func()) {
	now := b.elapsed()
	affected := []*line{l}
	for _, m := range b.lines {
		if m.mirror == l.name {
			affected = append(affected, m)
		}
	}
	before := make([]hal.Level, len(affected))
	for i, a := range affected {
		before[i] = b.levelLocked(a, now)
	}
	mutate()
	for i, a := range affected {
		if after := b.levelLocked(a, now); after != before[i] {
			for _, s := range a.subs {
				s.push(change{level: after, at: now})
			}
		}
	}
}

// chip is the sim GPIO controller handed to one consumer.
type chip struct {
	b     *Board
	mu    sync.Mutex
	owned map[string]owned // line name -> what was requested
}

func (c *chip) Label() string { return ChipLabel }

func (c *chip) claim(name string, out bool) (*line, error) {
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	l, ok := b.lines[name]
	if !ok {
		return nil, fmt.Errorf("sim: chip %s has no line %q: %w", ChipLabel, name, hal.ErrAbsent)
	}
	if l.owner != "" {
		return nil, fmt.Errorf("sim: line %q is held by consumer %q: %w", name, l.owner, hal.ErrBusy)
	}
	if out && (l.script != 0 || l.mirror != "") {
		return nil, fmt.Errorf("sim: line %q is an input only: %w", name, hal.ErrUnsupported)
	}
	l.owner = "tobe-body"
	l.out = out
	return l, nil
}

// owned is a line requested from the chip; halt is nil for inputs.
type owned struct {
	halt    func() error
	release func()
}

func (c *chip) remember(name string, o owned) {
	c.mu.Lock()
	c.owned[name] = o
	c.mu.Unlock()
}

func (c *chip) In(name string, cfg hal.InConfig) (hal.LineIn, error) {
	l, err := c.claim(name, false)
	if err != nil {
		return nil, err
	}
	b := c.b
	in := &lineIn{b: b, l: l, cfg: cfg, halt: make(chan struct{}), queue: make(chan change, edgeQueue)}
	b.mu.Lock()
	in.cursor = b.elapsed()
	in.last = b.levelLocked(l, in.cursor)
	l.subs = append(l.subs, in)
	b.mu.Unlock()
	c.remember(name, owned{release: func() {
		in.Halt()
		b.mu.Lock()
		for i, s := range l.subs {
			if s == in {
				l.subs = append(l.subs[:i], l.subs[i+1:]...)
				break
			}
		}
		l.owner = ""
		b.mu.Unlock()
	}})
	return in, nil
}

func (c *chip) Out(name string, cfg hal.OutConfig) (hal.LineOut, error) {
	l, err := c.claim(name, true)
	if err != nil {
		return nil, err
	}
	o := &lineOut{b: c.b, l: l, safe: cfg.Safe}
	c.b.mu.Lock()
	c.b.setLocked(l, cfg.Safe) // driven safe in the same request
	c.b.mu.Unlock()
	c.remember(name, owned{halt: o.Halt, release: func() {
		o.Halt()
		c.b.mu.Lock()
		o.closed = true
		l.owner, l.out = "", false
		c.b.mu.Unlock()
	}})
	return o, nil
}

// Outs claims the lines one by one: a fake has no request to share.
func (c *chip) Outs(reqs []hal.OutRequest) ([]hal.LineOut, []error) { return hal.OutEach(c, reqs) }

// Halt drives every requested output to its safe level and latches it.
// Inputs go on reporting: the e-stop and its reset must be read after a
// halt more than ever.
func (c *chip) Halt() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range c.owned {
		if o.halt != nil {
			o.halt()
		}
	}
	return nil
}

func (c *chip) Close() error {
	c.mu.Lock()
	lines := c.owned
	c.owned = map[string]owned{}
	c.mu.Unlock()
	for _, o := range lines {
		o.release()
	}
	return nil
}

// lineIn is a requested input line.
type lineIn struct {
	b        *Board
	l        *line
	cfg      hal.InConfig
	halt     chan struct{}
	haltOnce sync.Once
	queue    chan change
	peeked   *change // a change read ahead while debouncing

	mu     sync.Mutex // one waiter at a time; guards the fields below
	last   hal.Level
	seq    uint64
	lost   uint64 // pushes that found the queue full, guarded by Board.mu
	cursor time.Duration
}

// push queues a change; called with Board.mu held. A full queue drops its
// oldest change, as the kernel's event buffer does, so the newest level
// always reaches the reader; the loss shows as a gap in Seq.
func (in *lineIn) push(c change) {
	for {
		select {
		case in.queue <- c:
			return
		default:
		}
		select {
		case <-in.queue:
			in.lost++
		default:
		}
	}
}

func (in *lineIn) Name() string { return in.l.name }

func (in *lineIn) Halt() error {
	in.haltOnce.Do(func() { close(in.halt) })
	return nil
}

func (in *lineIn) Read() (hal.Level, error) {
	select {
	case <-in.halt:
		return hal.Low, hal.ErrHalted
	default:
	}
	in.b.mu.Lock()
	defer in.b.mu.Unlock()
	return in.b.levelLocked(in.l, in.b.elapsed()), nil
}

func (in *lineIn) WaitForEdge(ctx context.Context) (hal.EdgeEvent, error) {
	if in.cfg.Edge == hal.NoEdge {
		return hal.EdgeEvent{}, fmt.Errorf("sim: line %q was requested without edge detection: %w", in.l.name, hal.ErrUnsupported)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	b := in.b
	for {
		var c change
		if in.l.script != 0 {
			_, next := b.sc.pressed(in.l.script, b.sc.buttonPeriod(), in.cursor)
			if err := b.waitUntil(ctx, in.halt, nil, next); err != nil {
				return hal.EdgeEvent{}, err
			}
			in.cursor = next
			b.mu.Lock()
			c = change{level: b.levelLocked(in.l, next), at: next}
			b.mu.Unlock()
		} else {
			var err error
			if c, err = in.nextHeld(ctx); err != nil {
				return hal.EdgeEvent{}, err
			}
		}
		if c.level == in.last {
			continue
		}
		if in.cfg.Debounce > 0 && in.l.script != 0 {
			// A scripted line's level is known at any time.
			if err := b.waitUntil(ctx, in.halt, nil, c.at+in.cfg.Debounce); err != nil {
				return hal.EdgeEvent{}, err
			}
			b.mu.Lock()
			now := b.levelLocked(in.l, c.at+in.cfg.Debounce)
			b.mu.Unlock()
			in.cursor = c.at + in.cfg.Debounce
			if now != c.level {
				continue // it bounced back within the window
			}
		} else if in.cfg.Debounce > 0 {
			// A held line keeps its history in the queue: a change within
			// the window restarts it.
			for {
				n, ok, err := in.heldBefore(ctx, c.at+in.cfg.Debounce)
				if err != nil {
					return hal.EdgeEvent{}, err
				}
				if !ok {
					break
				}
				c = n
			}
			if c.level == in.last {
				continue
			}
		}
		in.last = c.level
		e := hal.EdgeEvent{Line: in.l.name, Level: c.level, Time: b.mono(c.at), Edge: hal.FallingEdge}
		if c.level == hal.High {
			e.Edge = hal.RisingEdge
		}
		if in.cfg.Edge != hal.BothEdges && in.cfg.Edge != e.Edge {
			continue // not an edge this request reports, nor counts
		}
		b.mu.Lock()
		in.seq += 1 + in.lost
		in.lost = 0
		e.Seq = in.seq
		b.mu.Unlock()
		return e, nil
	}
}

// lineOut is a requested output line. halted and closed are guarded by
// Board.mu, the sim's stand-in for the line's own lock.
type lineOut struct {
	b      *Board
	l      *line
	safe   hal.Level
	halted bool
	closed bool
}

func (o *lineOut) Name() string    { return o.l.name }
func (o *lineOut) Safe() hal.Level { return o.safe }

func (o *lineOut) Out(v hal.Level) error {
	o.b.mu.Lock()
	defer o.b.mu.Unlock()
	switch {
	case o.closed:
		return fmt.Errorf("sim: line %q: %w", o.l.name, hal.ErrClosed)
	case o.halted:
		return fmt.Errorf("sim: line %q: %w", o.l.name, hal.ErrHalted)
	}
	o.b.setLocked(o.l, v)
	return nil
}

func (o *lineOut) Rearm() error {
	o.b.mu.Lock()
	defer o.b.mu.Unlock()
	if o.closed {
		return fmt.Errorf("sim: line %q: %w", o.l.name, hal.ErrClosed)
	}
	o.halted = false
	return nil
}

func (o *lineOut) ReadBack() (hal.Level, error) {
	o.b.mu.Lock()
	defer o.b.mu.Unlock()
	return o.b.levelLocked(o.l, o.b.elapsed()), nil
}

// Halt drives the line to its safe level and latches it there. After
// Close it does nothing: the line may belong to another request by then.
func (o *lineOut) Halt() error {
	o.b.mu.Lock()
	defer o.b.mu.Unlock()
	if o.closed {
		return nil
	}
	o.halted = true
	o.b.setLocked(o.l, o.safe)
	return nil
}

// nextHeld returns the next queued change of a held line.
func (in *lineIn) nextHeld(ctx context.Context) (change, error) {
	if p := in.peeked; p != nil {
		in.peeked = nil
		return *p, nil
	}
	select {
	case c := <-in.queue:
		return c, nil
	case <-in.halt:
		return change{}, hal.ErrHalted
	case <-ctx.Done():
		return change{}, ctx.Err()
	}
}

// heldBefore returns the next change of a held line that happened before
// deadline, waiting for scene time to reach it; ok is false when the line
// held still until deadline.
func (in *lineIn) heldBefore(ctx context.Context, deadline time.Duration) (c change, ok bool, err error) {
	if p := in.peeked; p != nil {
		if p.at < deadline {
			in.peeked = nil
			return *p, true, nil
		}
		return change{}, false, nil
	}
	d := deadline - in.b.elapsed()
	if d <= 0 {
		select {
		case c = <-in.queue:
		default:
			return change{}, false, nil
		}
	} else {
		tm := time.NewTimer(d)
		defer tm.Stop()
		select {
		case c = <-in.queue:
		case <-tm.C:
			return change{}, false, nil
		case <-in.halt:
			return change{}, false, hal.ErrHalted
		case <-ctx.Done():
			return change{}, false, ctx.Err()
		}
	}
	if c.at < deadline {
		return c, true, nil
	}
	later := c // not &c: the return below overwrites the named result
	in.peeked = &later
	return change{}, false, nil
}

// AddLine adds a line of that name to the board, held at level: an output
// of another board's, simulated (the runner's simulation mode drives a
// twin of each real output). A name the board has is refused.
func (b *Board) AddLine(name string, level hal.Level) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.lines[name]; ok {
		return fmt.Errorf("sim: chip %s already has a line %q", ChipLabel, name)
	}
	b.lines[name] = &line{name: name, level: level}
	return nil
}
