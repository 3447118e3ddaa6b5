// Package silero is a pure-Go inference of the Silero VAD v5 voice
// activity detector (snakers4/silero-vad, silero_vad.onnx of v5.1–v5.1.2),
// 16 kHz path only. The weights in weights.bin are Silero's, taken
// unchanged from that model file: MIT licence, Copyright (c) 2020-present
// Silero Team (LICENSE). scripts/silero-weights extracts them.
//
// A Detector takes 512-sample chunks (32 ms) of 16 kHz mono audio and
// returns, for each, the model's speech probability. It keeps what
// snakers4's OnnxWrapper keeps between calls: the last 64 samples of the
// previous model input (zeros at first) and the LSTM state. It computes in
// float32, allocates nothing per call and agrees with onnxruntime's output
// to about 1e-6 (at most 2.1e-6 over the voice corpus; see the tests).
//
// # The network
//
// The ONNX graph compares sr with 16000 (Equal) and branches with an If:
// the then-branch is the 16 kHz network, the else-branch the 8 kHz one
// (half the sizes; not used here). All weights are Constant nodes inside
// the branch, not initializers. The 16 kHz branch, for one call:
//
//	input  [1, 576]   64 samples of context ‖ the 512-sample chunk
//	Pad    reflect, 0 left, 64 right                       → [1, 640]
//	         x[576+j] = x[574-j], j = 0…63 (the edge sample is not repeated)
//	STFT   Conv, 258 filters × 256 taps, stride 128, no pad, no bias
//	                                                       → [1, 258, 4]
//	         The fixed basis (stft.forward_basis_buffer) is a periodic Hann
//	         window times the 256-point DFT: rows 0…128 are
//	         w[n]·cos(2πkn/256), rows 129…257 are −w[n]·sin(2πkn/256),
//	         w[n] = ½ − ½cos(2πn/256) (checked to 8e-8).
//	         Frames start at samples 0, 128, 256, 384 of the padded input.
//	         Computed here by a real FFT instead (see below).
//	magnitude  sqrt(re² + im²), re = rows 0…128, im = rows 129…257
//	                                                       → [1, 129, 4]
//	Conv   129→128, k 3, stride 1, pad 1, bias; ReLU        → [1, 128, 4]
//	Conv   128→64,  k 3, stride 2, pad 1, bias; ReLU        → [1, 64, 2]
//	Conv    64→64,  k 3, stride 2, pad 1, bias; ReLU        → [1, 64, 1]
//	Conv    64→128, k 3, stride 1, pad 1, bias; ReLU        → [1, 128, 1]
//	Squeeze the time axis                                  → x [1, 128]
//	LSTM   one step, hidden 128, h = state[0], c = state[1]:
//	         g = W·x + Wb + R·h + Rb   (W, R [512, 128]; Wb, Rb [512])
//	         rows of g in ONNX gate order i, o, f, c (128 each):
//	         i = σ(g_i), o = σ(g_o), f = σ(g_f), c̃ = tanh(g_c)
//	         c' = f⊙c + i⊙c̃,  h' = o⊙tanh(c')
//	         stateN = [h', c']                              [2, 1, 128]
//	ReLU(h'), Conv 128→1, k 1, bias; Sigmoid                → [1, 1, 1]
//	ReduceMean over time (one step)                        → output [1, 1]
//
// The encoder convolutions are named reparam_conv: the re-parameterised
// (folded) form of the training-time blocks, plain Conv + bias at
// inference. The LSTM is a PyTorch LSTMCell exported as an ONNX LSTM: the
// graph slices its weight_ih, weight_hh, bias_ih and bias_hh (PyTorch gate
// order i, f, g, o) and concatenates them into ONNX's order i, o, f, c; the
// extractor folds those constant Slice/Concat/Unsqueeze nodes, so weights.bin
// holds W, R and B = Wb ‖ Rb exactly as the LSTM node sees them. The graph
// has a second LSTM node, for a call without a state; it has the same
// weights and is never taken (a state is always passed).
//
// The 8 kHz branch differs only in size (STFT 130 × 128 taps, stride 64,
// reflect pad 32; 65 bins into the first convolution; 256-sample chunks with
// 32 of context). This package implements 16 kHz only.
//
// # Implementation notes
//
// The STFT magnitude is not a Conv here: each frame is multiplied by the
// periodic Hann window and transformed by a 256-point real FFT (a 128-point
// complex radix-2 FFT of the even and odd samples, then split; fft.go), in
// float32 with twiddles computed in float64, and |X[k]| is taken for
// k = 0…128. That is about 5k operations per frame instead of 66k
// multiply-adds, and its error is that of the float32 Conv (TestSTFT).
//
// Tensors are held time-major ([t][channel]). Per chunk the rest is about
// 0.35 million multiply-adds if done densely: 165k in the first
// convolution, 58k in the other three, 131k in the LSTM. The weights are
// reordered at load so that four output rows are computed at once with
// their weights interleaved, and the loops range over small arrays (no
// bounds checks); the ReLU'd inputs of the later convolutions and the
// LSTM's W·x (half to four fifths zeros) are passed as lists of their
// nonzero entries, which skips about a quarter of the multiply-adds; Wb + Rb
// is summed once (as onnxruntime does). The kernels are in dot.go,
// dot_other.go and dot_arm64.go (fused multiply-add chains there). Only the
// order of the float32 sums differs from a plain loop. The sigmoids and
// tanh are evaluated in float64 from a short exp polynomial and rounded
// once: within an ulp of math's (TestActivations).
//
// The numeric kernels (the STFT, the convolutions, the dot products) are
// marked //go:norace: they touch only the Detector's own buffers and the
// read-only weights, from the one goroutine that calls Process, and the
// race detector's instrumentation made the body's tests under -race
// spend minutes in them. Process, Reset and the state they keep are
// instrumented as usual.
//
// Out-of-contract input is made safe rather than propagated: samples are
// clipped to [-1, 1] and NaN is read as 0, so one bad chunk cannot poison the
// LSTM state. onnxruntime would pass such values through.
//
// # weights.bin
//
// All little-endian:
//
//	magic    8 bytes  "SILVAD5\x00"
//	verLen   uint32, then verLen bytes: version text naming the source model
//	count    uint32 tensors, each:
//	  nameLen uint32, name (ASCII)
//	  rank    uint32, dims [rank]uint32
//	  data    [dims[0]·…·dims[rank-1]]float32, row-major (ONNX layout)
//
// The tensors, in this order: enc0.w [128 129 3], enc0.b [128];
// enc1.w [64 128 3], enc1.b [64]; enc2.w [64 64 3], enc2.b [64];
// enc3.w [128 64 3], enc3.b [128]; lstm.W [1 512 128], lstm.R [1 512 128],
// lstm.B [1 1024] (Wb ‖ Rb), gate order i, o, f, c; dec.w [1 128 1],
// dec.b [1]. Conv weights are [out, in, tap]. A file with any other tensor
// is refused.
//
// Earlier files also held stft.w [258 1 256], the STFT's basis (264 KB).
// The extractor now checks that it is the periodic Hann window times the
// DFT, which the FFT computes, and leaves it out.
package silero
