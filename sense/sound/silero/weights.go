package silero

import (
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
)

//go:embed weights.bin
var weightsBin []byte

const weightsMagic = "SILVAD5\x00"

// denseConv is the first convolution, 129→128 channels, kernel 3, stride 1,
// pad 1, its weights blocked for dot4: w[(b·3+k)·33+g][4m+r] is the weight
// of output channel 4b+r for input channel 4g+m at tap k (0 for the padding
// channels 129…131).
type denseConv struct {
	w [][16]float32 // [128/4][3][33]
	b []float32     // [128]
}

// conv is a later convolution, whose input is sparse, its weights blocked
// for dot4Sparse: w[(b·k+t)·in+j][r] is the weight of output channel 4b+r
// for input channel j at tap t.
type conv struct {
	in, out, k, stride, pad int
	w                       [][4]float32 // [out/4][k][in]
	b                       []float32    // [out]
}

// model is the network's weights, shared read-only by every Detector.
type model struct {
	version string
	enc0    denseConv
	enc     [3]conv       // encoder layers 1…3
	lstmW   [][4]float32  // [512/4][128]: lstmW[b·128+j][r] = W[4b+r][j]
	lstmR   [][16]float32 // [512/4][32]: lstmR[b·32+g][4m+r] = R[4b+r][4g+m]
	bias    []float32     // [512]: Wb + Rb
	decW    []float32     // [128]
	decB    float32
}

var loadModel = sync.OnceValue(func() *model {
	m, err := parseWeights(weightsBin)
	if err != nil {
		panic("silero: embedded weights.bin: " + err.Error())
	}
	return m
})

type rawTensor struct {
	name string
	dims []int
	data []float32
}

// parseWeights reads the weights.bin layout described in the package doc.
func parseWeights(b []byte) (*model, error) {
	if len(b) < len(weightsMagic) || string(b[:len(weightsMagic)]) != weightsMagic {
		return nil, errors.New("bad magic")
	}
	b = b[len(weightsMagic):]
	short := errors.New("truncated")
	u32 := func() (int, error) {
		if len(b) < 4 {
			return 0, short
		}
		v := binary.LittleEndian.Uint32(b)
		b = b[4:]
		if v > 1<<24 {
			return 0, fmt.Errorf("implausible length %d", v)
		}
		return int(v), nil
	}
	str := func() (string, error) {
		n, err := u32()
		if err != nil {
			return "", err
		}
		if len(b) < n {
			return "", short
		}
		s := string(b[:n])
		b = b[n:]
		return s, nil
	}
	version, err := str()
	if err != nil {
		return nil, err
	}
	count, err := u32()
	if err != nil {
		return nil, err
	}
	ts := map[string]rawTensor{}
	for range count {
		var t rawTensor
		if t.name, err = str(); err != nil {
			return nil, err
		}
		rank, err := u32()
		if err != nil {
			return nil, err
		}
		n := 1
		for range rank {
			d, err := u32()
			if err != nil {
				return nil, err
			}
			t.dims = append(t.dims, d)
			n *= d
			if n > 1<<24 {
				return nil, fmt.Errorf("tensor %s too large", t.name)
			}
		}
		if len(b) < 4*n {
			return nil, fmt.Errorf("tensor %s: %w", t.name, short)
		}
		t.data = make([]float32, n)
		for i := range t.data {
			t.data[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		b = b[4*n:]
		if _, dup := ts[t.name]; dup {
			return nil, fmt.Errorf("tensor %s twice", t.name)
		}
		ts[t.name] = t
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%d bytes after the last tensor", len(b))
	}
	used := 0
	get := func(name string, dims ...int) ([]float32, error) {
		t, ok := ts[name]
		if !ok {
			return nil, fmt.Errorf("no tensor %s", name)
		}
		used++
		if !slices.Equal(t.dims, dims) {
			return nil, fmt.Errorf("tensor %s has shape %v, want %v", name, t.dims, dims)
		}
		return t.data, nil
	}
	m := &model{version: version}
	w, err := get("enc0.w", 128, nBins, 3)
	if err != nil {
		return nil, err
	}
	if m.enc0.b, err = get("enc0.b", 128); err != nil {
		return nil, err
	}
	m.enc0.w = make([][16]float32, 128/4*3*binQuads)
	for o := range 128 {
		for j := range nBins {
			for k := range 3 {
				m.enc0.w[(o/4*3+k)*binQuads+j/4][j%4*4+o%4] = w[(o*nBins+j)*3+k]
			}
		}
	}
	for i, c := range [3]conv{
		{in: 128, out: 64, k: 3, stride: 2, pad: 1},
		{in: 64, out: 64, k: 3, stride: 2, pad: 1},
		{in: 64, out: hidden, k: 3, stride: 1, pad: 1},
	} {
		name := fmt.Sprintf("enc%d", i+1)
		w, err := get(name+".w", c.out, c.in, c.k)
		if err != nil {
			return nil, err
		}
		if c.b, err = get(name+".b", c.out); err != nil {
			return nil, err
		}
		c.w = make([][4]float32, c.out/4*c.k*c.in)
		for o := range c.out {
			for j := range c.in {
				for k := range c.k {
					c.w[(o/4*c.k+k)*c.in+j][o%4] = w[(o*c.in+j)*c.k+k]
				}
			}
		}
		m.enc[i] = c
	}
	lw, err := get("lstm.W", 1, 4*hidden, hidden)
	if err != nil {
		return nil, err
	}
	lr, err := get("lstm.R", 1, 4*hidden, hidden)
	if err != nil {
		return nil, err
	}
	bias, err := get("lstm.B", 1, 8*hidden)
	if err != nil {
		return nil, err
	}
	// Gate rows stay in ONNX order i, o, f, c.
	m.lstmW = make([][4]float32, 4*hidden/4*hidden)
	m.lstmR = make([][16]float32, 4*hidden/4*hidden/4)
	m.bias = make([]float32, 4*hidden)
	for g := range 4 * hidden {
		for j := range hidden {
			m.lstmW[g/4*hidden+j][g%4] = lw[g*hidden+j]
			m.lstmR[(g/4*hidden+j)/4][j%4*4+g%4] = lr[g*hidden+j]
		}
		m.bias[g] = bias[g] + bias[4*hidden+g]
	}
	if m.decW, err = get("dec.w", 1, hidden, 1); err != nil {
		return nil, err
	}
	decB, err := get("dec.b", 1)
	if err != nil {
		return nil, err
	}
	m.decB = decB[0]
	if used != len(ts) {
		// For example stft.w, which weights.bin held before the STFT was
		// computed by FFT.
		return nil, fmt.Errorf("%d tensors, %d of them not used", len(ts), len(ts)-used)
	}
	return m, nil
}
