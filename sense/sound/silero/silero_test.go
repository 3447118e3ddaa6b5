package silero

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tobe-body/tobe-body/sense/sound/voicetest"
)

// The reference: testdata/mix.silero.json is what scripts/bench/silero's
// vad.mjs (onnxruntime-node 1.31.1, the official v5 model) wrote for the
// audio testAudio builds. To regenerate it:
//
//	SILERO_WRITE_MIX=/tmp/silero-mix go test -run TestWriteMix ./sense/sound/silero/
//	(cd scripts/bench/silero && node vad.mjs /tmp/silero-mix)
//	cp /tmp/silero-mix/mix.silero.json sense/sound/silero/testdata/
//
// The tolerance, 1e-4, is tighter than the 1e-3 asked for and still safe:
// vad.mjs rounds each probability to 4 decimals (up to 5e-5 of the
// difference), and against unrounded onnxruntime output this package
// differs by at most 1.9e-6 over the whole voice corpus (52 files, float32
// sums in another order, the STFT by FFT; 2.1e-6 on arm64, whose fused
// multiply-adds round differently). A real error in the network (a wrong
// gate, tap or padding) moves probabilities by 1e-2 or more.
const (
	refTolerance = 1e-4
	mixWAV       = "mix.wav"
	mixRef       = "testdata/mix.silero.json"
)

// rng is a small deterministic generator (64-bit LCG, Knuth's MMIX
// constants, top bits), so the test audio is the same on every platform
// and Go version.
type rng uint64

func (r *rng) uniform() float64 { // in [-1, 1)
	*r = *r*6364136223846793005 + 1442695040888963407
	return float64(int64(*r)>>11) / (1 << 52)
}

func (r *rng) gauss() float64 { // approximately N(0, 1): sum of 12 uniforms on [-½, ½)
	var s float64
	for range 12 {
		s += r.uniform() / 2
	}
	return s
}

func dbfs(db float64) float64 { return 32768 * math.Pow(10, db/20) }

func toInt16(x float64) int16 {
	return int16(max(-32768, min(32767, math.Round(x))))
}

// testAudio builds the test's 30 s of 16 kHz audio from testdata/speech.wav
// (8.8 s of pocketsphinx test speech: "go forward", "something", a LibriVox
// sentence) and deterministic noise:
//
//	0.5 s  digital silence
//	8.8 s  the speech as recorded
//	2.0 s  white noise, -40 dBFS RMS
//	3.0 s  brown noise (integrated white, leaky), -25 dBFS RMS
//	8.8 s  the speech at -12 dB under white noise at -38 dBFS RMS
//	2.0 s  a 220 Hz harmonic tone, 8 partials at 1/n, the first at -20 dBFS
//	4.0 s  the first 4 s of the speech +12 dB, clipped at full scale
//	1.0 s  digital silence
//
// then zero-padded to a whole number of 512-sample chunks.
func testAudio(t testing.TB) []int16 {
	speech, err := voicetest.ReadWAV("testdata/speech.wav")
	if err != nil {
		t.Fatal(err)
	}
	var out []int16
	sec := func(s float64) int { return int(s * SampleRate) }
	silence := func(s float64) { out = append(out, make([]int16, sec(s))...) }
	r := rng(0x5113e0)

	silence(0.5)
	out = append(out, speech...)
	for range sec(2) {
		out = append(out, toInt16(dbfs(-40)*r.gauss()))
	}
	var b float64
	brown := make([]float64, sec(3))
	var pow float64
	for i := range brown {
		b = 0.995*b + r.gauss()
		brown[i] = b
		pow += b * b
	}
	g := dbfs(-25) / math.Sqrt(pow/float64(len(brown)))
	for _, v := range brown {
		out = append(out, toInt16(g*v))
	}
	for _, s := range speech {
		out = append(out, toInt16(float64(s)*math.Pow(10, -12.0/20)+dbfs(-38)*r.gauss()))
	}
	for i := range sec(2) {
		var v float64
		for n := 1; n <= 8; n++ {
			v += math.Sin(2*math.Pi*220*float64(n)*float64(i)/SampleRate) / float64(n)
		}
		out = append(out, toInt16(dbfs(-20)*v))
	}
	for _, s := range speech[:sec(4)] {
		out = append(out, toInt16(float64(s)*math.Pow(10, 12.0/20)))
	}
	silence(1)
	if n := len(out) % ChunkSize; n != 0 {
		out = append(out, make([]int16, ChunkSize-n)...)
	}
	return out
}

