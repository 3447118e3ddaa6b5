// Package main is silero-weights, which extracts the weights of the
// 16 kHz path of the Silero VAD v5 ONNX model into
// sense/sound/silero/weights.bin, the file that package embeds. It
// parses the ONNX protobuf directly with protowire (no generated ONNX
// bindings), so the extraction is reproducible from the model file alone:
//
//	go run ./scripts/silero-weights                       # writes sense/sound/silero/weights.bin
//	go run ./scripts/silero-weights -dump                 # prints the graph (nodes, subgraphs, tensors)
//	go run ./scripts/silero-weights -model M.onnx -out W.bin
//
// The default model is the one the Node benchmark harness installs:
// scripts/bench/silero/node_modules/@ricky0123/vad-web/dist/silero_vad_v5.onnx,
// byte for byte the silero_vad.onnx of snakers4/silero-vad v5.1–v5.1.2
// (SHA-256 2623a295…788f). Model and weights: MIT, Copyright (c) 2020-present
// Silero Team; see sense/sound/silero/LICENSE.
//
// Run it from the repository's root (the default paths are relative). Any
// other model file is refused by its SHA-256: the package hard-codes the
// network's shapes, padding and strides, which the extraction also checks.
// The STFT's fixed basis is not written: the package computes the STFT by a
// real FFT with its own periodic Hann window, so the extraction checks that
// the basis is exactly that window times the DFT (to 1e-6; it is to 8e-8)
// and refuses the model otherwise.
// The weights.bin layout and the network are described in
// sense/sound/silero/doc.go.
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"

	"google.golang.org/protobuf/encoding/protowire"
)

const (
	defaultModel = "scripts/bench/silero/node_modules/@ricky0123/vad-web/dist/silero_vad_v5.onnx"
	defaultOut   = "sense/sound/silero/weights.bin"
	modelSHA256  = "2623a2953f6ff3d2c1e61740c6cdb7168133479b267dfef114a4a3cc5bdd788f"
	version      = "silero-vad v5.1 (silero_vad.onnx sha256 2623a295...788f) 16 kHz"
)

// ONNX field numbers (onnx.proto3).
const (
	modelGraph = 7

	graphNode        = 1
	graphName        = 2
	graphInitializer = 5

	nodeInput     = 1
	nodeOutput    = 2
	nodeName      = 3
	nodeOpType    = 4
	nodeAttribute = 5

	attrName   = 1
	attrF      = 2
	attrI      = 3
	attrS      = 4
	attrT      = 5
	attrG      = 6
	attrFloats = 7
	attrInts   = 8
	attrType   = 20

	tensorDims      = 1
	tensorDataType  = 2
	tensorFloatData = 4
	tensorInt64Data = 7
	tensorName      = 8
	tensorRawData   = 9

	dtFloat = 1
	dtInt64 = 7
)

type tensor struct {
	name   string
	dims   []int64
	dtype  int64
	floats []float32
	ints   []int64
}

type attribute struct {
	name   string
	typ    int64
	f      float32
	i      int64
	s      string
	t      *tensor
	g      *graph
	floats []float32
	ints   []int64
}

type node struct {
	name, op string
	inputs   []string
	outputs  []string
	attrs    []*attribute
}

type graph struct {
	name  string
	nodes []*node
	inits []*tensor
}

