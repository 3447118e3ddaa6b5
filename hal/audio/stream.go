package audio

import (
	"errors"
	"time"

	"github.com/tobe-body/tobe-body/hal"
)

// ErrStalled is returned by ReadFrame and Play when a running device has
// not called back for a while (stallAfter): PortAudio's stream thread
// ended, as it does when the device is unplugged or its driver fails. The
// device will not recover; close it and open it again.
var ErrStalled = errors.New("audio: the device stopped calling back")

// stream is an open PortAudio stream as a capture or playback drives it.
// The cgo side implements it; tests use a fake.
type stream interface {
	// start starts the device calling back.
	start() error
	// abort stops the device now, dropping what it holds.
	abort() error
	// close releases the stream and the library reference it holds.
	close() error
}

// callbackFlags are what PortAudio reports with a buffer.
type callbackFlags uint

const (
	// inputOverflow: samples before this buffer were lost (an xrun).
	inputOverflow callbackFlags = 1 << iota
	// outputUnderflow: the device ran dry before this buffer (an xrun).
	outputUnderflow
)

// clockSource says how a capture stamps its frames.
type clockSource int

const (
	clockUnknown clockSource = iota
	// clockDevice: PortAudio's stream times are on CLOCK_MONOTONIC (ALSA
	// stamps hw PCMs with it), so a buffer's ADC time is used as it is.
	clockDevice
	// clockEstimate: they are on another clock (the wall clock, for some
	// plugins), so a frame is stamped hal.MonoNow at the callback minus
	// what PortAudio says was buffered behind it.
	clockEstimate
)

func (c clockSource) String() string {
	switch c {
	case clockDevice:
		return "the device's ADC time (CLOCK_MONOTONIC)"
	case clockEstimate:
		return "MonoNow at the callback minus the buffered audio"
	}
	return "not known yet"
}

// near is how close PortAudio's current time must be to a clock's reading
// at the callback to be taken as that clock. The two readings are a
// callback's work apart (microseconds, milliseconds under emulation),
// while CLOCK_MONOTONIC and the wall clock are years apart on any board
// whose clock was ever set.
const near = time.Second

// chooseClock decides, at the first callback, whether PortAudio's times
// (cur, its current time) are CLOCK_MONOTONIC: they must be near mono and
// not near the wall clock too. A board whose wall clock still counts from
// boot (no RTC, no NTP yet) has both near each other; then the estimate is
// used, as the wall clock will jump when it is set.
func chooseClock(cur time.Duration, mono hal.Mono, wall time.Time) clockSource {
	abs := func(d time.Duration) time.Duration { return max(d, -d) }
	if cur > 0 && abs(cur-mono.Duration()) < near && abs(cur-time.Duration(wall.UnixNano())) >= near {
		return clockDevice
	}
	return clockEstimate
}
