// Package uapi holds the Linux kernel's userspace structures and ioctl
// request numbers that hal's drivers use, once: the GPIO character device
// (linux/gpio.h, uAPI v2, and the chip info of v1), V4L2
// (linux/videodev2.h), evdev (linux/input.h) and i2c-dev's SMBus
// transfers (linux/i2c-dev.h). A structure is laid out
// byte for byte as the C compiler lays out the kernel's header for the
// ABI Go builds for (amd64, arm64 and 32-bit ARM differ where a long or a
// pointer is in it), and a request number is computed from the size of
// its structure, so both follow the architecture; the tests check them
// against the C compiler's figures. Names are the kernel's in Go's case:
// struct gpio_v2_line_request is GPIOV2LineRequest,
// GPIO_V2_LINE_FLAG_INPUT is GPIOV2LineFlagInput, VIDIOC_QUERYCAP is
// VIDIOCQueryCap.
//
// The structures and numbers compile on every platform, so that code
// built everywhere can name a flag; Ioctl, which issues them, is Linux's.
// Packages outside hal cannot import this one: what the lab tests need of
// the kernel's interfaces they get from hal/gpio/gpiosim and
// hal/camera/vivid.
package uapi

import "bytes"

// The request encoding of asm-generic/ioctl.h, which x86 and ARM use:
// _IOC(dir, type, nr, size) is dir<<30 | size<<16 | type<<8 | nr.
const (
	iocWrite = 1
	iocRead  = 2

	iocSize = 16
	iocType = 8
	iocDir  = 30
)

// CString is a NUL-padded char array of the kernel's (a name, a label) as
// a string.
func CString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// Timeval is a struct timeval as the kernel's structures hold it: two
// longs, as wide as Go's int on every architecture Linux runs Go on.
type Timeval struct {
	Sec  int
	Usec int
}
