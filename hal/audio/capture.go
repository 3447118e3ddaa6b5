package audio

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tobe-body/tobe-body/hal"
)

// maxBuffered bounds what PortAudio may say is buffered behind a frame
// for the estimate to believe it; more is a host API's nonsense, and the
// frame's own length is used instead.
const maxBuffered = time.Second

// Capture is a microphone: PortAudio calls back with each frame from its
// own thread, the frame goes into a ring, and ReadFrame takes frames out.
// It implements hal.AudioCapture; ReadFrame may be called from several
// goroutines, each frame going to one of them.
type Capture struct {
	name     string
	format   hal.AudioFormat
	frameDur time.Duration

	ctl     sync.Mutex // serialises the stream's start, abort and close
	dev     stream     // nil while paused
	running bool
	// reopen opens the device again for Resume; nil: it cannot be.
	reopen func() (stream, error)

	mu    sync.Mutex // guards what the callback shares with readers
	ring  ring
	clock clockSource
	last  time.Time // the last callback
	// flagged is PortAudio's current time at the last buffer flagged with
	// an overflow. PortAudio hands each of the host's buffers on in frames,
	// all with the host buffer's flags and current time: one loss, flagged
	// on each, is counted on the first.
	flagged time.Duration
	halted  bool
	closed  bool
	// paused while Pause let the device go; told once a reader was told
	// (hal.ErrPaused); resumed is closed by Resume.
	paused, told bool
	resumed      chan struct{}
	halt         chan struct{} // closed by Halt
	ready        chan struct{} // poked when a frame arrives

	// stallOnce, when set, makes the next callback sleep that long first:
	// the lab's way to make the device overrun for real.
	stallOnce atomic.Int64
}

func newCapture(name string, f hal.AudioFormat) *Capture {
	return &Capture{
		name: name, format: f, frameDur: f.FrameDuration(),
		ring: newRing(ringFrames(f), f.Len()),
		halt: make(chan struct{}), ready: make(chan struct{}, 1),
	}
}

// run starts dev; the capture owns it from here on, and closes it if it
// cannot be started.
func (c *Capture) run(dev stream) error {
	c.ctl.Lock()
	defer c.ctl.Unlock()
	c.dev = dev
	c.mu.Lock()
	c.last = time.Now()
	c.mu.Unlock()
	if err := dev.start(); err != nil {
		c.mu.Lock()
		c.halted, c.closed = true, true
		c.mu.Unlock()
		dev.close()
		return fmt.Errorf("audio: capture %q: start: %w", c.name, err)
	}
	c.running = true
	return nil
}

// Name is PortAudio's name of the device, as "Loopback: PCM (hw:0,1)".
func (c *Capture) Name() string { return c.name }

// Format is what ReadFrame delivers.
func (c *Capture) Format() hal.AudioFormat { return c.format }

// deliver takes one buffer from PortAudio's thread: adc is when its first
// sample was captured and cur when PortAudio looked, both on PortAudio's
// clock. It never blocks on a reader.
func (c *Capture) deliver(in []int16, adc, cur time.Duration, flags callbackFlags) {
	if d := c.stallOnce.Swap(0); d > 0 {
		time.Sleep(time.Duration(d))
	}
	now, wall := hal.MonoNow(), time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last = wall
	if c.halted || c.paused {
		return
	}
	if c.clock == clockUnknown {
		c.clock = chooseClock(cur, now, wall)
	}
	overflowed := flags&inputOverflow != 0
	if overflowed {
		if cur != 0 && cur == c.flagged {
			overflowed = false // the same host buffer, the same loss
		}
		c.flagged = cur
	}
	t := hal.Mono(adc)
	if c.clock != clockDevice {
		buffered := cur - adc
		if cur == 0 || buffered < c.frameDur || buffered > maxBuffered {
			buffered = c.frameDur
		}
		t = now.Add(-buffered)
	}
	c.ring.push(in, t, overflowed)
	select {
	case c.ready <- struct{}{}:
	default:
	}
}

