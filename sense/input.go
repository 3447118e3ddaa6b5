package sense

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/hal"
)

// InputRole says what an input device is to the body.
type InputRole string

const (
	// Control devices (buttons, keypads, rotary encoders, gamepads the
	// config dedicates to the body) name their keys: input.pressed,
	// input.released, input.rotated.
	Control InputRole = "control"
	// Activity devices (keyboards, mice, everything else) are private: they
	// only say that they were used, per device and window (input.activity),
	// never which key, never text.
	Activity InputRole = "activity"
)

// InputConfig is how an input channel reads a device.
type InputConfig struct {
	Role InputRole
	// Window is the period of input.activity summaries (activity devices).
	Window time.Duration
	// RotateWindow coalesces rotation into one input.rotated (controls).
	RotateWindow time.Duration
}

// Input defaults.
const (
	DefaultActivityWindow = 10 * time.Second
	DefaultRotateWindow   = 200 * time.Millisecond
)

// Validate checks the config and fills the defaults.
func (c *InputConfig) Validate() error {
	if c.Window == 0 {
		c.Window = DefaultActivityWindow
	}
	if c.RotateWindow == 0 {
		c.RotateWindow = DefaultRotateWindow
	}
	switch {
	case c.Role != Control && c.Role != Activity:
		return fmt.Errorf("sense: input role %q is neither %q nor %q", c.Role, Control, Activity)
	case c.Window < time.Second || c.Window > time.Hour:
		return fmt.Errorf("sense: activity window %v outside 1s..1h", c.Window)
	case c.RotateWindow < 10*time.Millisecond || c.RotateWindow > 5*time.Second:
		return fmt.Errorf("sense: rotate window %v outside 10ms..5s", c.RotateWindow)
	}
	return nil
}

// Key is the payload of input.pressed and input.released (controls
// only); it is the body's, so that the people's takeover in act reads the
// same type.
type Key = body.KeyPress

// Rotated is the payload of input.rotated (controls only).
type Rotated struct {
	Device string `cbor:"device" json:"device"`
	Axis   string `cbor:"axis" json:"axis"`
	Delta  int64  `cbor:"delta" json:"delta"`
}

// ActivityReport is the payload of input.activity: how much a private
// device was used in a window, and nothing about what was typed.
type ActivityReport struct {
	Device   string `cbor:"device" json:"device"`
	Events   int    `cbor:"events" json:"events"`
	WindowMS int64  `cbor:"window_ms" json:"window_ms"`
}

// InputChannel turns an input device's events into events of its role.
type InputChannel struct {
	out *Outlet
	dev hal.InputDevice
	cfg InputConfig
	now func() hal.Mono

	// activity
	winStart hal.Mono
	count    int
	// rotation
	rotAxis  uint16
	rotDelta int64
	rotStart hal.Mono
	rotLast  hal.Mono
	rotating bool
}

// NewInputChannel reads dev and emits to out.
func NewInputChannel(out *Outlet, dev hal.InputDevice, cfg InputConfig) (*InputChannel, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", out.Source().Channel, err)
	}
	return &InputChannel{out: out, dev: dev, cfg: cfg, now: hal.MonoNow}, nil
}

// Run reads events until ctx is done, the device is halted (nil) or goes
// away (an error wrapping hal.ErrAbsent); what was counted is reported
// first.
func (c *InputChannel) Run(ctx context.Context) error {
	name := c.dev.Info().Name
	for {
		var deadline hal.Mono
		switch {
		case c.rotating:
			deadline = c.rotStart.Add(c.cfg.RotateWindow)
		case c.count > 0:
			deadline = c.winStart.Add(c.cfg.Window)
		}
		rctx, cancel := ctx, context.CancelFunc(func() {})
		if deadline != 0 {
			rctx, cancel = context.WithTimeout(ctx, deadline.Sub(c.now()))
		}
		ev, err := c.dev.ReadEvent(rctx)
		cancel()
		switch {
		case err == nil:
			c.take(name, ev)
			continue
		case ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
			c.flush(name, c.now(), false)
			continue
		}
		c.flush(name, c.now(), true)
		if ctx.Err() != nil || errors.Is(err, hal.ErrHalted) {
			return nil
		}
		return fmt.Errorf("%s: %w", c.out.Source().Channel, err)
	}
}

// flush reports what is due at now: a rotation whose window closed, an
// activity window that ended; at the end (final), whatever is pending.
func (c *InputChannel) flush(name string, now hal.Mono, final bool) {
	if c.rotating && (final || now >= c.rotStart.Add(c.cfg.RotateWindow)) {
		c.rotating = false
		if c.rotDelta != 0 {
			c.out.Emit("input.rotated", c.rotLast, 0, Rotated{Device: name, Axis: axisName(c.rotAxis), Delta: c.rotDelta})
		}
	}
	switch end := c.winStart.Add(c.cfg.Window); {
	case c.count > 0 && now >= end:
		c.out.Emit("input.activity", end, 0, ActivityReport{Device: name, Events: c.count, WindowMS: c.cfg.Window.Milliseconds()})
		c.count = 0
	case c.count > 0 && final:
		c.out.Emit("input.activity", now, 0, ActivityReport{Device: name, Events: c.count, WindowMS: now.Sub(c.winStart).Milliseconds()})
		c.count = 0
	}
}

