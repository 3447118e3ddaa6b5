package silero

import (
	"testing"

	"github.com/tobe-body/tobe-body/sense/sound/voicetest"
)

// BenchmarkDetector runs the detector over the test audio, one chunk (32 ms)
// per op, and reports the time per second of audio: wall (ns/audio-s) and
// the process's CPU (cpu-ns/audio-s). Pin it to compare with the Pi:
//
//	GOMAXPROCS=1 taskset -c 1 go test -run '^$' -bench Detector -benchtime 5s ./sense/sound/silero/
func BenchmarkDetector(b *testing.B) {
	audio := testAudio(b)
	n := len(audio) / ChunkSize
	chunks := make([][]float32, n)
	for i := range chunks {
		chunks[i] = make([]float32, ChunkSize)
		for j, s := range audio[i*ChunkSize : (i+1)*ChunkSize] {
			chunks[i][j] = float32(s) / 32768
		}
	}
	d := New()
	var i int
	var sink float32
	b.ReportAllocs()
	cpu0, cpuOK := voicetest.CPUTime()
	b.ResetTimer()
	for b.Loop() {
		sink += d.Process(chunks[i])
		if i++; i == n {
			i = 0
		}
	}
	b.StopTimer()
	cpu1, _ := voicetest.CPUTime()
	const chunksPerSecond = float64(SampleRate) / ChunkSize
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)*chunksPerSecond, "ns/audio-s")
	if cpuOK {
		b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/float64(b.N)*chunksPerSecond, "cpu-ns/audio-s")
	}
	if sink < 0 {
		b.Fatal(sink)
	}
}
