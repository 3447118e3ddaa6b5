package sound

import (
	"fmt"
	"time"

	"github.com/tobe-body/tobe-body/hal"
)

// Kind says what an Event reports.
type Kind uint8

// Kinds of Event. String gives the ledger's event type.
const (
	// Level summarises a period of SummaryEvery: mean RMS, highest peak,
	// the noise floor and how much of it was voice.
	Level Kind = iota + 1
	// LoudStarted: a window's peak reached LoudDBFS.
	LoudStarted
	// LoudEnded: the peak stayed below LoudDBFS - LoudHysteresis for
	// LoudRelease, or the audio was cut.
	LoudEnded
	// VoiceStarted: voice confirmed; Time is its onset.
	VoiceStarted
	// VoiceEnded: voice absent for Hangover, or the audio was cut; Time is
	// the end of the last window that kept the segment going.
	VoiceEnded
)

func (k Kind) String() string {
	switch k {
	case Level:
		return "audio.level"
	case LoudStarted:
		return "audio.loud"
	case LoudEnded:
		return "audio.loud_ended"
	case VoiceStarted:
		return "audio.voice_started"
	case VoiceEnded:
		return "audio.voice_ended"
	}
	return fmt.Sprintf("audio.kind(%d)", uint8(k))
}

// Event is one transition or summary. Which fields mean something depends
// on Kind; the others are zero. Levels are in dBFS, where 0 dBFS is the
// RMS of a full-scale square wave (a full-scale sine is -3.01 dBFS RMS and
// 0 dBFS peak) and Silence stands for no signal at all.
//
// Time is when the thing happened on the capture clock, from the frame's
// time and the sample's offset in it, not when the Analyzer noticed:
// LoudStarted is the first sample at or over LoudDBFS; VoiceStarted is
// the onset, back-dated to the start of the sound that led to voice (see
// the package doc); an ended event is the end of the last window that
// kept the stretch going; Level is the end of the period's last window.
// Events leave Process in the order of Time.
type Event struct {
	Kind Kind
	Time hal.Mono
	// Start is where the summarised period (Level) or the stretch that
	// ended (LoudEnded, VoiceEnded) began; for the other kinds it is Time.
	Start hal.Mono
	// RMS: Level, the period's RMS over the audio analysed; LoudStarted,
	// the window's; LoudEnded, the loud stretch's.
	RMS float64
	// Peak: Level, LoudStarted and LoudEnded, the highest sample.
	Peak float64
	// Floor: Level, the broadband noise floor (the RMS the room does not
	// go below); VoiceStarted, the noise floor of the speech band.
	Floor float64
	// SNR: VoiceStarted and VoiceEnded, the highest rise of the speech
	// band over its floor so far in the segment, in dB.
	SNR float64
	// Voice: Level, how much of the period was inside voice segments.
	Voice time.Duration
	// Covered: Level, how much audio the period analysed; less than the
	// span from Start to Time when samples were lost.
	Covered time.Duration
	// Gaps: Level, how many times audio was lost (overruns, frames
	// missing) in the period.
	Gaps int
	// Cut: LoudEnded and VoiceEnded, the stretch was ended by lost audio
	// or the end of the stream, not by the sound ending.
	Cut bool
}

// Duration is Time - Start: the length of an ended stretch or the span of
// a summary.
func (e Event) Duration() time.Duration { return e.Time.Sub(e.Start) }

func (e Event) String() string {
	switch e.Kind {
	case Level:
		return fmt.Sprintf("%v %v rms %.1f peak %.1f floor %.1f dBFS voice %v of %v gaps %d", e.Kind, e.Time, e.RMS, e.Peak, e.Floor, e.Voice, e.Covered, e.Gaps)
	case LoudStarted:
		return fmt.Sprintf("%v %v peak %.1f rms %.1f dBFS", e.Kind, e.Time, e.Peak, e.RMS)
	case LoudEnded:
		return fmt.Sprintf("%v %v after %v peak %.1f rms %.1f dBFS cut %t", e.Kind, e.Time, e.Duration(), e.Peak, e.RMS, e.Cut)
	case VoiceStarted:
		return fmt.Sprintf("%v %v snr %.1f dB floor %.1f dBFS", e.Kind, e.Time, e.SNR, e.Floor)
	case VoiceEnded:
		return fmt.Sprintf("%v %v after %v snr %.1f dB cut %t", e.Kind, e.Time, e.Duration(), e.SNR, e.Cut)
	}
	return fmt.Sprintf("%v %v", e.Kind, e.Time)
}
