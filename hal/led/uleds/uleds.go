// Package uleds makes LED class devices from user space through the
// kernel's uleds driver (/dev/uleds), for the lab: a real LED under
// /sys/class/leds, with the kernel's LED core (brightness, triggers)
// behind it, whose brightness the kernel reports back to the program
// that made it. The LED lives while that program keeps it open.
package uleds

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/tobe-body/tobe-body/hal/internal/uapi"
)

// LED is one LED made through /dev/uleds.
type LED struct {
	Name string
	f    *os.File
	last int32
}

// Make makes the LED name with max_brightness max and waits until it is
// in /sys/class/leds.
func Make(name string, max int32) (*LED, error) {
	if len(name) >= uapi.ULedsMaxNameSize {
		return nil, fmt.Errorf("uleds: name %q: at most %d bytes", name, uapi.ULedsMaxNameSize-1)
	}
	f, err := os.OpenFile("/dev/uleds", os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("uleds: %w", err)
	}
	var u uapi.ULedsUserDev
	copy(u.Name[:], name)
	u.MaxBrightness = max
	if err := binary.Write(f, binary.NativeEndian, &u); err != nil {
		f.Close()
		return nil, fmt.Errorf("uleds: making %s: %w", name, err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		_, err := os.Stat(filepath.Join("/sys/class/leds", name, "brightness"))
		if err == nil {
			return &LED{Name: name, f: f, last: -1}, nil
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("uleds: %s did not appear in /sys/class/leds: %w", name, err)
		}
	}
}

// WaitFor waits until the kernel set the LED's brightness to want, as
// this side hears it, for at most within; it returns the last brightness
// heard when it does not come.
func (l *LED) WaitFor(want int32, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if err := l.f.SetReadDeadline(deadline); err != nil {
			return err
		}
		var b int32
		if err := binary.Read(l.f, binary.NativeEndian, &b); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				break
			}
			return fmt.Errorf("uleds: %s: %w", l.Name, err)
		}
		l.last = b
		if b == want {
			return nil
		}
	}
	if l.last == want {
		return nil // set before this wait, and not changed since
	}
	return fmt.Errorf("uleds: %s: the kernel set brightness %d, not %d, within %v", l.Name, l.last, want, within)
}

// Close removes the LED.
func (l *LED) Close() error { return l.f.Close() }
