package sense

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/sense/sound"
)

// SoundLevel is the payload of audio.level: a summary of a period.
type SoundLevel struct {
	RMS       float64 `cbor:"rms_dbfs" json:"rms_dbfs"`
	Peak      float64 `cbor:"peak_dbfs" json:"peak_dbfs"`
	Floor     float64 `cbor:"floor_dbfs" json:"floor_dbfs"`
	VoiceMS   int64   `cbor:"voice_ms" json:"voice_ms"`
	CoveredMS int64   `cbor:"covered_ms" json:"covered_ms"`
	Gaps      int     `cbor:"gaps,omitempty" json:"gaps,omitempty"`
	PeriodMS  int64   `cbor:"period_ms" json:"period_ms"`
}

// Loud is the payload of audio.loud and audio.loud_ended.
type Loud struct {
	Peak       float64 `cbor:"peak_dbfs" json:"peak_dbfs"`
	RMS        float64 `cbor:"rms_dbfs" json:"rms_dbfs"`
	DurationMS int64   `cbor:"duration_ms,omitempty" json:"duration_ms,omitempty"`
	Cut        bool    `cbor:"cut,omitempty" json:"cut,omitempty"`
}

// Voice is the payload of audio.voice_started and audio.voice_ended.
type Voice struct {
	SNR        float64 `cbor:"snr_db" json:"snr_db"`
	Floor      float64 `cbor:"floor_dbfs,omitempty" json:"floor_dbfs,omitempty"`
	DurationMS int64   `cbor:"duration_ms,omitempty" json:"duration_ms,omitempty"`
	Cut        bool    `cbor:"cut,omitempty" json:"cut,omitempty"`
}

// MicChannel analyses a microphone's frames and emits level summaries,
// loud stretches and voice activity. No audio is kept or sent: the
// analyser holds one window, and only the numbers above leave it.
type MicChannel struct {
	out *Outlet
	mic hal.AudioCapture
	an  *sound.Analyzer

	evs []sound.Event

	mu     sync.Mutex
	stats  MicChannelStats
	period struct{ sum, n, peak float64 }
	taps   map[*MicTap]struct{}
	ring   ring // the last seconds heard, for Clip; empty without SetRing
	// capturing is told of each clip (the indicator blinks); nil: none.
	capturing func() (done func())
	stopped   chan struct{} // closed when Run returns
	stop      sync.Once
}

// ring is the last frames a microphone heard, interleaved samples in
// memory only, a frame a slot: next is the slot the next frame goes to,
// filled how many slots hold one, lost the overruns before each slot's
// frame, and end the time just after the newest frame.
type ring struct {
	buf    []int16
	lost   []int
	size   int // samples a frame
	next   int
	filled int
	end    hal.Mono
}

// put adds a frame heard from t that lasts d, after overruns.
func (r *ring) put(f *hal.AudioFrame, d time.Duration) {
	if len(r.lost) == 0 || len(f.Samples) != r.size {
		return
	}
	copy(r.buf[r.next*r.size:], f.Samples)
	r.lost[r.next] = f.Overruns
	r.next = (r.next + 1) % len(r.lost)
	r.filled = min(r.filled+1, len(r.lost))
	r.end = f.Time.Add(d)
}

// last appends the samples of the newest n frames (n at most filled) to
// out, and returns the overruns among them.
func (r *ring) last(out []int16, n int) ([]int16, int) {
	lost := 0
	for i := range n {
		slot := (r.next - n + i + len(r.lost)) % len(r.lost)
		out = append(out, r.buf[slot*r.size:(slot+1)*r.size]...)
		if i > 0 {
			lost += r.lost[slot] // before the first is before the clip
		}
	}
	return out, lost
}

// MicChannelStats is what a microphone channel saw.
type MicChannelStats struct {
	Frames, Overruns uint64
	Voice, Loud      bool    // a voice segment or a loud stretch is on
	RMS, Peak        float64 // dBFS since the last call of Stats
}

// NewMicChannel analyses mic's frames with cfg.
func NewMicChannel(out *Outlet, mic hal.AudioCapture, cfg sound.Config) (*MicChannel, error) {
	an, err := sound.New(cfg, mic.Format())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", out.Source().Channel, err)
	}
	return &MicChannel{out: out, mic: mic, an: an, taps: map[*MicTap]struct{}{}, stopped: make(chan struct{})}, nil
}

// MicTap hears what a microphone channel hears: a copy of every frame
// the channel reads after Listen, until Close. The channel is the
// microphone's one reader; a tap is how anything else (the verification
// of a sound the body plays) listens. A tap that falls behind loses its
// oldest frames, counted in the next frame's Overruns; it never holds
// the channel up. It is safe for one reader and a Close from any
// goroutine.
type MicTap struct {
	c      *MicChannel
	frames chan hal.AudioFrame
	lost   int // frames dropped since the last delivered, under c.mu
	closed chan struct{}
	once   sync.Once
	// why is what ended the tap when the channel did (a pause), read
	// after closed.
	why error
}

