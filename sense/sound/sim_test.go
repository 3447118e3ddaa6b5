package sound

import (
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/sim"
)

// TestSimMicrophone runs the Analyzer over a minute of the simulated
// board's microphone (a speech-like burst of 1–3 s every 10 s over noise
// at -50 dBFS) and checks that it finds each burst once and nothing else.
// The bursts are found independently from the samples: 20 ms windows
// over -40 dBFS RMS, joined across pauses under 300 ms. Each detector
// finds each burst; the sim's speech is synthetic, and Silero's onsets
// on it (up to 450 ms late) are held to 500 ms only (on recorded speech,
// to 150: TestVoiceOnRecordedSpeech).
func TestSimMicrophone(t *testing.T) {
	for _, tc := range []struct {
		voice VoiceDetector
		onset time.Duration
	}{{VoiceSilero, 500 * time.Millisecond}, {VoicePeriodicity, 100 * time.Millisecond}} {
		t.Run(string(tc.voice), func(t *testing.T) { simMicrophone(t, tc.voice, tc.onset) })
	}
}

func simMicrophone(t *testing.T, voice VoiceDetector, onsetTol time.Duration) {
	seeds := []uint64{1, 2, 3}
	if emulated() && voice == VoiceSilero {
		seeds = seeds[:1] // a minute of the sim through Silero, under emulation
	}
	for _, seed := range seeds {
		synctest.Test(t, func(t *testing.T) {
			b := sim.New(seed)
			mic, err := b.Drivers().OpenCapture(hal.AudioConfig{Device: sim.MicName})
			if err != nil {
				t.Fatal(err)
			}
			defer mic.Close()
			a, err := New(Config{Voice: voice}, mic.Format())
			if err != nil {
				t.Fatal(err)
			}
			f := mic.Format()
			fr := hal.AudioFrame{Samples: make([]int16, f.Len())}
			var evs []Event
			var bursts []span
			var start hal.Mono
			var lastLoud time.Duration
			inBurst := false
			const minute = 60 * time.Second
			for i := range int(minute / f.FrameDuration()) {
				if err := mic.ReadFrame(t.Context(), &fr); err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					start = fr.Time
				}
				evs = a.Process(&fr, evs)
				var sum float64
				for _, s := range fr.Samples {
					sum += float64(s) * float64(s)
				}
				at := fr.Time.Sub(start)
				if 10*math.Log10(sum/float64(len(fr.Samples))/(32768*32768)+1e-12) > -40 {
					if !inBurst && (len(bursts) == 0 || at-lastLoud > 300*time.Millisecond) {
						bursts = append(bursts, span{from: at})
					}
					inBurst = true
					lastLoud = at + f.FrameDuration()
					bursts[len(bursts)-1].to = lastLoud
				} else {
					inBurst = false
				}
			}
			evs = a.Flush(evs)
			if len(bursts) != 6 {
				t.Fatalf("seed %d: the samples hold %d bursts in a minute, want 6 (one every 10 s): %v", seed, len(bursts), bursts)
			}
			var starts, ends []Event
			for _, e := range evs {
				switch e.Kind {
				case VoiceStarted:
					starts = append(starts, e)
				case VoiceEnded:
					ends = append(ends, e)
				case LoudStarted, LoudEnded:
					inside := false
					for _, b := range bursts {
						if at := e.Time.Sub(start); at >= b.from-100*time.Millisecond && at <= b.to+DefaultLoudRelease {
							inside = true
						}
					}
					if !inside {
						t.Errorf("seed %d: %v outside the bursts %v", seed, e, bursts)
					}
				}
			}
			if len(starts) != len(bursts) || len(ends) != len(bursts) {
				for _, e := range ends {
					t.Logf("seed %d: voice %v..%v", seed, e.Start.Sub(start), e.Time.Sub(start))
				}
				t.Fatalf("seed %d: %d voice starts and %d ends, want one pair for each of the %d bursts %v", seed, len(starts), len(ends), len(bursts), bursts)
			}
			for i, b := range bursts {
				on, off := starts[i].Time.Sub(start), ends[i].Time.Sub(start)
				if d := on - b.from; d < -onsetTol || d > onsetTol {
					t.Errorf("seed %d: burst %v..%v: voice started at %v, want within %v", seed, b.from, b.to, on, onsetTol)
				}
				if d := off - b.to; d < -(DefaultHangover+DefaultWindow) || d > DefaultHangover+DefaultWindow {
					t.Errorf("seed %d: burst %v..%v: voice ended at %v, want within %v", seed, b.from, b.to, off, DefaultHangover+DefaultWindow)
				}
				t.Logf("seed %d: burst %v..%v, voice %v..%v", seed, b.from, b.to, on, off)
			}
		})
	}
}