// TestWriteMix writes the test audio as a WAV file for vad.mjs, when
// SILERO_WRITE_MIX names a directory.
func TestWriteMix(t *testing.T) {
	dir := os.Getenv("SILERO_WRITE_MIX")
	if dir == "" {
		t.Skip("SILERO_WRITE_MIX not set")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	a := testAudio(t)
	if err := voicetest.WriteWAV(filepath.Join(dir, mixWAV), a); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s: %d samples, %.3f s", filepath.Join(dir, mixWAV), len(a), float64(len(a))/SampleRate)
}

type reference struct {
	Rate  int       `json:"rate"`
	Chunk int       `json:"chunk"`
	Probs []float64 `json:"probs"`
}

func readReference(t testing.TB, path string) reference {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ref reference
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if ref.Rate != SampleRate || ref.Chunk != ChunkSize {
		t.Fatalf("%s: rate %d, chunk %d; want %d, %d", path, ref.Rate, ref.Chunk, SampleRate, ChunkSize)
	}
	return ref
}

// compare runs a fresh Detector over audio and checks every chunk against
// ref within tol; it returns the largest difference.
func compare(t *testing.T, name string, audio []int16, ref reference, tol float64) float64 {
	t.Helper()
	n := (len(audio) + ChunkSize - 1) / ChunkSize
	if len(ref.Probs) != n {
		t.Fatalf("%s: reference has %d chunks, audio %d", name, len(ref.Probs), n)
	}
	d := New()
	var chunk [ChunkSize]int16
	var maxDiff float64
	var worst, bad int
	for i := range n {
		clear(chunk[:])
		copy(chunk[:], audio[i*ChunkSize:])
		p := float64(d.ProcessInt16(chunk[:]))
		diff := math.Abs(p - ref.Probs[i])
		if diff > maxDiff {
			maxDiff, worst = diff, i
		}
		if diff > tol {
			bad++
			if bad <= 10 {
				t.Errorf("%s: chunk %d (%.3f s): p = %.6f, onnxruntime %.4f, |Δ| = %.2g > %g",
					name, i, float64(i*ChunkSize)/SampleRate, p, ref.Probs[i], diff, tol)
			}
		}
	}
	if bad > 10 {
		t.Errorf("%s: %d chunks of %d off by more than %g", name, bad, n, tol)
	}
	t.Logf("%s: %d chunks, max |Δp| = %.3g (chunk %d)", name, n, maxDiff, worst)
	return maxDiff
}

// TestMatchesOnnxruntime checks every chunk's probability against
// onnxruntime's on 30 s of speech, noise, tones and clipped speech.
func TestMatchesOnnxruntime(t *testing.T) {
	audio := testAudio(t)
	ref := readReference(t, mixRef)
	compare(t, "mix", audio, ref, refTolerance)

	// The reference must say something: speech and non-speech both occur.
	var hi, lo int
	for _, p := range ref.Probs {
		if p > 0.9 {
			hi++
		}
		if p < 0.1 {
			lo++
		}
	}
	if hi < 100 || lo < 100 {
		t.Errorf("reference has %d chunks > 0.9 and %d < 0.1; expected a mix", hi, lo)
	}
}

// TestCorpus compares against vad.mjs's output for every DIR/NAME.wav that
// has a DIR/NAME.silero.json, when SILERO_REF_DIR names DIR (for example a
// copy of the voice corpus that vad.mjs was run over).
func TestCorpus(t *testing.T) {
	dir := os.Getenv("SILERO_REF_DIR")
	if dir == "" {
		t.Skip("SILERO_REF_DIR not set")
	}
	refs, err := filepath.Glob(filepath.Join(dir, "*.silero.json"))
	if err != nil || len(refs) == 0 {
		t.Fatalf("no *.silero.json in %s", dir)
	}
	var worst float64
	for _, r := range refs {
		name := strings.TrimSuffix(filepath.Base(r), ".silero.json")
		audio, err := voicetest.ReadWAV(filepath.Join(dir, name+".wav"))
		if err != nil {
			t.Error(err)
			continue
		}
		worst = max(worst, compare(t, name, audio, readReference(t, r), refTolerance))
	}
	t.Logf("%d files, max |Δp| = %.3g", len(refs), worst)
}

func TestProcessFloatMatchesInt16(t *testing.T) {
	audio := testAudio(t)[:100*ChunkSize]
	a, b := New(), New()
	f := make([]float32, ChunkSize)
	for i := 0; i < len(audio); i += ChunkSize {
		for j, s := range audio[i : i+ChunkSize] {
			f[j] = float32(s) / 32768
		}
		pa, pb := a.Process(f), b.ProcessInt16(audio[i:i+ChunkSize])
		if pa != pb {
			t.Fatalf("chunk %d: Process %v, ProcessInt16 %v", i/ChunkSize, pa, pb)
		}
	}
}

func TestReset(t *testing.T) {
	audio := testAudio(t)
	d := New()
	first := make([]float32, 40)
	for i := range first {
		first[i] = d.ProcessInt16(audio[i*ChunkSize : (i+1)*ChunkSize])
	}
	d.Reset()
	for i := range first {
		if p := d.ProcessInt16(audio[i*ChunkSize : (i+1)*ChunkSize]); p != first[i] {
			t.Fatalf("after Reset chunk %d: %v, first time %v", i, p, first[i])
		}
	}
}

func TestProcessPanicsOnWrongLength(t *testing.T) {
	for _, n := range []int{0, ChunkSize - 1, ChunkSize + 1, inputSize} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Process(%d samples) did not panic", n)
				}
			}()
			New().Process(make([]float32, n))
		}()
	}
}

