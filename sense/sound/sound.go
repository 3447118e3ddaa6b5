// Package sound is the body's on-device sound analysis: it turns a
// microphone's PCM frames into a few events, never into audio.
//
// An Analyzer mixes each frame down to mono and cuts it into fixed
// windows (Config.Window). For every window it measures the RMS and the
// peak in dBFS (the peak over every channel, before the mixdown) and the
// energy in the speech band, 300–3400 Hz (two Butterworth sections), and
// judges voice with one of two detectors (Config.Voice). From these it
// reports:
//
//   - Level, a summary every Config.SummaryEvery: RMS over the period,
//     the highest peak, the noise floor, how much of it was voice, how
//     much audio was analysed and how often audio was lost;
//   - LoudStarted and LoudEnded, when a window's peak reaches
//     Config.LoudDBFS and when it has stayed Config.LoudHysteresis below
//     it for Config.LoudRelease;
//   - VoiceStarted and VoiceEnded, from a voice activity detector.
//
// # Voice activity: Silero
//
// By default voice is told by Silero VAD v5 (sense/sound/silero, a small
// neural network in pure Go): the mono mixdown is resampled to 16 kHz
// (linear interpolation, after an eighth-order low-pass at 7 kHz for a
// faster input) and judged in chunks of 512 samples (32 ms), each giving
// the probability of speech. Silero misses speech under about -56 dBFS
// whatever the noise, so a quiet room is brought up first: the gain puts
// the broadband noise floor at -36 dBFS, 40 dB at most, and never lowers
// anything. A chunk at 0.5 or over starts voice (once MinVoice of chunks
// at 0.35 or over have come, as below), a chunk at 0.35 or over keeps it
// going, as Silero's own iterator does; the onset is dated 30 ms before
// the first chunk of the run rising to it from 0.2, a reach at most.
// Silero's state is kept over lost audio and forgotten at Flush. Measured
// on recorded speech over recorded ambiences at 10 dB SNR, it finds every
// phrase once and nothing else with the onset within 150 ms (p99), where
// the periodicity detector below misses, splits and is fooled by birds;
// it costs about ten times as much (see Cost).
//
// # Voice activity: periodicity
//
// A window has the energy of voice when its speech band is Config.VoiceSNR
// over the band's noise floor. It is voiced when, besides, the spectrum
// between 100 and 2600 Hz is periodic with a pitch between 80 and 400 Hz:
// the spectrum is divided by a running estimate of the noise's own
// spectrum (so that noise of any colour, hum included, looks white), and
// the autocorrelation this gives, corrected for the analysis window,
// must peak above a fixed level at a lag of one pitch period.
// Periodicity is what tells voiced speech from noise, including a noise
// that has just got louder and that the floor has not caught up with
// yet. Purely unvoiced or whispered speech is not detected; sung notes,
// music and other harmonic sounds can be.
//
// The noise floors (of the speech band, driving the detector, and of the
// broadband RMS, reported in Level) fall toward a quieter window within
// tens of milliseconds and rise toward a louder one with the time
// constant Config.FloorRise. The pauses between syllables keep the floor
// down during speech, while a new steady noise, having no pauses, is
// absorbed within a few time constants. The noise spectrum learns only
// while no voice is near, from windows close to the floor and from
// louder ones that are not periodic.
//
// Voice starts once Config.MinVoice of voiced windows have come, each
// within a reach (300 ms, or the Hangover if shorter) of the one before
// and all within MinVoice + reach of the first (whose periodicity must be
// clearer). The onset is back-dated to the start of the sound that led to
// the first voiced window (windows with the energy of voice, apart by
// less than a reach, going back a reach at most): a consonant or a weak
// syllable often comes before the first clearly periodic one. A segment
// goes on through windows that are voiced, and through windows with only
// the energy of voice (unvoiced consonants, weak syllables) up to a reach
// after the last voiced one, and ends as every segment does (below).
//
// A voiced window's harmonics must look like a voice's: two neighbouring
// harmonics of its pitch under 2 kHz standing over the noise. A bird's
// call or a whistle, a tone or two high over a voice's pitch, is periodic
// at a subharmonic in the pitch range too, but with its "harmonics" far
// apart.
//
// A steady sound that appears suddenly is judged like anything else
// while the floor rises to it: a noise is not periodic and yields nothing;
// a steady harmonic sound (a transformer's buzz, a held note) is voice
// until the floor has risen to within VoiceSNR of it, about FloorRise ×
// ln(step/VoiceSNR) (3 s for a 30 dB step with the defaults), and then
// no more.
//
// # Phrases
//
// With either detector a segment ends when Config.Hangover (700 ms by
// default) passes without a window or chunk that keeps it going;
// VoiceEnded is dated at the end of the last that did, and told a
// Hangover after it, a window and a chunk (52 ms) at most later. The
// Hangover is longer than the pauses between the words of a phrase, so
// that a phrase is one segment: measured on recorded speech at 10 dB SNR,
// a 300 ms Hangover split a third of two-word phrases, 700 ms none.
//
// # Time, gaps and order
//
// A frame's samples are placed on the capture clock from the frame's Time
// and the sample rate; a frame whose Time goes backwards is placed right
// after the previous one, so event times never go backwards. Seq and
// Overruns, not Time, say whether audio was lost: a frame with Overruns
// > 0, or whose Seq does not follow the last numbered frame's (a Seq of
// 0 means unnumbered and is neither checked nor remembered), follows lost
// audio. The Analyzer does not treat lost
// audio as silence and does not stretch anything across it: an open loud
// stretch or voice segment ends at the last audio before the gap (with
// Cut set), an onset not yet confirmed is dropped, the partial window is
// discarded, and the detector waits for a full spectrum of new audio
// before it judges voice again. The noise floors are kept: they describe
// the room, not the stream. Level periods stay on their grid; the gap
// shows as Covered shorter than the period and in Gaps. A period in which
// no audio arrived has no Level event.
//
// Back-dated events would otherwise come after events with later times,
// so the Analyzer holds an event back while a decision that could still
// produce an earlier one is open (an onset being confirmed or looked back
// for, a hangover or a loud release running). Events leave Process in the
// order of their Time, an event at most about max(MinVoice + 2 ×
// Hangover, LoudRelease) after it happened.
//
// # Audio never leaves
//
// The Analyzer keeps only the samples of its current window and spectrum
// (tens of milliseconds) and no event carries samples. Keeping or sending
// clips is for the channel that owns the Analyzer to decide, and only
// when its configuration allows it explicitly.
//
// # Cost
//
// New allocates everything; Process and Flush allocate nothing once the
// out slice has room. With Silero, a second of audio costs about 3 ms of
// CPU on the development machine (scripts/bench/sound.sh), the same
// whatever is heard; with the periodicity detector about 0.3 ms, as most
// windows need no spectrum. An Analyzer is not safe for concurrent use.
package sound

