//go:build !linux

package led

import (
	"fmt"

	"github.com/tobe-body/tobe-body/hal"
)

// Open fails: /sys/class/leds is Linux's.
func Open(name string) (hal.LED, error) {
	return nil, fmt.Errorf("LED %q: /sys/class/leds is Linux's: %w", name, hal.ErrUnsupported)
}
