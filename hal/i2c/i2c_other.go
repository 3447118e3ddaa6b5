//go:build !linux

package i2c

import (
	"fmt"

	"github.com/tobe-body/tobe-body/hal"
)

// Open fails: I²C buses are Linux's.
func Open(name string) (hal.I2CBus, error) {
	return nil, fmt.Errorf("I²C bus %q: i2c-dev is Linux's: %w", name, hal.ErrUnsupported)
}