func TestOutOfRangeInput(t *testing.T) {
	d := New()
	chunk := make([]float32, ChunkSize)
	for i := range chunk {
		switch i % 4 {
		case 0:
			chunk[i] = float32(math.NaN())
		case 1:
			chunk[i] = float32(math.Inf(1))
		case 2:
			chunk[i] = -math.MaxFloat32
		case 3:
			chunk[i] = 1e30
		}
	}
	for range 5 {
		if p := d.Process(chunk); !(p >= 0 && p <= 1) {
			t.Fatalf("p = %v", p)
		}
	}
	// The state stays usable: silence afterwards gives a finite, low
	// probability.
	clear(chunk)
	var p float32
	for range 50 {
		p = d.Process(chunk)
	}
	if !(p >= 0 && p < 0.1) {
		t.Errorf("silence after bad input: p = %v", p)
	}
}

func TestWeights(t *testing.T) {
	m := loadModel()
	if !strings.HasPrefix(m.version, "silero-vad v5.1") {
		t.Errorf("version %q", m.version)
	}
	// Corrupt files are refused, not half-read.
	for _, b := range [][]byte{nil, weightsBin[:100], weightsBin[:len(weightsBin)-1], append(append([]byte{}, weightsBin...), 0)} {
		if _, err := parseWeights(b); err == nil {
			t.Errorf("parseWeights accepted %d bytes", len(b))
		}
	}
	// So is a file with a tensor more, such as the STFT basis that
	// weights.bin held before the STFT was computed by FFT.
	verLen := int(binary.LittleEndian.Uint32(weightsBin[len(weightsMagic):]))
	countAt := len(weightsMagic) + 4 + verLen
	b := append([]byte{}, weightsBin...)
	binary.LittleEndian.PutUint32(b[countAt:], binary.LittleEndian.Uint32(b[countAt:])+1)
	b = binary.LittleEndian.AppendUint32(b, 6)
	b = append(b, "stft.w"...)
	b = binary.LittleEndian.AppendUint32(b, 1)
	b = binary.LittleEndian.AppendUint32(b, 1)
	b = binary.LittleEndian.AppendUint32(b, 0)
	if _, err := parseWeights(b); err == nil {
		t.Error("parseWeights accepted an extra tensor")
	}
}

