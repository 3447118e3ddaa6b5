// Package hal holds the hardware contracts of the body: small interfaces
// with typed units for GPIO lines, cameras, audio capture and playback and
// input devices, and the errors their drivers return.
//
// Every resource that senses or acts has Halt, meaning "go inert now": an
// output goes to its safe level, a stream stops delivering. Halt is safe to
// call from any goroutine, at any time, more than once, and it unblocks a
// reader waiting in the same device. Close releases the kernel resource;
// Close implies Halt.
//
// The drivers live in sub-packages (sim for the simulated board, and the
// real ones for the GPIO character device, V4L2, evdev and ALSA). Tests use
// the fakes in haltest. This package imports no other package of the body.
package hal

import (
	"errors"
	"time"
)

// Halter is implemented by everything that moves, senses or emits.
type Halter interface {
	// Halt makes the resource inert now. For an output that means its safe
	// level; for a stream it means no more data and any blocked read returns
	// ErrHalted. Halt does not wait for the consumer.
	Halt() error
}

// Errors a driver returns. Callers branch on them with errors.Is.
var (
	// ErrAbsent means the device a profile names is not on this board. A
	// board report shows it as Skipped, not Failed.
	ErrAbsent = errors.New("hal: device absent")
	// ErrBusy means another consumer holds the device or line.
	ErrBusy = errors.New("hal: device busy")
	// ErrHalted is returned by reads and writes after Halt.
	ErrHalted = errors.New("hal: halted")
	// ErrClosed is returned by every method after Close.
	ErrClosed = errors.New("hal: closed")
	// ErrUnsupported means the device cannot do what was asked (a format,
	// a pull, a rate).
	ErrUnsupported = errors.New("hal: unsupported")
	// ErrPaused is returned once by a stream's read after Pause: the
	// device was let go, and reads wait until Resume.
	ErrPaused = errors.New("hal: paused")
)

// Pauser is a stream that can let go of its device and take it again:
// the privacy switch's way to stop a camera or a microphone for real.
// Consumers find it by type assertion.
//
// Pause stops capture and closes the device (its descriptor, its
// buffers but those the consumer still holds, which go when released),
// drops what was captured and not yet read, and returns once the device
// is closed: nothing more is captured, and another process may open it.
// The consumer's next read returns ErrPaused once, then waits (for ctx,
// Halt, or frames after Resume). Resume opens the device again and
// resumes capture; a device that cannot be opened again is either
// retried by its driver, as after an unplug (a camera), or left paused
// with Resume's error, for the caller to try again (a microphone). Both
// are safe from any goroutine at any time, and do nothing
// when the stream is already paused (or running); after Halt or Close
// they do nothing.
type Pauser interface {
	Pause() error
	Resume() error
}

// Mono is a point in time on the kernel's CLOCK_MONOTONIC, counted from
// boot. Drivers stamp what they deliver with the kernel's own timestamp
// when the kernel gives one (V4L2 buffers, GPIO line events, evdev with
// the monotonic clock selected) and with MonoNow at read time otherwise.
// The body converts Mono to UTC with a measured offset; Mono itself never
// jumps when the wall clock is set.
type Mono time.Duration

// Duration returns m as a time.Duration since boot.
func (m Mono) Duration() time.Duration { return time.Duration(m) }

// Sub returns m-o.
func (m Mono) Sub(o Mono) time.Duration { return time.Duration(m - o) }

// Add returns m+d.
func (m Mono) Add(d time.Duration) Mono { return m + Mono(d) }

func (m Mono) String() string { return "mono+" + time.Duration(m).String() }
