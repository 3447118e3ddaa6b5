package sense

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/hal"
)

// LineConfig is how a GPIO input channel reads its line.
type LineConfig struct {
	// Active is the level that means pressed (for a button) or on.
	Active hal.Level
	// Button turns on press detection: gpio.long_press when the line is
	// held active for LongPress, gpio.double_press when it is pressed again
	// within DoublePress of the previous release.
	Button      bool
	LongPress   time.Duration
	DoublePress time.Duration
}

// Press detection defaults.
const (
	DefaultLongPress   = time.Second
	DefaultDoublePress = 400 * time.Millisecond
)

// Validate checks the config and fills the defaults.
func (c *LineConfig) Validate() error {
	if c.LongPress == 0 {
		c.LongPress = DefaultLongPress
	}
	if c.DoublePress == 0 {
		c.DoublePress = DefaultDoublePress
	}
	switch {
	case c.LongPress < 50*time.Millisecond || c.LongPress > time.Minute:
		return fmt.Errorf("sense: long_press %v outside 50ms..1m", c.LongPress)
	case c.DoublePress < 50*time.Millisecond || c.DoublePress > 5*time.Second:
		return fmt.Errorf("sense: double_press %v outside 50ms..5s", c.DoublePress)
	}
	return nil
}

// Changed is the payload of gpio.changed, and of gpio.level (with no
// Edge); it is the body's, so that the people's takeover in act reads
// the same type.
type Changed = body.LineChanged

// Press is the payload of gpio.long_press and gpio.double_press.
type Press struct {
	Line string `cbor:"line" json:"line"`
	// HeldMS is how long the line was held (long press), or the time
	// between the two presses (double press).
	HeldMS int64 `cbor:"held_ms" json:"held_ms"`
}

// LineChannel turns a GPIO input line's edges into events: gpio.changed
// for every (debounced) change, and for buttons gpio.long_press and
// gpio.double_press. Times come from the driver's edge timestamps. At
// start it reports the line's level (gpio.level), so that a contact's
// state is known without waiting for it to change.
type LineChannel struct {
	out  *Outlet
	line hal.LineIn
	cfg  LineConfig
	now  func() hal.Mono // the monotonic clock the long-press timer reads

	active     bool
	pressedAt  hal.Mono // while active
	longSent   bool     // this press was reported as long
	releasedAt hal.Mono // of the last short press, for double presses
	double     bool     // this press was the second of a double press
	lastSeq    uint64
}

// NewLineChannel reads line and emits to out.
func NewLineChannel(out *Outlet, line hal.LineIn, cfg LineConfig) (*LineChannel, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", out.Source().Channel, err)
	}
	return &LineChannel{out: out, line: line, cfg: cfg, now: hal.MonoNow}, nil
}

func levelWord(l hal.Level) string {
	if l == hal.High {
		return "high"
	}
	return "low"
}

// Run reads the line's level and emits it as gpio.level, timed now
// (nothing is emitted when the read fails), then reads edges until ctx
// is done or the line is halted (then it returns nil); another error of
// the line is returned.
func (c *LineChannel) Run(ctx context.Context) error {
	if l, err := c.line.Read(); err == nil {
		now := c.now()
		c.active = l == c.cfg.Active
		if c.active {
			c.pressedAt, c.longSent = now, true // held before we came: not a press of ours
		}
		// No edge, no sequence: a level read, not a change (the people's
		// takeover reads gpio.changed only).
		c.out.Emit("gpio.level", now, 0, Changed{Line: c.line.Name(), Level: levelWord(l), Active: c.active})
	}
	for {
		wctx, cancel := ctx, context.CancelFunc(func() {})
		if c.cfg.Button && c.active && !c.longSent {
			// Wake when the press becomes long, if nothing else happens.
			wctx, cancel = context.WithTimeout(ctx, c.pressedAt.Add(c.cfg.LongPress).Sub(c.now()))
		}
		e, err := c.line.WaitForEdge(wctx)
		cancel()
		switch {
		case err == nil:
			c.edge(e)
		case ctx.Err() != nil || errors.Is(err, hal.ErrHalted):
			return nil
		case errors.Is(err, context.DeadlineExceeded):
			c.longSent = true
			c.out.Emit("gpio.long_press", c.pressedAt.Add(c.cfg.LongPress), c.lastSeq,
				Press{Line: c.line.Name(), HeldMS: c.cfg.LongPress.Milliseconds()})
		default:
			return fmt.Errorf("%s: %w", c.out.Source().Channel, err)
		}
	}
}

func (c *LineChannel) edge(e hal.EdgeEvent) {
	p := Changed{Line: c.line.Name(), Level: levelWord(e.Level), Edge: "falling", Active: e.Level == c.cfg.Active, Reconciled: e.Reconciled}
	if e.Edge == hal.RisingEdge {
		p.Edge = "rising"
	}
	if c.lastSeq != 0 && e.Seq > c.lastSeq+1 {
		p.Lost = e.Seq - c.lastSeq - 1
	}
	if e.Seq > c.lastSeq {
		c.lastSeq = e.Seq
	}
	c.out.Emit("gpio.changed", e.Time, e.Seq, p)
	if !c.cfg.Button || p.Active == c.active {
		c.active = p.Active
		return
	}
	c.active = p.Active
	if p.Active { // pressed
		if c.releasedAt != 0 && e.Time.Sub(c.releasedAt) <= c.cfg.DoublePress {
			c.out.Emit("gpio.double_press", e.Time, e.Seq, Press{Line: c.line.Name(), HeldMS: e.Time.Sub(c.releasedAt).Milliseconds()})
			c.double = true
		}
		c.pressedAt, c.longSent = e.Time, false
		return
	}
	// Released: a short press may be the first of a double press; a long
	// one, or the second of a double, starts over.
	c.releasedAt = e.Time
	if c.longSent || c.double {
		c.releasedAt = 0
	}
	c.longSent, c.double = false, false
}
