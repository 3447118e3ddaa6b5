package sound

import (
	"encoding/json"
	"math"
	"os"
	"testing"
	"time"
)

// A spectrum from a recorded forest ambience at 10 dB SNR under speech,
// whose autocorrelation is highest at the shortest pitch period while
// still rising toward shorter lags: the highest step is on a slope, not
// a peak. A parabola through it put the period at a negative lag, and
// the search for the pitch's harmonics, stepping toward a bin past the
// band's end that a negative period never reaches, never returned: the
// analysis of that microphone stopped for good. periodicity now refines
// only a true peak, by at most half a step.
func TestPeriodicityOnASlopeReturns(t *testing.T) {
	b, err := os.ReadFile("testdata/periodicity-slope.json")
	if err != nil {
		t.Fatal(err)
	}
	var st struct{ Power, Noise []float64 }
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{}, format(16000, 1))
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Power) != len(a.power) || len(st.Noise) != len(a.binNoise) {
		t.Fatalf("the recorded spectrum has %d and %d bins; the analyzer %d and %d", len(st.Power), len(st.Noise), len(a.power), len(a.binNoise))
	}
	copy(a.power, st.Power)
	copy(a.binNoise, st.Noise)
	done := make(chan float64, 1)
	go func() { done <- a.periodicity() }()
	select {
	case per := <-done:
		if per < 0 || per > 1 {
			t.Errorf("periodicity %v, want within [0, 1]", per)
		}
	case <-time.After(time.Minute):
		// The goroutine is left spinning: the test binary ends with the
		// failure.
		t.Fatal("periodicity did not return in a minute: the harmonic search does not end")
	}
}

// The resampler to Silero's 16 kHz: a 1 kHz tone keeps its level (within
// 0.5 dB) and its frequency at every rate, a second of input gives a
// second of output, and a tone that would fold back into the speech band
// (12 kHz at 32 kHz and over, 4 kHz after folding) is at least 30 dB down.
func TestResampler(t *testing.T) {
	for _, rate := range []int{8000, 11025, 16000, 22050, 32000, 44100, 48000, 96000, 192000} {
		tone := func(f float64) (out []float32) {
			r := newResampler(rate, 16000)
			for i := range 2 * rate {
				out = r.push(0.5*math.Sin(2*math.Pi*f*float64(i)/float64(rate)), out)
			}
			return out
		}
		out := tone(1000)
		if d := len(out) - 32000; d < -1 || d > 1 {
			t.Errorf("%d Hz: 2 s in, %d samples out, want 32000", rate, len(out))
		}
		// The second second: the filter has settled.
		var sum float64
		cross := 0
		for i, v := range out[16000:32000] {
			sum += float64(v) * float64(v)
			if i > 0 && (out[16000+i-1] < 0) != (v < 0) {
				cross++
			}
		}
		if db := 10 * math.Log10(sum/16000/0.125); math.Abs(db) > 0.5 {
			t.Errorf("%d Hz: a 1 kHz tone is %.2f dB off its level", rate, db)
		}
		if cross < 1998 || cross > 2002 {
			t.Errorf("%d Hz: a 1 kHz tone crosses zero %d times a second, want 2000", rate, cross)
		}
		if rate < 32000 {
			continue
		}
		sum = 0
		for _, v := range tone(12000)[16000:32000] {
			sum += float64(v) * float64(v)
		}
		if db := 10 * math.Log10(sum/16000/0.125); db > -30 {
			t.Errorf("%d Hz: a 12 kHz tone folds back at %.1f dB, want -30 or less", rate, db)
		}
	}
}