// fields calls fn for each field of the message b.
func fields(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var u uint32
			u, n = protowire.ConsumeFixed32(b)
			x = uint64(u)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := fn(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}

// varints appends a repeated int64 field's value(s): one varint, or packed.
func varints(typ protowire.Type, v []byte, x uint64, dst []int64) ([]int64, error) {
	if typ == protowire.VarintType {
		return append(dst, int64(x)), nil
	}
	for len(v) > 0 {
		u, n := protowire.ConsumeVarint(v)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		dst = append(dst, int64(u))
		v = v[n:]
	}
	return dst, nil
}

func float32s(typ protowire.Type, v []byte, x uint64, dst []float32) ([]float32, error) {
	if typ == protowire.Fixed32Type {
		return append(dst, math.Float32frombits(uint32(x))), nil
	}
	if len(v)%4 != 0 {
		return nil, errors.New("packed float32 field not a multiple of 4 bytes")
	}
	for i := 0; i < len(v); i += 4 {
		dst = append(dst, math.Float32frombits(binary.LittleEndian.Uint32(v[i:])))
	}
	return dst, nil
}

func parseTensor(b []byte) (*tensor, error) {
	t := &tensor{}
	var raw []byte
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		var err error
		switch num {
		case tensorDims:
			t.dims, err = varints(typ, v, x, t.dims)
		case tensorDataType:
			t.dtype = int64(x)
		case tensorFloatData:
			t.floats, err = float32s(typ, v, x, t.floats)
		case tensorInt64Data:
			t.ints, err = varints(typ, v, x, t.ints)
		case tensorName:
			t.name = string(v)
		case tensorRawData:
			raw = v
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if raw != nil {
		switch t.dtype {
		case dtFloat:
			if len(raw)%4 != 0 {
				return nil, fmt.Errorf("tensor %q: raw_data length %d not a multiple of 4", t.name, len(raw))
			}
			for i := 0; i < len(raw); i += 4 {
				t.floats = append(t.floats, math.Float32frombits(binary.LittleEndian.Uint32(raw[i:])))
			}
		case dtInt64:
			if len(raw)%8 != 0 {
				return nil, fmt.Errorf("tensor %q: raw_data length %d not a multiple of 8", t.name, len(raw))
			}
			for i := 0; i < len(raw); i += 8 {
				t.ints = append(t.ints, int64(binary.LittleEndian.Uint64(raw[i:])))
			}
		}
	}
	return t, nil
}

func parseAttr(b []byte) (*attribute, error) {
	a := &attribute{}
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		var err error
		switch num {
		case attrName:
			a.name = string(v)
		case attrType:
			a.typ = int64(x)
		case attrF:
			a.f = math.Float32frombits(uint32(x))
		case attrI:
			a.i = int64(x)
		case attrS:
			a.s = string(v)
		case attrT:
			a.t, err = parseTensor(v)
		case attrG:
			a.g, err = parseGraph(v)
		case attrFloats:
			a.floats, err = float32s(typ, v, x, a.floats)
		case attrInts:
			a.ints, err = varints(typ, v, x, a.ints)
		}
		return err
	})
	return a, err
}

func parseNode(b []byte) (*node, error) {
	n := &node{}
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch num {
		case nodeInput:
			n.inputs = append(n.inputs, string(v))
		case nodeOutput:
			n.outputs = append(n.outputs, string(v))
		case nodeName:
			n.name = string(v)
		case nodeOpType:
			n.op = string(v)
		case nodeAttribute:
			a, err := parseAttr(v)
			if err != nil {
				return err
			}
			n.attrs = append(n.attrs, a)
		}
		return nil
	})
	return n, err
}

func parseGraph(b []byte) (*graph, error) {
	g := &graph{}
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch num {
		case graphNode:
			n, err := parseNode(v)
			if err != nil {
				return err
			}
			g.nodes = append(g.nodes, n)
		case graphName:
			g.name = string(v)
		case graphInitializer:
			t, err := parseTensor(v)
			if err != nil {
				return err
			}
			g.inits = append(g.inits, t)
		}
		return nil
	})
	return g, err
}

func parseModel(b []byte) (*graph, error) {
	var g *graph
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		if num == modelGraph {
			var err error
			g, err = parseGraph(v)
			return err
		}
		return nil
	})
	if err == nil && g == nil {
		err = errors.New("no graph in model")
	}
	return g, err
}

