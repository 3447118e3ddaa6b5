package sound

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/hal"
)

func TestValidateNamesTheBadField(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   Config
		field string // "" when the config is valid
	}{
		{"zero is all defaults", Config{}, ""},
		{"every field set", Config{Window: 10 * time.Millisecond, SummaryEvery: time.Minute, LoudDBFS: -12, LoudHysteresis: 3, LoudRelease: time.Second, VoiceSNR: 9, MinVoice: 60 * time.Millisecond, Hangover: 500 * time.Millisecond, FloorRise: 5 * time.Second}, ""},
		{"window too short", Config{Window: time.Millisecond}, "Window"},
		{"window negative", Config{Window: -20 * time.Millisecond}, "Window"},
		{"window too long", Config{Window: time.Second}, "Window"},
		{"summary too often", Config{SummaryEvery: 100 * time.Millisecond}, "SummaryEvery"},
		{"summary too rare", Config{SummaryEvery: 2 * time.Hour}, "SummaryEvery"},
		{"loud above full scale", Config{LoudDBFS: 3}, "LoudDBFS"},
		{"loud far too low", Config{LoudDBFS: -100}, "LoudDBFS"},
		{"loud not a number", Config{LoudDBFS: math.NaN()}, "LoudDBFS"},
		{"hysteresis negative", Config{LoudHysteresis: -1}, "LoudHysteresis"},
		{"hysteresis huge", Config{LoudHysteresis: 40}, "LoudHysteresis"},
		{"release negative", Config{LoudRelease: -time.Second}, "LoudRelease"},
		{"release too long", Config{LoudRelease: time.Minute}, "LoudRelease"},
		{"snr negative", Config{VoiceSNR: -3}, "VoiceSNR"},
		{"snr infinite", Config{VoiceSNR: math.Inf(1)}, "VoiceSNR"},
		{"min voice negative", Config{MinVoice: -time.Millisecond}, "MinVoice"},
		{"min voice too long", Config{MinVoice: 3 * time.Second}, "MinVoice"},
		{"hangover too long", Config{Hangover: 6 * time.Second}, "Hangover"},
		{"floor rise too fast", Config{FloorRise: 10 * time.Millisecond}, "FloorRise"},
		{"floor rise too slow", Config{FloorRise: time.Hour}, "FloorRise"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			_, newErr := New(tc.cfg, format(16000, 1))
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("Validate: got %v, want nil", err)
			case tc.field == "" && newErr != nil:
				t.Fatalf("New: got %v, want nil", newErr)
			case tc.field == "":
				return
			case err == nil:
				t.Fatalf("Validate: got nil, want an error naming %s", tc.field)
			case !strings.Contains(err.Error(), tc.field+" "):
				t.Errorf("Validate: got %q, want it to name %s", err, tc.field)
			case !errors.Is(err, ErrConfig):
				t.Errorf("Validate: got %v, want it to wrap ErrConfig", err)
			case !errors.Is(newErr, ErrConfig):
				t.Errorf("New: got %v, want the same error", newErr)
			}
		})
	}
}

func TestNewRefusesFormatsItCannotAnalyse(t *testing.T) {
	for _, f := range []hal.AudioFormat{
		{Rate: 4 * physic.KiloHertz, Channels: 1},
		{Rate: 384 * physic.KiloHertz, Channels: 1},
		{Rate: 16 * physic.KiloHertz, Channels: 0},
		{Rate: 16 * physic.KiloHertz, Channels: 64},
		{Rate: 16*physic.KiloHertz + physic.MilliHertz, Channels: 1},
	} {
		if _, err := New(Config{}, f); !errors.Is(err, hal.ErrUnsupported) {
			t.Errorf("New(%v): got %v, want hal.ErrUnsupported", f, err)
		}
	}
}

func TestDefaults(t *testing.T) {
	a, err := New(Config{}, format(16000, 1))
	if err != nil {
		t.Fatal(err)
	}
	got := a.Config()
	want := Config{DefaultWindow, DefaultSummaryEvery, DefaultLoudDBFS, DefaultLoudHysteresis, DefaultLoudRelease, DefaultVoiceSNR, DefaultMinVoice, DefaultHangover, DefaultVoice, DefaultFloorRise}
	if got != want {
		t.Errorf("Config(): got %+v, want %+v", got, want)
	}
}

