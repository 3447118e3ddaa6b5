package sound

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/sense/sound/voicetest"
)

var (
	voiceExport = flag.String("voice.export", "", "TestVoiceSideBySide: write each scene as DIR/NOISE-SNRdB.wav for a peer detector and stop")
	voiceSilero = flag.String("voice.silero", "", "TestVoiceSideBySide: compare with the Silero VAD probabilities in DIR/NOISE-SNRdB.silero.json")
)

// sileroOut is what scripts/bench/silero/vad.mjs writes for a scene.
type sileroOut struct {
	Rate   int       `json:"rate"`
	Chunk  int       `json:"chunk"`
	Probs  []float64 `json:"probs"`
	AudioS float64   `json:"audio_s"`
	CPUS   float64   `json:"cpu_s"`
}

// sceneName is a scene's file name, without its extension.
func sceneName(noise string, snr float64) string { return fmt.Sprintf("%s-%gdB", noise, snr) }

// voiceScenes are the corpus test's scenes: every noise at 10 dB, or at
// 20, 10 and 5 dB with -voice.table.
func voiceScenes(t *testing.T) (names []string, scenes []voicetest.Scene) {
	t.Helper()
	c, err := voicetest.Load(voicetest.Dir())
	if err != nil {
		t.Skipf("%v", err)
	}
	items := c.Items()
	snrs := []float64{10}
	if *voiceTable {
		snrs = []float64{20, 10, 5}
	}
	noises := []voicetest.Recording{{Name: "white", Samples: voicetest.White(60*voicetest.Rate, 1)}}
	noises = append(noises, c.Noise...)
	for _, n := range noises {
		if *voiceNoise != "" && n.Name != *voiceNoise {
			continue
		}
		for _, snr := range snrs {
			names = append(names, sceneName(n.Name, snr))
			scenes = append(scenes, voicetest.Build(items, n.Samples, snr))
		}
	}
	return names, scenes
}

// ours runs the Analyzer with a detector over a scene and returns its
// segments, its frame decisions (inside a segment) and scores (the
// periodicity or Silero's probability in the window a frame is in, 0
// where the periodicity detector had not the energy to look), and the
// CPU time the analysis took.
func ours(t *testing.T, voice VoiceDetector, sc voicetest.Scene) (segs []voicetest.Span, decided []bool, score []float64, cpu time.Duration) {
	t.Helper()
	a, err := New(Config{Voice: voice}, format(voicetest.Rate, 1))
	if err != nil {
		t.Fatal(err)
	}
	// Each frame's score is the window's or the chunk's its middle is
	// in.
	score = make([]float64, len(sc.Frames))
	mark := func(from, to time.Duration, v float64) {
		for k := max(0, int(from/voicetest.FrameLen)); k < len(score); k++ {
			mid := time.Duration(k)*voicetest.FrameLen + voicetest.FrameLen/2
			if mid >= to {
				break
			}
			if mid >= from {
				score[k] = v
			}
		}
	}
	a.trace = func(w windowTrace) {
		if voice == VoicePeriodicity {
			mark(since(w.start), since(w.end), w.periodicity)
		}
	}
	a.chunkTrace = func(end hal.Mono, p float32) {
		mark(since(end)-sileroChunk, since(end), float64(p))
	}
	c0, _ := voicetest.CPUTime()
	evs, at := feedTimed(a, sc.Samples, voicetest.Rate/50)
	c1, _ := voicetest.CPUTime()
	for i, e := range evs {
		if e.Kind == VoiceEnded {
			segs = append(segs, voicetest.Span{From: since(e.Start), To: since(e.Time), Told: at[i]})
		}
	}
	return segs, inside(segs, len(sc.Frames)), score, c1 - c0
}

// inside marks the frames whose middle is inside a segment.
func inside(segs []voicetest.Span, frames int) []bool {
	out := make([]bool, frames)
	for _, s := range segs {
		for k := max(0, int(s.From/voicetest.FrameLen)); k < frames; k++ {
			mid := time.Duration(k)*voicetest.FrameLen + voicetest.FrameLen/2
			if mid >= s.To {
				break
			}
			out[k] = mid >= s.From
		}
	}
	return out
}