import (
	"fmt"
	"math"
	"time"

	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/sense/sound/silero"
)

// Silence is the level, in dBFS, reported for no signal at all (digital
// zero); every lower level reads as Silence.
const Silence = -120.0

// Fixed parts of the analysis.
const (
	bandLo, bandHi   = 300.0, 3400.0 // speech band, Hz
	pitchLo, pitchHi = 80.0, 400.0   // voice pitch, Hz
	// periodicLo and periodicHi bound the band whose periodicity is
	// judged: from the lowest fundamentals (the first formant of /i/ and
	// /u/ lies under 300 Hz) to where harmonics, in a spectrum of
	// spectrumMin, begin to smear when the pitch wavers.
	periodicLo, periodicHi = 100.0, 2600.0
	// spectrumMin is the shortest audio a spectrum covers (two periods
	// of the lowest pitch and more): 512 samples at 16 kHz.
	spectrumMin = 25 * time.Millisecond
	// spectrumEvery is how often the noise spectrum is updated while no
	// window needs a spectrum of its own.
	spectrumEvery = 100 * time.Millisecond
	// binsMean is the time constant of the per-bin noise spectrum.
	binsMean = 400 * time.Millisecond
	// binsSmooth is how far, in Hz, the noise spectrum is smoothed to
	// either side of a bin.
	binsSmooth = 60.0
	// binsSNR is how close to its floor, in dB, the speech band must be
	// for a window to count as noise only.
	binsSNR = 3.0
	// periodicStart and periodicKeep are the periodicities that start a
	// voice segment and keep one going.
	periodicStart = 0.6
	periodicKeep  = 0.5
	// harmonicMin is how far a harmonic must stand over the noise
	// spectrum (a factor in power: 9 dB) to count.
	harmonicMin = 8.0
	// pairHz is the highest frequency of the pair of neighbouring
	// harmonics a voice must show: under the second formant, where a
	// voice's harmonics are strongest (and a telephone's band still has
	// them).
	pairHz = 2000.0
	// maxHarmonics is how many harmonics of a pitch are looked at: all
	// of the lowest pitch's in the periodicity band.
	maxHarmonics = 33 // periodicHi / pitchLo, and one
	// voiceMinDBFS is the speech band level below which nothing is voice,
	// whatever the floor (a silent room, a muted input).
	voiceMinDBFS = -80.0
	// sileroOn and sileroOff are the probabilities at which Silero's
	// chunks start voice and keep it going, and sileroPad how far before
	// its first chunk a segment is dated: its own iterator's.
	sileroOn, sileroOff = 0.5, 0.35
	// sileroLead is the probability from which a run of chunks rising
	// to voice dates its onset.
	sileroLead = 0.2
	// sileroFloorDBFS and sileroMaxGain: see Analyzer.window.
	sileroFloorDBFS = -36.0
	sileroMaxGain   = 40.0
	sileroPeakDBFS  = -3.0
	sileroPeakFall  = 6.0 // dB a second
	sileroPad       = 30 * time.Millisecond
	// sileroChunk is the audio a Silero chunk holds.
	sileroChunk = time.Duration(silero.ChunkSize) * time.Second / silero.SampleRate
	// consonantReach is how far from voiced audio the sound of a
	// consonant or a weak syllable reaches: see Analyzer.reach.
	consonantReach = 300 * time.Millisecond
	// floorFall is the time constant with which the floors fall.
	floorFall = 60 * time.Millisecond
	// fullScale is the magnitude of int16's most negative value.
	fullScale = 32768.0
)