// of returns the events of kind k.
func of(evs []Event, k Kind) []Event {
	var out []Event
	for _, e := range evs {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// since is t as an offset from the start of a scene.
func since(t hal.Mono) time.Duration { return t.Sub(base) }

// tone renders a sine of peak amplitude amp (full scale 1) at f Hz.
func tone(fs int, d time.Duration, f, amp float64) *scene {
	s := newScene(fs, d)
	for i := range s.x {
		s.x[i] = amp * math.Sin(2*math.Pi*f*float64(i)/float64(fs))
	}
	return s
}

func TestLevelSummaries(t *testing.T) {
	const fs = 16000
	square := newScene(fs, 30*time.Second)
	for i := range square.x {
		square.x[i] = 0.5 * float64(1-2*(i/40%2)) // 200 Hz at half scale
	}
	noisy := newScene(fs, 30*time.Second)
	noisy.addNoise(rand.New(rand.NewPCG(5, 5)), white, -40, 0, 30*time.Second)
	for _, tc := range []struct {
		name      string
		sc        *scene
		rms, peak float64 // dBFS
		tolerance float64 // dB
	}{
		// A full-scale sine: -3.01 dBFS RMS, 0 dBFS peak (32767 of 32768).
		{"full-scale sine", tone(fs, 30*time.Second, 1000, 32767.0/32768), -3.01, 0, 0.02},
		{"-20 dBFS sine", tone(fs, 30*time.Second, 440, 0.1), -23.01, -20, 0.02},
		{"-6 dBFS square", square, -6.02, -6.02, 0.02},
		{"digital silence", newScene(fs, 30*time.Second), Silence, Silence, 0},
		// Gaussian noise peaks at about 4.5 σ in 160 000 samples.
		{"-40 dBFS white noise", noisy, -40, -40 + 20*math.Log10(4.5), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := New(Config{}, format(fs, 1))
			if err != nil {
				t.Fatal(err)
			}
			evs := feed(a, tc.sc.pcm(1), 320)
			if got := slices.DeleteFunc(slices.Clone(evs), func(e Event) bool { return e.Kind != VoiceStarted && e.Kind != VoiceEnded }); len(got) != 0 {
				t.Errorf("got voice events %v, want none", got)
			}
			lv := of(evs, Level)
			if len(lv) != 3 {
				t.Fatalf("got %d Level events, want 3 (one every 10 s of 30 s): %v", len(lv), lv)
			}
			for i, e := range lv {
				wantStart, wantEnd := time.Duration(i)*10*time.Second, time.Duration(i+1)*10*time.Second
				if since(e.Start) != wantStart || since(e.Time) != wantEnd || e.Covered != 10*time.Second {
					t.Errorf("Level %d covers %v..%v (%v of audio), want %v..%v, all of it", i, since(e.Start), since(e.Time), e.Covered, wantStart, wantEnd)
				}
				if math.Abs(e.RMS-tc.rms) > tc.tolerance {
					t.Errorf("Level %d: RMS %.3f dBFS, want %.3f", i, e.RMS, tc.rms)
				}
				if tc.name == "-40 dBFS white noise" {
					if e.Peak < tc.peak-2 || e.Peak > tc.peak+2 {
						t.Errorf("Level %d: peak %.2f dBFS, want about %.2f", i, e.Peak, tc.peak)
					}
				} else if math.Abs(e.Peak-tc.peak) > tc.tolerance {
					t.Errorf("Level %d: peak %.3f dBFS, want %.3f", i, e.Peak, tc.peak)
				}
				// The floor of a steady sound is its level.
				if math.Abs(e.Floor-tc.rms) > max(tc.tolerance, 0.1) {
					t.Errorf("Level %d: floor %.2f dBFS, want the steady level %.2f", i, e.Floor, tc.rms)
				}
				if e.Voice != 0 || e.Gaps != 0 {
					t.Errorf("Level %d: voice %v, gaps %d, want none", i, e.Voice, e.Gaps)
				}
			}
		})
	}
}

func TestSummaryPeriod(t *testing.T) {
	for _, every := range []time.Duration{time.Second, 3 * time.Second, 7 * time.Second} {
		t.Run(every.String(), func(t *testing.T) {
			a, err := New(Config{SummaryEvery: every}, format(16000, 1))
			if err != nil {
				t.Fatal(err)
			}
			evs := feed(a, tone(16000, 21*time.Second, 300, 0.01).pcm(1), 333)
			lv := of(evs, Level)
			want := int((21*time.Second + every - 1) / every)
			if len(lv) != want {
				t.Fatalf("got %d Level events, want %d", len(lv), want)
			}
			for i, e := range lv[:len(lv)-1] {
				if since(e.Time) != time.Duration(i+1)*every {
					t.Errorf("Level %d at %v, want %v", i, since(e.Time), time.Duration(i+1)*every)
				}
			}
			if last := lv[len(lv)-1]; since(last.Time) != 21*time.Second {
				t.Errorf("last Level (from Flush) at %v, want 21s", since(last.Time))
			}
		})
	}
}

// clap adds a hand clap at t: a burst of noise with a 1 ms attack and a
// decay of about 8 ms, peaking near full scale.
func (s *scene) clap(r *rand.Rand, t time.Duration, peak float64) {
	i := s.idx(t)
	for k := 0; k < s.fs/10 && i+k < len(s.x); k++ {
		tt := float64(k) / float64(s.fs)
		env := math.Min(1, tt/0.001) * math.Exp(-tt/0.008)
		s.x[i+k] += peak * env * max(-1, min(1, r.NormFloat64()/3))
	}
}

func TestLoud(t *testing.T) {
	const fs = 16000
	r := rand.New(rand.NewPCG(9, 9))
	type pair struct{ start, end time.Duration }
	for _, tc := range []struct {
		name string
		make func() *scene
		want []pair // loud stretches, to the window
	}{
		{"one clap", func() *scene {
			s := newScene(fs, 6*time.Second)
			s.addNoise(r, pink, -50, 0, 6*time.Second)
			s.clap(r, 3*time.Second, 0.9)
			return s
		}, []pair{{3 * time.Second, 3*time.Second + 40*time.Millisecond}}},
		{"a one-sample impulse", func() *scene {
			s := newScene(fs, 6*time.Second)
			s.addNoise(r, pink, -50, 0, 6*time.Second)
			s.x[s.idx(3*time.Second)+100] = -1
			return s
		}, []pair{{3*time.Second + 100*time.Second/fs, 3*time.Second + 20*time.Millisecond}}},
		{"two claps apart", func() *scene {
			s := newScene(fs, 8*time.Second)
			s.addNoise(r, pink, -50, 0, 8*time.Second)
			s.clap(r, 2*time.Second, 0.9)
			s.clap(r, 5*time.Second, 0.5)
			return s
		}, []pair{{2 * time.Second, 2*time.Second + 40*time.Millisecond}, {5 * time.Second, 5*time.Second + 40*time.Millisecond}}},
		{"two claps within the release", func() *scene {
			s := newScene(fs, 6*time.Second)
			s.addNoise(r, pink, -50, 0, 6*time.Second)
			s.clap(r, 2*time.Second, 0.9)
			s.clap(r, 2300*time.Millisecond, 0.9)
			return s
		}, []pair{{2 * time.Second, 2300*time.Millisecond + 40*time.Millisecond}}},
		{"a tone hovering at the threshold", func() *scene {
			// Peak alternating between -19 and -21 dBFS every 100 ms
			// from 1 s to 5 s.
			s := newScene(fs, 7*time.Second)
			for i := s.idx(time.Second); i < s.idx(5*time.Second); i++ {
				db := -19.0
				if (i/(fs/10))%2 == 1 {
					db = -21
				}
				s.x[i] = amp(db) * math.Sin(2*math.Pi*500*float64(i)/fs)
			}
			return s
		}, []pair{{time.Second, 5 * time.Second}}},
		{"a tone under the threshold", func() *scene {
			return tone(fs, 5*time.Second, 500, amp(-21))
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := New(Config{}, format(fs, 1))
			if err != nil {
				t.Fatal(err)
			}
			evs := feed(a, tc.make().pcm(1), 320)
			starts, ends := of(evs, LoudStarted), of(evs, LoudEnded)
			if len(starts) != len(tc.want) || len(ends) != len(tc.want) {
				t.Fatalf("got %d loud starts and %d ends, want %d of each: %v", len(starts), len(ends), len(tc.want), evs)
			}
			for i, w := range tc.want {
				s, e := starts[i], ends[i]
				// The start is the first sample over the threshold.
				if d := since(s.Time) - w.start; d < 0 || d > 2*time.Millisecond {
					t.Errorf("loud %d started at %v, want %v (the first loud sample)", i, since(s.Time), w.start)
				}
				if s.Peak < DefaultLoudDBFS || s.Peak > 0 {
					t.Errorf("loud %d started with peak %.1f dBFS, want at least %v", i, s.Peak, DefaultLoudDBFS)
				}
				if e.Start != s.Time {
					t.Errorf("loud %d ended with Start %v, want its start %v", i, since(e.Start), since(s.Time))
				}
				if d := since(e.Time) - w.end; d < -DefaultWindow || d > DefaultWindow {
					t.Errorf("loud %d ended at %v, want %v within a window", i, since(e.Time), w.end)
				}
				if e.Cut || e.Peak < s.Peak {
					t.Errorf("loud %d ended cut %t, peak %.1f, want not cut, peak ≥ %.1f", i, e.Cut, e.Peak, s.Peak)
				}
			}
		})
	}
}

// burstResult is how one speech burst was detected.
type burstResult struct {
	pairs      int
	onsetErr   time.Duration // VoiceStarted.Time - true onset
	endErr     time.Duration // VoiceEnded.Time - true end
	emittedLag time.Duration // when VoiceEnded came out of Process, after the true end
}

// feedTimed is feed that also notes, per event, the time of the end of
// the frame whose Process returned it.
func feedTimed(a *Analyzer, samples []int16, frame int) (evs []Event, at []time.Duration) {
	ch := a.format.Channels
	fr := hal.AudioFrame{}
	for i, seq := 0, uint64(1); i < len(samples); i, seq = i+frame*ch, seq+1 {
		fr.Samples = samples[i:min(len(samples), i+frame*ch)]
		fr.Seq = seq
		fr.Time = base.Add(a.at(i / ch))
		n := len(evs)
		evs = a.Process(&fr, evs)
		for range evs[n:] {
			at = append(at, a.at((i+len(fr.Samples))/ch))
		}
	}
	n := len(evs)
	evs = a.Flush(evs)
	for range evs[n:] {
		at = append(at, a.at(len(samples)/ch))
	}
	return evs, at
}

// matchBursts checks that each speech span of sc has exactly one voice
// segment and that there are no others, and returns how each was found.
func matchBursts(t *testing.T, sc *scene, evs []Event, at []time.Duration) []burstResult {
	t.Helper()
	var starts, ends []int
	for i, e := range evs {
		switch e.Kind {
		case VoiceStarted:
			starts = append(starts, i)
		case VoiceEnded:
			ends = append(ends, i)
		}
	}
	if len(starts) != len(ends) {
		t.Fatalf("got %d voice starts and %d ends", len(starts), len(ends))
	}
	res := make([]burstResult, len(sc.speech))
	for k := range starts {
		s, e := evs[starts[k]], evs[ends[k]]
		if e.Start != s.Time {
			t.Errorf("voice end %v has Start %v, want its start %v", since(e.Time), since(e.Start), since(s.Time))
		}
		found := false
		for j, sp := range sc.speech {
			// A segment belongs to the burst it overlaps.
			if since(s.Time) < sp.to && since(e.Time) > sp.from {
				res[j].pairs++
				if res[j].pairs == 1 {
					res[j].onsetErr = since(s.Time) - sp.from
					res[j].endErr = since(e.Time) - sp.to
					res[j].emittedLag = at[ends[k]] - sp.to
				}
				found = true
			}
		}
		if !found {
			t.Errorf("voice from %v to %v, where there is no speech", since(s.Time), since(e.Time))
		}
	}
	return res
}

// speechScene is n bursts of 0.5–2 s, 3–6 s apart, over noise at
// noiseDB, with speech at snr dB over the noise.
func speechScene(r *rand.Rand, fs int, kind noiseKind, noiseDB, snr float64, n int) *scene {
	var bursts []span
	at := 2 * time.Second
	for range n {
		d := 500*time.Millisecond + time.Duration(r.IntN(1500))*time.Millisecond
		bursts = append(bursts, span{at, at + d})
		at += d + 3*time.Second + time.Duration(r.IntN(3000))*time.Millisecond
	}
	sc := newScene(fs, at)
	sc.addNoise(r, kind, noiseDB, 0, at)
	for _, b := range bursts {
		sc.addSpeech(r, noiseDB+snr, b.from, b.to-b.from)
	}
	return sc
}

// Synthetic speech in synthetic noise, each detector: each burst found
// once, its onset within 100 ms, its end told within Hangover and two
// windows of the burst's end (for Silero, a chunk and its tail more:
// its probability stays over sileroOff up to sileroTail after a
// synthetic burst).
func TestVoiceInNoiseAt10dB(t *testing.T) {
	for _, v := range []VoiceDetector{VoiceSilero, VoicePeriodicity} {
		t.Run(string(v), func(t *testing.T) { voiceInNoiseAt10dB(t, v) })
	}
}

// sileroTail is how long Silero's probability stays over sileroOff after
// synthetic speech ends (measured: up to 230 ms).
const sileroTail = 300 * time.Millisecond

func voiceInNoiseAt10dB(t *testing.T, voice VoiceDetector) {
	if emulated() && voice == VoiceSilero {
		t.Skip("under emulation (TOBE_BODY_EMULATED): Silero on synthetic speech runs natively in make test")
	}
	const fs = 16000
	cfg := Config{Voice: voice}.withDefaults()
	late := time.Duration(0)
	if voice == VoiceSilero {
		late = sileroChunk + sileroTail
	}
	var all []time.Duration
	for _, kind := range []noiseKind{white, pink} {
		for seed := uint64(1); seed <= 4; seed++ {
			t.Run(fmt.Sprintf("%s/seed%d", kind, seed), func(t *testing.T) {
				sc := speechScene(rand.New(rand.NewPCG(seed, 10)), fs, kind, -55, 10, 8)
				a, err := New(cfg, format(fs, 1))
				if err != nil {
					t.Fatal(err)
				}
				evs, at := feedTimed(a, sc.pcm(1), 320)
				var onsets []string
				for j, b := range matchBursts(t, sc, evs, at) {
					sp := sc.speech[j]
					onsets = append(onsets, fmt.Sprintf("%+d", b.onsetErr.Milliseconds()))
					all = append(all, b.onsetErr)
					switch {
					case b.pairs != 1:
						t.Errorf("burst %v..%v: %d voice segments, want 1", sp.from, sp.to, b.pairs)
					case b.onsetErr < -100*time.Millisecond || b.onsetErr > 100*time.Millisecond:
						t.Errorf("burst %v..%v: voice started %v from the onset, want within 100ms", sp.from, sp.to, b.onsetErr)
					case b.endErr < -(cfg.Hangover+cfg.Window) || b.endErr > cfg.Hangover+cfg.Window+late:
						t.Errorf("burst %v..%v: voice ended %v from the end, want within %v", sp.from, sp.to, b.endErr, cfg.Hangover+cfg.Window+late)
					case b.emittedLag > cfg.Hangover+2*cfg.Window+late:
						t.Errorf("burst %v..%v: the end came out %v after the true end, want within %v", sp.from, sp.to, b.emittedLag, cfg.Hangover+2*cfg.Window+late)
					}
				}
				t.Logf("onset errors (ms): %s", strings.Join(onsets, " "))
				checkLevelVoice(t, sc, evs)
			})
		}
	}
	if len(all) > 0 {
		var sum, worst time.Duration
		for _, d := range all {
			sum += d
			worst = max(worst, d.Abs())
		}
		t.Logf("onset error over %d bursts: mean %v, worst %v", len(all), sum/time.Duration(len(all)), worst)
	}
}

// checkLevelVoice checks that the Level events' voice adds up to the
// voice segments.
func checkLevelVoice(t *testing.T, sc *scene, evs []Event) {
	t.Helper()
	var seg, lv time.Duration
	for _, e := range evs {
		switch e.Kind {
		case VoiceEnded:
			seg += e.Duration()
		case Level:
			lv += e.Voice
		}
	}
	if (seg - lv).Abs() > time.Millisecond {
		t.Errorf("Level events count %v of voice, the segments last %v", lv, seg)
	}
}

func TestNoVoiceInSilenceOrSteadySound(t *testing.T) {
	const fs = 16000
	for _, tc := range []struct {
		name  string
		kind  noiseKind // "" for digital silence
		level float64
	}{
		{"digital silence", "", 0},
		{"dither at -70 dBFS", white, -70},
		{"white noise", white, -40},
		{"pink noise", pink, -40},
		{"brown noise", brown, -30},
		{"mains hum", hum, -40},
		{"fan", fan, -35},
		{"loud pink noise", pink, -15},
		// A steady harmonic sound is periodic, but it is there from the
		// start, so the floor is already at its level.
		{"buzz", buzz, -40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sc := newScene(fs, 60*time.Second)
			if tc.kind != "" {
				sc.addNoise(rand.New(rand.NewPCG(3, 3)), tc.kind, tc.level, 0, 60*time.Second)
			}
			a, err := New(Config{}, format(fs, 1))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range feed(a, sc.pcm(1), 320) {
				if e.Kind == VoiceStarted || e.Kind == VoiceEnded {
					t.Errorf("got %v, want no voice", e)
				}
			}
		})
	}
}