// The Analyzer with each of its voice detectors (periodicity, and
// Silero VAD v5 in pure Go) and the peer, Silero VAD v5 as its authors
// run it (onnxruntime, in scripts/bench/silero), on the corpus test's
// scenes, side by side: the phrases each finds, with the peer's
// probabilities made into segments as its own VADIterator does (0.5 on,
// 0.35 off, 30 ms pad) with the Analyzer's hangover; the frames inside
// the segments against the labelled frames of speech (precision,
// recall); the ROC-AUC of each one's per-frame score (the periodicity,
// Silero's probability); and the CPU time per second of audio. scripts/bench/sound.sh runs it:
// -voice.export writes the scenes, vad.mjs scores them, -voice.silero
// compares.
func TestVoiceSideBySide(t *testing.T) {
	if *voiceExport == "" && *voiceSilero == "" {
		t.Skip("for scripts/bench/sound.sh: -voice.export=DIR, then -voice.silero=DIR")
	}
	names, scenes := voiceScenes(t)
	if *voiceExport != "" {
		for i, sc := range scenes {
			if err := voicetest.WriteWAV(filepath.Join(*voiceExport, names[i]+".wav"), sc.Samples); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	var table strings.Builder
	fmt.Fprintf(&table, "| scene | detector | detected | split | merged | false | onset p50 / p99 ms | end told p50 / p99 ms | frame precision | recall | ROC-AUC | CPU µs per audio-s |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	row := func(name, who string, sc voicetest.Scene, segs []voicetest.Span, decided []bool, score []float64, cpuPerS float64) {
		s := voicetest.Judge(sc, segs)
		fs, err := voicetest.ScoreFrames(sc.Frames, decided, score)
		if err != nil {
			t.Fatal(err)
		}
		ms := func(d time.Duration) int64 { return d.Milliseconds() }
		fmt.Fprintf(&table, "| %s | %s | %d/%d | %d | %d | %d | %d / %d | %d / %d | %.3f | %.3f | %.3f | %.0f |\n", name, who,
			s.Detected, s.Phrases, s.Split, s.Merged, s.False,
			ms(voicetest.Quantile(s.Onset, 0.5)), ms(voicetest.Quantile(s.Onset, 0.99)),
			ms(voicetest.Quantile(s.Told, 0.5)), ms(voicetest.Quantile(s.Told, 0.99)),
			fs.Precision, fs.Recall, fs.AUC, cpuPerS)
		fmt.Printf("voice: scene=%s detector=%s detected=%d phrases=%d split=%d merged=%d false=%d onset_p99_ms=%d told_p99_ms=%d precision=%.4f recall=%.4f auc=%.4f cpu_us_per_s=%.1f\n",
			name, who, s.Detected, s.Phrases, s.Split, s.Merged, s.False, ms(voicetest.Quantile(s.Onset, 0.99)), ms(voicetest.Quantile(s.Told, 0.99)), fs.Precision, fs.Recall, fs.AUC, cpuPerS)
	}
	hangover := Config{}.withDefaults().Hangover
	for i, sc := range scenes {
		audio := float64(len(sc.Samples)) / voicetest.Rate
		for _, v := range []VoiceDetector{VoicePeriodicity, VoiceSilero} {
			segs, decided, score, cpu := ours(t, v, sc)
			row(names[i], string(v), sc, segs, decided, score, cpu.Seconds()/audio*1e6)
		}

		b, err := os.ReadFile(filepath.Join(*voiceSilero, names[i]+".silero.json"))
		if err != nil {
			t.Fatal(err)
		}
		var so sileroOut
		if err := json.Unmarshal(b, &so); err != nil {
			t.Fatalf("%s: %v", names[i], err)
		}
		if so.Rate != voicetest.Rate || so.Chunk <= 0 || math.Abs(float64(len(so.Probs)*so.Chunk)/voicetest.Rate-audio) > 0.1 {
			t.Fatalf("%s: Silero's %d chunks of %d at %d Hz are not the scene's %.1f s", names[i], len(so.Probs), so.Chunk, so.Rate, audio)
		}
		chunk := time.Duration(so.Chunk) * time.Second / voicetest.Rate
		ssegs := voicetest.Streaming(so.Probs, chunk, 0.5, 0.35, hangover, 30*time.Millisecond)
		sscore := make([]float64, len(sc.Frames))
		for k := range sscore {
			sscore[k] = so.Probs[min(len(so.Probs)-1, int((time.Duration(k)*voicetest.FrameLen+voicetest.FrameLen/2)/chunk))]
		}
		row(names[i], "silero-onnx", sc, ssegs, inside(ssegs, len(sc.Frames)), sscore, so.CPUS/so.AudioS*1e6)
	}
	t.Logf("side by side, hangover %v:\n%s", hangover, table.String())
}
