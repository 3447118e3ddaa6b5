package sound

import (
	"math"
	"math/rand/v2"
	"time"

	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/hal"
)

// Synthetic signals for the tests, all seeded and in [-1, 1] full scale.

// vowels are formant frequencies (F1, F2, F3) of a few vowels, Hz.
var vowels = [...][3]float64{
	{730, 1090, 2440}, // a
	{270, 2290, 3010}, // i
	{300, 870, 2240},  // u
	{530, 1840, 2480}, // e
	{570, 840, 2410},  // o
}

// resonator is a two-pole formant resonance.
type resonator struct{ a1, a2, g, y1, y2 float64 }

func (r *resonator) set(f, bw float64, fs int) {
	rad := math.Exp(-math.Pi * bw / float64(fs))
	r.a1 = 2 * rad * math.Cos(2*math.Pi*f/float64(fs))
	r.a2 = -rad * rad
	r.g = 1 - r.a1 - r.a2 // unity gain at DC, as in a Klatt cascade
}

func (r *resonator) step(x float64) float64 {
	y := r.g*x + r.a1*r.y1 + r.a2*r.y2
	r.y2, r.y1 = r.y1, y
	return y
}

// speech renders a burst of synthetic voiced speech lasting d: a
// harmonic series falling 6 dB an octave (a glottal pulse train) on a
// fundamental that starts between 100 and 250 Hz, glides down through the
// burst, wavers and steps from syllable to syllable; shaped by three
// formant resonances that change with each syllable's vowel; cut into
// syllables of 3–6 a second, each a sin² swell over most of its length
// with a pause in between, at a level between 0 and -6 dB, some led by a
// short unvoiced consonant. The
// burst's level is not normalised. end is where the last syllable's sound
// ends, in samples (the burst's last pause is silent).
func speech(r *rand.Rand, fs int, d time.Duration) (x []float64, end int) {
	n := int(d.Seconds() * float64(fs))
	out := make([]float64, n)
	cons := make([]float64, n)
	base := 100 + 150*r.Float64()
	var form [3]resonator
	var phase float64
	var hiss resonator
	hiss.set(4500*float64(fs)/16000, 3000, fs)
	for i := 0; i < n; {
		rateHz := 3 + 3*r.Float64()
		syl := min(n-i, int(float64(fs)/rateHz))
		voicedLen := int(float64(syl) * (0.7 + 0.2*r.Float64()))
		v := vowels[r.IntN(len(vowels))]
		for k := range form {
			f := v[k] * (0.95 + 0.1*r.Float64())
			form[k].set(min(f, 0.45*float64(fs)), 80+40*float64(k), fs)
		}
		end = i + voicedLen
		step := 1 + 0.16*(r.Float64()-0.5)
		consonant := r.IntN(3) == 0
		consLen := int(float64(fs) * (0.03 + 0.03*r.Float64()))
		for j := range syl {
			t := float64(i+j) / float64(fs)
			f0 := base * step * (1 - 0.15*t/d.Seconds()) * (1 + 0.02*math.Sin(2*math.Pi*5.3*t))
			phase += 2 * math.Pi * f0 / float64(fs)
			if phase > 2*math.Pi*1000 {
				phase -= 2 * math.Pi * 1000
			}
			var src float64
			for h := 1; float64(h)*f0 < min(4000, 0.45*float64(fs)); h++ {
				src += math.Sin(float64(h)*phase) / float64(h)
			}
			var env float64
			if j < voicedLen {
				s := math.Sin(math.Pi * float64(j) / float64(voicedLen))
				env = s * s
			}
			y := src
			for k := range form {
				y = form[k].step(y)
			}
			y *= env
			if consonant && j < consLen {
				cons[i+j] = hiss.step(r.NormFloat64()) * math.Sin(math.Pi*float64(j)/float64(consLen))
			}
			out[i+j] = y
		}
		// Stressed and unstressed syllables: each at 0 to -6 dB.
		scale(out[i:i+voicedLen], amp(-6*r.Float64()))
		i += syl
	}
	// Consonants hiss 10 dB under the voiced sound's RMS.
	scale(cons, 0.3*rms(out)*math.Sqrt(float64(nonzero(cons))/float64(n)))
	for i, v := range cons {
		out[i] += v
	}
	return out, end
}

func nonzero(x []float64) int {
	n := 0
	for _, v := range x {
		if v != 0 {
			n++
		}
	}
	return n
}

// noiseKind names a steady background.
type noiseKind string

const (
	white noiseKind = "white"
	pink  noiseKind = "pink"
	brown noiseKind = "brown"
	hum   noiseKind = "hum"  // 50 Hz mains and its harmonics
	fan   noiseKind = "fan"  // band noise, 150–1500 Hz
	buzz  noiseKind = "buzz" // 100 Hz and its harmonics: steady but harmonic
)

