package sim

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tobe-body/tobe-body/hal"
)

// Names the sim board answers to; the sim board profile uses them.
const (
	ChipLabel      = "sim-gpio"
	CameraName     = "sim:front"
	MicName        = "sim:mic"
	SpeakerName    = "sim:speaker"
	KeypadName     = "sim-keypad"
	KeyboardName   = "sim-keyboard"
	LineEStop      = "ESTOP"
	LineEStop2     = "ESTOP2"
	LineReset      = "RESET"
	LineButton     = "BUTTON"
	LineRelay1     = "RELAY1"
	LineRelay1Feed = "RELAY1_FB" // a feedback contact that follows RELAY1
	LineRelay2     = "RELAY2"
	LineLED        = "LED"
	LineBuzzer     = "BUZZER"
	// LinePrivacy is the privacy switch: a slide switch to ground with a
	// pull-up, on (Low) when slid; off (High) as the board starts.
	LinePrivacy = "PRIVACY"
)

// Board is one simulated board. Its methods are safe for concurrent use.
type Board struct {
	sc    scene
	start time.Time
	base  hal.Mono

	mu    sync.Mutex
	lines map[string]*line

	speaker playLog
}

// New makes a board whose scene starts now, repeatable for the same seed.
func New(seed uint64) *Board { return NewPressing(seed, ButtonPeriod) }

// NewPressing is New with the scripted button and keypad pressed once a
// period, at least MinButtonPeriod: for a bench that needs many presses
// soon.
func NewPressing(seed uint64, period time.Duration) *Board {
	b := &Board{
		sc:    scene{seed: seed, button: max(period, MinButtonPeriod)},
		start: time.Now(),
		base:  hal.MonoNow(),
		lines: map[string]*line{},
	}
	add := func(l *line) { b.lines[l.name] = l }
	// Normally-closed e-stop contacts to ground with pull-ups: closed (no
	// stop) reads Low.
	add(&line{name: LineEStop, level: hal.Low})
	add(&line{name: LineEStop2, level: hal.Low})
	// The reset button pulls to ground when pressed: released reads High.
	add(&line{name: LineReset, level: hal.High})
	add(&line{name: LinePrivacy, level: hal.High})
	add(&line{name: LineButton, script: streamButton})
	for _, n := range []string{LineRelay1, LineRelay2, LineLED, LineBuzzer} {
		add(&line{name: n, level: hal.Low})
	}
	add(&line{name: LineRelay1Feed, mirror: LineRelay1})
	for _, n := range LEDNames {
		add(&line{name: "led:" + n, level: hal.Low})
	}
	return b
}

// Drivers returns the openers of this board's devices.
func (b *Board) Drivers() hal.Drivers {
	return hal.Drivers{
		Name: "sim",
		OpenChip: func(label string) (hal.Chip, error) {
			if label != ChipLabel {
				return nil, fmt.Errorf("sim: no GPIO chip labelled %q (the sim board has %q): %w", label, ChipLabel, hal.ErrAbsent)
			}
			return &chip{b: b, owned: map[string]owned{}}, nil
		},
		OpenCamera:   b.openCamera,
		OpenCapture:  b.openCapture,
		OpenPlayback: b.openPlayback,
		OpenInput:    b.openInput,
		WatchInputs:  b.watchInputs,
		OpenI2C:      b.openI2C,
		OpenLED:      b.openLED,
	}
}

// elapsed is the scene time now.
func (b *Board) elapsed() time.Duration { return time.Since(b.start) }

// mono converts scene time to the monotonic clock.
func (b *Board) mono(t time.Duration) hal.Mono { return b.base.Add(t) }

// waitUntil blocks until scene time t, ctx is done, halt is closed, or
// stop is (a pause: errPausedMidRead).
func (b *Board) waitUntil(ctx context.Context, halt, stop <-chan struct{}, t time.Duration) error {
	d := t - b.elapsed()
	if d <= 0 {
		select {
		case <-halt:
			return hal.ErrHalted
		case <-stop:
			return errPausedMidRead
		default:
			return ctx.Err()
		}
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-halt:
		return hal.ErrHalted
	case <-stop:
		return errPausedMidRead
	case <-ctx.Done():
		return ctx.Err()
	}
}

// SetInput sets the level of a held input line (ESTOP, ESTOP2, RESET,
// PRIVACY), as
// a wire or a person would. Listeners see the edge at the time of the call.
func (b *Board) SetInput(name string, l hal.Level) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	ln, ok := b.lines[name]
	switch {
	case !ok:
		return fmt.Errorf("sim: no line %q: %w", name, hal.ErrAbsent)
	case ln.script != 0 || ln.mirror != "":
		return fmt.Errorf("sim: line %q is driven by the scene, not held", name)
	case ln.out:
		return fmt.Errorf("sim: line %q is requested as an output", name)
	}
	b.setLocked(ln, l)
	return nil
}

// SetStuck makes an output read back l whatever is driven (a welded relay,
// a shorted LED); nil clears the fault.
func (b *Board) SetStuck(name string, l *hal.Level) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	ln, ok := b.lines[name]
	if !ok {
		return fmt.Errorf("sim: no line %q: %w", name, hal.ErrAbsent)
	}
	b.changeLocked(ln, func() {
		if l == nil {
			ln.stuck = nil
		} else {
			v := *l
			ln.stuck = &v
		}
	})
	return nil
}

// Level reads a line as the outside world sees it.
func (b *Board) Level(name string) (hal.Level, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ln, ok := b.lines[name]
	if !ok {
		return hal.Low, fmt.Errorf("sim: no line %q: %w", name, hal.ErrAbsent)
	}
	return b.levelLocked(ln, b.elapsed()), nil
}
