package voicetest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Item is speech to lay in a scene: its samples and its phrases, from
// its start.
type Item struct {
	Name    string
	Samples []int16
	Phrases []Span
	// Pause is the longest pause inside one of its phrases.
	Pause time.Duration
}

// pad is what an item keeps of its recording around its phrases.
const pad = 150 * time.Millisecond

func at(d time.Duration) int { return int(d * Rate / time.Second) }

// Items are the corpus's speech: each recording cut to its phrases with
// pad either side, and phrases made of two of one kajongg voice's
// recordings joined by a pause of 200, 400 or 550 ms (a pause between
// words that must not end a phrase; the noise fills it).
func (c *Corpus) Items() []Item {
	byName := map[string]Item{}
	var items []Item
	for _, r := range c.Speech {
		ps, pause, _ := Phrases(r.Samples)
		if len(ps) == 0 {
			continue
		}
		from := max(0, at(ps[0].From-pad))
		to := min(len(r.Samples), at(ps[len(ps)-1].To+pad))
		it := Item{Name: r.Name, Samples: r.Samples[from:to], Pause: pause}
		off := time.Duration(from) * time.Second / Rate
		for _, p := range ps {
			it.Phrases = append(it.Phrases, Span{From: p.From - off, To: p.To - off})
		}
		items = append(items, it)
		byName[r.Name] = it
	}
	for _, v := range []string{"male1", "male2", "female1", "female2"} {
		for _, j := range []struct {
			a, b string
			gap  time.Duration
		}{{"dangerousgame", "originalcall", 400 * time.Millisecond}, {"nochoice", "b1", 550 * time.Millisecond}, {"c5", "s9", 200 * time.Millisecond}, {"we", "dr", 400 * time.Millisecond}} {
			a, okA := byName["kajongg-"+v+"-"+j.a]
			b, okB := byName["kajongg-"+v+"-"+j.b]
			if !okA || !okB || len(a.Phrases) != 1 || len(b.Phrases) != 1 {
				continue
			}
			// Each cut to its phrase, the second after the pause; a's level
			// and b's are made one.
			sa := a.Samples[at(a.Phrases[0].From):at(a.Phrases[0].To)]
			sb := b.Samples[at(b.Phrases[0].From):at(b.Phrases[0].To)]
			gain := rms(sa) / rms(sb)
			s := make([]int16, 0, len(sa)+at(j.gap)+len(sb))
			s = append(s, sa...)
			s = append(s, make([]int16, at(j.gap))...)
			for _, v := range sb {
				s = append(s, clip(float64(v)*gain))
			}
			d := time.Duration(len(s)) * time.Second / Rate
			items = append(items, Item{Name: fmt.Sprintf("kajongg-%s-%s+%s(%v)", v, j.a, j.b, j.gap), Samples: s, Phrases: []Span{{To: d}}, Pause: j.gap})
		}
	}
	return items
}

func rms(s []int16) float64 {
	var sum float64
	for _, v := range s {
		sum += float64(v) * float64(v)
	}
	return math.Sqrt(sum / float64(max(1, len(s))))
}

func clip(v float64) int16 { return int16(max(-32768, min(32767, math.Round(v)))) }

// A scene's layout: noise alone for Lead, then each item and Gap of
// noise after it; speech at SpeechDBFS (the RMS of its phrases' active
// frames).
const (
	Lead       = 4 * time.Second
	Gap        = 3 * time.Second
	SpeechDBFS = -26.0
)

// Scene is speech laid over noise.
type Scene struct {
	Samples []int16
	// Phrases are where speech is, each with its item's name.
	Phrases []Span
	Names   []string
	// Frames label the scene's FrameLen frames: true where an item's
	// recording has a frame of speech (Active), the pauses inside a
	// phrase not.
	Frames []bool
}

// White is Gaussian white noise, seeded.
func White(n int, seed uint64) []int16 {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s := make([]int16, n)
	for i := range s {
		s[i] = clip(r.NormFloat64() * 3000)
	}
	return s
}

// Build lays items over noise (looped as long as the scene) with the
// noise's RMS snr dB under the speech's.
func Build(items []Item, noise []int16, snr float64) Scene {
	var sc Scene
	total := Lead
	for _, it := range items {
		total += time.Duration(len(it.Samples))*time.Second/Rate + Gap
	}
	out := make([]float64, at(total))
	sc.Frames = make([]bool, int(total/FrameLen))
	speech := math.Pow(10, SpeechDBFS/20) * 32768
	noiseGain := speech * math.Pow(10, -snr/20) / rms(noise)
	for i := range out {
		out[i] = float64(noise[i%len(noise)]) * noiseGain
	}
	pos := Lead
	for _, it := range items {
		_, _, active := Phrases(it.Samples)
		gain := speech / (active * 32768)
		o := at(pos)
		for i, v := range it.Samples {
			out[o+i] += float64(v) * gain
		}
		frames, _ := Active(it.Samples)
		for i, on := range frames {
			if k := int((pos + time.Duration(i)*FrameLen + FrameLen/2) / FrameLen); on && k < len(sc.Frames) {
				sc.Frames[k] = true
			}
		}
		for _, p := range it.Phrases {
			sc.Phrases = append(sc.Phrases, Span{From: pos + p.From, To: pos + p.To})
			sc.Names = append(sc.Names, it.Name)
		}
		pos += time.Duration(len(it.Samples))*time.Second/Rate + Gap
	}
	sc.Samples = make([]int16, len(out))
	for i, v := range out {
		sc.Samples[i] = clip(v)
	}
	return sc
}

