package audio

import (
	"math"
	"time"

	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/hal"
)

// fullScaleRMS is the RMS of a full-scale int16 sine: the 0 dBFS of
// Level (AES17's convention, so a sine at -6 dBFS peaks at half scale).
var fullScaleRMS = 32767 / math.Sqrt2

// fade is the raised-cosine ramp at each end of a Tone, so it starts and
// stops without a click.
const fade = 5 * time.Millisecond

// Tone returns d of a sine at freq, level dBFS (0 is full scale, at most
// 0), as interleaved samples of format f with the same signal on every
// channel. The first and last 5 ms are faded in and out.
func Tone(f hal.AudioFormat, freq physic.Frequency, dBFS float64, d time.Duration) []int16 {
	rate := float64(f.Rate) / float64(physic.Hertz)
	ch := max(f.Channels, 1)
	if rate <= 0 || d <= 0 {
		return nil
	}
	n := int(math.Round(d.Seconds() * rate))
	amp := 32767 * math.Pow(10, min(dBFS, 0)/20)
	w := 2 * math.Pi * (float64(freq) / float64(physic.Hertz)) / rate
	ramp := min(int(fade.Seconds()*rate), n/2)
	out := make([]int16, n*ch)
	for i := range n {
		g := 1.0
		if j := min(i, n-1-i); j < ramp {
			g = 0.5 - 0.5*math.Cos(math.Pi*float64(j)/float64(ramp))
		}
		s := int16(math.Round(amp * g * math.Sin(w*float64(i))))
		for c := range ch {
			out[i*ch+c] = s
		}
	}
	return out
}

// Level is the RMS level of one channel of interleaved samples, in dBFS
// relative to a full-scale sine; -Inf for silence or no samples.
func Level(samples []int16, channels, channel int) float64 {
	channels = max(channels, 1)
	var sum float64
	var n int
	for i := channel; i < len(samples); i += channels {
		v := float64(samples[i])
		sum += v * v
		n++
	}
	if n == 0 || sum == 0 {
		return math.Inf(-1)
	}
	return 20 * math.Log10(math.Sqrt(sum/float64(n))/fullScaleRMS)
}

// Frequency estimates the frequency of a tone in one channel of
// interleaved samples at rate from its rising zero crossings, each placed
// between two samples by linear interpolation, over the span from the
// first to the last. It is meant for a clean tone (a loopback, a test
// signal), not for noisy speech, and needs two full periods; ok is false
// when there are not two.
func Frequency(samples []int16, channels, channel int, rate physic.Frequency) (hz float64, ok bool) {
	channels = max(channels, 1)
	fs := float64(rate) / float64(physic.Hertz)
	var first, last float64
	crossings := 0
	prev, idx := 0.0, 0
	havePrev := false
	for i := channel; i < len(samples); i += channels {
		v := float64(samples[i])
		if havePrev && prev < 0 && v >= 0 {
			at := float64(idx-1) + prev/(prev-v) // where the line crosses zero
			if crossings == 0 {
				first = at
			}
			last = at
			crossings++
		}
		prev, havePrev = v, true
		idx++
	}
	if crossings < 3 || fs <= 0 {
		return 0, false
	}
	return float64(crossings-1) * fs / (last - first), true
}
