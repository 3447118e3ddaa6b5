package sound

import (
	"cmp"
	"errors"
	"fmt"
	"time"
)

// ErrConfig is wrapped by every error of Config.Validate.
var ErrConfig = errors.New("sound: invalid configuration")

// Config tunes an Analyzer. A zero field means its default (the Default*
// constants); a non-zero field outside its range is refused by Validate,
// which names the field.
type Config struct {
	// Window is the analysis window: levels, the loud threshold and the
	// voice decision are taken once a window. 5 ms..100 ms.
	Window time.Duration
	// SummaryEvery is the period of the Level summary. 1 s..1 h, and at
	// least a Window.
	SummaryEvery time.Duration
	// LoudDBFS is the peak level, in dBFS, at which a window is loud.
	// -90..0 (exclusive of 0).
	LoudDBFS float64
	// LoudHysteresis is how far, in dB, the peak must fall below LoudDBFS
	// before a loud stretch can end, so that a level hovering at the
	// threshold does not flap. 0..30 (exclusive of 0).
	LoudHysteresis float64
	// LoudRelease is how long the peak must stay below LoudDBFS -
	// LoudHysteresis before the loud stretch ends. Up to 10 s.
	LoudRelease time.Duration
	// VoiceSNR is how far, in dB, the energy in the speech band must rise
	// over its noise floor for a window to count as voiced (with the
	// spectral evidence). 0..40 (exclusive of 0).
	VoiceSNR float64
	// MinVoice is how much voiced audio confirms the onset of voice. Up to
	// 2 s.
	MinVoice time.Duration
	// Hangover is how long voice must be absent before a voice segment
	// ends; pauses between syllables and words shorter than this stay
	// inside one segment. Up to 5 s.
	Hangover time.Duration
	// Voice is the voice activity detector: VoiceSilero or
	// VoicePeriodicity.
	Voice VoiceDetector
	// FloorRise is the time constant with which the noise floors rise
	// toward a louder steady noise (they fall within tens of milliseconds
	// when the sound gets quieter). 100 ms..5 min.
	FloorRise time.Duration
}

// VoiceDetector names a voice activity detector.
type VoiceDetector string

// The voice activity detectors.
const (
	// VoiceSilero is Silero VAD v5 (sense/sound/silero), a small neural
	// network judging 32 ms chunks of 16 kHz audio: see the package doc.
	VoiceSilero VoiceDetector = "silero"
	// VoicePeriodicity is the periodicity of the speech band at a
	// voice's pitch: see the package doc.
	VoicePeriodicity VoiceDetector = "periodicity"
)

// Defaults of Config.
const (
	DefaultWindow         = 20 * time.Millisecond
	DefaultSummaryEvery   = 10 * time.Second
	DefaultLoudDBFS       = -20.0
	DefaultLoudHysteresis = 6.0
	DefaultLoudRelease    = 500 * time.Millisecond
	DefaultVoiceSNR       = 6.0
	DefaultMinVoice       = 100 * time.Millisecond
	DefaultHangover       = 700 * time.Millisecond
	DefaultFloorRise      = 2 * time.Second
	DefaultVoice          = VoiceSilero
)

// Validate reports the first field outside its range, by name. The
// error wraps ErrConfig.
func (c Config) Validate() error {
	win := cmp.Or(c.Window, DefaultWindow)
	for _, err := range []error{
		durIn("Window", c.Window, 5*time.Millisecond, 100*time.Millisecond),
		durIn("SummaryEvery", c.SummaryEvery, max(time.Second, win), time.Hour),
		dbIn("LoudDBFS", c.LoudDBFS, -90, 0, "dBFS"),
		dbIn("LoudHysteresis", c.LoudHysteresis, 0, 30, "dB"),
		durIn("LoudRelease", c.LoudRelease, time.Nanosecond, 10*time.Second),
		dbIn("VoiceSNR", c.VoiceSNR, 0, 40, "dB"),
		durIn("MinVoice", c.MinVoice, time.Nanosecond, 2*time.Second),
		durIn("Hangover", c.Hangover, time.Nanosecond, 5*time.Second),
		durIn("FloorRise", c.FloorRise, 100*time.Millisecond, 5*time.Minute),
		voiceIn(c.Voice),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

// voiceIn checks Voice: empty or a detector's name.
func voiceIn(v VoiceDetector) error {
	switch v {
	case "", VoiceSilero, VoicePeriodicity:
		return nil
	}
	return fmt.Errorf("%w: Voice is %q, want %q or %q (or empty for the default)", ErrConfig, v, VoiceSilero, VoicePeriodicity)
}

// durIn checks a duration field: zero, or in lo..hi.
func durIn(field string, v, lo, hi time.Duration) error {
	if v != 0 && (v < lo || v > hi) {
		return fmt.Errorf("%w: %s is %v, want %v..%v (or 0 for the default)", ErrConfig, field, v, lo, hi)
	}
	return nil
}

// dbIn checks a level field: zero, or in lo..hi excluding the end that
// is zero (zero means the default).
func dbIn(field string, v, lo, hi float64, unit string) error {
	ok := v > lo && v <= hi // NaN is never ok
	if hi == 0 {
		ok = v >= lo && v < hi
	}
	if v != 0 && !ok {
		return fmt.Errorf("%w: %s is %v %s, want %v..%v %s (or 0 for the default)", ErrConfig, field, v, unit, lo, hi, unit)
	}
	return nil
}

// withDefaults fills the zero fields.
func (c Config) withDefaults() Config {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	deff := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Window, DefaultWindow)
	def(&c.SummaryEvery, DefaultSummaryEvery)
	deff(&c.LoudDBFS, DefaultLoudDBFS)
	deff(&c.LoudHysteresis, DefaultLoudHysteresis)
	def(&c.LoudRelease, DefaultLoudRelease)
	deff(&c.VoiceSNR, DefaultVoiceSNR)
	def(&c.MinVoice, DefaultMinVoice)
	def(&c.Hangover, DefaultHangover)
	def(&c.FloorRise, DefaultFloorRise)
	if c.Voice == "" {
		c.Voice = DefaultVoice
	}
	return c
}
