package sound

import (
	"encoding/binary"
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"
)

// naiveDFT is the textbook O(n²) transform of a real sequence, bins
// 0..n/2.
func naiveDFT(x []float64) (re, im []float64) {
	n := len(x)
	re = make([]float64, n/2+1)
	im = make([]float64, n/2+1)
	for k := range re {
		for j, v := range x {
			s, c := math.Sincos(-2 * math.Pi * float64(j*k%n) / float64(n))
			re[k] += v * c
			im[k] += v * s
		}
	}
	return re, im
}

// checkFFT compares the FFT of x with the naive DFT, within a tolerance
// relative to the signal's energy.
func checkFFT(t *testing.T, x []float64) {
	t.Helper()
	n := len(x)
	f := newRealFFT(n)
	gotRe := make([]float64, n/2+1)
	gotIm := make([]float64, n/2+1)
	f.transform(x, gotRe, gotIm)
	wantRe, wantIm := naiveDFT(x)
	var energy float64
	for _, v := range x {
		energy += v * v
	}
	tol := 1e-9 * math.Sqrt(energy*float64(n)+1)
	for k := range wantRe {
		if math.Abs(gotRe[k]-wantRe[k]) > tol || math.Abs(gotIm[k]-wantIm[k]) > tol {
			t.Fatalf("n=%d bin %d: got %g%+gi, want %g%+gi (tolerance %g)", n, k, gotRe[k], gotIm[k], wantRe[k], wantIm[k], tol)
		}
	}
}

func TestRealFFTMatchesNaiveDFT(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048} {
		for _, kind := range []string{"random", "impulse", "dc", "nyquist", "sine"} {
			x := make([]float64, n)
			switch kind {
			case "random":
				for i := range x {
					x[i] = r.NormFloat64()
				}
			case "impulse":
				x[n/3] = 1
			case "dc":
				for i := range x {
					x[i] = 0.5
				}
			case "nyquist":
				for i := range x {
					x[i] = float64(1 - 2*(i%2))
				}
			case "sine":
				for i := range x {
					x[i] = math.Sin(2*math.Pi*3.3*float64(i)/float64(n)) + 0.1
				}
			}
			t.Run(kind, func(t *testing.T) { checkFFT(t, x) })
		}
	}
}

func TestRealFFTRejectsBadLength(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 6, 100} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("newRealFFT(%d) did not panic", n)
				}
			}()
			newRealFFT(n)
		}()
	}
}

func TestRealFFTAllocatesNothing(t *testing.T) {
	f := newRealFFT(512)
	x := make([]float64, 512)
	re := make([]float64, 257)
	im := make([]float64, 257)
	if n := testing.AllocsPerRun(10, func() { f.transform(x, re, im) }); n != 0 {
		t.Errorf("transform allocates %v times, want 0", n)
	}
}

// FuzzRealFFT checks the FFT against the naive DFT on arbitrary input:
// the bytes are read as float32 values (non-finite ones become zero) and
// the length is the largest power of two they fill, at most 512.
func FuzzRealFFT(f *testing.F) {
	f.Add([]byte{0, 0, 128, 63, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	seed := make([]byte, 4*64)
	for i := range 64 {
		binary.LittleEndian.PutUint32(seed[4*i:], math.Float32bits(float32(math.Sin(float64(i)))))
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, b []byte) {
		n := len(b) / 4
		if n < 4 {
			return
		}
		n = min(512, 1<<(63-bits.LeadingZeros64(uint64(n))))
		x := make([]float64, n)
		for i := range x {
			v := float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
			if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > 1e6 {
				v = 0
			}
			x[i] = v
		}
		checkFFT(t, x)
	})
}