// ReadFrame fills f with the oldest frame not yet read. It blocks until
// there is one, ctx is done, the capture is halted (hal.ErrHalted) or
// closed (hal.ErrClosed), or the device has stopped calling back
// (ErrStalled). f.Seq counts the frames the device delivered, so frames
// dropped because readers fell behind leave a gap; f.Overruns counts the
// losses since the frame before (see the package doc).
func (c *Capture) ReadFrame(ctx context.Context, f *hal.AudioFrame) error {
	if len(f.Samples) != c.format.Len() {
		return fmt.Errorf("audio: capture %q: frame holds %d samples, want %d", c.name, len(f.Samples), c.format.Len())
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		c.mu.Lock()
		switch {
		case c.closed:
			c.mu.Unlock()
			return fmt.Errorf("audio: capture %q: %w", c.name, hal.ErrClosed)
		case c.halted:
			c.mu.Unlock()
			return fmt.Errorf("audio: capture %q: %w", c.name, hal.ErrHalted)
		case c.paused && !c.told:
			c.told = true
			c.mu.Unlock()
			return fmt.Errorf("audio: capture %q: %w", c.name, hal.ErrPaused)
		case c.paused:
			resumed := c.resumed
			c.mu.Unlock()
			select {
			case <-resumed:
			case <-c.halt:
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		case c.ring.pop(f):
			if c.ring.n > 0 {
				// More frames than pokes: wake another reader for them.
				select {
				case c.ready <- struct{}{}:
				default:
				}
			}
			c.mu.Unlock()
			return nil
		}
		idle := time.Since(c.last)
		c.mu.Unlock()
		if idle >= stallAfter {
			return fmt.Errorf("audio: capture %q: no callback for %v: %w", c.name, idle.Round(time.Millisecond), ErrStalled)
		}
		if timer == nil {
			timer = time.NewTimer(stallAfter - idle)
		} else {
			timer.Reset(stallAfter - idle)
		}
		select {
		case <-c.ready:
		case <-timer.C:
		case <-c.halt:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Halt stops the device now; a blocked ReadFrame returns hal.ErrHalted,
// and so does every one after. A capture does not rearm: open it again.
func (c *Capture) Halt() error {
	c.mu.Lock()
	if !c.halted {
		c.halted = true
		close(c.halt)
	}
	c.mu.Unlock()
	c.ctl.Lock()
	defer c.ctl.Unlock()
	if c.running {
		c.running = false
		if err := c.dev.abort(); err != nil {
			return fmt.Errorf("audio: capture %q: halt: %w", c.name, err)
		}
	}
	return nil
}

// Pause stops the device and closes its stream, which releases the
// PCM; what was captured and not read is dropped. A reader's next
// ReadFrame returns hal.ErrPaused, and the ones after it wait for
// Resume (no stall is counted meanwhile). It returns once the stream is
// closed, and does nothing when paused already, halted or closed.
func (c *Capture) Pause() error {
	c.ctl.Lock()
	defer c.ctl.Unlock()
	c.mu.Lock()
	if c.paused || c.halted || c.closed {
		c.mu.Unlock()
		return nil
	}
	c.paused, c.told, c.resumed = true, false, make(chan struct{})
	c.ring.n, c.ring.pending, c.ring.dropping = 0, 0, false
	c.mu.Unlock()
	select {
	case c.ready <- struct{}{}: // a waiting reader learns of it
	default:
	}
	var err error
	if c.running {
		c.running = false
		err = c.dev.abort()
	}
	if cerr := c.dev.close(); err == nil {
		err = cerr
	}
	c.dev = nil
	if err != nil {
		return fmt.Errorf("audio: capture %q: pause: %w", c.name, err)
	}
	return nil
}

// Resume opens the device again and starts it. When it cannot, the
// capture stays paused and the error says why; Resume may be called
// again.
func (c *Capture) Resume() error {
	c.ctl.Lock()
	defer c.ctl.Unlock()
	c.mu.Lock()
	paused := c.paused && !c.halted && !c.closed
	c.mu.Unlock()
	if !paused {
		return nil
	}
	if c.reopen == nil {
		return fmt.Errorf("audio: capture %q: resume: the device cannot be opened again", c.name)
	}
	dev, err := c.reopen()
	if err == nil {
		if err = dev.start(); err != nil {
			dev.close()
		}
	}
	if err != nil {
		return fmt.Errorf("audio: capture %q: resume: %w", c.name, err)
	}
	c.dev, c.running = dev, true
	c.mu.Lock()
	c.paused, c.last = false, time.Now()
	close(c.resumed)
	c.mu.Unlock()
	return nil
}

// Close halts the device and releases it. It is safe to call more than
// once; only the first call does anything.
func (c *Capture) Close() error {
	herr := c.Halt()
	c.ctl.Lock()
	defer c.ctl.Unlock()
	c.mu.Lock()
	was := c.closed
	c.closed = true
	c.mu.Unlock()
	if was {
		return nil
	}
	if c.dev == nil {
		return herr // paused: closed already
	}
	if err := c.dev.close(); err != nil {
		return fmt.Errorf("audio: capture %q: close: %w", c.name, err)
	}
	return herr
}

// clockSource says how frames are stamped; known after the first frame.
func (c *Capture) clockSource() clockSource {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.clock
}

// ring holds the frames the device delivered that no reader took yet.
type ring struct {
	slots    []slot
	head, n  int
	seq      uint64 // frames the device delivered
	pending  int    // losses to charge to the next frame in
	dropping bool   // the readers are a ring behind: the oldest go
}

type slot struct {
	samples  []int16
	t        hal.Mono
	seq      uint64
	overruns int
}

func newRing(frames, size int) ring {
	r := ring{slots: make([]slot, frames)}
	for i := range r.slots {
		r.slots[i].samples = make([]int16, size)
	}
	return r
}

// push adds a frame captured at t. overflowed says the device lost
// samples just before it. When the ring is full the oldest frame goes:
// one overrun for each time the readers fall behind, however many frames
// it costs, charged to the oldest frame kept.
func (r *ring) push(in []int16, t hal.Mono, overflowed bool) {
	r.seq++
	if overflowed {
		r.pending++
	}
	if len(r.slots) == 0 {
		return
	}
	if len(in) != len(r.slots[0].samples) {
		// Not a frame: PortAudio promises whole ones. Lost all the same.
		r.pending++
		return
	}
	if r.n == len(r.slots) {
		carry := r.slots[r.head].overruns
		if !r.dropping {
			carry++
			r.dropping = true
		}
		r.head = (r.head + 1) % len(r.slots)
		r.n--
		if r.n > 0 {
			r.slots[r.head].overruns += carry
		} else {
			r.pending += carry
		}
	}
	s := &r.slots[(r.head+r.n)%len(r.slots)]
	copy(s.samples, in)
	s.t, s.seq, s.overruns = t, r.seq, r.pending
	r.pending = 0
	r.n++
}

// pop moves the oldest frame into f; false when there is none.
func (r *ring) pop(f *hal.AudioFrame) bool {
	if r.n == 0 {
		return false
	}
	s := &r.slots[r.head]
	copy(f.Samples, s.samples)
	f.Time, f.Seq, f.Overruns = s.t, s.seq, s.overruns
	r.head = (r.head + 1) % len(r.slots)
	r.n--
	r.dropping = false
	return true
}
