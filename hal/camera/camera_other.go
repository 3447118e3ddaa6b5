//go:build !linux

package camera

import (
	"fmt"
	"runtime"

	"github.com/tobe-body/tobe-body/hal"
)

// Open needs Linux's V4L2.
func Open(cfg hal.CameraConfig) (hal.Camera, error) {
	return nil, fmt.Errorf("camera %s: V4L2 is Linux's, this is %s: %w", cfg.Device, runtime.GOOS, hal.ErrAbsent)
}
