package haltest

import (
	"context"
	"fmt"
	"sync"

	"github.com/tobe-body/tobe-body/hal"
)

// pauser makes a fake a hal.Pauser: Pause drops what waits (drop) and
// makes the next read return hal.ErrPaused and the ones after it wait
// until Resume.
type pauser struct {
	mu      sync.Mutex
	paused  bool
	told    bool
	resumed chan struct{}
	stop    chan struct{} // closed by Pause: a read waiting gives up
	pauses  int
}

// stopped is the channel the next Pause closes.
func (p *pauser) stopped() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stop == nil {
		p.stop = make(chan struct{})
	}
	return p.stop
}

func (p *pauser) pause(drop func()) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.paused {
		p.paused, p.told, p.resumed = true, false, make(chan struct{})
		p.pauses++
		drop()
		if p.stop != nil {
			close(p.stop)
			p.stop = nil
		}
	}
	return nil
}

// Resume lets reads go on.
func (p *pauser) Resume() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused {
		p.paused = false
		close(p.resumed)
	}
	return nil
}

// Pauses counts the pauses.
func (p *pauser) Pauses() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pauses
}

// gate is what a read asks first: hal.ErrPaused once a pause, then a
// wait while paused.
func (p *pauser) gate(ctx context.Context, h *halter) error {
	for {
		p.mu.Lock()
		paused, told, resumed := p.paused, p.told, p.resumed
		if paused && !told {
			p.told = true
		}
		p.mu.Unlock()
		switch {
		case !paused:
			return nil
		case !told:
			return hal.ErrPaused
		}
		select {
		case <-resumed:
		case <-h.ch:
			return hal.ErrHalted
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Camera is a fake camera that delivers the frames a test pushes.
type Camera struct {
	halter
	pauser
	format hal.FrameFormat
	frames chan *hal.Frame

	mu       sync.Mutex
	released int
	failed   chan error
}

// NewCamera returns a camera of format f with room for n pushed frames.
func NewCamera(f hal.FrameFormat, n int) *Camera {
	return &Camera{halter: newHalter(), format: f, frames: make(chan *hal.Frame, n), failed: make(chan error, 1)}
}

// Fail makes the next NextFrame return err, as a device that went away
// (hal.ErrAbsent) or broke would.
func (c *Camera) Fail(err error) { c.failed <- err }

// Push queues a frame; it blocks when the queue is full.
func (c *Camera) Push(data []byte, seq uint64, t hal.Mono) {
	c.frames <- hal.NewFrame(c.format, data, seq, t, func() {
		c.mu.Lock()
		c.released++
		c.mu.Unlock()
	})
}

// Released counts frames the consumer gave back.
func (c *Camera) Released() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.released
}

func (c *Camera) Name() string            { return "test-camera" }
func (c *Camera) Format() hal.FrameFormat { return c.format }
func (c *Camera) Close() error            { return c.Halt() }

// Pause drops the frames pushed and not read (released) and pauses.
func (c *Camera) Pause() error {
	return c.pause(func() {
		for {
			select {
			case f := <-c.frames:
				f.Release()
			default:
				return
			}
		}
	})
}

func (c *Camera) NextFrame(ctx context.Context) (*hal.Frame, error) {
	if err := c.gate(ctx, &c.halter); err != nil {
		return nil, err
	}
	stop := c.stopped()
	select {
	case err := <-c.failed:
		return nil, err
	default:
	}
	select {
	case f := <-c.frames:
		return f, nil
	case err := <-c.failed:
		return nil, err
	case <-stop:
		return c.NextFrame(ctx) // paused while waiting
	case <-c.ch:
		return nil, hal.ErrHalted
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Capture is a fake microphone that delivers the frames a test pushes.
type Capture struct {
	halter
	pauser
	format hal.AudioFormat
	frames chan hal.AudioFrame
}

// NewCapture returns a microphone of format f with room for n frames.
func NewCapture(f hal.AudioFormat, n int) *Capture {
	return &Capture{halter: newHalter(), format: f, frames: make(chan hal.AudioFrame, n)}
}

// Push queues a frame; len(samples) must be f.Len().
func (c *Capture) Push(samples []int16, seq uint64, t hal.Mono) {
	if len(samples) != c.format.Len() {
		panic(fmt.Sprintf("haltest: pushed %d samples, the format holds %d", len(samples), c.format.Len()))
	}
	c.frames <- hal.AudioFrame{Samples: samples, Seq: seq, Time: t}
}

func (c *Capture) Name() string            { return "test-mic" }
func (c *Capture) Format() hal.AudioFormat { return c.format }
func (c *Capture) Close() error            { return c.Halt() }

// Pause drops the frames pushed and not read, and pauses.
func (c *Capture) Pause() error {
	return c.pause(func() {
		for {
			select {
			case <-c.frames:
			default:
				return
			}
		}
	})
}

func (c *Capture) ReadFrame(ctx context.Context, f *hal.AudioFrame) error {
	if len(f.Samples) != c.format.Len() {
		return fmt.Errorf("haltest: frame holds %d samples, want %d", len(f.Samples), c.format.Len())
	}
	if err := c.gate(ctx, &c.halter); err != nil {
		return err
	}
	stop := c.stopped()
	var got hal.AudioFrame
	select {
	case got = <-c.frames:
	case <-stop:
		return c.ReadFrame(ctx, f) // paused while waiting
	case <-c.ch:
		return hal.ErrHalted
	case <-ctx.Done():
		return ctx.Err()
	}
	copy(f.Samples, got.Samples)
	f.Seq, f.Time, f.Overruns = got.Seq, got.Time, got.Overruns
	return nil
}

// Playback is a fake speaker that records what it was asked to play.
type Playback struct {
	format hal.AudioFormat

	mu     sync.Mutex
	played [][]int16
	halts  int
	halted bool
}

// NewPlayback returns a speaker of format f.
func NewPlayback(f hal.AudioFormat) *Playback { return &Playback{format: f} }

func (p *Playback) Name() string            { return "test-speaker" }
func (p *Playback) Format() hal.AudioFormat { return p.format }
func (p *Playback) Close() error            { return p.Halt() }

func (p *Playback) Halt() error {
	p.mu.Lock()
	p.halts++
	p.halted = true
	p.mu.Unlock()
	return nil
}

// Rearm lifts the latch of Halt.
func (p *Playback) Rearm() error {
	p.mu.Lock()
	p.halted = false
	p.mu.Unlock()
	return nil
}

func (p *Playback) Play(ctx context.Context, samples []int16) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.halted {
		return fmt.Errorf("haltest: speaker: %w", hal.ErrHalted)
	}
	p.played = append(p.played, append([]int16(nil), samples...))
	return nil
}

// Played returns every buffer played, in order.
func (p *Playback) Played() [][]int16 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][]int16(nil), p.played...)
}

