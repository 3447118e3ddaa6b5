// Package voicetest judges a voice activity detector on recorded speech:
// it reads the corpus scripts/voice-corpus.sh makes (real speech and
// recorded noise, 16 kHz mono), labels each recording's phrases from the
// clean recording, lays phrases out over a noise at a chosen SNR, and
// scores what a detector found against the labels: phrases detected,
// split, merged, false detections, and the errors of onsets and ends.
// It is for tests and benchmarks, and knows nothing of any detector.
package voicetest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Rate is the corpus's sample rate.
const Rate = 16000

// Corpus are the recordings: speech and noise, by name.
type Corpus struct {
	Dir    string
	Speech []Recording
	Noise  []Recording
}

// Recording is one file's samples.
type Recording struct {
	Name    string
	Samples []int16
}

// Dir is where scripts/voice-corpus.sh puts the corpus: $VOICE_CORPUS,
// or the user's cache.
func Dir() string {
	if d := os.Getenv("VOICE_CORPUS"); d != "" {
		return d
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "tobe-body", "voice-corpus")
}

// ErrNoCorpus says the corpus is not there.
var ErrNoCorpus = errors.New("voicetest: no voice corpus (scripts/voice-corpus.sh makes it)")

// Load reads the corpus in dir.
func Load(dir string) (*Corpus, error) {
	if _, err := os.Stat(filepath.Join(dir, ".ready")); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrNoCorpus, dir)
	}
	c := &Corpus{Dir: dir}
	for _, part := range []struct {
		sub string
		to  *[]Recording
	}{{"speech", &c.Speech}, {"noise", &c.Noise}} {
		files, err := filepath.Glob(filepath.Join(dir, part.sub, "*.wav"))
		if err != nil {
			return nil, err
		}
		slices.Sort(files)
		for _, f := range files {
			s, err := ReadWAV(f)
			if err != nil {
				return nil, err
			}
			*part.to = append(*part.to, Recording{Name: strings.TrimSuffix(filepath.Base(f), ".wav"), Samples: s})
		}
	}
	if len(c.Speech) == 0 || len(c.Noise) == 0 {
		return nil, fmt.Errorf("%w: %s has %d speech and %d noise files", ErrNoCorpus, dir, len(c.Speech), len(c.Noise))
	}
	return c, nil
}

// ReadWAV reads a 16 kHz mono 16-bit PCM WAV file.
func ReadWAV(path string) ([]int16, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var riff [12]byte
	if _, err := io.ReadFull(f, riff[:]); err != nil || string(riff[:4]) != "RIFF" || string(riff[8:]) != "WAVE" {
		return nil, fmt.Errorf("voicetest: %s: not a WAV file", path)
	}
	var fmtOK bool
	for {
		var hdr [8]byte
		if _, err := io.ReadFull(f, hdr[:]); err != nil {
			return nil, fmt.Errorf("voicetest: %s: no data chunk", path)
		}
		size := int64(binary.LittleEndian.Uint32(hdr[4:]))
		switch string(hdr[:4]) {
		case "fmt ":
			b := make([]byte, size+size%2)
			if _, err := io.ReadFull(f, b); err != nil || size < 16 {
				return nil, fmt.Errorf("voicetest: %s: a short fmt chunk", path)
			}
			tag, ch := binary.LittleEndian.Uint16(b), binary.LittleEndian.Uint16(b[2:])
			rate, bits := binary.LittleEndian.Uint32(b[4:]), binary.LittleEndian.Uint16(b[14:])
			if tag != 1 && tag != 0xfffe || ch != 1 || rate != Rate || bits != 16 {
				return nil, fmt.Errorf("voicetest: %s: format %d, %d channels, %d Hz, %d bits; want 16 kHz mono 16-bit PCM", path, tag, ch, rate, bits)
			}
			fmtOK = true
		case "data":
			if !fmtOK {
				return nil, fmt.Errorf("voicetest: %s: data before fmt", path)
			}
			b := make([]byte, size)
			if _, err := io.ReadFull(f, b); err != nil {
				return nil, fmt.Errorf("voicetest: %s: %w", path, err)
			}
			s := make([]int16, size/2)
			for i := range s {
				s[i] = int16(binary.LittleEndian.Uint16(b[2*i:]))
			}
			return s, nil
		default:
			if _, err := f.Seek(size+size%2, io.SeekCurrent); err != nil {
				return nil, err
			}
		}
	}
}

