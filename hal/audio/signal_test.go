package audio

import (
	"math"
	"testing"
	"time"

	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/hal"
)

func TestToneLevelAndFrequency(t *testing.T) {
	for _, tc := range []struct {
		rate     physic.Frequency
		channels int
		freq     physic.Frequency
		dBFS     float64
	}{
		{16 * physic.KiloHertz, 1, 440 * physic.Hertz, -6},
		{16 * physic.KiloHertz, 1, 1000 * physic.Hertz, 0},
		{48 * physic.KiloHertz, 2, 440 * physic.Hertz, -20},
		{8 * physic.KiloHertz, 1, 3000 * physic.Hertz, -3},
		{16 * physic.KiloHertz, 1, 97 * physic.Hertz, -40},
	} {
		f := hal.AudioFormat{Rate: tc.rate, Channels: tc.channels}
		s := Tone(f, tc.freq, tc.dBFS, time.Second)
		if len(s) != int(tc.rate/physic.Hertz)*tc.channels {
			t.Fatalf("%v: %d samples, want a second's", tc, len(s))
		}
		// Skip the fades at each end, as a measurement would.
		body := s[int(tc.rate/physic.Hertz)/10*tc.channels : len(s)-int(tc.rate/physic.Hertz)/10*tc.channels]
		for ch := range tc.channels {
			if got := Level(body, tc.channels, ch); math.Abs(got-tc.dBFS) > 0.01 {
				t.Errorf("%v channel %d: level %.3f dBFS, want %.1f", tc, ch, got, tc.dBFS)
			}
			hz, ok := Frequency(body, tc.channels, ch, tc.rate)
			want := float64(tc.freq) / float64(physic.Hertz)
			if !ok || math.Abs(hz-want)/want > 1e-4 {
				t.Errorf("%v channel %d: frequency %.3f Hz %v, want %.0f within 0.01%%", tc, ch, hz, ok, want)
			}
		}
	}
}

func TestToneFadesAndClamps(t *testing.T) {
	f := hal.AudioFormat{Rate: 16 * physic.KiloHertz, Channels: 1}
	s := Tone(f, 440*physic.Hertz, 6, 100*time.Millisecond) // above full scale: clamped to 0
	if s[0] != 0 || s[len(s)-1] != 0 {
		t.Errorf("ends %d, %d; want faded to 0", s[0], s[len(s)-1])
	}
	var peak int16
	for _, v := range s {
		peak = max(peak, v, -v)
	}
	if peak < 32700 {
		t.Errorf("peak %d, want full scale", peak)
	}
	if Tone(f, 440*physic.Hertz, -6, 0) != nil || Tone(hal.AudioFormat{}, 440*physic.Hertz, -6, time.Second) != nil {
		t.Error("no duration or no rate should give no samples")
	}
	// A clip shorter than two fades still starts and ends at 0.
	if s := Tone(f, 440*physic.Hertz, 0, 4*time.Millisecond); len(s) != 64 || s[0] != 0 {
		t.Errorf("4 ms tone: %d samples starting %d", len(s), s[0])
	}
}

func TestLevelAndFrequencyEdges(t *testing.T) {
	if got := Level(make([]int16, 100), 1, 0); !math.IsInf(got, -1) {
		t.Errorf("silence: %v dBFS, want -Inf", got)
	}
	if got := Level(nil, 1, 0); !math.IsInf(got, -1) {
		t.Errorf("nothing: %v dBFS, want -Inf", got)
	}
	// A full-scale square wave is 3 dB above a full-scale sine.
	sq := make([]int16, 1600)
	for i := range sq {
		sq[i] = 32767
		if i/8%2 == 1 {
			sq[i] = -32767
		}
	}
	if got := Level(sq, 1, 0); math.Abs(got-3.0103) > 0.001 {
		t.Errorf("square: %.4f dBFS, want +3.01", got)
	}
	if hz, ok := Frequency(sq, 1, 0, 16*physic.KiloHertz); !ok || math.Abs(hz-1000) > 1 {
		t.Errorf("square of 16 samples at 16 kHz: %.2f Hz %v, want 1000", hz, ok)
	}
	// Less than two periods is no answer.
	s := Tone(hal.AudioFormat{Rate: 16 * physic.KiloHertz, Channels: 1}, 100*physic.Hertz, 0, 15*time.Millisecond)
	if _, ok := Frequency(s, 1, 0, 16*physic.KiloHertz); ok {
		t.Error("1.5 periods gave a frequency")
	}
	if _, ok := Frequency(make([]int16, 1000), 1, 0, 16*physic.KiloHertz); ok {
		t.Error("silence gave a frequency")
	}
}
