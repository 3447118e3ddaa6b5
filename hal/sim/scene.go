// Package sim is the simulated board: GPIO lines, a camera, a microphone, a
// speaker and input devices driven by a deterministic scripted scene.
//
// The scene is a pure function of its seed and the time since the board
// was made: a bright object crosses the camera about every 20 s, speech-like
// bursts rise over background noise on the microphone about every 10 s, a
// button on a GPIO line and a key on the keypad are pressed about every
// 30 s, someone types on the keyboard now and then, and a BME280 on the
// I²C bus reads air that drifts around 21 °C, with a shower lifting the
// humidity past 70 %RH three minutes in and every twenty minutes after
// (env.go). The e-stop lines
// and every other input are held where a test puts them (SetInput);
// outputs remember their level; what the speaker plays is heard by the
// microphone. Devices pace themselves with the time package and start no
// goroutines, so under testing/synctest a minute of scene takes no time.
package sim

import (
	"math"
	"time"
)

// Timing of the scripted scene.
const (
	ObjectPeriod   = 20 * time.Second // one crossing per period
	ObjectCrossing = 4 * time.Second  // time to cross the frame
	SpeechPeriod   = 10 * time.Second
	ButtonPeriod   = 30 * time.Second
	// MinButtonPeriod is the shortest period of the presses: one starts
	// between a tenth and eight tenths into its period and lasts up to
	// 400 ms, which must end before the next can start.
	MinButtonPeriod = 1500 * time.Millisecond
	TypingPeriod    = 45 * time.Second
)

// mix is splitmix64: a stateless hash that gives the scene its repeatable
// randomness from (seed, stream, index).
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// scene holds the seed; all of its methods are pure.
type scene struct {
	seed uint64
	// button is the period of the scripted button's and keypad's presses
	// (0: ButtonPeriod).
	button time.Duration
}

// buttonPeriod is the period of the scripted presses.
func (s scene) buttonPeriod() time.Duration {
	if s.button > 0 {
		return s.button
	}
	return ButtonPeriod
}

// Stream ids keep the scene's random draws independent of each other.
const (
	streamObject uint64 = iota + 1
	streamSpeech
	streamNoise
	streamTexture
	streamPixelNoise
	streamButton
	streamKeypad
	streamTyping
)

// rand returns a value in [0,1) for (stream, k, i).
func (s scene) rand(stream, k, i uint64) float64 {
	h := mix(s.seed ^ mix(stream<<56^k<<20^i))
	return float64(h>>11) / (1 << 53)
}

// between returns a value in [lo, hi) for (stream, k, i).
func (s scene) between(stream, k, i uint64, lo, hi float64) float64 {
	return lo + (hi-lo)*s.rand(stream, k, i)
}

// object is where the crossing object is at t: its centre in normalised
// coordinates and its half size; ok is false between crossings.
type object struct {
	X, Y, Half float64
}

func (s scene) objectAt(t time.Duration) (object, bool) {
	if t < 0 {
		return object{}, false
	}
	k := uint64(t / ObjectPeriod)
	start := time.Duration(s.between(streamObject, k, 0, 2, float64(ObjectPeriod-ObjectCrossing)/float64(time.Second)) * float64(time.Second))
	in := t - time.Duration(k)*ObjectPeriod - start
	if in < 0 || in >= ObjectCrossing {
		return object{}, false
	}
	p := float64(in) / float64(ObjectCrossing)
	half := 0.08
	x := -half + p*(1+2*half)
	if k%2 == 1 { // alternate direction
		x = 1 - x
	}
	y := s.between(streamObject, k, 1, 0.3, 0.7)
	return object{X: x, Y: y, Half: half}, true
}

// burst is one stretch of speech-like sound.
type burst struct {
	start, dur time.Duration
	f0         float64 // fundamental, Hz
}

func (s scene) burst(k uint64) burst {
	return burst{
		start: time.Duration(s.between(streamSpeech, k, 0, 0.5, 6.5) * float64(time.Second)),
		dur:   time.Duration(s.between(streamSpeech, k, 1, 1, 3) * float64(time.Second)),
		f0:    s.between(streamSpeech, k, 2, 100, 220),
	}
}

// Amplitudes of the microphone scene, as fractions of full scale.
const (
	noiseAmplitude  = 0.004 // about -50 dBFS RMS
	speechAmplitude = 0.6
)