// Stats counts what an Analyzer has seen.
type Stats struct {
	Frames  uint64 // frames processed
	Windows uint64 // windows analysed
	// Spectra counts the windows that needed a spectrum.
	Spectra uint64
	// Chunks counts the chunks Silero judged (32 ms of audio each).
	Chunks uint64
	// Overruns is the sum of the frames' Overruns.
	Overruns uint64
	// Gaps counts the places where audio was lost: frames with Overruns
	// or a Seq that does not follow the last numbered frame's.
	Gaps uint64
}

// Analyzer turns audio frames into events; see the package doc.
type Analyzer struct {
	cfg    Config
	format hal.AudioFormat
	rate   int
	ch     int
	n      int // samples per window

	// The clock.
	started bool // a frame came since New or Flush
	clocked bool // a frame came since New: cursor is set
	lastSeq uint64
	cursor  hal.Mono // time of the next sample expected

	// The window being filled: mono samples in [-1, 1).
	win       []float64
	fill      int
	winStart  hal.Mono
	winPeak   int32 // highest |sample| over every channel
	winLoudAt int   // first sample at or over the loud threshold, -1 if none

	loudOn, loudOff int32 // peak thresholds in sample units

	// The speech band filter and its noise floor.
	hp, lp    biquad
	bandFloor floor
	// The broadband noise floor.
	levelFloor floor

	// The spectrum: the most recent m mono samples in a ring.
	m          int
	ring       []float64
	ringAt     int // oldest sample
	fresh      int // samples in the ring since the last gap
	hann       []float64
	frame      []float64
	specRe     []float64
	specIm     []float64
	power      []float64
	fft        *realFFT
	perLo      int       // first bin of the periodicity band
	perHi      int       // last bin of the periodicity band
	binFloor   []float64 // per-bin noise spectrum
	binNoise   []float64 // and smoothed across bins
	binsSet    bool
	smoothBins int
	binsAt     hal.Mono // when the bin floors were last updated
	acf        *realFFT
	acfIn      []float64
	acfRe      []float64
	acfIm      []float64
	lagLo      int       // shortest pitch period, in autocorrelation steps
	lagHi      int       // longest pitch period
	hannInv    []float64 // 1 / the window's normalised autocorrelation per step
	pairHi     int       // last bin of a pair of neighbouring harmonics
	// harm and harmBin are the harmonics of the pitch found: how far
	// each stands over the noise, and its bin.
	harm    [maxHarmonics]float64
	harmBin [maxHarmonics]int

	// Silero, when it is the voice detector: the network, the resampler
	// to its 16 kHz, the chunk being filled and the last probability.
	net      *silero.Detector
	rs       resampler
	chunk    []float32
	prob     float32
	peakHold float64 // dBFS: see window
	// from is where the audio since the last cut began: no onset is
	// dated before it.
	from    hal.Mono
	fromSet bool

	// reach is how far from voiced audio a window with only the energy
	// of voice still belongs to it (a consonant, a weak syllable), and
	// how far apart an onset's voiced windows may be: consonantReach, or
	// the Hangover if that is shorter.
	reach  time.Duration
	voice  voiceState
	lead   lead
	loud   loudState
	period period

	// pending holds events, in order of Time, until no earlier one can
	// come.
	pending []Event
	stats   Stats

	// trace, when set (by tests), sees every judged window, and
	// chunkTrace every chunk Silero judged: its end and probability.
	trace      func(windowTrace)
	chunkTrace func(end hal.Mono, p float32)
}

// windowTrace is what the voice detector saw in one window.
type windowTrace struct {
	start, end     hal.Mono
	band, floor    float64 // speech band level and its floor, dBFS
	periodicity    float64 // 0 unless the energy was enough to look
	energy, voiced bool
	phase          voicePhase // after the window
}

type voicePhase uint8

const (
	voiceIdle voicePhase = iota
	voiceOnset
	voiceOn
)

