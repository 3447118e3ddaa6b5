package sound

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/sense/sound/voicetest"
)

// BenchmarkAnalyze16kMono measures what the Analyzer costs for a second
// of 16 kHz mono audio in 20 ms frames, with each voice detector. The
// audio is a scene like the sim's, looped: speech bursts of 0.5–2 s, one
// every few seconds, over pink noise. One op is one second of audio.
//
// cpu-ns/audio-s is the CPU time the process used per second of audio
// (getrusage: user and system), which a shared machine does not inflate
// the way it does wall time; run it with GOMAXPROCS=1 so that it is this
// goroutine's. ns/audio-s is the wall time. spectra/window is the share
// of windows that needed a spectrum.
func BenchmarkAnalyze16kMono(b *testing.B) {
	benchDetectors(b, 16000, 1, false)
}

// BenchmarkAnalyze16kMonoSpeech is the same on speech without pauses
// between bursts, where every window needs a spectrum: the most a second
// of audio costs.
func BenchmarkAnalyze16kMonoSpeech(b *testing.B) {
	benchDetectors(b, 16000, 1, true)
}

// BenchmarkAnalyze48kStereo is the sim scene at 48 kHz, two channels.
func BenchmarkAnalyze48kStereo(b *testing.B) {
	benchDetectors(b, 48000, 2, false)
}

func benchDetectors(b *testing.B, fs, ch int, busy bool) {
	for _, v := range []VoiceDetector{VoiceSilero, VoicePeriodicity} {
		b.Run(string(v), func(b *testing.B) { benchAnalyze(b, v, fs, ch, busy) })
	}
}

func benchAnalyze(b *testing.B, voice VoiceDetector, fs, ch int, busy bool) {
	r := rand.New(rand.NewPCG(1, 1))
	const length = 30 * time.Second
	sc := newScene(fs, length)
	sc.addNoise(r, pink, -55, 0, length)
	for k := range 6 {
		at, d := time.Duration(1+5*k)*time.Second, 500*time.Millisecond+time.Duration(r.IntN(1500))*time.Millisecond
		if busy {
			at, d = time.Duration(5*k)*time.Second, 5*time.Second
		}
		sc.addSpeech(r, -45, at, d)
	}
	pcm := sc.pcm(ch)
	a, err := New(Config{Voice: voice}, format(fs, ch))
	if err != nil {
		b.Fatal(err)
	}
	frame := fs / 50 * ch
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
	for range 50 * 30 { // settle the floors, once round the scene
		next()
	}
	st0 := a.Stats()
	cpu0, cpuOK := voicetest.CPUTime()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for range 50 {
			next()
		}
	}
	b.StopTimer()
	cpu1, _ := voicetest.CPUTime()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/audio-s")
	if cpuOK {
		b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/audio-s")
	}
	st := a.Stats()
	b.ReportMetric(float64(st.Spectra-st0.Spectra)/float64(st.Windows-st0.Windows), "spectra/window")
}