// tapFrames is how many frames a tap holds for its reader (half a
// second at 20 ms frames).
const tapFrames = 25

// Listen starts a tap.
func (c *MicChannel) Listen() *MicTap {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.listen()
}

// listen starts a tap; c.mu is held.
func (c *MicChannel) listen() *MicTap {
	t := &MicTap{c: c, frames: make(chan hal.AudioFrame, tapFrames), closed: make(chan struct{})}
	c.taps[t] = struct{}{}
	return t
}

// Format is the microphone's.
func (t *MicTap) Format() hal.AudioFormat { return t.c.mic.Format() }

// ReadFrame waits for the next frame and copies it into f, whose Samples
// must hold Format().Len() values. It returns hal.ErrClosed after Close,
// hal.ErrHalted once the channel stopped reading, or ctx's error.
func (t *MicTap) ReadFrame(ctx context.Context, f *hal.AudioFrame) error {
	if len(f.Samples) != t.Format().Len() {
		return fmt.Errorf("%s: tap: frame holds %d samples, want %d", t.c.out.Source().Channel, len(f.Samples), t.Format().Len())
	}
	var got hal.AudioFrame
	select {
	case got = <-t.frames:
	case <-t.closed:
		if t.why != nil {
			return t.why
		}
		return hal.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	case <-t.c.stopped:
		select {
		case got = <-t.frames:
		default:
			return fmt.Errorf("%s stopped reading: %w", t.c.out.Source().Channel, hal.ErrHalted)
		}
	}
	copy(f.Samples, got.Samples)
	f.Time, f.Seq, f.Overruns = got.Time, got.Seq, got.Overruns
	return nil
}

// Close ends the tap. It is safe to call more than once.
func (t *MicTap) Close() error {
	t.once.Do(func() {
		t.c.mu.Lock()
		delete(t.c.taps, t)
		t.c.mu.Unlock()
		close(t.closed)
	})
	return nil
}

// endTaps ends every tap with why (their reads return it); c.mu is held.
func (c *MicChannel) endTaps(why error) {
	for t := range c.taps {
		t.once.Do(func() {
			t.why = why
			close(t.closed)
		})
		delete(c.taps, t)
	}
}

// feedTaps hands each tap a copy of f; c.mu is held.
func (c *MicChannel) feedTaps(f *hal.AudioFrame) {
	for t := range c.taps {
		cp := *f
		cp.Samples = slices.Clone(f.Samples)
		cp.Overruns += t.lost
		select {
		case t.frames <- cp:
			t.lost = 0
		default:
			t.lost++
		}
	}
}

// Stats returns what the channel saw; RMS and Peak cover the time since
// the previous call.
func (c *MicChannel) Stats() MicChannelStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.RMS, s.Peak = sound.Silence, sound.Silence
	if c.period.n > 0 && c.period.sum > 0 {
		s.RMS = max(sound.Silence, 10*math.Log10(2*c.period.sum/c.period.n))
	}
	if c.period.peak > 0 {
		s.Peak = max(sound.Silence, 20*math.Log10(c.period.peak))
	}
	c.period.sum, c.period.n, c.period.peak = 0, 0, 0
	return s
}

// SetRing makes the channel keep the last d of what it hears in memory,
// for Clip, rounded up to whole frames (call before Run); 0 keeps
// nothing. Nothing of it is written anywhere.
func (c *MicChannel) SetRing(d time.Duration) {
	f := c.mic.Format()
	fd := f.FrameDuration()
	if d <= 0 || fd <= 0 {
		c.ring = ring{}
		return
	}
	frames := int((d + fd - 1) / fd)
	c.ring = ring{buf: make([]int16, frames*f.Len()), lost: make([]int, frames), size: f.Len()}
}

// SetCapturing makes the channel tell fn of each Clip, which calls the
// func fn returns when it ends (call before Run): the privacy
// indicator's blink.
func (c *MicChannel) SetCapturing(fn func() (done func())) { c.capturing = fn }

// RingBytes is the memory the ring holds (SetRing).
func (c *MicChannel) RingBytes() int { return 2*len(c.ring.buf) + 8*len(c.ring.lost) }