type voiceState struct {
	phase   voicePhase
	onset   hal.Mono // where the segment is dated from
	first   hal.Mono // the first voiced window's start
	lastEnd hal.Mono // end of the last window that kept it going
	// periodicEnd is the end of the last periodic window (lastEnd may be
	// a later window with only the energy).
	periodicEnd hal.Mono
	voiced      time.Duration
	snr         float64 // highest so far
	onsetFloor  float64 // speech band floor at the onset
}

// lead is a run of windows with the energy of voice, apart by no more
// than Hangover, not yet voice: where an onset is dated from.
type lead struct {
	on         bool
	start, end hal.Mono
}

type loudState struct {
	on      bool
	start   hal.Mono
	lastEnd hal.Mono // end of the last window over the lower threshold
	peak    int32
	energy  float64 // sum of squares up to lastEnd
	samples int
	runE    float64 // since lastEnd
	runN    int
}

// period accumulates one Level summary.
type period struct {
	anchored bool
	end      hal.Mono // grid end
	first    hal.Mono // start of the first window in it
	last     hal.Mono // end of the last window in it
	windows  int
	energy   float64
	samples  int
	peak     int32
	covered  time.Duration
	voice    time.Duration
	gaps     int
}

// New makes an Analyzer for audio of format f. The frame size of f does
// not matter: frames of any length are accepted. It fails with an error
// wrapping ErrConfig for a bad cfg and hal.ErrUnsupported for a format it
// cannot analyse (rates 8..192 kHz, 1..32 channels).
func New(cfg Config, f hal.AudioFormat) (*Analyzer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	rate := int(f.Rate / physic.Hertz)
	switch {
	case f.Rate%physic.Hertz != 0 || rate < 8000 || rate > 192000:
		return nil, fmt.Errorf("sound: sample rate %v outside 8..192 kHz: %w", f.Rate, hal.ErrUnsupported)
	case f.Channels < 1 || f.Channels > 32:
		return nil, fmt.Errorf("sound: %d channels outside 1..32: %w", f.Channels, hal.ErrUnsupported)
	}
	a := &Analyzer{cfg: cfg, format: f, rate: rate, ch: f.Channels}
	a.n = max(1, int(int64(cfg.Window)*int64(rate)/int64(time.Second)))
	a.win = make([]float64, a.n)
	a.winLoudAt = -1
	a.loudOn = int32(math.Ceil(fullScale * math.Pow(10, cfg.LoudDBFS/20)))
	a.loudOff = int32(math.Ceil(fullScale * math.Pow(10, (cfg.LoudDBFS-cfg.LoudHysteresis)/20)))
	a.hp = butterworth(bandLo, rate, true)
	a.lp = butterworth(bandHi, rate, false)
	a.reach = min(consonantReach, cfg.Hangover)
	if cfg.Voice == VoiceSilero {
		a.net = silero.New()
		a.rs = newResampler(rate, silero.SampleRate)
		a.chunk = make([]float32, 0, silero.ChunkSize+2)
	}
	a.bandFloor = newFloor(cfg.Window, floorFall, cfg.FloorRise)
	a.levelFloor = a.bandFloor

	a.m = 4
	for a.m < a.n || a.m < int(int64(spectrumMin)*int64(rate)/int64(time.Second)) {
		a.m *= 2
	}
	a.ring = make([]float64, a.m)
	a.hann = make([]float64, a.m)
	var sumW2 float64
	for i := range a.hann {
		w := 0.5 - 0.5*math.Cos(2*math.Pi*float64(i)/float64(a.m))
		a.hann[i] = w
		sumW2 += w * w
	}
	a.frame = make([]float64, a.m)
	a.specRe = make([]float64, a.m/2+1)
	a.specIm = make([]float64, a.m/2+1)
	a.fft = newRealFFT(a.m)
	binHz := float64(rate) / float64(a.m)
	a.smoothBins = max(1, int(math.Round(binsSmooth/binHz)))
	a.perLo = max(a.smoothBins, int(math.Ceil(periodicLo/binHz)))
	a.perHi = min(a.m/2-1-a.smoothBins, int(math.Floor(periodicHi/binHz)))
	a.pairHi = min(a.perHi, int(math.Floor(pairHz/binHz)))
	a.power = make([]float64, a.perHi+a.smoothBins+1)
	a.binFloor = make([]float64, a.perHi+a.smoothBins+1)
	a.binNoise = make([]float64, a.perHi+1)

	// The autocorrelation of the periodicity band is the inverse
	// transform of its power spectrum. As the band is far below Nyquist, a
	// shorter transform gives it at steps of m/l samples, still fine
	// enough (1/8000 s or less) for harmonics up to periodicHi.
	l := 4
	for l < a.m && float64(l)*binHz < 8000 {
		l *= 2
	}
	for l/2 <= a.perHi+1 {
		l *= 2
	}
	a.acf = newRealFFT(l)
	a.acfIn = make([]float64, l)
	a.acfRe = make([]float64, l/2+1)
	a.acfIm = make([]float64, l/2+1)
	step := float64(a.m) / float64(l) // samples per autocorrelation step
	a.lagLo = max(1, int(math.Ceil(float64(rate)/pitchHi/step)))
	a.lagHi = min(l/2-1, int(math.Floor(float64(rate)/pitchLo/step)))
	a.hannInv = make([]float64, a.lagHi+2)
	for s := range a.hannInv {
		lag := s * a.m / l
		var r float64
		for i := 0; i+lag < a.m; i++ {
			r += a.hann[i] * a.hann[i+lag]
		}
		a.hannInv[s] = sumW2 / r
	}

	// Events wait behind an open decision for at most about this long;
	// a window adds at most a few.
	hold := max(cfg.MinVoice+2*cfg.Hangover, cfg.LoudRelease) + 2*cfg.Window
	a.pending = make([]Event, 0, 4*int(hold/cfg.Window)+8)
	return a, nil
}