// TestNoiseStep changes a steady background suddenly and checks what the
// detector makes of it while the floors rise to the new level. A noise,
// of any colour, yields no voice at all; a steady harmonic sound (the
// buzz) is voice from its onset until the speech band's floor is within
// VoiceSNR of it, about FloorRise·ln(step/VoiceSNR), once, and not after.
// A noise that steps up or down is no voice. A buzz (a steady harmonic
// sound) that appears is voice to the periodicity detector until its
// floor has risen to it; Silero knows a buzz is not a voice.
func TestNoiseStep(t *testing.T) {
	const fs = 16000
	const step = 10 * time.Second
	for _, voice := range []VoiceDetector{VoiceSilero, VoicePeriodicity} {
		for _, kind := range []noiseKind{white, pink, brown, hum, fan, buzz} {
			if emulated() && voice == VoiceSilero && kind != buzz {
				continue // Silero under emulation: the buzz alone
			}
			for _, levels := range [][2]float64{{-60, -30}, {-50, -40}, {-40, -20}, {-30, -60}} {
				t.Run(fmt.Sprintf("%s/%s/%v_to_%v", voice, kind, levels[0], levels[1]), func(t *testing.T) {
					t.Parallel()
					sc := newScene(fs, 40*time.Second)
					r := rand.New(rand.NewPCG(4, 4))
					sc.addNoise(r, white, -70, 0, 40*time.Second)
					sc.addNoise(r, kind, levels[0], 0, step)
					sc.addNoise(r, kind, levels[1], step, 40*time.Second)
					a, err := New(Config{Voice: voice}, format(fs, 1))
					if err != nil {
						t.Fatal(err)
					}
					var open time.Duration // the last window over the floor by VoiceSNR
					a.trace = func(w windowTrace) {
						if w.energy {
							open = since(w.end)
						}
					}
					evs := feed(a, sc.pcm(1), 320)
					starts, ends := of(evs, VoiceStarted), of(evs, VoiceEnded)
					if open > step {
						t.Logf("the speech band stayed VoiceSNR over its floor for %v after the step", open-step)
					}
					if kind != buzz || levels[1] < levels[0] || voice == VoiceSilero {
						if len(starts)+len(ends) != 0 {
							t.Errorf("got voice %v %v, want none", starts, ends)
						}
						return
					}
					rise := levels[1] - levels[0]
					limit := time.Duration(DefaultFloorRise.Seconds()*math.Log(rise/DefaultVoiceSNR)*float64(time.Second)) + 500*time.Millisecond
					switch {
					case len(starts) != 1 || len(ends) != 1:
						t.Fatalf("got voice %v %v, want one segment", starts, ends)
					case since(starts[0].Time) < step-DefaultWindow || since(starts[0].Time) > step+100*time.Millisecond:
						t.Errorf("voice started at %v, want at the step, %v", since(starts[0].Time), step)
					case ends[0].Duration() > limit:
						t.Errorf("voice lasted %v, want the floor to absorb the buzz within %v", ends[0].Duration(), limit)
					}
					t.Logf("buzz stepping %v dB: voice for %v", rise, ends[0].Duration())
				})
			}
		}
	}
}

