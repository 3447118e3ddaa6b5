//go:build !linux

package probe

import (
	"fmt"
	"runtime"

	"github.com/tobe-body/tobe-body/hal"
)

func unsupported(what string) error {
	return fmt.Errorf("%s: the kernel interfaces are Linux's, this is %s: %w", what, runtime.GOOS, hal.ErrAbsent)
}

// Chip is Linux only.
func (f Finder) Chip(label string) (string, error) { return "", unsupported("GPIO chip " + label) }

// Line is Linux only.
func (f Finder) Line(chipPath, name string) error { return unsupported("GPIO line " + name) }

// Camera is Linux only.
func (f Finder) Camera(device, driver string) (string, error) { return "", unsupported("camera") }

func access(path string) error { return unsupported(path) }

// LineOffset is Linux only.
func (f Finder) LineOffset(chipPath, name string) (uint32, error) {
	return 0, unsupported("GPIO line " + name)
}