// Config returns the configuration in use, defaults filled in.
func (a *Analyzer) Config() Config { return a.cfg }

// Stats returns the counters so far.
func (a *Analyzer) Stats() Stats { return a.stats }

// at is the offset of sample i of a frame.
func (a *Analyzer) at(i int) time.Duration {
	return time.Duration(int64(i) * int64(time.Second) / int64(a.rate))
}

// Process analyses one frame and appends to out the events it completes,
// in order of Time, and returns out. Samples holds interleaved samples of
// the Analyzer's channel count; a trailing partial multi-channel sample
// is ignored. Most frames complete no event.
func (a *Analyzer) Process(fr *hal.AudioFrame, out []Event) []Event {
	a.stats.Frames++
	if fr.Overruns > 0 {
		a.stats.Overruns += uint64(fr.Overruns)
	}
	start := fr.Time
	skipped := a.started && fr.Seq != 0 && a.lastSeq != 0 && fr.Seq != a.lastSeq+1
	if fr.Overruns > 0 || skipped {
		a.stats.Gaps++
		a.period.gaps++
		if a.started {
			a.cut()
		}
	}
	if a.clocked {
		start = max(start, a.cursor)
	}
	a.started, a.clocked = true, true
	if fr.Seq != 0 {
		a.lastSeq = fr.Seq
	}

	n := len(fr.Samples) / a.ch
	src := fr.Samples[:n*a.ch]
	for i := 0; i < n; {
		if a.fill == 0 {
			a.winStart = start.Add(a.at(i))
		}
		take := min(n-i, a.n-a.fill)
		a.mix(src[i*a.ch : (i+take)*a.ch])
		i += take
		if a.fill == a.n {
			a.window(start.Add(a.at(i)))
		}
	}
	a.cursor = start.Add(a.at(n))
	return a.release(out)
}

// Flush ends the stream: open loud and voice stretches end (Cut), the
// current period's Level is emitted however short, and every event held
// back is appended to out. A later Process starts afresh, keeping only
// the noise floors, the clock (its events still come after these) and
// Stats.
func (a *Analyzer) Flush(out []Event) []Event {
	a.cut()
	if a.net != nil {
		a.net.Reset()
		a.prob = 0
	}
	a.closePeriod()
	a.period.anchored = false
	a.started = false
	a.lastSeq = 0
	out = append(out, a.pending...)
	a.pending = a.pending[:0]
	return out
}

// mix appends whole multi-channel samples to the window as mono.
func (a *Analyzer) mix(src []int16) {
	w := a.win[a.fill:]
	peak, loudAt := a.winPeak, a.winLoudAt
	if a.ch == 1 {
		w = w[:len(src)]
		for j, s := range src {
			v := int32(s)
			w[j] = float64(v) * (1 / fullScale)
			if v < 0 {
				v = -v
			}
			if v > peak {
				peak = v
				if v >= a.loudOn && loudAt < 0 {
					loudAt = a.fill + j
				}
			}
		}
		a.fill += len(src)
	} else {
		inv := 1 / (fullScale * float64(a.ch))
		for j := 0; j < len(src)/a.ch; j++ {
			var sum int32
			for _, s := range src[j*a.ch : (j+1)*a.ch] {
				v := int32(s)
				sum += v
				if v < 0 {
					v = -v
				}
				if v > peak {
					peak = v
					if v >= a.loudOn && loudAt < 0 {
						loudAt = a.fill + j
					}
				}
			}
			w[j] = float64(sum) * inv
		}
		a.fill += len(src) / a.ch
	}
	a.winPeak, a.winLoudAt = peak, loudAt
}

// dB converts a mean square (1 = full-scale square) to dBFS.
func dB(ms float64) float64 {
	if !(ms > 0) {
		return Silence
	}
	return max(Silence, 10*math.Log10(ms))
}