// Rates, channels and frame sizes: each burst of synthetic speech found
// once by the periodicity detector, whose judgement does not depend on
// the rate; the Level the same as for the mono mixdown, for both
// detectors. (Silero at 48 kHz in two channels: TestVoiceOnRecordedSpeech;
// its resampler at every rate: TestResampler.)
func TestRatesChannelsAndFrameSizes(t *testing.T) {
	for _, tc := range []struct {
		fs, ch, frame int
		oneSilent     bool // only the first channel carries sound
	}{
		{8000, 1, 160, false},
		{8000, 1, 97, false},
		{16000, 1, 1024, false},
		{16000, 2, 320, false},
		{16000, 2, 320, true},
		{44100, 1, 441, false},
		{48000, 1, 960, false},
		{48000, 2, 480, false},
		{48000, 6, 1000, true},
	} {
		t.Run(fmt.Sprintf("%dHz/x%d/%d/one-silent=%t", tc.fs, tc.ch, tc.frame, tc.oneSilent), func(t *testing.T) {
			t.Parallel()
			sc := speechScene(rand.New(rand.NewPCG(uint64(tc.fs+tc.ch), 11)), tc.fs, pink, -55, 10, 4)
			pcm := sc.pcm(tc.ch)
			if tc.oneSilent {
				for i := range pcm {
					if i%tc.ch != 0 {
						pcm[i] = 0
					}
				}
			}
			a, err := New(Config{Voice: VoicePeriodicity}, format(tc.fs, tc.ch))
			if err != nil {
				t.Fatal(err)
			}
			evs, at := feedTimed(a, pcm, tc.frame)
			for j, b := range matchBursts(t, sc, evs, at) {
				sp := sc.speech[j]
				if b.pairs != 1 || b.onsetErr.Abs() > 100*time.Millisecond {
					t.Errorf("burst %v..%v: %d segments, onset off by %v; want 1, within 100ms", sp.from, sp.to, b.pairs, b.onsetErr)
				}
			}
			sa, err := New(Config{Voice: VoiceSilero}, format(tc.fs, tc.ch))
			if err != nil {
				t.Fatal(err)
			}
			sevs, _ := feedTimed(sa, pcm, tc.frame)
			checkLevelVoice(t, sc, sevs)
			// The level is that of the mono mixdown; the peak is the
			// highest sample of any channel.
			mono, err := New(Config{}, format(tc.fs, 1))
			if err != nil {
				t.Fatal(err)
			}
			want := of(feed(mono, sc.pcm(1), tc.frame), Level)
			got := of(evs, Level)
			if len(got) != len(want) || len(of(sevs, Level)) != len(want) {
				t.Fatalf("got %d Level events (%d with Silero), want %d as for mono", len(got), len(of(sevs, Level)), len(want))
			}
			for i, e := range of(sevs, Level) {
				if e.RMS != got[i].RMS || e.Peak != got[i].Peak {
					t.Errorf("Level %d with Silero: RMS %.2f, peak %.2f dBFS; want %.2f, %.2f", i, e.RMS, e.Peak, got[i].RMS, got[i].Peak)
				}
			}
			shift := 0.0
			if tc.oneSilent {
				shift = 20 * math.Log10(float64(tc.ch))
			}
			for i := range got {
				if math.Abs(got[i].RMS+shift-want[i].RMS) > 0.01 || math.Abs(got[i].Peak-want[i].Peak) > 0.01 {
					t.Errorf("Level %d: RMS %.2f, peak %.2f dBFS; want %.2f, %.2f", i, got[i].RMS, got[i].Peak, want[i].RMS-shift, want[i].Peak)
				}
			}
		})
	}
}

