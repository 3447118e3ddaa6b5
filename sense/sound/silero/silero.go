package silero

import (
	"fmt"
	"math"
)

const (
	// SampleRate is the only rate the detector takes, in Hz.
	SampleRate = 16000
	// ChunkSize is the number of samples Process takes per call (32 ms).
	ChunkSize = 512

	contextSize = 64                        // samples of the previous input kept
	inputSize   = contextSize + ChunkSize   // 576, the model's input
	padSize     = 64                        // reflect padding on the right
	paddedSize  = inputSize + padSize       // 640
	nFFT        = 256                       // STFT filter length
	hop         = 128                       // STFT stride
	nBins       = nFFT/2 + 1                // 129
	binQuads    = (nBins + 3) / 4           // 33: the bins padded to 132, in fours
	nFrames     = (paddedSize-nFFT)/hop + 1 // 4
	hidden      = 128                       // LSTM size
	enc0Len     = nFrames                   // 4
	enc1Len     = (enc0Len+2-3)/2 + 1       // 2
	enc2Len     = (enc1Len+2-3)/2 + 1       // 1
	enc3Len     = enc2Len                   // 1
)

// Detector runs Silero VAD v5 over a stream of 512-sample chunks. It is not
// safe for concurrent use; Detectors are independent of each other and share
// only the read-only weights.
type Detector struct {
	m *model

	in    [paddedSize]float32 // context ‖ chunk ‖ reflect padding
	mag   [nFrames * binQuads][4]float32
	enc0  [enc0Len * 128]float32
	enc1  [enc1Len * 64]float32
	enc2  [enc2Len * 64]float32
	x     [hidden]float32        // the LSTM's input
	h     [hidden / 4][4]float32 // the LSTM's state
	c     [hidden]float32
	gates [4 * hidden]float32
	nz    sparse // the nonzero entries of the layer input in use
}

// New returns a Detector with zero context and state. The first call loads
// the embedded weights (about 1 MB) once for the process.
func New() *Detector {
	return &Detector{m: loadModel()}
}

// Reset forgets the context and the LSTM state, as at New: for a new
// stream, or after a gap in this one.
func (d *Detector) Reset() {
	clear(d.in[:contextSize])
	clear(d.h[:])
	clear(d.c[:])
}

// Process takes the next ChunkSize samples of 16 kHz mono audio, in [-1, 1)
// (int16 / 32768), and returns the probability that the chunk is speech. It
// panics if len(chunk) != ChunkSize. Samples outside [-1, 1] are clipped
// and NaN is read as 0.
func (d *Detector) Process(chunk []float32) float32 {
	if len(chunk) != ChunkSize {
		panic(fmt.Sprintf("silero: Process got %d samples, want %d", len(chunk), ChunkSize))
	}
	in := d.in[contextSize:inputSize]
	for i, s := range chunk {
		switch {
		case s > 1:
			s = 1
		case s < -1:
			s = -1
		case s != s:
			s = 0
		}
		in[i] = s
	}
	return d.run()
}

// ProcessInt16 is Process for signed 16-bit samples (scaled by 1/32768).
func (d *Detector) ProcessInt16(chunk []int16) float32 {
	if len(chunk) != ChunkSize {
		panic(fmt.Sprintf("silero: ProcessInt16 got %d samples, want %d", len(chunk), ChunkSize))
	}
	in := d.in[contextSize:inputSize]
	for i, s := range chunk {
		in[i] = float32(s) / 32768
	}
	return d.run()
}

// run evaluates the network on d.in[:inputSize] and carries the context
// and the state to the next call.
func (d *Detector) run() float32 {
	m := d.m
	x := d.in[:]

	// Reflect padding: x[576+j] = x[574-j].
	for j := range padSize {
		x[inputSize+j] = x[inputSize-2-j]
	}

	// STFT magnitude, time-major [frame][bin] (bins 129…131 stay 0).
	for t := range nFrames {
		plan.mag((*[binQuads][4]float32)(d.mag[t*binQuads:]), (*[nFFT]float32)(x[t*hop:]))
	}

	// Encoder. The ReLUs leave half to four fifths of each output zero (on
	// speech and noise alike), so the layers after the first, and the
	// LSTM's W·x, take their input as a list of its nonzero entries.
	enc0ReLU(d.enc0[:], d.mag[:], &m.enc0)
	d.nz.set(d.enc0[:], 128)
	convReLU(d.enc1[:], &d.nz, &m.enc[0])
	d.nz.set(d.enc1[:], 64)
	convReLU(d.enc2[:], &d.nz, &m.enc[1])
	d.nz.set(d.enc2[:], 64)
	convReLU(d.x[:], &d.nz, &m.enc[2])
	d.nz.set(d.x[:], hidden)

	// LSTM cell, gate order i, o, f, c: g = W·x + R·h + bias.
	xnz := d.nz.entries(0)
	for b := 0; b < len(d.gates); b += 4 {
		g := (*[4]float32)(d.gates[b:])
		*g = [4]float32(m.bias[b:])
		dot4Sparse(g, m.lstmW[b/4*hidden:(b/4+1)*hidden], xnz)
		dot4(g, m.lstmR[b/4*hidden/4:(b/4+1)*hidden/4], d.h[:])
	}
	gi := d.gates[0*hidden : 1*hidden]
	gO := d.gates[1*hidden : 2*hidden]
	gf := d.gates[2*hidden : 3*hidden]
	gc := d.gates[3*hidden : 4*hidden]
	c := d.c[:]
	var out float32
	for j := range hidden {
		cj := sigmoid(gf[j])*c[j] + sigmoid(gi[j])*tanh(gc[j])
		hj := sigmoid(gO[j]) * tanh(cj)
		c[j] = cj
		d.h[j/4][j%4] = hj
		if hj > 0 { // ReLU before the decoder's 1×1 convolution
			out += m.decW[j] * hj
		}
	}

	// The next call's context: the last 64 samples of this input.
	copy(x[:contextSize], x[inputSize-contextSize:inputSize])
	return sigmoid(out + m.decB)
}

