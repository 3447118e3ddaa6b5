package sound

import (
	"encoding/json"
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