// Clip returns what the microphone heard from before ago (as much of it
// as the ring holds, in whole frames) to after from now (in whole
// frames), without a gap or an overlap between the two. It returns
// ctx's error when ctx ends before after has passed, and hal.ErrHalted
// when the channel stopped reading.
func (c *MicChannel) Clip(ctx context.Context, before, after time.Duration) (hal.AudioSpan, error) {
	f := c.mic.Format()
	fd := f.FrameDuration()
	if before < 0 || after < 0 || fd <= 0 {
		return hal.AudioSpan{}, fmt.Errorf("%s: clip of %v before and %v after", c.out.Source().Channel, before, after)
	}
	frames := func(d time.Duration) int { return int((d + fd - 1) / fd) }
	if c.capturing != nil {
		defer c.capturing()()
	}
	h := hal.AudioSpan{Format: f}
	var tap *MicTap
	c.mu.Lock()
	select {
	case <-c.stopped:
		c.mu.Unlock()
		return hal.AudioSpan{}, fmt.Errorf("%s stopped reading: %w", c.out.Source().Channel, hal.ErrHalted)
	default:
	}
	n := min(frames(before), c.ring.filled)
	h.Samples = make([]int16, 0, (n+frames(after))*f.Len())
	h.Samples, h.Lost = c.ring.last(h.Samples, n)
	h.Start = c.ring.end.Add(-time.Duration(int64(n) * int64(fd)))
	if after > 0 {
		// In the same hold of mu as the ring's copy: the next frame
		// goes to the ring and to the tap alike.
		tap = c.listen()
	}
	c.mu.Unlock()
	if tap == nil {
		return h, nil
	}
	defer tap.Close()
	fr := hal.AudioFrame{Samples: make([]int16, f.Len())}
	for i := range frames(after) {
		if err := tap.ReadFrame(ctx, &fr); err != nil {
			return hal.AudioSpan{}, fmt.Errorf("%s: clip: %w", c.out.Source().Channel, err)
		}
		if i == 0 && n == 0 {
			h.Start = fr.Time
		}
		if i > 0 || n > 0 {
			h.Lost += fr.Overruns // before the first frame is before the clip
		}
		h.Samples = append(h.Samples, fr.Samples...)
	}
	return h, nil
}

// Run reads frames until ctx is done or the microphone is halted (nil);
// another error ends what was open (cut) and is returned.
func (c *MicChannel) Run(ctx context.Context) error {
	defer c.stop.Do(func() { close(c.stopped) })
	f := hal.AudioFrame{Samples: make([]int16, c.mic.Format().Len())}
	for {
		err := c.mic.ReadFrame(ctx, &f)
		if errors.Is(err, hal.ErrPaused) {
			// The privacy switch (or a pause): what was on is cut, the
			// ring forgets what it heard, and a clip or a listener in
			// progress ends. Whoever paused says so in the registry.
			c.emit(c.an.Flush(c.evs[:0]))
			c.mu.Lock()
			c.ring.next, c.ring.filled = 0, 0
			clear(c.ring.buf)
			c.endTaps(fmt.Errorf("%s: %w", c.out.Source().Channel, err))
			c.mu.Unlock()
			continue
		}
		if err != nil {
			c.emit(c.an.Flush(c.evs[:0]))
			if ctx.Err() != nil || errors.Is(err, hal.ErrHalted) {
				return nil
			}
			return fmt.Errorf("%s: %w", c.out.Source().Channel, err)
		}
		var sum, peak float64
		for _, v := range f.Samples {
			x := float64(v) / 32768
			sum += x * x
			peak = max(peak, math.Abs(x))
		}
		c.mu.Lock()
		c.stats.Frames++
		c.stats.Overruns += uint64(f.Overruns)
		c.period.sum += sum
		c.period.n += float64(len(f.Samples))
		c.period.peak = max(c.period.peak, peak)
		c.ring.put(&f, c.mic.Format().FrameDuration())
		c.feedTaps(&f)
		c.mu.Unlock()
		c.evs = c.an.Process(&f, c.evs[:0])
		c.emit(c.evs)
	}
}

func (c *MicChannel) emit(evs []sound.Event) {
	for _, e := range evs {
		var p any
		switch e.Kind {
		case sound.Level:
			p = SoundLevel{RMS: round1(e.RMS), Peak: round1(e.Peak), Floor: round1(e.Floor), VoiceMS: e.Voice.Milliseconds(),
				CoveredMS: e.Covered.Milliseconds(), Gaps: e.Gaps, PeriodMS: e.Duration().Milliseconds()}
		case sound.LoudStarted:
			p = Loud{Peak: round1(e.Peak), RMS: round1(e.RMS)}
			c.setOn(&c.stats.Loud, true)
		case sound.LoudEnded:
			p = Loud{Peak: round1(e.Peak), RMS: round1(e.RMS), DurationMS: e.Duration().Milliseconds(), Cut: e.Cut}
			c.setOn(&c.stats.Loud, false)
		case sound.VoiceStarted:
			p = Voice{SNR: round1(e.SNR), Floor: round1(e.Floor)}
			c.setOn(&c.stats.Voice, true)
		case sound.VoiceEnded:
			p = Voice{SNR: round1(e.SNR), DurationMS: e.Duration().Milliseconds(), Cut: e.Cut}
			c.setOn(&c.stats.Voice, false)
		default:
			continue
		}
		c.out.Emit(e.Kind.String(), e.Time, 0, p)
	}
}

func (c *MicChannel) setOn(b *bool, on bool) {
	c.mu.Lock()
	*b = on
	c.mu.Unlock()
}