// enc0ReLU computes the first convolution, ReLU(conv(x)), for the
// time-major STFT magnitudes x [frame][bin quad][4] into dst [frame][128],
// zero padding one frame on each side. A tap range is contiguous in both
// the weights (see denseConv) and x, so each block of four rows and output
// frame is one dot4 over the taps that fall inside x. The frame loop is
// inside the block loop, so a block's weights (6 KB) are still in L1 for
// the next frame.
//
//go:norace
func enc0ReLU(dst []float32, x [][4]float32, c *denseConv) {
	const q, k, pad, out = binQuads, 3, 1, 128
	tin := len(x) / q
	dst = dst[:tin*out]
	for b := 0; b < out; b += 4 {
		wb := c.w[b/4*k*q : (b/4+1)*k*q]
		bias := [4]float32(c.b[b:])
		for t := range tin {
			k0 := max(0, pad-t)
			k1 := min(k, tin+pad-t)
			o := (*[4]float32)(dst[t*out+b:])
			*o = bias
			dot4(o, wb[k0*q:k1*q], x[(t+k0-pad)*q:(t+k1-pad)*q])
			for r, v := range o {
				o[r] = max(v, 0)
			}
		}
	}
}

// convReLU computes ReLU(conv(x)) into time-major dst [tout][c.out] for an
// input x [tin][c.in] given as its nonzero entries, zero padding c.pad on
// each side.
//
//go:norace
func convReLU(dst []float32, x *sparse, c *conv) {
	tin := x.n
	tout := (tin+2*c.pad-c.k)/c.stride + 1
	dst = dst[:tout*c.out]
	blk := c.k * c.in // one block's weights, [tap][in]
	for b := 0; b < c.out; b += 4 {
		wb := c.w[b/4*blk : (b/4+1)*blk]
		bias := [4]float32(c.b[b:])
		for t := range tout {
			o := (*[4]float32)(dst[t*c.out+b:])
			*o = bias
			for k := range c.k {
				if ti := t*c.stride + k - c.pad; ti >= 0 && ti < tin {
					dot4Sparse(o, wb[k*c.in:(k+1)*c.in], x.entries(ti))
				}
			}
			for r, v := range o {
				o[r] = max(v, 0)
			}
		}
	}
}

func sigmoid(x float32) float32 {
	return float32(1 / (1 + exp64(-float64(x))))
}

func tanh(x float32) float32 {
	// tanh x = (1 − e^−2|x|)/(1 + e^−2|x|) with the sign of x; e^−2|x| is
	// in (0, 1], so nothing overflows. Near 0, where 1 − e^−2|x| cancels,
	// the Taylor series to x⁹ (relative error below 1e-14 for |x| < 1/16).
	y := float64(x)
	if a := math.Abs(y); a >= 1.0/16 {
		e := exp64(-2 * a)
		return float32(math.Copysign((1-e)/(1+e), y))
	}
	y2 := y * y
	return float32(y * (1 + y2*(-1.0/3+y2*(2.0/15+y2*(-17.0/315+y2*(62.0/2835))))))
}

// exp64 returns e^x to a relative 3e-9, far below float32's 6e-8, for any x
// (x is clamped to ±104: beyond that every result here rounds to the same
// float32). x = n·ln2 + r with |r| ≤ ln2/2; e^r is its Taylor polynomial of
// degree 7 (truncation below r⁸/8! ≤ 2.1e-9) and 2^n is built in the
// exponent bits. NaN gives NaN.
func exp64(x float64) float64 {
	const (
		log2e = 1.4426950408889634
		ln2   = 0.6931471805599453
		round = 0x1.8p52 // adding it rounds to an integer in the low mantissa bits
	)
	if x < -104 {
		x = -104
	} else if x > 104 {
		x = 104
	}
	t := x*log2e + round
	n := t - round // x·log2(e) rounded to an integer, |n| ≤ 151
	r := x - n*ln2
	// The polynomial by Estrin's scheme: shorter dependency chains than
	// Horner's.
	r2 := r * r
	r4 := r2 * r2
	p := ((1 + r) + r2*(1.0/2+r*(1.0/6))) + r4*((1.0/24+r*(1.0/120))+r2*(1.0/720+r*(1.0/5040)))
	return p * math.Float64frombits(uint64(int64(n)+1023)<<52)
}