// peakDB converts a sample magnitude to dBFS.
func peakDB(p int32) float64 {
	if p <= 0 {
		return Silence
	}
	return max(Silence, 20*math.Log10(float64(p)/fullScale))
}

// window analyses the full window, which ended at end.
func (a *Analyzer) window(end hal.Mono) {
	st := a.winStart
	a.stats.Windows++
	peak, loudAt := a.winPeak, a.winLoudAt
	a.fill, a.winPeak, a.winLoudAt = 0, 0, -1

	// Broadband and speech band energy; the window goes into the ring.
	var sum, band float64
	hp, lp := a.hp, a.lp
	ring, at := a.ring, a.ringAt
	for _, x := range a.win {
		sum += x * x
		y := hp.b0*x + hp.z1
		hp.z1 = hp.b1*x - hp.a1*y + hp.z2
		hp.z2 = hp.b2*x - hp.a2*y
		z := lp.b0*y + lp.z1
		lp.z1 = lp.b1*y - lp.a1*z + lp.z2
		lp.z2 = lp.b2*y - lp.a2*z
		band += z * z
		ring[at] = x
		if at++; at == len(ring) {
			at = 0
		}
	}
	a.hp, a.lp, a.ringAt = hp, lp, at
	ms := sum / float64(a.n)

	a.account(st, end, sum, peak)
	a.loudStep(st, end, sum, peak, loudAt)
	a.levelFloor.update(dB(ms))

	if !a.fromSet {
		a.from, a.fromSet = st, true
	}
	if a.net != nil {
		bandDB := dB(band / float64(a.n))
		snr := 0.0
		if a.bandFloor.set {
			snr = bandDB - a.bandFloor.db
		}
		floorDB := a.bandFloor.db
		// Silero hears a quiet room louder: it misses speech under about
		// -56 dBFS, whatever the noise. The noise floor is brought up
		// to sileroFloorDBFS (sileroMaxGain at most), where speech 10 dB
		// over the noise is well within its hearing, but never so far
		// that the loudest of the last seconds (a peak held, falling
		// sileroPeakFall a second) would pass sileroPeakDBFS: clipped
		// speech is heard worse.
		a.peakHold = max(peakDB(peak), a.peakHold-sileroPeakFall*end.Sub(st).Seconds())
		gain := 1.0
		if a.levelFloor.set {
			gain = math.Pow(10, max(0, min(sileroMaxGain, sileroFloorDBFS-a.levelFloor.db, sileroPeakDBFS-a.peakHold))/20)
		}
		a.listen(st, snr, gain)
		a.bandFloor.update(bandDB)
		if a.trace != nil {
			on := float64(a.prob) >= sileroOn
			a.trace(windowTrace{st, end, bandDB, floorDB, float64(a.prob), on, on, a.voice.phase})
		}
		return
	}
	a.fresh = min(a.m, a.fresh+a.n)
	if a.fresh < a.m {
		return // not a full spectrum of audio since the last gap yet
	}
	bandDB := dB(band / float64(a.n))
	snr := 0.0
	if a.bandFloor.set {
		snr = bandDB - a.bandFloor.db
	}
	energy := snr >= a.cfg.VoiceSNR && bandDB >= voiceMinDBFS
	var per float64
	if energy || !a.binsSet || end.Sub(a.binsAt) >= spectrumEvery {
		a.stats.Spectra++
		a.spectrum()
		if energy && a.binsSet {
			per = a.periodicity()
		}
		// The noise spectrum learns, while no voice is near, from windows
		// close to the floor and from those well over it that do not
		// look voiced (a louder noise).
		if a.voice.phase == voiceIdle && (snr < binsSNR || (energy && per < periodicKeep)) {
			// After a long pause in learning (voice, lost audio) the
			// next spectrum counts as no more than one taken on time.
			a.updateBins(min(end.Sub(a.binsAt), spectrumEvery))
			a.binsAt = end
		}
	}
	floorDB := a.bandFloor.db
	if energy && a.voice.phase != voiceOn {
		if !a.lead.on || st.Sub(a.lead.end) > a.reach {
			a.lead = lead{on: true, start: st}
		}
		a.lead.end = end
	}
	// The onset reaches back over the sound that led to this window, a
	// reach at most: the consonant or the weak syllable before the first
	// clearly voiced one.
	onset := max(a.lead.start, st.Add(-a.reach))
	a.voiceStep(st, end, energy && per >= periodicStart, energy && per >= periodicKeep, energy, snr, onset)
	a.bandFloor.update(bandDB)
	if a.trace != nil {
		a.trace(windowTrace{st, end, bandDB, floorDB, per, energy, energy && per >= periodicStart, a.voice.phase})
	}
}

