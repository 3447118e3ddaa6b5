package hal

import (
	"context"
	"fmt"
)

// Event types and codes of the Linux input subsystem that the body uses by
// name. The values are the kernel's (linux/input-event-codes.h).
const (
	EvSyn uint16 = 0x00
	EvKey uint16 = 0x01
	EvRel uint16 = 0x02
	EvAbs uint16 = 0x03

	SynReport  uint16 = 0
	SynDropped uint16 = 3

	KeyEnter uint16 = 28
	BtnMisc  uint16 = 0x100 // BTN_0
	RelDial  uint16 = 0x07
)

// InputEvent is one evdev event.
type InputEvent struct {
	// Time is the kernel's timestamp on the monotonic clock.
	Time  Mono
	Type  uint16
	Code  uint16
	Value int32
}

func (e InputEvent) String() string {
	return fmt.Sprintf("type=%d code=%d value=%d at %s", e.Type, e.Code, e.Value, e.Time)
}

// InputInfo identifies an input device.
type InputInfo struct {
	Name    string
	Path    string // /dev/input/eventN
	Phys    string
	Bus     uint16
	Vendor  uint16
	Product uint16
	// Keys lists the EV_KEY codes the device can send.
	Keys []uint16
}

// InputConfig selects an input device by name or path.
type InputConfig struct {
	Name string
	Path string
	// Grab asks for exclusive access (EVIOCGRAB).
	Grab bool
}

// InputDevice is a stream of evdev events.
type InputDevice interface {
	Halter
	Info() InputInfo
	// ReadEvent blocks until the next event, ctx is done, or the device is
	// halted (ErrHalted). A removed device returns ErrAbsent.
	ReadEvent(ctx context.Context) (InputEvent, error)
	Close() error
}

// InputChange is an input device that appeared or went away.
type InputChange struct {
	// Added is true for a device that appeared, false for one removed.
	Added bool
	// Info describes the device; for a removal it is what was known when
	// it was added.
	Info InputInfo
}

func (c InputChange) String() string {
	if c.Added {
		return fmt.Sprintf("added %s %q", c.Info.Path, c.Info.Name)
	}
	return fmt.Sprintf("removed %s %q", c.Info.Path, c.Info.Name)
}

// InputWatcher reports input devices as they come and go: first every
// device present, as additions, then each change.
type InputWatcher interface {
	// Next blocks until the next change, ctx is done, or the watcher is
	// closed (ErrClosed).
	Next(ctx context.Context) (InputChange, error)
	Close() error
}
