//go:build lab && portaudio

package act

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/audio"
)

func init() { labAudioLoad = startAudioLoad }

// startAudioLoad is E8's audio: the loopback's playback side plays a tone
// without a break while its capture side is read frame by frame through
// PortAudio, each frame's level measured, as the sound channel does. It
// returns a function that stops it and says how much it did.
func startAudioLoad(t *testing.T) func() string {
	t.Helper()
	mic, err := audio.OpenCapture(hal.AudioConfig{Device: "Loopback,1"})
	if err != nil {
		t.Fatal(err)
	}
	spk, err := audio.OpenPlayback(hal.AudioConfig{Device: "Loopback,0"})
	if err != nil {
		mic.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var frames, overruns atomic.Int64
	var loud atomic.Uint64 // the last frame's RMS, as float64 bits
	done := make(chan struct{}, 2)
	go func() {
		defer func() { done <- struct{}{} }()
		tone := audio.Tone(spk.Format(), 440*physic.Hertz, -12, 500*time.Millisecond)
		for ctx.Err() == nil {
			if err := spk.Play(ctx, tone); err != nil && ctx.Err() == nil {
				t.Errorf("audio load: play: %v", err)
				return
			}
		}
	}()
	go func() {
		defer func() { done <- struct{}{} }()
		f := hal.AudioFrame{Samples: make([]int16, mic.Format().Len())}
		for ctx.Err() == nil {
			if err := mic.ReadFrame(ctx, &f); err != nil {
				if ctx.Err() == nil {
					t.Errorf("audio load: capture: %v", err)
				}
				return
			}
			var sum float64
			for _, s := range f.Samples {
				sum += float64(s) * float64(s)
			}
			loud.Store(math.Float64bits(math.Sqrt(sum / float64(len(f.Samples)))))
			frames.Add(1)
			overruns.Add(int64(f.Overruns))
		}
	}()
	start := time.Now()
	return func() string {
		cancel()
		<-done
		<-done
		spk.Close()
		mic.Close()
		s := time.Since(start).Seconds()
		rms := math.Float64frombits(loud.Load())
		return fmt.Sprintf("audio %.0f frames/s captured (%d overruns), last at %.1f dBFS, a tone playing", float64(frames.Load())/s, overruns.Load(), 20*math.Log10(max(rms, 1)/32768))
	}
}
