package audio

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tobe-body/tobe-body/hal"
)

// Playback is a speaker: Play queues a clip, PortAudio's thread takes the
// queued samples as the device needs them and plays silence when there
// are none. It implements hal.AudioPlayback; Play may be called from
// several goroutines, the clips playing one after another in the order
// they were queued.
type Playback struct {
	name   string
	format hal.AudioFormat

	ctl     sync.Mutex // serialises the stream's start, abort and close
	dev     stream
	running bool

	mu         sync.Mutex // guards what the callback shares with players
	queue      []*clip
	last       time.Time // the last callback
	sounding   bool      // the last callback handed the device samples
	underflows uint64
	flagged    time.Duration // PortAudio's current time at the last underflow flag
	halted     bool
	closed     bool

	// stallOnce, when set, makes the next callback sleep that long first:
	// the lab's way to make the device underrun for real.
	stallOnce atomic.Int64
}

// clip is one Play's samples on their way to the device.
type clip struct {
	samples []int16
	pos     int           // handed to the device so far
	done    chan struct{} // closed when all are handed, or they were dropped
	err     error         // why they were dropped
}

func newPlayback(name string, f hal.AudioFormat) *Playback {
	return &Playback{name: name, format: f}
}

// run starts dev; the playback owns it from here on, and closes it if it
// cannot be started.
func (p *Playback) run(dev stream) error {
	p.ctl.Lock()
	defer p.ctl.Unlock()
	p.dev = dev
	p.mu.Lock()
	p.last = time.Now()
	p.mu.Unlock()
	if err := dev.start(); err != nil {
		p.mu.Lock()
		p.halted, p.closed = true, true
		p.mu.Unlock()
		dev.close()
		return fmt.Errorf("audio: playback %q: start: %w", p.name, err)
	}
	p.running = true
	return nil
}

// Name is PortAudio's name of the device, as "Loopback: PCM (hw:0,0)".
func (p *Playback) Name() string { return p.name }

// Format is what Play takes.
func (p *Playback) Format() hal.AudioFormat { return p.format }

// Underflows counts the times the device ran dry while it was playing a
// clip: PortAudio's thread was late and a gap was heard. Silence between
// clips that runs dry is not counted; nobody hears it.
func (p *Playback) Underflows() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.underflows
}

