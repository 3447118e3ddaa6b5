package audio

import (
	"fmt"
	"time"

	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/hal"
)

// Defaults and limits of a stream.
const (
	// DefaultRate is the rate when AudioConfig.Rate is zero: speech
	// bandwidth, what voice activity and keyword models expect.
	DefaultRate = 16000 * physic.Hertz
	// DefaultFrame is the frame length when AudioConfig.FrameSamples is
	// zero: 20 ms, the usual step of voice activity detectors.
	DefaultFrame = 20 * time.Millisecond

	minRate, maxRate = 8000, 192000 // Hz
	maxChannels      = 32           // snd-aloop's limit; real cards have fewer
	minFrame         = 16           // samples a channel

	// ringTime is how much captured audio waits for a reader that fell
	// behind before the oldest is dropped (an overrun).
	ringTime = 500 * time.Millisecond
	// minLatencyFrames is the least device buffer asked of ALSA, in frames:
	// room for the callback thread to be late by a few frames (a busy
	// board, or an emulator) before the device overruns or underruns.
	minLatencyFrames = 4
	// stallAfter is how long a running stream may go without a callback
	// before a reader or player is told the device stopped (unplugged, or
	// its driver failed): PortAudio ends the stream's thread then and
	// calls back no more.
	stallAfter = 2 * time.Second
)

// formatFor fills cfg's zero fields with the defaults and checks the rest.
// The errors wrap hal.ErrUnsupported.
func formatFor(cfg hal.AudioConfig) (hal.AudioFormat, error) {
	rate := cfg.Rate
	if rate == 0 {
		rate = DefaultRate
	}
	hz := int64(rate / physic.Hertz)
	ch := cfg.Channels
	if ch == 0 {
		ch = 1
	}
	n := cfg.FrameSamples
	if n == 0 {
		n = int(hz * int64(DefaultFrame) / int64(time.Second))
	}
	switch {
	case rate%physic.Hertz != 0 || hz < minRate || hz > maxRate:
		return hal.AudioFormat{}, fmt.Errorf("sample rate %s: want a whole number of Hz in %d..%d: %w", rate, minRate, maxRate, hal.ErrUnsupported)
	case ch < 1 || ch > maxChannels:
		return hal.AudioFormat{}, fmt.Errorf("%d channels: want 1..%d: %w", ch, maxChannels, hal.ErrUnsupported)
	case n < minFrame || int64(n) > hz:
		return hal.AudioFormat{}, fmt.Errorf("%d samples a frame: want %d..%d (at most a second): %w", n, minFrame, hz, hal.ErrUnsupported)
	}
	return hal.AudioFormat{Rate: rate, Channels: ch, FrameSamples: n}, nil
}

// latencyFor is the device buffer to ask for: the device's own suggestion
// for robust (high latency) streams, and at least minLatencyFrames frames.
func latencyFor(f hal.AudioFormat, deviceHigh time.Duration) time.Duration {
	return max(deviceHigh, minLatencyFrames*f.FrameDuration())
}

// ringFrames is how many frames the capture ring holds: ringTime, and at
// least two frames.
func ringFrames(f hal.AudioFormat) int {
	d := f.FrameDuration()
	if d <= 0 {
		return 2
	}
	return max(2, int((ringTime+d-1)/d))
}
