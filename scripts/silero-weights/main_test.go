package main

import (
	"math"
	"testing"
)

// TestCheckSTFTBasis: the Hann-windowed DFT, rounded to float32 as in the
// model, is accepted; another window, a scale, swapped or negated rows, or
// one entry off are refused.
func TestCheckSTFTBasis(t *testing.T) {
	const n, bins = 256, 129
	basis := func(win func(j int) float64) []float32 {
		b := make([]float32, 2*bins*n)
		for k := range bins {
			for j := range n {
				a := 2 * math.Pi * float64(k*j%n) / n
				b[k*n+j] = float32(win(j) * math.Cos(a))
				b[(bins+k)*n+j] = float32(-win(j) * math.Sin(a))
			}
		}
		return b
	}
	hann := func(j int) float64 { return 0.5 - 0.5*math.Cos(2*math.Pi*float64(j)/n) }
	if err := checkSTFTBasis(basis(hann)); err != nil {
		t.Fatal(err)
	}
	bad := map[string][]float32{
		"symmetric Hann": basis(func(j int) float64 { return 0.5 - 0.5*math.Cos(2*math.Pi*float64(j)/(n-1)) }),
		"Hamming":        basis(func(j int) float64 { return 0.54 - 0.46*math.Cos(2*math.Pi*float64(j)/n) }),
		"scaled":         basis(func(j int) float64 { return 2 * hann(j) }),
		"short":          basis(hann)[:2*bins*n-1],
	}
	swapped := basis(hann)
	copy(swapped, basis(hann)[bins*n:])
	copy(swapped[bins*n:], basis(hann)[:bins*n])
	bad["swapped"] = swapped
	negated := basis(hann)
	for i := bins * n; i < len(negated); i++ {
		negated[i] = -negated[i]
	}
	bad["negated imaginary"] = negated
	one := basis(hann)
	one[5*n+17] += 1e-5
	bad["one entry off"] = one
	nan := basis(hann)
	nan[3] = float32(math.NaN())
	bad["NaN"] = nan
	for name, b := range bad {
		if err := checkSTFTBasis(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
