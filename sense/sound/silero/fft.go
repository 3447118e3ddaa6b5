package silero

import "math"

// The STFT magnitude by a real FFT. The model's STFT is a Conv whose 258
// filters are a periodic Hann window times the 256-point DFT (see the
// package doc); |X[k]| of one frame is computed here instead as a 128-point
// complex FFT of the windowed frame's even and odd samples packed as
// re and im, then split into the 256-point spectrum. That is about 5k
// floating-point operations per frame instead of 66k multiply-adds.

const fftN = nFFT / 2 // the complex FFT's size, 128

// stftPlan holds the window and the twiddle factors, computed in float64
// and rounded once.
type stftPlan struct {
	win [nFFT]float32 // periodic Hann: ½ − ½cos(2πn/256)
	rev [fftN]uint8   // 7-bit bit reversal
	// Twiddles e^{-2πij/m} of the radix-2 stages m = 8…128, at [m/2 + j]
	// (j < m/2): cos in twr, sin in twi (so the factor is twr − i·twi).
	twr, twi [fftN]float32
	// The split's twiddles e^{-2πik/256}, k = 0…128: cos, sin.
	splr, spli [nBins]float32
}

var plan = newSTFTPlan()

func newSTFTPlan() *stftPlan {
	p := new(stftPlan)
	for n := range p.win {
		p.win[n] = float32(0.5 - 0.5*math.Cos(2*math.Pi*float64(n)/nFFT))
	}
	for n := range p.rev {
		r := 0
		for b := 0; b < 7; b++ {
			r |= (n >> b & 1) << (6 - b)
		}
		p.rev[n] = uint8(r)
	}
	for h := 4; h < fftN; h *= 2 {
		for j := range h {
			a := math.Pi * float64(j) / float64(h)
			p.twr[h+j] = float32(math.Cos(a))
			p.twi[h+j] = float32(math.Sin(a))
		}
	}
	for k := range p.splr {
		a := 2 * math.Pi * float64(k) / nFFT
		p.splr[k] = float32(math.Cos(a))
		p.spli[k] = float32(math.Sin(a))
	}
	return p
}

// mag writes |X[k]|, k = 0…128, into dst[k/4][k%4], where X is the
// 256-point DFT of the Hann-windowed frame; dst[32][1…3] are left alone.
//
//go:norace
func (p *stftPlan) mag(dst *[binQuads][4]float32, frame *[nFFT]float32) {
	var re, im [fftN]float32

	// z[n] = w[2n]x[2n] + i·w[2n+1]x[2n+1], loaded in bit-reversed order,
	// and the first two radix-2 stages (twiddles 1 and −i) on each group
	// of four.
	for g := 0; g < fftN; g += 4 {
		var ar, ai [4]float32
		for q := range 4 {
			n := int(p.rev[g+q]) * 2
			ar[q] = frame[n&(nFFT-1)] * p.win[n&(nFFT-1)]
			ai[q] = frame[(n+1)&(nFFT-1)] * p.win[(n+1)&(nFFT-1)]
		}
		b0r, b0i := ar[0]+ar[1], ai[0]+ai[1]
		b1r, b1i := ar[0]-ar[1], ai[0]-ai[1]
		b2r, b2i := ar[2]+ar[3], ai[2]+ai[3]
		b3r, b3i := ar[2]-ar[3], ai[2]-ai[3]
		r := re[g : g+4 : g+4]
		i := im[g : g+4 : g+4]
		r[0], i[0] = b0r+b2r, b0i+b2i
		r[2], i[2] = b0r-b2r, b0i-b2i
		r[1], i[1] = b1r+b3i, b1i-b3r // b1 + (−i)·b3
		r[3], i[3] = b1r-b3i, b1i+b3r
	}

	// The remaining radix-2 stages, m = 8…128.
	for h := 4; h < fftN; h *= 2 {
		wr := p.twr[h : 2*h : 2*h]
		wi := p.twi[h : 2*h : 2*h]
		for g := 0; g < fftN; g += 2 * h {
			ur, ui := re[g:g+h:g+h], im[g:g+h:g+h]
			vr, vi := re[g+h:g+2*h:g+2*h], im[g+h:g+2*h:g+2*h]
			vr, vi = vr[:len(wr)], vi[:len(wr)]
			ur, ui = ur[:len(wr)], ui[:len(wr)]
			for j, c := range wr {
				s := wi[j]
				tr := vr[j]*c + vi[j]*s // (vr + i·vi)(c − i·s)
				ti := vi[j]*c - vr[j]*s
				vr[j], vi[j] = ur[j]-tr, ui[j]-ti
				ur[j], ui[j] = ur[j]+tr, ui[j]+ti
			}
		}
	}

	// Split: with Z the 128-point transform (Z[128] = Z[0]),
	//	2E[k] = Z[k] + conj(Z[128−k]), 2O[k] = −i(Z[k] − conj(Z[128−k])),
	//	X[k] = E[k] + e^{−2πik/256}·O[k].
	// The halves are carried to the end: |X[k]| = ½|2X[k]|, exactly.
	for k := range nBins {
		a := k & (fftN - 1)
		b := (fftN - k) & (fftN - 1)
		ar, ai, br, bi := re[a], im[a], re[b], im[b]
		er, ei := ar+br, ai-bi
		or, oi := ai+bi, br-ar
		c, s := p.splr[k], p.spli[k]
		xr := er + (or*c + oi*s) // E + (c − i·s)(or + i·oi)
		xi := ei + (oi*c - or*s)
		dst[k/4][k%4] = 0.5 * float32(math.Sqrt(float64(xr*xr+xi*xi)))
	}
}
