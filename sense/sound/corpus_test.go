package sound

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/sense/sound/voicetest"
)

var (
	voiceTable = flag.Bool("voice.table", false, "TestVoiceOnRecordedSpeech: every noise at 20, 10 and 5 dB, printed as a table")
	voiceNoise = flag.String("voice.noise", "", "TestVoiceOnRecordedSpeech: only this noise (white, city, country, forest)")
)

// voiceSegments runs an Analyzer with cfg over a scene and returns its voice
// segments, each with when its end was told.
func voiceSegments(t testing.TB, cfg Config, sc voicetest.Scene) []voicetest.Span {
	t.Helper()
	a, err := New(cfg, format(voicetest.Rate, 1))
	if err != nil {
		t.Fatal(err)
	}
	evs, at := feedTimed(a, sc.Samples, voicetest.Rate/50)
	var out []voicetest.Span
	for i, e := range evs {
		if e.Kind == VoiceEnded {
			out = append(out, voicetest.Span{From: since(e.Start), To: since(e.Time), Told: at[i]})
		}
	}
	return out
}

// The voice detector on recorded speech (scripts/voice-corpus.sh: people
// saying card names, game calls and tiles, sentences read aloud, and two
// calls of one voice joined by a pause of 200 to 550 ms), each phrase
// 3 s from the next, over recorded ambiences (a city, the country, a
// forest) and white noise. At 10 dB SNR every phrase is found once
// (none split into two segments, none merged with another), nothing is
// found where no one speaks, and the onset is at most 150 ms off the
// label's (p99). With -voice.table, every noise at 20, 10 and 5 dB.
func TestVoiceOnRecordedSpeech(t *testing.T) {
	c, err := voicetest.Load(voicetest.Dir())
	if errors.Is(err, voicetest.ErrNoCorpus) && os.Getenv("VOICE_CORPUS_REQUIRED") == "" {
		t.Skipf("%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	items := c.Items()
	snrs := []float64{10}
	if *voiceTable {
		snrs = []float64{20, 10, 5}
	}
	type noise struct {
		name    string
		samples []int16
	}
	noises := []noise{{"white", voicetest.White(60*voicetest.Rate, 1)}}
	for _, n := range c.Noise {
		noises = append(noises, noise{n.Name, n.Samples})
	}
	var table strings.Builder
	fmt.Fprintf(&table, "| noise | SNR | detected | split | merged | false | onset p50 / p99 ms | end p50 / p99 ms | end told p50 / p99 ms |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, n := range noises {
		if *voiceNoise != "" && n.name != *voiceNoise {
			continue
		}
		for _, snr := range snrs {
			sc := voicetest.Build(items, n.samples, snr)
			start := time.Now()
			s := voicetest.Judge(sc, voiceSegments(t, Config{}, sc))
			t.Logf("%s at %g dB: %v of audio in %v", n.name, snr, time.Duration(len(sc.Samples))*time.Second/voicetest.Rate, time.Since(start))
			fmt.Fprintf(&table, "| %s | %g dB | %s |\n", n.name, snr, s.Row())
			if len(s.Misses)+len(s.Splits)+len(s.Falses)+len(s.Off) > 0 {
				t.Logf("%s at %g dB: missed %v; split %v; false %v; onset off %v", n.name, snr, s.Misses, s.Splits, s.Falses, s.Off)
			}
			if snr != 10 {
				continue
			}
			if s.Detected != s.Phrases || s.Split > 0 || s.Merged > 0 || s.False > 0 {
				t.Errorf("%s at 10 dB: %d of %d phrases found, %d split, %d merged, %d false", n.name, s.Detected, s.Phrases, s.Split, s.Merged, s.False)
			}
			if p99 := voicetest.Quantile(s.Onset, 0.99); p99 > 150*time.Millisecond || p99 < -150*time.Millisecond {
				t.Errorf("%s at 10 dB: onset p99 %v, want within 150 ms", n.name, p99)
			}
		}
	}
	t.Logf("%d phrases of %d recordings and joined pairs:\n%s", len(items), len(c.Speech), table.String())
}