// Halts counts Halt calls.
func (p *Playback) Halts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.halts
}

// Input is a fake input device that delivers the events a test pushes.
type Input struct {
	halter
	info     hal.InputInfo
	events   chan hal.InputEvent
	unplug   chan struct{}
	unplugMu sync.Once
}

// NewInput returns a device described by info with room for n events.
func NewInput(info hal.InputInfo, n int) *Input {
	return &Input{halter: newHalter(), info: info, events: make(chan hal.InputEvent, n), unplug: make(chan struct{})}
}

// Push queues an event.
func (d *Input) Push(e hal.InputEvent) { d.events <- e }

// Unplug makes ReadEvent return hal.ErrAbsent once the queued events are
// read, as a removed device does.
func (d *Input) Unplug() { d.unplugMu.Do(func() { close(d.unplug) }) }

func (d *Input) Info() hal.InputInfo { return d.info }
func (d *Input) Close() error        { return d.Halt() }

func (d *Input) ReadEvent(ctx context.Context) (hal.InputEvent, error) {
	select {
	case e := <-d.events:
		return e, nil
	default:
	}
	select {
	case e := <-d.events:
		return e, nil
	case <-d.unplug:
		return hal.InputEvent{}, fmt.Errorf("haltest: %s unplugged: %w", d.info.Name, hal.ErrAbsent)
	case <-d.ch:
		return hal.InputEvent{}, hal.ErrHalted
	case <-ctx.Done():
		return hal.InputEvent{}, ctx.Err()
	}
}

// InputWatcher is a fake hotplug watcher: a test plugs and unplugs fake
// devices, and Open (for hal.Drivers.OpenInput) opens the plugged ones.
type InputWatcher struct {
	changes chan hal.InputChange
	closed  chan struct{}
	once    sync.Once

	mu      sync.Mutex
	plugged map[string]*Input
}

// NewInputWatcher returns a watcher with room for n changes.
func NewInputWatcher(n int) *InputWatcher {
	return &InputWatcher{changes: make(chan hal.InputChange, n), closed: make(chan struct{}), plugged: map[string]*Input{}}
}

// Plug adds a device (its Info().Path is its key) and reports it.
func (w *InputWatcher) Plug(d *Input) {
	w.mu.Lock()
	w.plugged[d.info.Path] = d
	w.mu.Unlock()
	w.changes <- hal.InputChange{Added: true, Info: d.info}
}

// Unplug removes a device: its reader ends with ErrAbsent and the removal
// is reported.
func (w *InputWatcher) Unplug(d *Input) {
	w.mu.Lock()
	delete(w.plugged, d.info.Path)
	w.mu.Unlock()
	d.Unplug()
	w.changes <- hal.InputChange{Info: d.info}
}

// Open opens a plugged device by path or name.
func (w *InputWatcher) Open(cfg hal.InputConfig) (hal.InputDevice, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, d := range w.plugged {
		if d.info.Path == cfg.Path || (cfg.Path == "" && d.info.Name == cfg.Name) {
			return d, nil
		}
	}
	return nil, fmt.Errorf("haltest: no device %q %q: %w", cfg.Path, cfg.Name, hal.ErrAbsent)
}

func (w *InputWatcher) Next(ctx context.Context) (hal.InputChange, error) {
	select {
	case c := <-w.changes:
		return c, nil
	case <-w.closed:
		return hal.InputChange{}, hal.ErrClosed
	case <-ctx.Done():
		return hal.InputChange{}, ctx.Err()
	}
}

func (w *InputWatcher) Close() error {
	w.once.Do(func() { close(w.closed) })
	return nil
}

// Compile-time checks that the fakes keep the contracts.
var (
	_ hal.Chip          = (*Chip)(nil)
	_ hal.LineIn        = (*LineIn)(nil)
	_ hal.LineOut       = (*LineOut)(nil)
	_ hal.Camera        = (*Camera)(nil)
	_ hal.AudioCapture  = (*Capture)(nil)
	_ hal.AudioPlayback = (*Playback)(nil)
	_ hal.InputDevice   = (*Input)(nil)
	_ hal.InputWatcher  = (*InputWatcher)(nil)
)