// Score is how a detector did on a scene.
type Score struct {
	Phrases, Detected, Split, Merged, False int
	// Onset and End are the errors of the phrases detected: the first
	// segment's start, the last one's end, less the label's; Told is how
	// long after the label's end the detector said it ended.
	Onset, End, Told []time.Duration
	// Misses, Splits, Falses and Off (onsets more than OnsetGoal from
	// the label's) name what went wrong, for a reader.
	Misses, Splits, Falses, Off []string
}

// Tolerance is how far outside a phrase's label a segment may begin or
// end and still be the phrase's: a label from energy misses a breath or
// a weak first consonant.
const Tolerance = 250 * time.Millisecond

// OnsetGoal is how far from its label's a phrase's onset may be.
const OnsetGoal = 150 * time.Millisecond

// Judge scores the segments found against the scene's phrases.
func Judge(sc Scene, found []Span) Score {
	s := Score{Phrases: len(sc.Phrases)}
	owners := make([]int, len(found))
	for i, p := range sc.Phrases {
		var mine []Span
		for j, f := range found {
			if f.From < p.To+Tolerance && f.To > p.From-Tolerance {
				mine = append(mine, f)
				owners[j]++
			}
		}
		switch {
		case len(mine) == 0:
			s.Misses = append(s.Misses, sc.Names[i])
			continue
		case len(mine) > 1:
			s.Split++
			s.Splits = append(s.Splits, fmt.Sprintf("%s in %d", sc.Names[i], len(mine)))
		}
		s.Detected++
		s.Onset = append(s.Onset, mine[0].From-p.From)
		if off := mine[0].From - p.From; off > OnsetGoal || off < -OnsetGoal {
			s.Off = append(s.Off, fmt.Sprintf("%s by %v", sc.Names[i], off))
		}
		s.End = append(s.End, mine[len(mine)-1].To-p.To)
		if told := mine[len(mine)-1].Told; told > 0 {
			s.Told = append(s.Told, told-p.To)
		}
	}
	for j, n := range owners {
		switch {
		case n == 0:
			s.False++
			s.Falses = append(s.Falses, found[j].String())
		case n > 1:
			s.Merged++
		}
	}
	return s
}

// Quantile is the q-th quantile of ds (nearest rank); 0 for none.
func Quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, max(0, int(math.Ceil(q*float64(len(s))))-1))]
}

// Row is the score as a table's row: detected, split, merged, false,
// onset p50/p99, end p50/p99, and when the end was told p50/p99.
func (s Score) Row() string {
	ms := func(d time.Duration) string { return fmt.Sprintf("%d", d.Milliseconds()) }
	return strings.Join([]string{fmt.Sprintf("%d/%d", s.Detected, s.Phrases), fmt.Sprint(s.Split), fmt.Sprint(s.Merged), fmt.Sprint(s.False),
		ms(Quantile(s.Onset, 0.5)) + " / " + ms(Quantile(s.Onset, 0.99)), ms(Quantile(s.End, 0.5)) + " / " + ms(Quantile(s.End, 0.99)),
		ms(Quantile(s.Told, 0.5)) + " / " + ms(Quantile(s.Told, 0.99))}, " | ")
}

// Upsample3 is s at three times its rate (48 kHz): zeros stuffed between
// its samples and a windowed-sinc low-pass at 7.6 kHz (96 taps a phase's
// 32, Blackman). For feeding a detector the rate a USB microphone gives.
func Upsample3(s []int16) []int16 {
	const taps, up = 96, 3
	var h [taps]float64
	for i := range h {
		x := float64(i) - float64(taps-1)/2
		w := 0.42 - 0.5*math.Cos(2*math.Pi*float64(i)/float64(taps-1)) + 0.08*math.Cos(4*math.Pi*float64(i)/float64(taps-1))
		fc := 7600.0 / (Rate * up) // cycles a sample
		sinc := 2 * fc
		if x != 0 {
			sinc = math.Sin(2*math.Pi*fc*x) / (math.Pi * x)
		}
		h[i] = up * sinc * w
	}
	out := make([]int16, len(s)*up)
	for n := range out {
		// y[n] = Σ h[k]·x_up[n-k], where x_up is s with zeros between.
		var y float64
		for k := n % up; k < taps; k += up {
			if j := (n - k) / up; j >= 0 && j < len(s) {
				y += h[k] * float64(s[j])
			}
		}
		out[n] = clip(y)
	}
	return out
}
