//go:build !linux

package gpio

import (
	"fmt"
	"runtime"

	"github.com/tobe-body/tobe-body/hal"
)

// Open needs the Linux GPIO character device.
func Open(label string) (hal.Chip, error) {
	return nil, fmt.Errorf("gpio: chip %s: the GPIO character device is Linux's, this is %s: %w", label, runtime.GOOS, hal.ErrAbsent)
}
