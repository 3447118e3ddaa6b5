package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/hal"
)

// Audio defaults and limits of the sim.
const (
	audioRate       = 16000
	audioFrame      = 320 // 20 ms at 16 kHz
	audioMaxRate    = 48000
	audioMaxChan    = 2
	audioBufferTime = 500 * time.Millisecond // ring before an overrun
	playKeep        = 10 * time.Second       // speaker history the mic can hear
	speakerToMic    = 0.5                    // acoustic coupling
)

func audioFormat(cfg hal.AudioConfig) (hal.AudioFormat, error) {
	rate := int(cfg.Rate / physic.Hertz)
	if rate == 0 {
		rate = audioRate
	}
	ch := cfg.Channels
	if ch == 0 {
		ch = 1
	}
	n := cfg.FrameSamples
	if n == 0 {
		n = rate / 50
	}
	switch {
	case rate < 8000 || rate > audioMaxRate:
		return hal.AudioFormat{}, fmt.Errorf("sim: sample rate %d Hz outside 8000..%d: %w", rate, audioMaxRate, hal.ErrUnsupported)
	case ch < 1 || ch > audioMaxChan:
		return hal.AudioFormat{}, fmt.Errorf("sim: %d channels outside 1..%d: %w", ch, audioMaxChan, hal.ErrUnsupported)
	case n < 16 || n > rate:
		return hal.AudioFormat{}, fmt.Errorf("sim: %d samples a frame outside 16..%d: %w", n, rate, hal.ErrUnsupported)
	}
	return hal.AudioFormat{Rate: physic.Frequency(rate) * physic.Hertz, Channels: ch, FrameSamples: n}, nil
}

type capture struct {
	pauser
	b        *Board
	format   hal.AudioFormat
	rate     int
	halt     chan struct{}
	haltOnce sync.Once

	mu   sync.Mutex // one reader at a time; guards next
	next uint64     // index of the next frame
}

func (b *Board) openCapture(cfg hal.AudioConfig) (hal.AudioCapture, error) {
	if cfg.Device != MicName && cfg.Device != "" {
		return nil, fmt.Errorf("sim: no microphone %q (the sim board has %q): %w", cfg.Device, MicName, hal.ErrAbsent)
	}
	f, err := audioFormat(cfg)
	if err != nil {
		return nil, err
	}
	c := &capture{b: b, format: f, rate: int(f.Rate / physic.Hertz), halt: make(chan struct{})}
	c.next = uint64(b.elapsed() / f.FrameDuration())
	return c, nil
}

func (c *capture) Name() string            { return MicName }
func (c *capture) Format() hal.AudioFormat { return c.format }
func (c *capture) Close() error            { return c.Halt() }
func (c *capture) at(sample uint64) time.Duration {
	return time.Duration(sample * uint64(time.Second) / uint64(c.rate))
}

func (c *capture) Halt() error {
	c.haltOnce.Do(func() { close(c.halt) })
	return nil
}

