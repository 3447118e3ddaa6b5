//go:build !linux

package vivid

import (
	"unsafe"

	"github.com/tobe-body/tobe-body/hal"
)

// V4L2 is Linux's: no node opens elsewhere.

func open(string) (int, error)                 { return -1, hal.ErrUnsupported }
func ioctl(int, uintptr, unsafe.Pointer) error { return hal.ErrUnsupported }
func closeFD(int) error                        { return nil }