// feedGap feeds samples in 20 ms frames but drops the frames that start
// in [from, to); the frame after the drop carries overruns and, when
// keepSeq, the Seq that follows the last one delivered.
func feedGap(a *Analyzer, samples []int16, from, to time.Duration, overruns int, keepSeq bool) []Event {
	frame := a.rate / 50
	var out []Event
	fr := hal.AudioFrame{}
	seq, delivered := uint64(0), uint64(0)
	dropped := false
	for i := 0; i < len(samples); i += frame {
		seq++
		at := a.at(i)
		if at >= from && at < to {
			dropped = true
			continue
		}
		fr.Samples = samples[i:min(len(samples), i+frame)]
		fr.Time = base.Add(at)
		fr.Seq = seq
		if keepSeq {
			fr.Seq = delivered + 1
		}
		fr.Overruns = 0
		if dropped {
			fr.Overruns = overruns
			dropped = false
		}
		delivered = fr.Seq
		out = a.Process(&fr, out)
	}
	return a.Flush(out)
}

func TestLostAudioIsNotStretchedOver(t *testing.T) {
	const fs = 16000
	r := rand.New(rand.NewPCG(12, 12))
	sc := newScene(fs, 12*time.Second)
	sc.addNoise(r, pink, -55, 0, 12*time.Second)
	sc.addSpeech(r, -45, 2*time.Second, 3*time.Second)
	for i := sc.idx(7 * time.Second); i < sc.idx(10*time.Second); i++ {
		sc.x[i] += 0.5 * math.Sin(2*math.Pi*1000*float64(i)/fs) // loud
	}
	pcm := sc.pcm(1)
	for _, tc := range []struct {
		name     string
		from, to time.Duration // the frames lost
		overruns int
		keepSeq  bool // Seq follows on although frames were lost
	}{
		{"an overrun in speech", 3200 * time.Millisecond, 3400 * time.Millisecond, 1, true},
		{"frames missing in speech", 3200 * time.Millisecond, 3400 * time.Millisecond, 0, false},
		{"an overrun in a loud tone", 8 * time.Second, 8500 * time.Millisecond, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := New(Config{}, format(fs, 1))
			if err != nil {
				t.Fatal(err)
			}
			evs := feedGap(a, pcm, tc.from, tc.to, tc.overruns, tc.keepSeq)
			checkOrder(t, evs)
			if st := a.Stats(); st.Gaps != 1 || st.Overruns != uint64(tc.overruns) {
				t.Errorf("Stats: %d gaps, %d overruns; want 1, %d", st.Gaps, st.Overruns, tc.overruns)
			}
			kinds := []Kind{VoiceStarted, VoiceEnded}
			if tc.from >= 7*time.Second {
				kinds = []Kind{LoudStarted, LoudEnded}
			}
			starts, ends := of(evs, kinds[0]), of(evs, kinds[1])
			var cut int
			for i, e := range ends {
				s := starts[i]
				spans := since(s.Time) < tc.from && since(e.Time) > tc.to
				switch {
				case spans:
					t.Errorf("%v..%v spans the lost audio %v..%v", since(s.Time), since(e.Time), tc.from, tc.to)
				case e.Cut:
					cut++
					if since(e.Time) > tc.from || since(e.Time) < tc.from-DefaultHangover {
						t.Errorf("cut %v at %v, want at the last audio before %v", e.Kind, since(e.Time), tc.from)
					}
				}
			}
			if cut != 1 {
				t.Errorf("%d %v events are cut, want 1: %v", cut, kinds[1], ends)
			}
			// The stretch goes on after the gap as a new one.
			resumed := false
			for _, s := range starts {
				if since(s.Time) >= tc.to && since(s.Time) < tc.to+500*time.Millisecond {
					resumed = true
				}
			}
			if !resumed {
				t.Errorf("no %v in the 500ms after the gap, want the sound found again: %v", kinds[0], starts)
			}
			lv := of(evs, Level)
			if len(lv) != 2 || lv[0].Gaps != 1 || lv[0].Covered != 10*time.Second-(tc.to-tc.from) || lv[1].Gaps != 0 {
				t.Errorf("Levels %v, want the first to count the gap and cover all but the lost audio", lv)
			}
		})
	}
}

