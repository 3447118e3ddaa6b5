package silero

// On arm64 Go fuses a*b + c into one FMADDS, so each step is sixteen fused
// multiply-adds into eight running sums (two per row), two after another
// per sum. Per sixteen multiply-adds that is about 31 instructions (16
// FMADDS, 10 paired loads, 5 for the loop), against 39 for dot_other.go's
// trees, which need separate multiplies and adds. On the Cortex-A72 of the
// Raspberry Pi 4 (3-wide decode, two FMA pipes, 3-cycle accumulator
// forwarding) the instruction count is the limit.

// dot4 adds to acc the dot products of x with four interleaved weight rows:
// w[i][4m+r] is row r's weight for x[i][m].
//
//go:norace
func dot4(acc *[4]float32, w [][16]float32, x [][4]float32) {
	x = x[:len(w)]
	s0, s1, s2, s3 := acc[0], acc[1], acc[2], acc[3]
	var t0, t1, t2, t3 float32
	for i := range w {
		ww, xx := &w[i], &x[i]
		v0, v1, v2, v3 := xx[0], xx[1], xx[2], xx[3]
		s0 = s0 + ww[0]*v0 + ww[4]*v1
		s1 = s1 + ww[1]*v0 + ww[5]*v1
		s2 = s2 + ww[2]*v0 + ww[6]*v1
		s3 = s3 + ww[3]*v0 + ww[7]*v1
		t0 = t0 + ww[8]*v2 + ww[12]*v3
		t1 = t1 + ww[9]*v2 + ww[13]*v3
		t2 = t2 + ww[10]*v2 + ww[14]*v3
		t3 = t3 + ww[11]*v2 + ww[15]*v3
	}
	*acc = [4]float32{s0 + t0, s1 + t1, s2 + t2, s3 + t3}
}

// dot4Sparse adds to acc the dot products of an input given as its nonzero
// entries x with four interleaved weight rows: w[j][r] is row r's weight for
// input j.
//
//go:norace
func dot4Sparse(acc *[4]float32, w [][4]float32, x []nzQuad) {
	s0, s1, s2, s3 := acc[0], acc[1], acc[2], acc[3]
	var t0, t1, t2, t3 float32
	for i := range x {
		e := &x[i]
		w0, w1, w2, w3 := &w[e.j[0]], &w[e.j[1]], &w[e.j[2]], &w[e.j[3]]
		v0, v1, v2, v3 := e.v[0], e.v[1], e.v[2], e.v[3]
		s0 = s0 + w0[0]*v0 + w1[0]*v1
		s1 = s1 + w0[1]*v0 + w1[1]*v1
		s2 = s2 + w0[2]*v0 + w1[2]*v1
		s3 = s3 + w0[3]*v0 + w1[3]*v1
		t0 = t0 + w2[0]*v2 + w3[0]*v3
		t1 = t1 + w2[1]*v2 + w3[1]*v3
		t2 = t2 + w2[2]*v2 + w3[2]*v3
		t3 = t3 + w2[3]*v2 + w3[3]*v3
	}
	*acc = [4]float32{s0 + t0, s1 + t1, s2 + t2, s3 + t3}
}