// fill gives PortAudio's thread the next len(out) samples: queued clips,
// then silence. cur is PortAudio's current time, the same for every
// buffer cut from one host buffer, so an underflow flagged on each of
// them is counted once. It never blocks on a player.
func (p *Playback) fill(out []int16, cur time.Duration, flags callbackFlags) {
	if d := p.stallOnce.Swap(0); d > 0 {
		time.Sleep(time.Duration(d))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last = time.Now()
	if flags&outputUnderflow != 0 {
		if (cur == 0 || cur != p.flagged) && (p.sounding || len(p.queue) > 0) {
			p.underflows++
		}
		p.flagged = cur
	}
	n := 0
	for !p.halted && n < len(out) && len(p.queue) > 0 {
		c := p.queue[0]
		k := copy(out[n:], c.samples[c.pos:])
		c.pos += k
		n += k
		if c.pos == len(c.samples) {
			close(c.done)
			p.queue[0] = nil
			p.queue = p.queue[1:]
		}
	}
	p.sounding = n > 0
	clear(out[n:])
}

// Play queues samples (interleaved, Format().Channels to a frame) and
// blocks until the last of them was handed to the device, which plays it
// within its latency; or until ctx is done (what was not handed yet is
// dropped), the playback is halted (hal.ErrHalted) or closed
// (hal.ErrClosed), or the device stopped calling back (ErrStalled). After
// Halt every Play returns hal.ErrHalted until Rearm.
func (p *Playback) Play(ctx context.Context, samples []int16) error {
	if len(samples)%p.format.Channels != 0 {
		return fmt.Errorf("audio: playback %q: %d samples is not a whole number of %d-channel frames", p.name, len(samples), p.format.Channels)
	}
	p.mu.Lock()
	switch {
	case p.closed:
		p.mu.Unlock()
		return fmt.Errorf("audio: playback %q: %w", p.name, hal.ErrClosed)
	case p.halted:
		p.mu.Unlock()
		return fmt.Errorf("audio: playback %q: %w", p.name, hal.ErrHalted)
	case len(samples) == 0:
		p.mu.Unlock()
		return nil
	}
	c := &clip{samples: slices.Clone(samples), done: make(chan struct{})}
	p.queue = append(p.queue, c)
	p.mu.Unlock()

	timer := time.NewTimer(stallAfter)
	defer timer.Stop()
	for {
		select {
		case <-c.done:
			return c.err
		case <-ctx.Done():
			if p.drop(c) {
				return ctx.Err()
			}
			return c.err
		case <-timer.C:
			p.mu.Lock()
			idle := time.Since(p.last)
			p.mu.Unlock()
			if idle < stallAfter {
				timer.Reset(stallAfter - idle)
				continue
			}
			if p.drop(c) {
				return fmt.Errorf("audio: playback %q: no callback for %v: %w", p.name, idle.Round(time.Millisecond), ErrStalled)
			}
			return c.err
		}
	}
}

// drop takes c off the queue; false if it was done already.
func (p *Playback) drop(c *clip) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-c.done:
		return false
	default:
	}
	if i := slices.Index(p.queue, c); i >= 0 {
		p.queue = slices.Delete(p.queue, i, i+1)
	}
	close(c.done)
	return true
}

// haltLocked latches the halt and ends every queued clip with ErrHalted.
func (p *Playback) haltLocked() {
	p.halted = true
	for _, c := range p.queue {
		c.err = fmt.Errorf("audio: playback %q: %w", p.name, hal.ErrHalted)
		close(c.done)
	}
	p.queue = nil
}

// Halt silences the device now: the callback hands it no more samples,
// the stream is aborted so what the device holds is dropped too, every
// Play waiting returns hal.ErrHalted, and so does every Play until Rearm.
func (p *Playback) Halt() error {
	p.mu.Lock()
	p.haltLocked() // silence from the next callback on, whatever ctl waits for
	p.mu.Unlock()
	p.ctl.Lock()
	defer p.ctl.Unlock()
	var err error
	if p.running {
		p.running = false
		err = p.dev.abort()
	}
	// A Rearm that ran between the two locks is undone: Halt wins.
	p.mu.Lock()
	p.haltLocked()
	p.mu.Unlock()
	if err != nil {
		return fmt.Errorf("audio: playback %q: halt: %w", p.name, err)
	}
	return nil
}

// Rearm lifts Halt's latch and starts the device again. It does nothing
// to a playback that is not halted.
func (p *Playback) Rearm() error {
	p.ctl.Lock()
	defer p.ctl.Unlock()
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return fmt.Errorf("audio: playback %q: rearm: %w", p.name, hal.ErrClosed)
	}
	if !p.running {
		if err := p.dev.start(); err != nil {
			return fmt.Errorf("audio: playback %q: rearm: %w", p.name, err)
		}
		p.running = true
	}
	p.mu.Lock()
	p.halted, p.last, p.sounding = false, time.Now(), false
	p.mu.Unlock()
	return nil
}

// Close halts the device and releases it. It is safe to call more than
// once; only the first call does anything.
func (p *Playback) Close() error {
	herr := p.Halt()
	p.ctl.Lock()
	defer p.ctl.Unlock()
	p.mu.Lock()
	was := p.closed
	p.closed = true
	p.mu.Unlock()
	if was {
		return nil
	}
	if err := p.dev.close(); err != nil {
		return fmt.Errorf("audio: playback %q: close: %w", p.name, err)
	}
	return herr
}