// account adds a window to the current Level period, closing the period
// first when the window starts on or after its end.
func (a *Analyzer) account(st, end hal.Mono, sum float64, peak int32) {
	p := &a.period
	if !p.anchored {
		*p = period{anchored: true, end: st.Add(a.cfg.SummaryEvery), gaps: p.gaps}
	} else if st >= p.end {
		a.closePeriod()
		every := hal.Mono(a.cfg.SummaryEvery)
		p.end += (st-p.end)/every*every + every
	}
	if p.windows == 0 {
		p.first = st
	}
	p.windows++
	p.last = end
	p.energy += sum
	p.samples += a.n
	p.peak = max(p.peak, peak)
	p.covered += end.Sub(st)
}

// closePeriod emits the Level of the current period, if it has audio,
// and empties it (keeping its grid).
func (a *Analyzer) closePeriod() {
	p := &a.period
	if p.windows > 0 {
		a.emit(Event{
			Kind:    Level,
			Time:    p.last,
			Start:   p.first,
			RMS:     dB(p.energy / float64(p.samples)),
			Peak:    peakDB(p.peak),
			Floor:   a.levelFloor.db,
			Voice:   p.voice,
			Covered: p.covered,
			Gaps:    p.gaps,
		})
	}
	*p = period{anchored: p.anchored, end: p.end}
}

// credit counts [from, to) as voice in the periods it overlaps: the
// current one and any Level still held back.
func (a *Analyzer) credit(from, to hal.Mono) {
	overlap := func(s, e hal.Mono) time.Duration {
		return max(0, min(e, to).Sub(max(s, from)))
	}
	for i := range a.pending {
		if ev := &a.pending[i]; ev.Kind == Level {
			ev.Voice += overlap(ev.Start, ev.Time)
		}
	}
	if p := &a.period; p.windows > 0 {
		p.voice += overlap(p.first, p.last)
	}
}

func (a *Analyzer) loudStep(st, end hal.Mono, sum float64, peak int32, loudAt int) {
	l := &a.loud
	if !l.on {
		if peak < a.loudOn {
			return
		}
		*l = loudState{on: true, start: st.Add(a.at(loudAt)), lastEnd: end, peak: peak, energy: sum, samples: a.n}
		a.emit(Event{Kind: LoudStarted, Time: l.start, Start: l.start, Peak: peakDB(peak), RMS: dB(sum / float64(a.n))})
		return
	}
	l.runE += sum
	l.runN += a.n
	if peak >= a.loudOff {
		l.lastEnd = end
		l.peak = max(l.peak, peak)
		l.energy += l.runE
		l.samples += l.runN
		l.runE, l.runN = 0, 0
		return
	}
	if end.Sub(l.lastEnd) >= a.cfg.LoudRelease {
		a.endLoud(false)
	}
}

func (a *Analyzer) endLoud(cut bool) {
	l := &a.loud
	a.emit(Event{Kind: LoudEnded, Time: l.lastEnd, Start: l.start, Peak: peakDB(l.peak), RMS: dB(l.energy / float64(l.samples)), Cut: cut})
	*l = loudState{}
}

// voiceStep advances the voice detector by one window (a chunk, for
// Silero): start says the window may start voice, keep that it is voiced
// enough to keep voice going, energy that it has the energy of voice, and
// onset is where voice it starts is dated from.
func (a *Analyzer) voiceStep(st, end hal.Mono, start, keep, energy bool, snr float64, onset hal.Mono) {
	v := &a.voice
	switch v.phase {
	case voiceIdle:
		if start {
			*v = voiceState{phase: voiceOnset, onset: onset, first: st, lastEnd: end, voiced: end.Sub(st), snr: snr, onsetFloor: a.bandFloor.db}
			a.confirm()
		}
	case voiceOnset:
		switch {
		case keep:
			v.voiced += end.Sub(st)
			v.lastEnd = end
			v.snr = max(v.snr, snr)
			a.confirm()
		case end.Sub(v.lastEnd) >= a.reach || end.Sub(v.first) >= a.cfg.MinVoice+a.reach:
			// Too sparse to be voice.
			*v = voiceState{}
		}
	case voiceOn:
		// Voiced windows keep the segment going, and so do windows
		// with only the energy (consonants are not periodic) up to a
		// reach after the last voiced one.
		if keep {
			v.periodicEnd = end
		}
		if keep || (energy && end.Sub(v.periodicEnd) <= a.reach) {
			a.credit(v.lastEnd, end)
			v.lastEnd = end
			v.snr = max(v.snr, snr)
		} else if end.Sub(v.lastEnd) >= a.cfg.Hangover {
			a.endVoice(false)
		}
	}
}

