package sound

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/hal"
)

// BenchmarkAnalyze16kMono measures the CPU time the Analyzer needs for a
// second of 16 kHz mono audio in 20 ms frames: a scene like the sim's
// (speech bursts of 0.5–2 s over noise, one every few seconds), looped.
// One op is one second of audio; ns/audio-s repeats ns/op under the name
// that says so, and audio-s/cpu-s is its inverse.
func BenchmarkAnalyze16kMono(b *testing.B) {
	const fs = 16000
	r := rand.New(rand.NewPCG(1, 1))
	sc := newScene(fs, 30*time.Second)
	sc.addNoise(r, pink, -50, 0, 30*time.Second)
	for k := range 6 {
		sc.addSpeech(r, -30, time.Duration(1+5*k)*time.Second, 500*time.Millisecond+time.Duration(r.IntN(1500))*time.Millisecond)
	}
	pcm := sc.pcm(1)
	a, err := New(Config{}, format(fs, 1))
	if err != nil {
		b.Fatal(err)
	}
	const frame = fs / 50
	fr := hal.AudioFrame{}
	out := make([]Event, 0, 64)
	var seq uint64
	next := func() {
		i := int(seq%uint64(len(pcm)/frame)) * frame
		seq++
		fr.Samples = pcm[i : i+frame]
		fr.Seq = seq
		fr.Time = base.Add(time.Duration(seq) * 20 * time.Millisecond)
		out = a.Process(&fr, out[:0])
	}
	for range 50 * 30 { // warm up: floors settled, every buffer grown
		next()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for range 50 {
			next()
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/audio-s")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "audio-s/cpu-s")
	st := a.Stats()
	b.ReportMetric(float64(st.Spectra)/float64(st.Windows), "spectra/window")
}