// checkOrder checks that events come in order of time and that every
// end follows its start.
func checkOrder(t *testing.T, evs []Event) {
	t.Helper()
	var last hal.Mono
	open := map[Kind]*Event{}
	for i, e := range evs {
		if i > 0 && e.Time < last {
			t.Fatalf("event %d (%v) at %v, before the one before at %v", i, e.Kind, e.Time, last)
		}
		last = e.Time
		switch e.Kind {
		case LoudStarted, VoiceStarted:
			if open[e.Kind] != nil {
				t.Fatalf("event %d: %v while one is open", i, e.Kind)
			}
			open[e.Kind] = &evs[i]
		case LoudEnded, VoiceEnded:
			start := open[e.Kind-1]
			if start == nil || e.Start != start.Time || e.Time < e.Start {
				t.Fatalf("event %d: %v with no matching start (%v)", i, e, start)
			}
			open[e.Kind-1] = nil
		case Level:
			if e.Time < e.Start || e.Covered > e.Duration() || e.Voice > e.Covered || e.Voice < 0 || e.Gaps < 0 {
				t.Fatalf("event %d: %v is inconsistent", i, e)
			}
		default:
			t.Fatalf("event %d: unknown kind %v", i, e.Kind)
		}
	}
}

func TestNoVoiceInTones(t *testing.T) {
	const fs = 16000
	for _, tc := range []struct {
		name string
		wave func(t float64) float64 // amplitude at t seconds, from 5 s on
	}{
		{"a 1 kHz beep, on and off every half second", func(t float64) float64 {
			if int(t*2)%2 == 1 {
				return 0
			}
			return 0.1 * math.Sin(2*math.Pi*1000*t)
		}},
		{"a 440 Hz tone that starts", func(t float64) float64 { return 0.05 * math.Sin(2*math.Pi*440*t) }},
		{"a smoke alarm at 3.1 kHz", func(t float64) float64 {
			if math.Mod(t, 1.5) > 0.5 {
				return 0
			}
			return 0.3 * math.Sin(2*math.Pi*3100*t)
		}},
		{"a siren sweeping 600–1200 Hz", func(t float64) float64 {
			// The phase of a sweep whose frequency goes 600→1200→600 Hz
			// every 2 s.
			return 0.1 * math.Sin(2*math.Pi*(900*t-300/math.Pi*math.Cos(math.Pi*t)))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sc := newScene(fs, 20*time.Second)
			sc.addNoise(rand.New(rand.NewPCG(6, 6)), pink, -55, 0, 20*time.Second)
			for i := sc.idx(5 * time.Second); i < len(sc.x); i++ {
				sc.x[i] += tc.wave(float64(i) / fs)
			}
			a, err := New(Config{}, format(fs, 1))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range feed(a, sc.pcm(1), 320) {
				if e.Kind == VoiceStarted || e.Kind == VoiceEnded {
					t.Errorf("got %v, want no voice", e)
				}
			}
		})
	}
}

