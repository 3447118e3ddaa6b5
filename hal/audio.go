package hal

import (
	"context"
	"fmt"
	"time"

	"periph.io/x/conn/v3/physic"
)

// AudioFormat describes signed 16-bit interleaved PCM in fixed-size frames.
type AudioFormat struct {
	Rate     physic.Frequency
	Channels int
	// FrameSamples is the number of samples per channel in one frame.
	FrameSamples int
}

// FrameDuration is how long one frame lasts.
func (f AudioFormat) FrameDuration() time.Duration {
	hz := int64(f.Rate / physic.Hertz)
	if hz <= 0 {
		return 0
	}
	return time.Duration(int64(f.FrameSamples) * int64(time.Second) / hz)
}

// Len is the number of int16 values in one frame.
func (f AudioFormat) Len() int { return f.FrameSamples * f.Channels }

func (f AudioFormat) String() string {
	return fmt.Sprintf("s16 %s x%d, %d samples/frame", f.Rate, f.Channels, f.FrameSamples)
}

// AudioConfig is what a consumer asks of an audio device.
type AudioConfig struct {
	// Device names the PCM: an ALSA card id or "default"; for the sim, a name.
	Device       string
	Rate         physic.Frequency
	Channels     int
	FrameSamples int
}

// AudioFrame is one frame of captured audio. The caller owns Samples.
type AudioFrame struct {
	Samples []int16
	// Time is when the first sample was captured.
	Time Mono
	// Seq counts frames from 1.
	Seq uint64
	// Overruns is how many times the device overran (xrun) since the
	// previous frame; samples were lost there.
	Overruns int
}

// AudioSpan is a stretch of captured audio: interleaved samples in
// Format, the first captured at Start. Lost counts the frames missing
// from it (the device overran, or its reader fell behind).
type AudioSpan struct {
	Format  AudioFormat
	Samples []int16
	Start   Mono
	Lost    int
}

// Duration is how long s lasts.
func (s AudioSpan) Duration() time.Duration {
	hz := int64(s.Format.Rate / physic.Hertz)
	if hz <= 0 || s.Format.Channels <= 0 {
		return 0
	}
	return time.Duration(int64(len(s.Samples)/s.Format.Channels) * int64(time.Second) / hz)
}

// AudioCapture is a microphone.
type AudioCapture interface {
	Halter
	Name() string
	Format() AudioFormat
	// ReadFrame fills f.Samples, which must hold Format().Len() values, and
	// stamps f. It blocks until a whole frame is there, ctx is done, or the
	// device is halted (ErrHalted).
	ReadFrame(ctx context.Context, f *AudioFrame) error
	Close() error
}

// AudioPlayback is a speaker or buzzer driven with PCM.
//
// Halt silences it now, dropping what is queued, and latches it: Play
// returns ErrHalted until Rearm.
type AudioPlayback interface {
	Halter
	Name() string
	Format() AudioFormat
	// Play queues interleaved samples and blocks until they were handed to
	// the device, ctx is done, or the device is halted.
	Play(ctx context.Context, samples []int16) error
	// Rearm lifts the latch of Halt.
	Rearm() error
	Close() error
}
