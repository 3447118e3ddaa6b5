package silero

// The multiply-adds of the convolutions and the LSTM, about 0.35 million per
// chunk if done densely, take most of the time. Go compiles them to scalar
// code (no SIMD), so the layout aims at few instructions per multiply-add:
//
//   - Weight rows are taken four at a time, interleaved: for input j the four
//     rows' weights are adjacent, so each input value is loaded once for four
//     multiply-adds and the weights are read in order.
//   - The loops range over slices of small arrays ([4] or [16] float32), so
//     they need no bounds checks and no per-step slice arithmetic.
//   - The inputs that follow a ReLU are mostly zeros and are passed as a list
//     of their nonzero entries (sparse), padded with zero entries to whole
//     groups of four. Skipping a zero skips an exact +0 (w·0 = ±0 adds
//     nothing to a sum), so only the order of the sums changes.
//
// The kernels' arithmetic is in dot_arm64.go (chains of fused multiply-adds)
// and dot_other.go (a small tree per step); see there.

// nzQuad is four entries of an activation: channel indices and values.
// Padding entries have value 0 and index 0.
type nzQuad struct {
	j [4]uint16
	v [4]float32
}

// sparse holds the nonzero entries of a time-major activation [t][ch], row
// by row, in quads: row t's are q[row[t]:row[t+1]].
type sparse struct {
	n   int // rows
	row [enc0Len + 1]int
	q   [enc0Len * 128 / 4]nzQuad
}

// set lists the nonzero entries of x, n rows of ch values (ch a multiple of
// 4, at most 128).
//
//go:norace
func (s *sparse) set(x []float32, ch int) {
	s.n = len(x) / ch
	k := 0 // entries so far, a multiple of 4 at each row's start
	for t := range s.n {
		s.row[t] = k / 4
		for j, v := range x[t*ch : (t+1)*ch] {
			// Written always, kept if nonzero: no branch on the data.
			e := &s.q[uint(k/4)%uint(len(s.q))]
			e.j[k%4] = uint16(j)
			e.v[k%4] = v
			if v != 0 {
				k++
			}
		}
		for ; k%4 != 0; k++ {
			e := &s.q[uint(k/4)%uint(len(s.q))]
			e.j[k%4] = 0
			e.v[k%4] = 0
		}
	}
	s.row[s.n] = k / 4
}

// entries returns row t's entries.
func (s *sparse) entries(t int) []nzQuad {
	return s.q[s.row[t]:s.row[t+1]]
}
