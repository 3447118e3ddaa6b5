package sound

import "math"

// realFFT is the discrete Fourier transform of a real sequence whose
// length is a power of two: a radix-2 complex FFT of half the length on
// the even and odd samples packed as one complex sequence, then a split
// step. Everything it needs is allocated by newRealFFT; transform
// allocates nothing. It is not safe for concurrent use (it has a scratch
// buffer).
type realFFT struct {
	n, half int
	// rev is the bit-reversal permutation of the half-length transform.
	rev []int32
	// tw is e^{-2πij/half} for j < half/2, the butterflies' twiddles.
	twRe, twIm []float64
	// sp is e^{-2πik/n} for k ≤ half/2, the split step's twiddles.
	spRe, spIm []float64
	re, im     []float64 // scratch, half long
}

// newRealFFT prepares transforms of length n, a power of two ≥ 4.
func newRealFFT(n int) *realFFT {
	if n < 4 || n&(n-1) != 0 {
		panic("sound: FFT length must be a power of two ≥ 4")
	}
	h := n / 2
	f := &realFFT{
		n: n, half: h,
		rev:  make([]int32, h),
		twRe: make([]float64, h/2),
		twIm: make([]float64, h/2),
		spRe: make([]float64, h/2+1),
		spIm: make([]float64, h/2+1),
		re:   make([]float64, h),
		im:   make([]float64, h),
	}
	bits := 0
	for 1<<bits < h {
		bits++
	}
	for i := range h {
		r := 0
		for b := range bits {
			if i&(1<<b) != 0 {
				r |= 1 << (bits - 1 - b)
			}
		}
		f.rev[i] = int32(r)
	}
	for j := range f.twRe {
		s, c := math.Sincos(-2 * math.Pi * float64(j) / float64(h))
		f.twRe[j], f.twIm[j] = c, s
	}
	for k := range f.spRe {
		s, c := math.Sincos(-2 * math.Pi * float64(k) / float64(n))
		f.spRe[k], f.spIm[k] = c, s
	}
	return f
}

// transform computes X[k] = Σ x[j]·e^{-2πijk/n} for k = 0..n/2 into
// outRe and outIm, which hold n/2+1 values; x holds n. The other half of
// the spectrum is the conjugate mirror of this one.
func (f *realFFT) transform(x, outRe, outIm []float64) {
	h := f.half
	re, im := f.re[:h], f.im[:h]
	x = x[:2*h]
	outRe, outIm = outRe[:h+1], outIm[:h+1]
	// Pack even samples as real parts, odd ones as imaginary parts, in
	// bit-reversed order.
	for i, r := range f.rev {
		re[r] = x[2*i]
		im[r] = x[2*i+1]
	}
	// Iterative decimation-in-time butterflies.
	for size := 2; size <= h; size <<= 1 {
		hs := size >> 1
		step := h / size
		for start := 0; start < h; start += size {
			a := re[start : start+hs]
			ai := im[start : start+hs]
			b := re[start+hs : start+size]
			bi := im[start+hs : start+size]
			for j := range a {
				wr, wi := f.twRe[j*step], f.twIm[j*step]
				tr := b[j]*wr - bi[j]*wi
				ti := b[j]*wi + bi[j]*wr
				b[j] = a[j] - tr
				bi[j] = ai[j] - ti
				a[j] += tr
				ai[j] += ti
			}
		}
	}
	// Split: with Z the transform of the packed sequence, the even
	// samples' transform is (Z[k] + conj Z[h-k])/2 and the odd samples'
	// is (Z[k] - conj Z[h-k])/2i; X[k] = E[k] + e^{-2πik/n}·O[k].
	outRe[0] = re[0] + im[0]
	outIm[0] = 0
	outRe[h] = re[0] - im[0]
	outIm[h] = 0
	for k := 1; k <= h/2; k++ {
		zr, zi := re[k], im[k]
		cr, ci := re[h-k], -im[h-k] // conj Z[h-k]
		er, ei := (zr+cr)/2, (zi+ci)/2
		// (z - c)/2i = (zi-ci)/2 - i(zr-cr)/2
		or, oi := (zi-ci)/2, -(zr-cr)/2
		wr, wi := f.spRe[k], f.spIm[k]
		tr := or*wr - oi*wi
		ti := or*wi + oi*wr
		outRe[k] = er + tr
		outIm[k] = ei + ti
		// X[h-k] = conj(E[k]) + e^{-2πi(h-k)/n}·conj(O[k])
		//        = conj(E[k]) - conj(e^{-2πik/n})·conj(O[k]) = conj(E[k] - W^k O[k]).
		outRe[h-k] = er - tr
		outIm[h-k] = -(ei - ti)
	}
}