// TestOrderAroundBackDatedEvents puts a clap at different places around a
// burst of speech: events back-dated by the voice detector must still
// leave in order of time, and nothing may wait longer than the longest
// open decision.
func TestOrderAroundBackDatedEvents(t *testing.T) {
	const fs = 16000
	for _, clapAt := range []time.Duration{-400, -150, -50, 300, 900, 1700, 1900} {
		clapAt *= time.Millisecond
		t.Run(fmt.Sprintf("clap%+v", clapAt), func(t *testing.T) {
			r := rand.New(rand.NewPCG(13, 13))
			sc := newScene(fs, 6*time.Second)
			sc.addNoise(r, pink, -55, 0, 6*time.Second)
			sc.addSpeech(r, -45, 2*time.Second, 1500*time.Millisecond)
			sc.clap(r, 2*time.Second+clapAt, 0.9)
			a, err := New(Config{}, format(fs, 1))
			if err != nil {
				t.Fatal(err)
			}
			evs, at := feedTimed(a, sc.pcm(1), 320)
			checkOrder(t, evs)
			cfg := a.Config()
			wait := max(cfg.MinVoice+2*cfg.Hangover, cfg.LoudRelease) + 2*cfg.Window
			for i, e := range evs {
				if lag := at[i] - since(e.Time); lag > wait {
					t.Errorf("%v came out %v after it happened, want within %v", e, lag, wait)
				}
			}
			if n, m := len(of(evs, LoudStarted)), len(of(evs, VoiceStarted)); n != 1 || m != 1 {
				t.Errorf("got %d loud and %d voice stretches, want 1 of each: %v", n, m, evs)
			}
		})
	}
}

func TestTimeJitterKeepsOrder(t *testing.T) {
	const fs = 16000
	r := rand.New(rand.NewPCG(14, 14))
	sc := speechScene(r, fs, white, -55, 10, 6)
	a, err := New(Config{}, format(fs, 1))
	if err != nil {
		t.Fatal(err)
	}
	pcm := sc.pcm(1)
	var evs []Event
	fr := hal.AudioFrame{}
	for i, seq := 0, uint64(1); i < len(pcm); i, seq = i+320, seq+1 {
		fr.Samples = pcm[i:min(len(pcm), i+320)]
		fr.Seq = seq
		// Stamped when read: up to 8 ms late, sometimes "earlier" than
		// the frame before ended.
		fr.Time = base.Add(a.at(i) + time.Duration(r.IntN(8000))*time.Microsecond)
		evs = a.Process(&fr, evs)
	}
	evs = a.Flush(evs)
	checkOrder(t, evs)
	if st := a.Stats(); st.Gaps != 0 {
		t.Errorf("%d gaps, want none: jitter is not lost audio", st.Gaps)
	}
	if got := len(of(evs, VoiceStarted)); got != len(sc.speech) {
		t.Errorf("%d voice segments, want %d", got, len(sc.speech))
	}
}