// noise renders n samples of a steady background of unit RMS.
func noise(r *rand.Rand, kind noiseKind, fs, n int) []float64 {
	out := make([]float64, n)
	switch kind {
	case white:
		for i := range out {
			out[i] = r.NormFloat64()
		}
	case pink: // Paul Kellet's filter
		var b0, b1, b2, b3, b4, b5, b6 float64
		for i := range out {
			w := r.NormFloat64()
			b0 = 0.99886*b0 + w*0.0555179
			b1 = 0.99332*b1 + w*0.0750759
			b2 = 0.96900*b2 + w*0.1538520
			b3 = 0.86650*b3 + w*0.3104856
			b4 = 0.55000*b4 + w*0.5329522
			b5 = -0.7616*b5 - w*0.0168980
			out[i] = b0 + b1 + b2 + b3 + b4 + b5 + b6 + w*0.5362
			b6 = w * 0.115926
		}
	case brown: // leaky integral of white, with its DC removed
		var y, dc float64
		for i := range out {
			y = 0.998*y + r.NormFloat64()
			dc += (y - dc) * 0.0005
			out[i] = y - dc
		}
	case hum, buzz:
		f0, harmonics := 50.0, 12
		if kind == buzz {
			f0, harmonics = 100, 20
		}
		var ph [20]float64
		for h := range ph {
			ph[h] = 2 * math.Pi * r.Float64()
		}
		// One period, repeated (f0 divides every rate the tests use).
		period := make([]float64, int(float64(fs)/f0))
		for i := range period {
			t := float64(i) / float64(fs)
			for h := 1; h <= harmonics && float64(h)*f0 < 0.45*float64(fs); h++ {
				period[i] += math.Sin(2*math.Pi*f0*float64(h)*t+ph[h-1]) / float64(h)
			}
		}
		for i := range out {
			out[i] = period[i%len(period)] + 0.01*r.NormFloat64()
		}
	case fan:
		var lo, hi resonator
		// Two resonances make a broad hump between about 150 and 1500 Hz.
		lo.set(300, 400, fs)
		hi.set(900, 1200, fs)
		for i := range out {
			w := r.NormFloat64()
			out[i] = lo.step(w) + 0.7*hi.step(w)
		}
	}
	scale(out, 1)
	return out
}

// rms is the root mean square of x.
func rms(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += v * v
	}
	return math.Sqrt(s / float64(max(1, len(x))))
}

// scale sets the RMS of x.
func scale(x []float64, to float64) {
	if r := rms(x); r > 0 {
		for i := range x {
			x[i] *= to / r
		}
	}
}

// amp converts dBFS RMS to an RMS amplitude on the [-1, 1] scale.
func amp(dbfs float64) float64 { return math.Pow(10, dbfs/20) }

// span is a stretch of a synthetic signal, from its start.
type span struct{ from, to time.Duration }

// scene is a synthetic recording: a mono signal and the spans of speech
// in it.
type scene struct {
	fs     int
	x      []float64
	speech []span
}

func newScene(fs int, d time.Duration) *scene {
	return &scene{fs: fs, x: make([]float64, int(d.Seconds()*float64(fs)))}
}

func (s *scene) idx(t time.Duration) int { return int(t.Seconds() * float64(s.fs)) }

// addNoise adds a steady background at level dBFS RMS from from to to.
func (s *scene) addNoise(r *rand.Rand, kind noiseKind, dbfs float64, from, to time.Duration) {
	i, j := s.idx(from), min(len(s.x), s.idx(to))
	for k, v := range noise(r, kind, s.fs, j-i) {
		s.x[i+k] += v * amp(dbfs)
	}
}

// addSpeech adds a burst of speech lasting d at from, with its RMS over
// the burst at dbfs, and notes the span from its start to the end of its
// last syllable's sound.
func (s *scene) addSpeech(r *rand.Rand, dbfs float64, from, d time.Duration) {
	v, end := speech(r, s.fs, d)
	scale(v, amp(dbfs))
	i := s.idx(from)
	for k, x := range v {
		s.x[i+k] += x
	}
	s.speech = append(s.speech, span{from, from + time.Duration(int64(end)*int64(time.Second)/int64(s.fs))})
}

// pcm quantises the scene to int16 with ch identical channels.
func (s *scene) pcm(ch int) []int16 {
	out := make([]int16, len(s.x)*ch)
	for i, v := range s.x {
		q := int16(max(-32768, min(32767, math.Round(v*32768))))
		for c := range ch {
			out[i*ch+c] = q
		}
	}
	return out
}

// base is the capture clock's reading at a scene's first sample.
const base = hal.Mono(1000 * time.Second)

// feed runs samples through a through frames of frame samples per
// channel, numbered from 1 and stamped from base, then flushes; it
// returns every event.
func feed(a *Analyzer, samples []int16, frame int) []Event {
	ch := a.format.Channels
	var out []Event
	fr := hal.AudioFrame{}
	for i, seq := 0, uint64(1); i < len(samples); i, seq = i+frame*ch, seq+1 {
		fr.Samples = samples[i:min(len(samples), i+frame*ch)]
		fr.Seq = seq
		fr.Time = base.Add(time.Duration(int64(i/ch) * int64(time.Second) / int64(a.rate)))
		out = a.Process(&fr, out)
	}
	return a.Flush(out)
}

func format(fs, ch int) hal.AudioFormat {
	return hal.AudioFormat{Rate: physic.Frequency(fs) * physic.Hertz, Channels: ch, FrameSamples: fs / 50}
}