func (c *InputChannel) take(name string, ev hal.InputEvent) {
	c.flush(name, ev.Time, false)
	if c.cfg.Role == Activity {
		// Counted, never named: key presses and motion alike.
		if ev.Type == hal.EvKey || ev.Type == hal.EvRel || ev.Type == hal.EvAbs {
			if ev.Type == hal.EvKey && ev.Value == 2 {
				return // autorepeat is not use
			}
			if c.count == 0 {
				c.winStart = ev.Time
			}
			c.count++
		}
		return
	}
	switch ev.Type {
	case hal.EvKey:
		switch ev.Value {
		case 1:
			c.out.Emit("input.pressed", ev.Time, 0, Key{Device: name, Key: KeyName(ev.Code)})
		case 0:
			c.out.Emit("input.released", ev.Time, 0, Key{Device: name, Key: KeyName(ev.Code)})
		}
	case hal.EvRel:
		if c.rotating && ev.Code != c.rotAxis {
			c.flush(name, ev.Time, true) // another axis: report the first now
		}
		if !c.rotating {
			c.rotating, c.rotAxis, c.rotDelta, c.rotStart = true, ev.Code, 0, ev.Time
		}
		c.rotDelta += int64(ev.Value)
		c.rotLast = ev.Time
	}
}

var axisNames = map[uint16]string{0x00: "x", 0x01: "y", 0x06: "hwheel", 0x07: "dial", 0x08: "wheel"}

func axisName(code uint16) string {
	if n, ok := axisNames[code]; ok {
		return n
	}
	return fmt.Sprintf("rel%d", code)
}

// keyNames are the kernel's names (linux/input-event-codes.h) of the keys
// a control is likely to have. Only controls are ever named.
var keyNames = func() map[uint16]string {
	m := map[uint16]string{
		1: "KEY_ESC", 14: "KEY_BACKSPACE", 15: "KEY_TAB", 28: "KEY_ENTER", 57: "KEY_SPACE",
		2: "KEY_1", 3: "KEY_2", 4: "KEY_3", 5: "KEY_4", 6: "KEY_5", 7: "KEY_6", 8: "KEY_7", 9: "KEY_8", 10: "KEY_9", 11: "KEY_0",
		55: "KEY_KPASTERISK", 74: "KEY_KPMINUS", 78: "KEY_KPPLUS", 83: "KEY_KPDOT", 96: "KEY_KPENTER", 98: "KEY_KPSLASH",
		71: "KEY_KP7", 72: "KEY_KP8", 73: "KEY_KP9", 75: "KEY_KP4", 76: "KEY_KP5", 77: "KEY_KP6", 79: "KEY_KP1", 80: "KEY_KP2", 81: "KEY_KP3", 82: "KEY_KP0",
		103: "KEY_UP", 105: "KEY_LEFT", 106: "KEY_RIGHT", 108: "KEY_DOWN", 102: "KEY_HOME", 107: "KEY_END",
		113: "KEY_MUTE", 114: "KEY_VOLUMEDOWN", 115: "KEY_VOLUMEUP", 116: "KEY_POWER",
		163: "KEY_NEXTSONG", 164: "KEY_PLAYPAUSE", 165: "KEY_PREVIOUSSONG", 166: "KEY_STOPCD",
		0x110: "BTN_LEFT", 0x111: "BTN_RIGHT", 0x112: "BTN_MIDDLE",
		0x130: "BTN_SOUTH", 0x131: "BTN_EAST", 0x133: "BTN_NORTH", 0x134: "BTN_WEST",
		0x136: "BTN_TL", 0x137: "BTN_TR", 0x138: "BTN_TL2", 0x139: "BTN_TR2",
		0x13a: "BTN_SELECT", 0x13b: "BTN_START", 0x13c: "BTN_MODE", 0x13d: "BTN_THUMBL", 0x13e: "BTN_THUMBR",
		0x220: "BTN_DPAD_UP", 0x221: "BTN_DPAD_DOWN", 0x222: "BTN_DPAD_LEFT", 0x223: "BTN_DPAD_RIGHT",
	}
	for i := range uint16(10) {
		m[0x100+i] = fmt.Sprintf("BTN_%d", i)
	}
	for i := range uint16(10) {
		m[59+i] = fmt.Sprintf("KEY_F%d", i+1)
	}
	m[87], m[88] = "KEY_F11", "KEY_F12"
	return m
}()

// KeyName is the kernel's name of a key code, or KEY_<code>.
func KeyName(code uint16) string {
	if n, ok := keyNames[code]; ok {
		return n
	}
	return fmt.Sprintf("KEY_%d", code)
}