// Span is a stretch of a scene, from its start. Told, for a segment a
// detector found, is when it said the segment ended (0: not known).
type Span struct{ From, To, Told time.Duration }

func (s Span) String() string { return fmt.Sprintf("%v..%v", s.From, s.To) }

// Label thresholds: FrameLen frames, active when their RMS is within
// LabelRange of the recording's loudest frame; PhraseGap is the longest
// pause inside one phrase. The LibriVox and card-name recordings carry
// their own room noise and breaths 25 to 35 dB under their loudest
// frame, for up to half a second before the first word: a range of 30
// dB labelled those as speech.
const (
	FrameLen   = 10 * time.Millisecond
	LabelRange = 25.0 // dB
	PhraseGap  = 600 * time.Millisecond
)

// Phrases labels a clean recording: the stretches of its active frames
// (Active) joined across pauses of up to PhraseGap. It also returns the
// longest pause it joined across, and the RMS (linear, of full scale) of
// its active frames.
func Phrases(s []int16) (phrases []Span, longestPause time.Duration, activeRMS float64) {
	active, activeRMS := Active(s)
	for i, on := range active {
		if !on {
			continue
		}
		at := time.Duration(i) * FrameLen
		if k := len(phrases) - 1; k >= 0 && at-phrases[k].To <= PhraseGap {
			longestPause = max(longestPause, at-phrases[k].To)
			phrases[k].To = at + FrameLen
			continue
		}
		phrases = append(phrases, Span{From: at, To: at + FrameLen})
	}
	return phrases, longestPause, activeRMS
}

// Active labels a clean recording's FrameLen frames: a frame is speech
// when its RMS over 100 Hz is within LabelRange dB of the loudest
// frame's. It also returns the RMS (linear, of full scale) of the active
// frames. (The LibriVox readings carry a rumble under 100 Hz, 20 to 30
// dB under their loudest frame, before their first words.)
func Active(s []int16) (active []bool, activeRMS float64) {
	n := int(FrameLen * Rate / time.Second)
	var rms []float64
	peak := 0.0
	hp := highPass(100)
	for i := 0; i+n <= len(s); i += n {
		var sum float64
		for _, v := range s[i : i+n] {
			y := hp.step(float64(v))
			sum += y * y
		}
		r := math.Sqrt(sum/float64(n)) / 32768
		rms = append(rms, r)
		peak = max(peak, r)
	}
	thr := peak * math.Pow(10, -LabelRange/20)
	var sum float64
	var count int
	active = make([]bool, len(rms))
	for i, r := range rms {
		if r >= thr && r > 0 {
			active[i] = true
			sum += r * r
			count++
		}
	}
	if count > 0 {
		activeRMS = math.Sqrt(sum / float64(count))
	}
	return active, activeRMS
}

// biquad is a second-order IIR section (transposed direct form II).
type biquad struct{ b0, b1, b2, a1, a2, z1, z2 float64 }

// highPass is a second-order Butterworth high-pass at f Hz (the audio
// EQ cookbook's).
func highPass(f float64) biquad {
	sin, cos := math.Sincos(2 * math.Pi * f / Rate)
	alpha := sin / math.Sqrt2
	a0 := 1 + alpha
	return biquad{b0: (1 + cos) / 2 / a0, b1: -(1 + cos) / a0, b2: (1 + cos) / 2 / a0, a1: -2 * cos / a0, a2: (1 - alpha) / a0}
}

func (q *biquad) step(x float64) float64 {
	y := q.b0*x + q.z1
	q.z1 = q.b1*x - q.a1*y + q.z2
	q.z2 = q.b2*x - q.a2*y
	return y
}