func (t *tensor) String() string {
	s := fmt.Sprintf("%s dtype=%d dims=%v", t.name, t.dtype, t.dims)
	switch {
	case len(t.floats) > 0 && len(t.floats) <= 8:
		s += fmt.Sprintf(" floats=%v", t.floats)
	case len(t.floats) > 0:
		s += fmt.Sprintf(" (%d floats)", len(t.floats))
	case len(t.ints) > 0 && len(t.ints) <= 8:
		s += fmt.Sprintf(" ints=%v", t.ints)
	case len(t.ints) > 0:
		s += fmt.Sprintf(" (%d ints)", len(t.ints))
	}
	return s
}

func dump(g *graph, indent string) {
	fmt.Printf("%sgraph %q: %d nodes, %d initializers\n", indent, g.name, len(g.nodes), len(g.inits))
	for _, t := range g.inits {
		fmt.Printf("%s  init %v\n", indent, t)
	}
	for _, n := range g.nodes {
		fmt.Printf("%s  %s %q %v -> %v\n", indent, n.op, n.name, n.inputs, n.outputs)
		for _, a := range n.attrs {
			switch {
			case a.g != nil:
				fmt.Printf("%s    @%s:\n", indent, a.name)
				dump(a.g, indent+"      ")
			case a.t != nil:
				fmt.Printf("%s    @%s = tensor %v\n", indent, a.name, a.t)
			case len(a.ints) > 0:
				fmt.Printf("%s    @%s = %v\n", indent, a.name, a.ints)
			case len(a.floats) > 0:
				fmt.Printf("%s    @%s = %v\n", indent, a.name, a.floats)
			case a.s != "":
				fmt.Printf("%s    @%s = %q\n", indent, a.name, a.s)
			case a.typ == 1:
				fmt.Printf("%s    @%s = %g\n", indent, a.name, a.f)
			default:
				fmt.Printf("%s    @%s = %d\n", indent, a.name, a.i)
			}
		}
	}
}

// collect gathers every float tensor of g and its subgraphs, by name: the
// initializers and the values of Constant nodes (named after their output).
func collect(g *graph, into map[string]*tensor) {
	for _, t := range g.inits {
		into[t.name] = t
	}
	for _, n := range g.nodes {
		for _, a := range n.attrs {
			if n.op == "Constant" && a.name == "value" && a.t != nil && len(n.outputs) == 1 {
				t := *a.t
				t.name = n.outputs[0]
				into[t.name] = &t
			}
			if a.g != nil {
				collect(a.g, into)
			}
		}
	}
}

// sixteenK returns the 16 kHz branch: the top graph is
//
//	Constant 16000 → Equal(sr, 16000) → If(then: 16 kHz, else: 8 kHz)
//
// and this checks that shape before taking the If's then_branch.
func sixteenK(g *graph) (*graph, error) {
	consts := map[string]*tensor{}
	collect(&graph{nodes: g.nodes, inits: g.inits}, consts)
	eq := map[string]bool{} // outputs of Equal(sr, 16000)
	for _, n := range g.nodes {
		if n.op == "Equal" && len(n.inputs) == 2 && len(n.outputs) == 1 {
			for i, in := range n.inputs {
				c := consts[n.inputs[1-i]]
				if in == "sr" && c != nil && len(c.ints) == 1 && c.ints[0] == 16000 {
					eq[n.outputs[0]] = true
				}
			}
		}
	}
	for _, n := range g.nodes {
		if n.op != "If" || len(n.inputs) != 1 || !eq[n.inputs[0]] {
			continue
		}
		for _, a := range n.attrs {
			if a.name == "then_branch" && a.g != nil {
				return a.g, nil
			}
		}
	}
	return nil, errors.New("no If(Equal(sr, 16000)) with a then_branch in the top graph")
}

func main() {
	modelPath := flag.String("model", defaultModel, "Silero VAD v5 ONNX model")
	outPath := flag.String("out", defaultOut, "weights file to write")
	doDump := flag.Bool("dump", false, "print the model graph and exit")
	flag.Parse()
	if err := run(*modelPath, *outPath, *doDump); err != nil {
		fmt.Fprintln(os.Stderr, "silero-weights:", err)
		os.Exit(1)
	}
}