func (c *capture) ReadFrame(ctx context.Context, f *hal.AudioFrame) error {
	if len(f.Samples) != c.format.Len() {
		return fmt.Errorf("sim: frame holds %d samples, want %d", len(f.Samples), c.format.Len())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := uint64(c.format.FrameSamples)
	var first uint64
	for {
		stop, resumed, err := c.gate(ctx, c.halt)
		if err != nil {
			return err
		}
		f.Overruns = 0
		// A reader that fell more than the ring behind loses the oldest
		// audio; after a pause the capture starts from now, as a device
		// opened again does.
		if behind := c.b.elapsed() - c.at((c.next+1)*n); behind > audioBufferTime || resumed {
			c.next = uint64(c.b.elapsed()/c.format.FrameDuration()) - 1
			f.Overruns = 1
			if resumed {
				f.Overruns = 0
			}
		}
		first = c.next * n
		err = c.b.waitUntil(ctx, c.halt, stop, c.at(first+n))
		if errors.Is(err, errPausedMidRead) {
			continue
		}
		if err != nil {
			return err
		}
		break
	}
	c.next++
	play := c.b.speaker.snapshot()
	for i := range n {
		idx := first + i
		t := c.at(idx)
		v := c.b.sc.sample(t, idx) + speakerToMic*play.at(t)
		s := int16(max(-32768, min(32767, math.Round(v*32767))))
		for ch := range c.format.Channels {
			f.Samples[int(i)*c.format.Channels+ch] = s
		}
	}
	f.Time = c.b.mono(c.at(first))
	f.Seq = c.next
	return nil
}

// playLog keeps what the speaker played so the microphone hears it.
type playLog struct {
	mu   sync.Mutex
	segs []segment
}

type segment struct {
	start time.Duration
	rate  int
	ch    int
	data  []int16
}

func (s segment) end() time.Duration {
	return s.start + time.Duration(int64(len(s.data)/s.ch)*int64(time.Second)/int64(s.rate))
}

// segments is an immutable copy to read without the lock.
type segments []segment

func (p *playLog) snapshot() segments {
	p.mu.Lock()
	defer p.mu.Unlock()
	return segments(p.segs)
}

// at is the first channel of what played at t, in [-1, 1].
func (ss segments) at(t time.Duration) float64 {
	for _, s := range ss {
		if t >= s.start && t < s.end() {
			i := int(int64(t-s.start) * int64(s.rate) / int64(time.Second))
			return float64(s.data[i*s.ch]) / 32768
		}
	}
	return 0
}

// add schedules data after what is queued and returns when it ends.
func (p *playLog) add(now time.Duration, rate, ch int, data []int16) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	start := now
	if n := len(p.segs); n > 0 && p.segs[n-1].end() > start {
		start = p.segs[n-1].end()
	}
	kept := p.segs[:0:0]
	for _, s := range p.segs {
		if s.end() > now-playKeep {
			kept = append(kept, s)
		}
	}
	seg := segment{start: start, rate: rate, ch: ch, data: append([]int16(nil), data...)}
	p.segs = append(kept, seg)
	return seg.end()
}

// cut drops what has not played yet.
func (p *playLog) cut(now time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	kept := p.segs[:0:0]
	for _, s := range p.segs {
		switch {
		case s.start >= now:
		case s.end() > now:
			keep := int(int64(now-s.start)*int64(s.rate)/int64(time.Second)) * s.ch
			s.data = s.data[:keep]
			kept = append(kept, s)
		default:
			kept = append(kept, s)
		}
	}
	p.segs = kept
}

type playback struct {
	b      *Board
	format hal.AudioFormat

	mu     sync.Mutex    // the speaker's own lock, shared with nothing slow
	halt   chan struct{} // closed by Halt to end a Play in progress
	halted bool
}

func (b *Board) openPlayback(cfg hal.AudioConfig) (hal.AudioPlayback, error) {
	if cfg.Device != SpeakerName && cfg.Device != "" {
		return nil, fmt.Errorf("sim: no speaker %q (the sim board has %q): %w", cfg.Device, SpeakerName, hal.ErrAbsent)
	}
	f, err := audioFormat(cfg)
	if err != nil {
		return nil, err
	}
	return &playback{b: b, format: f, halt: make(chan struct{})}, nil
}

func (p *playback) Name() string            { return SpeakerName }
func (p *playback) Format() hal.AudioFormat { return p.format }
func (p *playback) Close() error            { return p.Halt() }

// Halt silences the speaker now, ends a Play in progress and latches:
// Play is refused until Rearm.
func (p *playback) Halt() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.b.speaker.cut(p.b.elapsed())
	if !p.halted {
		close(p.halt)
		p.halted = true
	}
	return nil
}

func (p *playback) Rearm() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.halted {
		p.halt = make(chan struct{})
		p.halted = false
	}
	return nil
}

func (p *playback) Play(ctx context.Context, samples []int16) error {
	if len(samples)%p.format.Channels != 0 {
		return fmt.Errorf("sim: %d samples is not a whole number of %d-channel frames", len(samples), p.format.Channels)
	}
	p.mu.Lock()
	if p.halted {
		p.mu.Unlock()
		return fmt.Errorf("sim: speaker: %w", hal.ErrHalted)
	}
	halt := p.halt
	end := p.b.speaker.add(p.b.elapsed(), int(p.format.Rate/physic.Hertz), p.format.Channels, samples)
	p.mu.Unlock()
	err := p.b.waitUntil(ctx, halt, nil, end)
	if err != nil && err != hal.ErrHalted {
		p.b.speaker.cut(p.b.elapsed())
	}
	return err
}