// TestSTFT checks the FFT's magnitudes against the model's STFT computed
// directly in float64: a periodic Hann window times the DFT, on random
// frames, a full-scale square wave, a sine and silence.
func TestSTFT(t *testing.T) {
	r := rng(7)
	var frames [][nFFT]float32
	for range 200 {
		var f [nFFT]float32
		for n := range f {
			f[n] = float32(r.uniform())
		}
		frames = append(frames, f)
	}
	var sq, sine, zero [nFFT]float32
	for n := range sq {
		sq[n] = float32(1 - 2*(n/8%2))
		sine[n] = float32(math.Sin(2 * math.Pi * 13.25 * float64(n) / nFFT))
	}
	frames = append(frames, sq, sine, zero)
	var worst, worstRel float64
	for _, f := range frames {
		var got [binQuads][4]float32
		plan.mag(&got, &f)
		for k := range nBins {
			var re, im float64
			for n := range nFFT {
				w := 0.5 - 0.5*math.Cos(2*math.Pi*float64(n)/nFFT)
				a := 2 * math.Pi * float64(k*n%nFFT) / nFFT
				re += w * math.Cos(a) * float64(f[n])
				im -= w * math.Sin(a) * float64(f[n])
			}
			want := math.Hypot(re, im)
			d := math.Abs(float64(got[k/4][k%4]) - want)
			worst = max(worst, d)
			worstRel = max(worstRel, d/max(want, 1))
		}
	}
	// float32 rounding: 2.1e-6 relative at most here, as for the Conv with
	// the model's float32 basis computed directly in float32 (2.3e-6 on
	// the random frames).
	if worstRel > 5e-6 {
		t.Errorf("FFT magnitudes differ from the float64 STFT by %.3g (%.3g relative)", worst, worstRel)
	}
	t.Logf("max |Δ| = %.3g, relative to max(|X|, 1) %.3g", worst, worstRel)
}

func TestAllocs(t *testing.T) {
	d := New()
	chunk := make([]float32, ChunkSize)
	for i := range chunk {
		chunk[i] = float32(math.Sin(float64(i)))
	}
	if n := testing.AllocsPerRun(100, func() { d.Process(chunk) }); n != 0 {
		t.Errorf("Process allocates %v times per call", n)
	}
}

// TestActivations checks the float32 sigmoid and tanh against math's,
// rounded to float32, over a dense sweep: at most one ulp apart.
func TestActivations(t *testing.T) {
	ulps := func(a, b float32) int64 {
		d := int64(math.Float32bits(a)) - int64(math.Float32bits(b))
		if a < 0 || b < 0 {
			d = int64(math.Float32bits(-a)) - int64(math.Float32bits(-b))
		}
		return max(d, -d)
	}
	var worstS, worstT, off int64
	check := func(x float32) {
		s := float32(1 / (1 + math.Exp(-float64(x))))
		th := float32(math.Tanh(float64(x)))
		ds, dt := ulps(sigmoid(x), s), ulps(tanh(x), th)
		if ds > 0 || dt > 0 {
			off++
		}
		worstS, worstT = max(worstS, ds), max(worstT, dt)
		if ds > 1 || dt > 1 {
			t.Errorf("x = %g: sigmoid %g (math %g), tanh %g (math %g)", x, sigmoid(x), s, tanh(x), th)
		}
	}
	for x := float32(-120); x <= 120; x += 1.0 / 4096 {
		check(x)
	}
	for _, x := range []float32{0, 1e-30, -1e-30, 1e-10, -3e-8, math.MaxFloat32, -math.MaxFloat32,
		float32(math.Inf(1)), float32(math.Inf(-1)), math.SmallestNonzeroFloat32} {
		check(x)
	}
	if s := sigmoid(float32(math.NaN())); s == s {
		t.Errorf("sigmoid(NaN) = %v", s)
	}
	t.Logf("max ulps: sigmoid %d, tanh %d; %d of ~%d points differ", worstS, worstT, off, 240*4096)
}

// TestSparse checks that the nonzero lists give back their activation
// exactly, with whole rows of zeros, of nonzeros (the most entries) and
// mixes.
func TestSparse(t *testing.T) {
	r := rng(3)
	var s sparse
	for _, shape := range [][2]int{{4, 128}, {2, 64}, {1, 64}, {1, 128}} {
		n, ch := shape[0], shape[1]
		for _, zeros := range []float64{0, 0.3, 0.8, 1} {
			x := make([]float32, n*ch)
			for i := range x {
				if (r.uniform()+1)/2 >= zeros {
					x[i] = float32(r.uniform())
				}
			}
			s.set(x, ch)
			if s.n != n {
				t.Fatalf("%d×%d: %d rows", n, ch, s.n)
			}
			for ti := range n {
				got := make([]float32, ch)
				for _, q := range s.entries(ti) {
					for m := range 4 {
						if q.v[m] != 0 && got[q.j[m]] != 0 {
							t.Fatalf("%d×%d row %d: channel %d listed twice", n, ch, ti, q.j[m])
						}
						got[q.j[m]] += q.v[m]
					}
				}
				if !slices.Equal(got, x[ti*ch:(ti+1)*ch]) {
					t.Errorf("%d×%d, %.0f%% zeros, row %d: entries give %v", n, ch, 100*zeros, ti, got)
				}
			}
		}
	}
}
