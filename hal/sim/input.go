package sim

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tobe-body/tobe-body/hal"
)

// Keys the scene types on the keyboard (KEY_H, KEY_E, KEY_L, KEY_O).
var typedKeys = []uint16{35, 18, 38, 38, 24}

// step is one scripted input event at a time within its period.
type step struct {
	at time.Duration
	ev hal.InputEvent
}

// inputScript describes one scripted device.
type inputScript struct {
	info   hal.InputInfo
	period time.Duration
	steps  func(s scene, k uint64) []step // the events of period k, in order
}

func key(at time.Duration, code uint16, value int32) []step {
	return []step{
		{at, hal.InputEvent{Type: hal.EvKey, Code: code, Value: value}},
		{at, hal.InputEvent{Type: hal.EvSyn, Code: hal.SynReport}},
	}
}

var inputScripts = map[string]inputScript{
	KeypadName: {
		info:   hal.InputInfo{Name: KeypadName, Path: "sim:" + KeypadName, Bus: 0x06, Keys: []uint16{hal.BtnMisc, hal.KeyEnter}},
		period: ButtonPeriod, // the scene's, when it has its own (openInput)
		steps: func(s scene, k uint64) []step {
			p := s.press(streamKeypad, k, s.buttonPeriod())
			return append(key(p.start, hal.BtnMisc, 1), key(p.start+p.dur, hal.BtnMisc, 0)...)
		},
	},
	KeyboardName: {
		info:   hal.InputInfo{Name: KeyboardName, Path: "sim:" + KeyboardName, Bus: 0x03, Keys: append([]uint16{hal.KeyEnter}, typedKeys...)},
		period: TypingPeriod,
		steps: func(s scene, k uint64) []step {
			at := time.Duration(s.between(streamTyping, k, 0, 0.1, 0.8) * float64(TypingPeriod))
			var out []step
			for i, code := range append(typedKeys, hal.KeyEnter) {
				at += time.Duration(s.between(streamTyping, k, uint64(i+1), 80, 250) * float64(time.Millisecond))
				out = append(out, key(at, code, 1)...)
				out = append(out, key(at+60*time.Millisecond, code, 0)...)
			}
			return out
		},
	},
}

type inputDevice struct {
	b        *Board
	script   inputScript
	halt     chan struct{}
	haltOnce sync.Once

	mu     sync.Mutex // one reader at a time; guards the fields below
	period uint64
	steps  []step
	next   int
}

func (b *Board) openInput(cfg hal.InputConfig) (hal.InputDevice, error) {
	name := cfg.Name
	if name == "" {
		name, _ = strings.CutPrefix(cfg.Path, "sim:")
	}
	s, ok := inputScripts[name]
	if !ok {
		return nil, fmt.Errorf("sim: no input device %q (the sim board has %q and %q): %w", name, KeypadName, KeyboardName, hal.ErrAbsent)
	}
	if name == KeypadName {
		s.period = b.sc.buttonPeriod()
	}
	d := &inputDevice{b: b, script: s, halt: make(chan struct{})}
	now := b.elapsed()
	d.period = uint64(now / s.period)
	d.steps = s.steps(b.sc, d.period)
	base := time.Duration(d.period) * s.period
	for d.next < len(d.steps) && base+d.steps[d.next].at < now {
		d.next++
	}
	return d, nil
}

func (d *inputDevice) Info() hal.InputInfo { return d.script.info }
func (d *inputDevice) Close() error        { return d.Halt() }

func (d *inputDevice) Halt() error {
	d.haltOnce.Do(func() { close(d.halt) })
	return nil
}

func (d *inputDevice) ReadEvent(ctx context.Context) (hal.InputEvent, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for d.next >= len(d.steps) {
		d.period++
		d.steps = d.script.steps(d.b.sc, d.period)
		d.next = 0
	}
	s := d.steps[d.next]
	at := time.Duration(d.period)*d.script.period + s.at
	if err := d.b.waitUntil(ctx, d.halt, nil, at); err != nil {
		return hal.InputEvent{}, err
	}
	d.next++
	ev := s.ev
	ev.Time = d.b.mono(at)
	return ev, nil
}

// inputWatcher reports the sim board's input devices, which are always
// plugged: each once, as an addition, then nothing until it is closed.
type inputWatcher struct {
	mu      sync.Mutex
	pending []hal.InputChange
	closed  chan struct{}
	once    sync.Once
}

func (b *Board) watchInputs() (hal.InputWatcher, error) {
	w := &inputWatcher{closed: make(chan struct{})}
	for _, name := range []string{KeypadName, KeyboardName} {
		w.pending = append(w.pending, hal.InputChange{Added: true, Info: inputScripts[name].info})
	}
	return w, nil
}

func (w *inputWatcher) Next(ctx context.Context) (hal.InputChange, error) {
	w.mu.Lock()
	if len(w.pending) > 0 {
		c := w.pending[0]
		w.pending = w.pending[1:]
		w.mu.Unlock()
		return c, nil
	}
	w.mu.Unlock()
	select {
	case <-w.closed:
		return hal.InputChange{}, fmt.Errorf("sim: input watcher: %w", hal.ErrClosed)
	case <-ctx.Done():
		return hal.InputChange{}, ctx.Err()
	}
}

func (w *inputWatcher) Close() error {
	w.once.Do(func() { close(w.closed) })
	return nil
}
