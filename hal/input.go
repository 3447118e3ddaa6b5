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