func TestFlush(t *testing.T) {
	const fs = 16000
	r := rand.New(rand.NewPCG(15, 15))
	sc := newScene(fs, 6*time.Second)
	sc.addNoise(r, pink, -55, 0, 6*time.Second)
	sc.addSpeech(r, -45, 2*time.Second, 3*time.Second)
	pcm := sc.pcm(1)
	a, err := New(Config{}, format(fs, 1))
	if err != nil {
		t.Fatal(err)
	}
	half := sc.idx(3 * time.Second)
	evs := feed(a, pcm[:half], 320) // feed flushes at 3 s, inside the speech
	checkOrder(t, evs)
	ends, lv := of(evs, VoiceEnded), of(evs, Level)
	if len(ends) != 1 || !ends[0].Cut || since(ends[0].Time) > 3*time.Second {
		t.Errorf("voice ends %v, want one, cut, by 3s", ends)
	}
	if len(lv) != 1 || lv[0].Covered != 3*time.Second {
		t.Errorf("Levels %v, want one covering the 3 s so far", lv)
	}
	if !strings.Contains(ends[0].String(), "cut true") {
		t.Errorf("String() = %q, want it to say the segment was cut", ends[0])
	}
	// Processing goes on afresh: the rest of the speech is a new
	// segment, and the Level grid starts again.
	fr := hal.AudioFrame{}
	var more []Event
	for i, seq := half, uint64(1); i < len(pcm); i, seq = i+320, seq+1 {
		fr.Samples, fr.Seq, fr.Time = pcm[i:i+320], seq, base.Add(a.at(i))
		more = a.Process(&fr, more)
	}
	more = a.Flush(more)
	checkOrder(t, more)
	if s := of(more, VoiceStarted); len(s) != 1 || since(s[0].Time) < 3*time.Second {
		t.Errorf("after the flush: voice starts %v, want one after 3s", s)
	}
	if l := of(more, Level); len(l) != 1 || since(l[0].Start) != 3*time.Second {
		t.Errorf("after the flush: Levels %v, want one from 3s", l)
	}
}

func TestProcessAllocatesNothing(t *testing.T) {
	const fs = 16000
	sc := speechScene(rand.New(rand.NewPCG(16, 16)), fs, pink, -55, 10, 6)
	pcm := sc.pcm(2)
	a, err := New(Config{}, format(fs, 2))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]Event, 0, 16)
	fr := hal.AudioFrame{}
	i, seq := 0, uint64(0)
	step := func() {
		if i+640 > len(pcm) {
			i = 0
		}
		seq++
		fr.Samples, fr.Seq, fr.Time = pcm[i:i+640], seq, base.Add(time.Duration(seq)*20*time.Millisecond)
		if seq%500 == 0 {
			fr.Overruns = 1
		} else {
			fr.Overruns = 0
		}
		i += 640
		out = a.Process(&fr, out[:0])
	}
	for range 3000 {
		step()
	}
	if n := testing.AllocsPerRun(3000, step); n != 0 {
		t.Errorf("Process allocates %v times a frame, want 0", n)
	}
	if n := testing.AllocsPerRun(10, func() { out = a.Flush(out[:0]) }); n != 0 {
		t.Errorf("Flush allocates %v times, want 0", n)
	}
}

// TestVoiceAcrossPeriods checks that a voice segment crossing the end of
// a Level period is split between the two summaries, although the
// segment is only confirmed, and back-dated, after the period ended.
func TestVoiceAcrossPeriods(t *testing.T) {
	const fs = 16000
	for _, at := range []time.Duration{9900 * time.Millisecond, 9500 * time.Millisecond, 8 * time.Second} {
		t.Run(at.String(), func(t *testing.T) {
			r := rand.New(rand.NewPCG(17, 17))
			sc := newScene(fs, 14*time.Second)
			sc.addNoise(r, pink, -55, 0, 14*time.Second)
			sc.addSpeech(r, -45, at, 2*time.Second+100*time.Millisecond)
			a, err := New(Config{}, format(fs, 1))
			if err != nil {
				t.Fatal(err)
			}
			evs := feed(a, sc.pcm(1), 320)
			checkOrder(t, evs)
			s, e, lv := of(evs, VoiceStarted), of(evs, VoiceEnded), of(evs, Level)
			if len(s) != 1 || len(e) != 1 || len(lv) != 2 {
				t.Fatalf("got %v", evs)
			}
			boundary := lv[0].Time
			want0 := max(0, boundary.Sub(s[0].Time))
			want1 := e[0].Time.Sub(max(boundary, s[0].Time))
			if lv[0].Voice != want0 || lv[1].Voice != want1 {
				t.Errorf("voice %v and %v in the two periods, want %v and %v (segment %v..%v)", lv[0].Voice, lv[1].Voice, want0, want1, since(s[0].Time), since(e[0].Time))
			}
		})
	}
}

func TestSeqGaps(t *testing.T) {
	for _, tc := range []struct {
		name     string
		seqs     []uint64
		overruns map[int]int // by frame index
		gaps     uint64
	}{
		{"numbered", []uint64{1, 2, 3, 4}, nil, 0},
		{"unnumbered", []uint64{0, 0, 0, 0}, nil, 0},
		{"an unnumbered frame among numbered ones", []uint64{1, 2, 0, 3, 4}, nil, 0},
		{"a skip over an unnumbered frame", []uint64{1, 2, 0, 5}, nil, 1},
		{"a skip", []uint64{7, 8, 10, 11, 20}, nil, 2},
		{"numbering starting anywhere", []uint64{1000, 1001}, nil, 0},
		{"restarted numbering", []uint64{5, 6, 1, 2}, nil, 1},
		{"an overrun", []uint64{1, 2, 3}, map[int]int{1: 4}, 1},
		{"an overrun before the first frame", []uint64{1, 2}, map[int]int{0: 1}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := New(Config{}, format(16000, 1))
			if err != nil {
				t.Fatal(err)
			}
			fr := hal.AudioFrame{Samples: make([]int16, 320)}
			for i, seq := range tc.seqs {
				fr.Seq, fr.Overruns, fr.Time = seq, tc.overruns[i], base.Add(time.Duration(i)*20*time.Millisecond)
				a.Process(&fr, nil)
			}
			if got := a.Stats().Gaps; got != tc.gaps {
				t.Errorf("got %d gaps, want %d", got, tc.gaps)
			}
		})
	}
}
