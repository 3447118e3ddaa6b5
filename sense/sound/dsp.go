package sound

import (
	"math"
	"time"
)

// biquad is a second-order IIR section (transposed direct form II).
type biquad struct {
	b0, b1, b2, a1, a2 float64
	z1, z2             float64
}

// butterworth returns a second-order Butterworth high-pass (high) or
// low-pass section at f Hz for rate fs.
func butterworth(f float64, fs int, high bool) biquad {
	return section(f, fs, math.Sqrt2/2, high)
}

// section is a second-order high-pass (high) or low-pass at f Hz for rate
// fs with quality q (the audio EQ cookbook's).
func section(f float64, fs int, q float64, high bool) biquad {
	sin, cos := math.Sincos(2 * math.Pi * f / float64(fs))
	alpha := sin / (2 * q)
	a0 := 1 + alpha
	s := biquad{a1: -2 * cos / a0, a2: (1 - alpha) / a0}
	if high {
		s.b0 = (1 + cos) / 2 / a0
		s.b1 = -(1 + cos) / a0
	} else {
		s.b0 = (1 - cos) / 2 / a0
		s.b1 = (1 - cos) / a0
	}
	s.b2 = s.b0
	return s
}

func (q *biquad) reset() { q.z1, q.z2 = 0, 0 }

func (q *biquad) step(x float64) float64 {
	y := q.b0*x + q.z1
	q.z1 = q.b1*x - q.a1*y + q.z2
	q.z2 = q.b2*x - q.a2*y
	return y
}

// resampler converts a stream from one rate to another by linear
// interpolation, after an eighth-order Butterworth low-pass at 7 kHz when
// the input is faster than 16 kHz (what folds back over 7 kHz is 17 dB
// down or more): enough for a voice detector, not for listening. pos is
// where the next output sample lies, in input samples after prev, the
// last input sample.
type resampler struct {
	step, pos, prev float64
	filter          bool
	lp              [4]biquad
}

func newResampler(from, to int) resampler {
	r := resampler{step: float64(from) / float64(to), pos: 1}
	if from > 16000 {
		r.filter = true
		for k := range r.lp {
			// The sections' Qs of an eighth-order Butterworth.
			q := 1 / (2 * math.Cos(math.Pi*float64(2*k+1)/16))
			r.lp[k] = section(7000, from, q, false)
		}
	}
	return r
}

// push takes the next input sample and appends the output samples it
// completes to out.
func (r *resampler) push(x float64, out []float32) []float32 {
	if r.filter {
		for k := range r.lp {
			x = r.lp[k].step(x)
		}
	}
	for ; r.pos <= 1; r.pos += r.step {
		out = append(out, float32(r.prev+(x-r.prev)*r.pos))
	}
	r.pos--
	r.prev = x
	return out
}

func (r *resampler) reset() {
	r.pos, r.prev = 1, 0
	for k := range r.lp {
		r.lp[k].reset()
	}
}

// floor is an adaptive noise floor in dB: it falls toward a quieter input
// quickly and rises toward a louder one slowly.
type floor struct {
	db   float64
	set  bool
	fall float64 // share of the distance covered per update going down
	rise float64 // and going up
}

func newFloor(every, fall, rise time.Duration) floor {
	return floor{
		fall: 1 - math.Exp(-every.Seconds()/fall.Seconds()),
		rise: 1 - math.Exp(-every.Seconds()/rise.Seconds()),
	}
}

func (f *floor) update(db float64) {
	switch {
	case !f.set:
		f.db, f.set = db, true
	case db < f.db:
		f.db += (db - f.db) * f.fall
	default:
		f.db += (db - f.db) * f.rise
	}
}

// spectrum computes the power spectrum of the most recent m samples,
// Hann-windowed, into a.power (bins up to perHi).
func (a *Analyzer) spectrum() {
	// The ring's oldest sample is at a.ringAt.
	old, hann := a.ring[a.ringAt:], a.hann[:a.m]
	frame := a.frame[:a.m]
	for i, v := range old {
		frame[i] = v * hann[i]
	}
	frame, hann = frame[len(old):], hann[len(old):]
	for i, v := range a.ring[:a.ringAt] {
		frame[i] = v * hann[i]
	}
	a.fft.transform(a.frame, a.specRe, a.specIm)
	hi := a.perHi + a.smoothBins
	re, im := a.specRe[:hi+1], a.specIm[:hi+1]
	for k := a.perLo - a.smoothBins; k <= hi; k++ {
		a.power[k] = re[k]*re[k] + im[k]*im[k]
	}
}