// speechVowels are formants (frequency, bandwidth) of a few vowels, which
// weight the harmonics of the voiced sound: a, e, i, o, u.
var speechVowels = [...][3]struct{ f, bw float64 }{
	{{700, 130}, {1220, 70}, {2600, 160}},
	{{530, 60}, {1840, 90}, {2480, 150}},
	{{300, 60}, {2250, 90}, {3000, 150}},
	{{570, 70}, {840, 80}, {2410, 160}},
	{{320, 60}, {870, 80}, {2240, 150}},
}

// Intonation: the pitch wavers by speechVibrato around the burst's f0 at
// speechWaver Hz, as a speaker's does; a steady pitch sounds like a
// machine's buzz.
const (
	speechVibrato = 0.12
	speechWaver   = 1.3
)

// sample returns the scene's microphone signal at t, in [-1, 1], without
// what the speaker adds.
func (s scene) sample(t time.Duration, index uint64) float64 {
	// Background: uniform white noise scaled to the wanted RMS (uniform on
	// [-a, a] has RMS a/sqrt(3)).
	v := (s.rand(streamNoise, 0, index)*2 - 1) * noiseAmplitude * math.Sqrt(3)
	k := uint64(t / SpeechPeriod)
	b := s.burst(k)
	in := t - time.Duration(k)*SpeechPeriod - b.start
	if in < 0 || in >= b.dur {
		return v
	}
	sec := in.Seconds()
	// Syllables at 4 Hz, each a vowel of its own, with soft attack and
	// release on the burst.
	env := math.Pow(math.Sin(math.Pi*4*sec), 2)
	edge := math.Min(1, math.Min(sec, b.dur.Seconds()-sec)/0.05)
	vowel := speechVowels[int(s.between(streamSpeech, k, 3+uint64(sec*4), 0, float64(len(speechVowels))))%len(speechVowels)]
	// The pitch f0·(1 + v·sin(ωt)); its phase, the integral, in closed
	// form, so that a sample needs nothing before it.
	w := 2 * math.Pi * speechWaver
	f0 := b.f0 * (1 + speechVibrato*math.Sin(w*sec))
	phase := 2 * math.Pi * b.f0 * (sec + speechVibrato*(1-math.Cos(w*sec))/w)
	// Harmonics up to 4 kHz, falling 3 dB an octave, weighted by the
	// vowel's formants.
	var voiced float64
	for h := 1; h <= 40; h++ {
		f := f0 * float64(h)
		if f > 4000 {
			break
		}
		var g float64
		for _, fm := range vowel {
			d := (f - fm.f) / fm.bw
			g += 1 / (1 + d*d)
		}
		voiced += g * math.Sin(float64(h)*phase) / math.Sqrt(float64(h))
	}
	// A consonant leads every other syllable: a hiss over its first
	// 60 ms, where the vowel is still quiet.
	var hiss float64
	if syl := sec * 4; int(syl)%2 == 1 && syl-math.Floor(syl) < 0.24 {
		hiss = (s.rand(streamNoise, 1, index)*2 - 1) * math.Sin(math.Pi*(syl-math.Floor(syl))/0.24)
	}
	// And breath: a little noise in the voice.
	breath := (s.rand(streamNoise, 2, index)*2 - 1) * 0.08
	return v + speechAmplitude*(env*(voiced/4+breath)+0.15*hiss)*edge
}

// press is one press of a scripted button: down at start, up after dur.
type press struct{ start, dur time.Duration }

func (s scene) press(stream, k uint64, period time.Duration) press {
	return press{
		start: time.Duration(s.between(stream, k, 0, 0.1, 0.8) * float64(period)),
		dur:   time.Duration(s.between(stream, k, 1, 0.12, 0.4) * float64(time.Second)),
	}
}

// pressed tells whether the scripted button of stream is down at t, and
// when it next changes.
func (s scene) pressed(stream uint64, period, t time.Duration) (down bool, next time.Duration) {
	if t < 0 {
		t = 0
	}
	k := uint64(t / period)
	base := time.Duration(k) * period
	p := s.press(stream, k, period)
	switch {
	case t < base+p.start:
		return false, base + p.start
	case t < base+p.start+p.dur:
		return true, base + p.start + p.dur
	default:
		n := s.press(stream, k+1, period)
		return false, base + period + n.start
	}
}
