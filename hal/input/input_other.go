//go:build !linux

package input

import (
	"fmt"
	"runtime"

	"github.com/tobe-body/tobe-body/hal"
)

// Open needs Linux's evdev.
func Open(cfg hal.InputConfig) (hal.InputDevice, error) {
	return nil, fmt.Errorf("input: evdev is Linux's, this is %s: %w", runtime.GOOS, hal.ErrAbsent)
}

// Watch needs Linux's evdev.
func Watch() (hal.InputWatcher, error) {
	return nil, fmt.Errorf("input: evdev is Linux's, this is %s: %w", runtime.GOOS, hal.ErrAbsent)
}