// updateBins moves the per-bin noise spectrum toward the last spectrum,
// a running mean over about binsMean; elapsed is the time since the
// previous update.
func (a *Analyzer) updateBins(elapsed time.Duration) {
	k := 1 - math.Exp(-elapsed.Seconds()/binsMean.Seconds())
	if !a.binsSet {
		k = 1
	}
	lo, hi := a.perLo-a.smoothBins, a.perHi+a.smoothBins
	for i := lo; i <= hi; i++ {
		a.binFloor[i] += (a.power[i] - a.binFloor[i]) * k
	}
	// Smooth across ±smoothBins (a running box sum): noise spectra are
	// smooth, and a trace of voice left in the mean is spread too thin
	// to look like harmonics.
	w := 2*a.smoothBins + 1
	var sum float64
	for i := lo; i < lo+w-1; i++ {
		sum += a.binFloor[i]
	}
	for i := a.perLo; i <= a.perHi; i++ {
		sum += a.binFloor[i+a.smoothBins]
		a.binNoise[i] = sum/float64(w) + 1e-30
		sum -= a.binFloor[i-a.smoothBins]
	}
	a.binsSet = true
}

// periodicity tells how periodic the periodicity band of the last
// spectrum is at a voice's pitch: the highest normalised autocorrelation
// at a lag between the shortest and the longest pitch period, corrected
// for the window's own autocorrelation, in [0, 1]. The spectrum is first
// divided by the noise spectrum, so that noise of any colour looks white
// and only what rises above it can look periodic. A periodicity that
// counts (periodicKeep or more) needs two harmonics of the pitch over
// the noise and near each other in level; a lone tone has 0.
func (a *Analyzer) periodicity() float64 {
	l := len(a.acfIn)
	var r0 float64
	for k := a.perLo; k <= a.perHi; k++ {
		p := a.power[k] / a.binNoise[k]
		a.acfIn[k] = p
		a.acfIn[l-k] = p
		r0 += p
	}
	if !(r0 > 0) || math.IsInf(r0, 0) {
		return 0
	}
	// The transform of this even sequence is real: the autocorrelation.
	// Bins outside the band stay zero from New on.
	a.acf.transform(a.acfIn, a.acfRe, a.acfIm)
	r := a.acfRe
	best, at := math.Inf(-1), 0
	for s := a.lagLo; s <= a.lagHi; s++ {
		if v := r[s] * a.hannInv[s]; v > best {
			best, at = v, s
		}
	}
	// Refine the peak between steps with a parabola through its
	// neighbours, when it is a peak: at either end of the range the
	// highest step may be on a slope, and a parabola through a slope
	// can put its vertex anywhere (even at a negative lag, where no
	// harmonic would ever pass the band's end below).
	lag := float64(at)
	y0 := r[at-1] * a.hannInv[at-1]
	y2 := r[at+1] * a.hannInv[at+1]
	if d := y0 - 2*best + y2; d < 0 && y0 <= best && y2 <= best {
		off := max(-0.5, min(0.5, 0.5*(y0-y2)/d))
		best -= 0.25 * (y0 - y2) * off
		lag += off
	}
	per := max(0, min(1, best/(2*r0)))
	if per < periodicKeep {
		return per
	}
	// A lone tone (a beep, a whistle, a siren) is periodic at every
	// multiple of its period, and so is a bird's call, a tone or two
	// high over a voice's pitch: at a subharmonic of a 2 kHz whistle
	// every tenth "harmonic" is there and the rest are noise. A voice
	// has its harmonics side by side, strongest under the second
	// formant. So two neighbouring harmonics of the pitch found (the
	// harmonic h is at bin h·l/lag), both under pairHz, must stand
	// clearly over the noise and within 20 dB of the strongest, which
	// a tone's leakage into the next bins is not.
	var top float64
	n := 0
	for h := 1; n < len(a.harm); h++ {
		k := int(math.Round(float64(h*l) / lag))
		if k+1 > a.perHi {
			break
		}
		v := 0.0
		if k-1 >= a.perLo {
			v = max(a.acfIn[k-1], a.acfIn[k], a.acfIn[k+1])
		}
		a.harm[n], a.harmBin[n] = v, k
		n++
		top = max(top, v)
	}
	// The autocorrelation's highest peak may be at two or three periods
	// of the pitch (its harmonics are then every second or third one
	// of the pitch found): their neighbours count as well, for a pitch
	// still a voice's.
	least := max(harmonicMin, top/100)
	for d := 1; d <= 3 && lag/float64(d) >= float64(a.lagLo)-0.5; d++ {
		for j := 1; (j+1)*d <= n && a.harmBin[(j+1)*d-1] <= a.pairHi; j++ {
			if a.harm[j*d-1] >= least && a.harm[(j+1)*d-1] >= least {
				return per
			}
		}
	}
	return 0
}
