//go:build linux

package probe

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tobe-body/tobe-body/hal"
)

// The kernel's structures and request numbers (linux/gpio.h,
// linux/videodev2.h).
const (
	gpioGetChipInfo   = 0x8044b401 // _IOR(0xB4, 0x01, struct gpiochip_info)
	gpioV2GetLineInfo = 0xc100b405 // _IOWR(0xB4, 0x05, struct gpio_v2_line_info)
	gpioV2FlagUsed    = 1 << 0
	vidiocQueryCap    = 0x80685600 // _IOR('V', 0, struct v4l2_capability)
	v4l2CapCapture    = 0x00000001
	v4l2CapCaptureMP  = 0x00001000
	v4l2CapDeviceCaps = 0x80000000
)

type gpioChipInfo struct {
	Name  [32]byte
	Label [32]byte
	Lines uint32
}

type gpioV2LineInfo struct {
	Name     [32]byte
	Consumer [32]byte
	Offset   uint32
	NumAttrs uint32
	Flags    uint64
	Attrs    [10][16]byte
	Padding  [4]uint32
}

type v4l2Capability struct {
	Driver       [16]byte
	Card         [32]byte
	BusInfo      [32]byte
	Version      uint32
	Capabilities uint32
	DeviceCaps   uint32
	Reserved     [3]uint32
}

func cstr(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

func ioctl(fd uintptr, req uintptr, arg unsafe.Pointer) error {
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, fd, req, uintptr(arg)); e != 0 {
		return e
	}
	return nil
}

func chipInfo(path string) (gpioChipInfo, error) {
	var info gpioChipInfo
	fd, err := os.Open(path)
	if err != nil {
		return info, err
	}
	defer fd.Close()
	if err := ioctl(fd.Fd(), gpioGetChipInfo, unsafe.Pointer(&info)); err != nil {
		return info, os.NewSyscallError("ioctl GPIO_GET_CHIPINFO "+path, err)
	}
	return info, nil
}

// Chip finds the GPIO chip with this label among /dev/gpiochip*.
func (f Finder) Chip(label string) (string, error) {
	var labels []string
	var errs []error
	for _, p := range f.glob("dev/gpiochip*") {
		info, err := chipInfo(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		l := cstr(info.Label[:])
		labels = append(labels, l)
		if l == label {
			return p, nil
		}
	}
	if len(errs) > 0 {
		return "", fmt.Errorf("no readable GPIO chip labelled %q (readable: %s): %w", label, list(labels), errors.Join(errs...))
	}
	return "", fmt.Errorf("no GPIO chip labelled %q (present: %s): %w", label, list(labels), hal.ErrAbsent)
}

// findLine reads the chip's line infos until the one named name.
func findLine(chipPath, name string) (gpioV2LineInfo, gpioChipInfo, error) {
	info, err := chipInfo(chipPath)
	if err != nil {
		return gpioV2LineInfo{}, info, err
	}
	fd, err := os.Open(chipPath)
	if err != nil {
		return gpioV2LineInfo{}, info, err
	}
	defer fd.Close()
	for off := uint32(0); off < info.Lines; off++ {
		li := gpioV2LineInfo{Offset: off}
		if err := ioctl(fd.Fd(), gpioV2GetLineInfo, unsafe.Pointer(&li)); err != nil {
			return li, info, os.NewSyscallError(fmt.Sprintf("ioctl GPIO_V2_GET_LINEINFO %s offset %d", chipPath, off), err)
		}
		if cstr(li.Name[:]) == name {
			return li, info, nil
		}
	}
	return gpioV2LineInfo{}, info, fmt.Errorf("chip %s has no line named %q: %w", cstr(info.Label[:]), name, hal.ErrAbsent)
}

// LineOffset returns the offset of the named line on the chip at path.
func (f Finder) LineOffset(chipPath, name string) (uint32, error) {
	li, _, err := findLine(chipPath, name)
	return li.Offset, err
}

// Line checks that the chip has a line of this name and no other consumer
// holds it.
func (f Finder) Line(chipPath, name string) error {
	li, info, err := findLine(chipPath, name)
	if err != nil {
		return err
	}
	if li.Flags&gpioV2FlagUsed != 0 {
		consumer := cstr(li.Consumer[:])
		if consumer == "" {
			consumer = "the kernel"
		}
		return fmt.Errorf("line %s (offset %d of %s) is held by consumer %q: %w", name, li.Offset, cstr(info.Label[:]), consumer, hal.ErrBusy)
	}
	return nil
}

func queryCap(path string) (v4l2Capability, error) {
	var c v4l2Capability
	fd, err := os.OpenFile(path, os.O_RDWR|unix.O_NONBLOCK, 0)
	if err != nil {
		return c, err
	}
	defer fd.Close()
	if err := ioctl(fd.Fd(), vidiocQueryCap, unsafe.Pointer(&c)); err != nil {
		return c, os.NewSyscallError("ioctl VIDIOC_QUERYCAP "+path, err)
	}
	return c, nil
}

func isCapture(c v4l2Capability) bool {
	caps := c.Capabilities
	if caps&v4l2CapDeviceCaps != 0 {
		caps = c.DeviceCaps
	}
	return caps&(v4l2CapCapture|v4l2CapCaptureMP) != 0
}

// Camera finds a V4L2 capture device by path, or the first one of a driver.
func (f Finder) Camera(device, driver string) (string, error) {
	if device != "" {
		p := device
		if !filepath.IsAbs(p) {
			return "", fmt.Errorf("camera device %q is not an absolute path", device)
		}
		c, err := queryCap(f.path(p))
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("no camera at %s: %w", p, hal.ErrAbsent)
		}
		if err != nil {
			return "", err
		}
		if !isCapture(c) {
			return "", fmt.Errorf("%s (%s, %s) is not a capture device", p, cstr(c.Driver[:]), cstr(c.Card[:]))
		}
		return fmt.Sprintf("%s (%s, %s)", p, cstr(c.Driver[:]), cstr(c.Card[:])), nil
	}
	var drivers []string
	var errs []error
	for _, p := range f.glob("dev/video*") {
		c, err := queryCap(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		d := cstr(c.Driver[:])
		drivers = append(drivers, d)
		if d == driver && isCapture(c) {
			return fmt.Sprintf("%s (%s, %s)", filepath.Join("/dev", filepath.Base(p)), d, cstr(c.Card[:])), nil
		}
	}
	if len(errs) > 0 {
		// Some device could not be asked: it may be the one wanted.
		return "", fmt.Errorf("no V4L2 capture device of driver %q among the readable ones (%s): %w", driver, list(drivers), errors.Join(errs...))
	}
	return "", fmt.Errorf("no V4L2 capture device of driver %q (present: %s): %w", driver, list(drivers), hal.ErrAbsent)
}

// access checks read and write permission on a device node.
func access(path string) error {
	if _, err := os.Stat(path); err != nil {
		if os.IsNotExist(err) {
			return fmt.Errorf("%s missing: %w", path, hal.ErrAbsent)
		}
		return err
	}
	if err := unix.Access(path, unix.R_OK|unix.W_OK); err != nil {
		return &os.PathError{Op: "access", Path: path, Err: err}
	}
	return nil
}