// listen passes the window, resampled to 16 kHz, to Silero, and each
// chunk it completes to the voice detector; snr is the window's speech
// band over its floor. The resampler interpolates linearly between input
// samples (after a low-pass at 7 kHz when the rate is over 16 kHz): a
// voice detector needs no finer.
func (a *Analyzer) listen(st hal.Mono, snr, gain float64) {
	for i, x := range a.win {
		a.chunk = a.rs.push(max(-1, min(1, x*gain)), a.chunk)
		if len(a.chunk) < silero.ChunkSize {
			continue
		}
		// At most one more sample than a chunk (an input sample yields
		// at most two outputs at 8 kHz): it begins the next.
		a.prob = a.net.Process(a.chunk[:silero.ChunkSize])
		a.chunk = a.chunk[:copy(a.chunk, a.chunk[silero.ChunkSize:])]
		a.stats.Chunks++
		end := st.Add(a.at(i + 1))
		if a.chunkTrace != nil {
			a.chunkTrace(end, a.prob)
		}
		p := float64(a.prob)
		// The run of chunks rising to voice leads to its onset.
		switch {
		case p < sileroLead || a.voice.phase == voiceOn:
			a.lead.on = false
		case !a.lead.on:
			a.lead = lead{on: true, start: end.Add(-sileroChunk)}
		}
		// Dated as Silero's own iterator dates a chunk, a pad before the
		// run rising to it.
		from := end.Add(-sileroChunk)
		onset := from
		if a.lead.on {
			onset = max(a.lead.start, from.Add(-a.reach))
		}
		onset = max(a.from, onset.Add(-sileroPad))
		a.voiceStep(from, end, p >= sileroOn, p >= sileroOff, p >= sileroOff, snr, onset)
	}
}

// confirm starts the voice segment once enough voiced audio was seen.
func (a *Analyzer) confirm() {
	v := &a.voice
	if v.voiced < a.cfg.MinVoice {
		return
	}
	v.phase = voiceOn
	v.periodicEnd = v.lastEnd
	a.emit(Event{Kind: VoiceStarted, Time: v.onset, Start: v.onset, SNR: v.snr, Floor: v.onsetFloor})
	a.credit(v.onset, v.lastEnd)
}

func (a *Analyzer) endVoice(cut bool) {
	v := &a.voice
	a.emit(Event{Kind: VoiceEnded, Time: v.lastEnd, Start: v.onset, SNR: v.snr, Cut: cut})
	*v = voiceState{}
	a.lead = lead{}
}

// cut ends what spans lost audio: see the package doc.
func (a *Analyzer) cut() {
	if a.loud.on {
		a.endLoud(true)
	}
	switch a.voice.phase {
	case voiceOn:
		a.endVoice(true)
	case voiceOnset:
		a.voice = voiceState{}
	}
	a.lead = lead{}
	a.fill, a.winPeak, a.winLoudAt = 0, 0, -1
	a.fresh = 0
	if a.net != nil {
		// Silero's state is kept over lost audio (it is the room's, as
		// the floors are); the partial chunk and the resampler are not.
		a.rs.reset()
		a.chunk = a.chunk[:0]
	}
	a.fromSet = false
	a.hp.reset()
	a.lp.reset()
}

// emit queues ev in order of Time (after events of the same Time).
func (a *Analyzer) emit(ev Event) {
	i := len(a.pending)
	a.pending = append(a.pending, ev)
	for i > 0 && a.pending[i-1].Time > ev.Time {
		a.pending[i] = a.pending[i-1]
		i--
	}
	a.pending[i] = ev
}

// horizon is the earliest Time an event not yet emitted could have.
func (a *Analyzer) horizon() hal.Mono {
	h := a.cursor
	if a.fill > 0 {
		h = min(h, a.winStart)
	}
	switch a.voice.phase {
	case voiceIdle:
		// A window still to come could start voice with an onset back
		// in the sound that leads to it; a chunk of Silero's, a pad
		// before its start.
		if a.net != nil {
			from := a.cursor.Add(-sileroChunk)
			if a.lead.on {
				from = max(a.lead.start, from.Add(-a.reach))
			}
			h = min(h, max(a.from, from.Add(-sileroPad)))
		} else if a.lead.on && h.Sub(a.lead.end) <= a.reach {
			h = min(h, max(a.lead.start, h.Add(-a.reach)))
		}
	case voiceOnset:
		h = min(h, a.voice.onset)
	case voiceOn:
		h = min(h, a.voice.lastEnd)
	}
	if a.loud.on {
		h = min(h, a.loud.lastEnd)
	}
	return h
}

// release appends to out the held events no earlier event can precede.
func (a *Analyzer) release(out []Event) []Event {
	h := a.horizon()
	n := 0
	for n < len(a.pending) && a.pending[n].Time <= h {
		n++
	}
	if n == 0 {
		return out
	}
	out = append(out, a.pending[:n]...)
	a.pending = a.pending[:copy(a.pending, a.pending[n:])]
	return out
}
