package silero

import (
	"encoding/binary"
	"math"
	"testing"
)

// FuzzProcess feeds arbitrary chunks: the input's bytes, as little-endian
// float32 samples (any bit pattern: NaN, ±Inf, huge, denormal), fill one
// chunk after another, the last one zero-padded; the first byte chooses
// whether the chunks go in as float32 or (the same bytes as int16) through
// ProcessInt16, and whether to Reset half-way. Process must not panic and
// every probability must be a number in [0, 1]; out-of-range and NaN
// samples are clipped and zeroed, so this holds for any input.
//
// An exec takes a few milliseconds, so minimising each new input can use
// the default -fuzzminimizetime of 60 s and look stalled; for example
//
//	go test -run '^$' -fuzz FuzzProcess -fuzztime 2m -fuzzminimizetime 2s ./sense/sound/silero/
func FuzzProcess(f *testing.F) {
	f.Add([]byte{0})
	f.Add(append([]byte{1}, make([]byte, 4*ChunkSize)...))
	loud := []byte{2}
	for i := range 3 * ChunkSize {
		loud = binary.LittleEndian.AppendUint32(loud, math.Float32bits(float32(math.Sin(float64(i)/7))))
	}
	f.Add(loud)
	nan := []byte{0}
	for range ChunkSize {
		nan = binary.LittleEndian.AppendUint32(nan, 0x7fc00000)
	}
	f.Add(nan)
	d := New()
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		mode, b := b[0], b[1:]
		if len(b) > 4*4*ChunkSize { // at most 4 float32 chunks (8 int16 ones): execs stay cheap
			b = b[:4*4*ChunkSize]
		}
		d.Reset()
		fc := make([]float32, ChunkSize)
		ic := make([]int16, ChunkSize)
		bytesPerChunk := 4 * ChunkSize
		if mode&1 != 0 {
			bytesPerChunk = 2 * ChunkSize
		}
		chunks := (len(b) + bytesPerChunk - 1) / bytesPerChunk
		for c := range max(chunks, 1) {
			if mode&2 != 0 && c == chunks/2 {
				d.Reset()
			}
			var p float32
			if mode&1 != 0 {
				clear(ic)
				for i := range ic {
					if o := c*bytesPerChunk + 2*i; o+2 <= len(b) {
						ic[i] = int16(binary.LittleEndian.Uint16(b[o:]))
					}
				}
				p = d.ProcessInt16(ic)
			} else {
				clear(fc)
				for i := range fc {
					if o := c*bytesPerChunk + 4*i; o+4 <= len(b) {
						fc[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[o:]))
					}
				}
				p = d.Process(fc)
			}
			if !(p >= 0 && p <= 1) {
				t.Fatalf("chunk %d: probability %v", c, p)
			}
		}
	})
}