func run(modelPath, outPath string, doDump bool) error {
	b, err := os.ReadFile(modelPath)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != modelSHA256 {
		return fmt.Errorf("%s has SHA-256 %s, not the v5.1 model's %s", modelPath, got, modelSHA256)
	}
	top, err := parseModel(b)
	if err != nil {
		return fmt.Errorf("parse %s: %w", modelPath, err)
	}
	if doDump {
		dump(top, "")
		return nil
	}
	g16, err := sixteenK(top)
	if err != nil {
		return err
	}
	all := map[string]*tensor{}
	collect(g16, all)
	ts, err := extract(g16, all)
	if err != nil {
		return err
	}
	out := encode(ts)
	if err := os.WriteFile(outPath, out, 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s: %d bytes, %d tensors\n", outPath, len(out), len(ts))
	for _, t := range ts {
		fmt.Printf("  %-16s %v (from %s)\n", t.name, t.dims, t.from)
	}
	return nil
}

type outTensor struct {
	name, from string
	dims       []int64
	data       []float32
}

// extract finds the 16 kHz path's weights in the order the package expects:
// four encoder convolutions (weight, bias), the LSTM (W, R, B) and the
// decoder's 1×1 convolution (weight, bias). The STFT basis is checked to be
// the Hann-windowed DFT the package computes by FFT, and not written. Each
// tensor is found through the node that consumes it, so a renamed tensor is
// still found and a changed network is refused.
func extract(g *graph, all map[string]*tensor) ([]outTensor, error) {
	var convs, lstms []*node
	for _, n := range walk(g) {
		switch n.op {
		case "Conv":
			convs = append(convs, n)
		case "LSTM":
			lstms = append(lstms, n)
		}
	}
	var reflect int
	for _, n := range walk(g) {
		if n.op == "Pad" {
			for _, a := range n.attrs {
				if a.name == "mode" && a.s == "reflect" {
					reflect++
				}
			}
		}
	}
	if reflect != 1 {
		return nil, fmt.Errorf("16 kHz path has %d reflect Pad nodes, want 1 (before the STFT)", reflect)
	}
	if len(convs) != 6 {
		return nil, fmt.Errorf("16 kHz path has %d Conv nodes, want 6 (STFT, 4 encoder, decoder)", len(convs))
	}
	// The exported decoder holds two LSTM nodes, one under "state given"
	// and one under "no state" (zeros); the detector always passes a state.
	// Both must see the same weights; lstmWeights checks that.
	if len(lstms) == 0 {
		return nil, errors.New("16 kHz path has no LSTM node")
	}
	var out []outTensor
	add := func(name, src string, t *tensor, shape ...int64) error {
		if t == nil {
			return fmt.Errorf("tensor %q not found as an initializer or Constant", src)
		}
		if t.dtype != dtFloat {
			return fmt.Errorf("tensor %q has data type %d, want float", src, t.dtype)
		}
		if fmt.Sprint(t.dims) != fmt.Sprint(shape) {
			return fmt.Errorf("tensor %q has shape %v, want %v", src, t.dims, shape)
		}
		if int64(len(t.floats)) != numel(shape) {
			return fmt.Errorf("tensor %q has %d values, want %d", src, len(t.floats), numel(shape))
		}
		out = append(out, outTensor{name: name, from: src, dims: shape, data: t.floats})
		return nil
	}
	type convSpec struct {
		name        string
		out, in, k  int64
		stride, pad int64
		bias        bool
	}
	specs := []convSpec{
		{"stft", 258, 1, 256, 128, 0, false},
		{"enc0", 128, 129, 3, 1, 1, true},
		{"enc1", 64, 128, 3, 2, 1, true},
		{"enc2", 64, 64, 3, 2, 1, true},
		{"enc3", 128, 64, 3, 1, 1, true},
		{"dec", 1, 128, 1, 1, 0, true},
	}
	for i, s := range specs {
		if s.name == "dec" {
			// Keep the layout in the order of computation: LSTM before decoder.
			if err := lstmWeights(g, lstms, all, func(name, src string, t *tensor, shape ...int64) error {
				return add(name, src, t, shape...)
			}); err != nil {
				return nil, err
			}
		}
		c := convs[i]
		if err := checkConv(c, s.k, s.stride, s.pad); err != nil {
			return nil, fmt.Errorf("%s (%s): %w", s.name, c.name, err)
		}
		if err := add(s.name+".w", c.inputs[1], all[c.inputs[1]], s.out, s.in, s.k); err != nil {
			return nil, err
		}
		if s.name == "stft" {
			// The package computes the STFT with an FFT and a Hann window
			// of its own: check that this basis is exactly that, then
			// leave it out of weights.bin.
			if err := checkSTFTBasis(out[len(out)-1].data); err != nil {
				return nil, fmt.Errorf("%s (%s): %w", s.name, c.inputs[1], err)
			}
			out = out[:len(out)-1]
		}
		if s.bias {
			if len(c.inputs) < 3 {
				return nil, fmt.Errorf("%s (%s) has no bias", s.name, c.name)
			}
			if err := add(s.name+".b", c.inputs[2], all[c.inputs[2]], s.out); err != nil {
				return nil, err
			}
		} else if len(c.inputs) > 2 && c.inputs[2] != "" {
			return nil, fmt.Errorf("%s (%s) has a bias, want none", s.name, c.name)
		}
	}
	return out, nil
}

// stftTolerance bounds |basis − Hann·DFT|, entry by entry. The model's
// basis is that product rounded to float32 (it differs by at most 8e-8);
// any other window, transform, scaling or row order differs by 1e-3 or more.
const stftTolerance = 1e-6

// checkSTFTBasis checks that the STFT Conv's filters [258][1][256] are a
// periodic Hann window w[n] = ½ − ½cos(2πn/256) times the 256-point DFT:
// row k (k ≤ 128) is w[n]·cos(2πkn/256) and row 129+k is −w[n]·sin(2πkn/256),
// so that the magnitude sqrt(row k² + row (129+k)²) the graph takes next is
// |X[k]| of the windowed frame, which the package computes by a real FFT.
func checkSTFTBasis(b []float32) error {
	const n, bins = 256, 129
	if len(b) != 2*bins*n {
		return fmt.Errorf("STFT basis has %d values, want %d", len(b), 2*bins*n)
	}
	var worst float64
	for k := range bins {
		for j := range n {
			w := 0.5 - 0.5*math.Cos(2*math.Pi*float64(j)/n)
			a := 2 * math.Pi * float64(k*j%n) / n
			worst = max(worst,
				math.Abs(float64(b[k*n+j])-w*math.Cos(a)),
				math.Abs(float64(b[(bins+k)*n+j])+w*math.Sin(a)))
		}
	}
	if !(worst <= stftTolerance) {
		return fmt.Errorf("STFT basis differs from a periodic Hann window times the DFT by %.3g (> %g): not the STFT the package computes", worst, stftTolerance)
	}
	fmt.Printf("STFT basis is a periodic Hann window times the 256-point DFT (max |Δ| %.2g): computed by FFT, not stored\n", worst)
	return nil
}

// lstmWeights checks the LSTM node's attributes and evaluates its W, R and
// B inputs. In the export they are not stored: the graph computes them from
// the PyTorch LSTMCell's weight_ih, weight_hh, bias_ih and bias_hh (gate
// rows i, f, g, o) with Slice and Concat into ONNX's gate order i, o, f, c,
// then Unsqueeze adds the direction axis. Folding those few constant ops
// here writes exactly the tensors the LSTM node sees.
func lstmWeights(g *graph, lstms []*node, all map[string]*tensor, add func(name, src string, t *tensor, shape ...int64) error) error {
	for _, lstm := range lstms {
		for _, a := range lstm.attrs {
			switch a.name {
			case "hidden_size":
				if a.i != 128 {
					return fmt.Errorf("LSTM hidden_size %d, want 128", a.i)
				}
			case "direction":
				if a.s != "forward" {
					return fmt.Errorf("LSTM direction %q, want forward", a.s)
				}
			default:
				return fmt.Errorf("LSTM has attribute %s, not handled", a.name)
			}
		}
	}
	producer := map[string]*node{}
	for _, n := range walk(g) {
		for _, o := range n.outputs {
			producer[o] = n
		}
	}
	f := folder{producer: producer, consts: all}
	for i, w := range []struct {
		name  string
		shape []int64
	}{
		{"lstm.W", []int64{1, 512, 128}},
		{"lstm.R", []int64{1, 512, 128}},
		{"lstm.B", []int64{1, 1024}},
	} {
		var t *tensor
		var src string
		for _, lstm := range lstms {
			if len(lstm.inputs) < 4 {
				return fmt.Errorf("the LSTM node %s has inputs %v, want X, W, R, B and more", lstm.name, lstm.inputs)
			}
			ti, err := f.eval(lstm.inputs[1+i])
			if err != nil {
				return fmt.Errorf("LSTM input %s: %w", w.name, err)
			}
			if t == nil {
				t, src = ti, lstm.inputs[1+i]
			} else if fmt.Sprint(t.dims) != fmt.Sprint(ti.dims) || fmt.Sprint(t.floats) != fmt.Sprint(ti.floats) {
				return fmt.Errorf("LSTM nodes %s and %s have different %s", lstms[0].name, lstm.name, w.name)
			}
		}
		if err := add(w.name, src, t, w.shape...); err != nil {
			return err
		}
	}
	return nil
}

// folder evaluates the constant subexpressions feeding the LSTM: Constant,
// Slice (on axis 0, step 1), Concat (axis 0) and Unsqueeze (axis 0). Any
// other op is refused.
type folder struct {
	producer map[string]*node
	consts   map[string]*tensor
}

func (f folder) eval(name string) (*tensor, error) {
	if t, ok := f.consts[name]; ok {
		return t, nil
	}
	n := f.producer[name]
	if n == nil {
		return nil, fmt.Errorf("%q has no producer", name)
	}
	args := make([]*tensor, len(n.inputs))
	for i, in := range n.inputs {
		if in == "" {
			continue
		}
		t, err := f.eval(in)
		if err != nil {
			return nil, err
		}
		args[i] = t
	}
	scalar := func(i int) (int64, error) {
		if i >= len(args) || args[i] == nil || len(args[i].ints) != 1 {
			return 0, fmt.Errorf("%s %s: input %d is not a one-element int64 tensor", n.op, n.name, i)
		}
		return args[i].ints[0], nil
	}
	switch n.op {
	case "Slice":
		x := args[0]
		start, err := scalar(1)
		if err != nil {
			return nil, err
		}
		end, err := scalar(2)
		if err != nil {
			return nil, err
		}
		if axis, err := scalar(3); err != nil || axis != 0 {
			return nil, fmt.Errorf("slice node %s: axis not 0", n.name)
		}
		if len(args) > 4 {
			if step, err := scalar(4); err != nil || step != 1 {
				return nil, fmt.Errorf("slice node %s: step not 1", n.name)
			}
		}
		if x.dtype != dtFloat || len(x.dims) == 0 || start < 0 || end > x.dims[0] || start >= end {
			return nil, fmt.Errorf("slice node %s: [%d:%d] of %v", n.name, start, end, x.dims)
		}
		row := numel(x.dims[1:])
		dims := append([]int64{end - start}, x.dims[1:]...)
		return &tensor{name: name, dtype: dtFloat, dims: dims, floats: x.floats[start*row : end*row]}, nil
	case "Concat":
		if len(n.attrs) != 1 || n.attrs[0].name != "axis" || n.attrs[0].i != 0 {
			return nil, fmt.Errorf("concat node %s: not on axis 0", n.name)
		}
		t := &tensor{name: name, dtype: dtFloat}
		for _, a := range args {
			if a.dtype != dtFloat || len(a.dims) == 0 {
				return nil, fmt.Errorf("concat node %s: input %v", n.name, a.dims)
			}
			if t.dims == nil {
				t.dims = append([]int64{0}, a.dims[1:]...)
			} else if fmt.Sprint(t.dims[1:]) != fmt.Sprint(a.dims[1:]) {
				return nil, fmt.Errorf("concat node %s: %v after %v", n.name, a.dims, t.dims)
			}
			t.dims[0] += a.dims[0]
			t.floats = append(t.floats, a.floats...)
		}
		return t, nil
	case "Unsqueeze":
		if axis, err := scalar(1); err != nil || axis != 0 {
			return nil, fmt.Errorf("unsqueeze node %s: axis not 0", n.name)
		}
		x := args[0]
		return &tensor{name: name, dtype: x.dtype, dims: append([]int64{1}, x.dims...), floats: x.floats}, nil
	}
	return nil, fmt.Errorf("%s %s: op not foldable here", n.op, n.name)
}

func numel(dims []int64) int64 {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	return n
}

// walk lists the nodes of g and its subgraphs in order, depth first.
func walk(g *graph) []*node {
	var ns []*node
	for _, n := range g.nodes {
		ns = append(ns, n)
		for _, a := range n.attrs {
			if a.g != nil {
				ns = append(ns, walk(a.g)...)
			}
		}
	}
	return ns
}

func checkConv(n *node, k, stride, pad int64) error {
	var ks, ss, ps, ds []int64
	group := int64(1)
	for _, a := range n.attrs {
		switch a.name {
		case "kernel_shape":
			ks = a.ints
		case "strides":
			ss = a.ints
		case "pads":
			ps = a.ints
		case "dilations":
			ds = a.ints
		case "group":
			group = a.i
		case "auto_pad":
			if a.s != "" && a.s != "NOTSET" {
				return fmt.Errorf("auto_pad %q", a.s)
			}
		}
	}
	if fmt.Sprint(ks) != fmt.Sprint([]int64{k}) {
		return fmt.Errorf("kernel_shape %v, want [%d]", ks, k)
	}
	if ss == nil {
		ss = []int64{1}
	}
	if fmt.Sprint(ss) != fmt.Sprint([]int64{stride}) {
		return fmt.Errorf("strides %v, want [%d]", ss, stride)
	}
	if ps == nil {
		ps = []int64{0, 0}
	}
	if fmt.Sprint(ps) != fmt.Sprint([]int64{pad, pad}) {
		return fmt.Errorf("pads %v, want [%d %d]", ps, pad, pad)
	}
	if ds != nil && fmt.Sprint(ds) != "[1]" {
		return fmt.Errorf("dilations %v", ds)
	}
	if group != 1 {
		return fmt.Errorf("group %d", group)
	}
	return nil
}

// encode writes the weights.bin layout (all little-endian):
//
//	magic   [8]byte "SILVAD5\x00"
//	verLen  uint32, then verLen bytes of version text
//	count   uint32 tensors, then per tensor:
//	  nameLen uint32, name bytes, rank uint32, dims [rank]uint32,
//	  data [prod(dims)]float32
func encode(ts []outTensor) []byte {
	var buf bytes.Buffer
	u32 := func(v uint32) { binary.Write(&buf, binary.LittleEndian, v) }
	buf.WriteString("SILVAD5\x00")
	u32(uint32(len(version)))
	buf.WriteString(version)
	u32(uint32(len(ts)))
	for _, t := range ts {
		u32(uint32(len(t.name)))
		buf.WriteString(t.name)
		u32(uint32(len(t.dims)))
		for _, d := range t.dims {
			u32(uint32(d))
		}
		for _, f := range t.data {
			u32(math.Float32bits(f))
		}
	}
	return buf.Bytes()
}
