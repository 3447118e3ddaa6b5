//go:build linux

package probe

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/internal/uapi"
)

func chipInfo(path string) (uapi.GPIOChipInfo, error) {
	var info uapi.GPIOChipInfo
	fd, err := os.Open(path)
	if err != nil {
		return info, err
	}
	defer fd.Close()
	if err := uapi.Ioctl(int(fd.Fd()), uapi.GPIOGetChipInfo, unsafe.Pointer(&info)); err != nil {
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
		l := uapi.CString(info.Label[:])
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
func findLine(chipPath, name string) (uapi.GPIOV2LineInfo, uapi.GPIOChipInfo, error) {
	info, err := chipInfo(chipPath)
	if err != nil {
		return uapi.GPIOV2LineInfo{}, info, err
	}
	fd, err := os.Open(chipPath)
	if err != nil {
		return uapi.GPIOV2LineInfo{}, info, err
	}
	defer fd.Close()
	for off := uint32(0); off < info.Lines; off++ {
		li := uapi.GPIOV2LineInfo{Offset: off}
		if err := uapi.Ioctl(int(fd.Fd()), uapi.GPIOV2GetLineInfo, unsafe.Pointer(&li)); err != nil {
			return li, info, os.NewSyscallError(fmt.Sprintf("ioctl GPIO_V2_GET_LINEINFO %s offset %d", chipPath, off), err)
		}
		if uapi.CString(li.Name[:]) == name {
			return li, info, nil
		}
	}
	return uapi.GPIOV2LineInfo{}, info, fmt.Errorf("chip %s has no line named %q: %w", uapi.CString(info.Label[:]), name, hal.ErrAbsent)
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
	if li.Flags&uapi.GPIOV2LineFlagUsed != 0 {
		consumer := uapi.CString(li.Consumer[:])
		if consumer == "" {
			consumer = "the kernel"
		}
		return fmt.Errorf("line %s (offset %d of %s) is held by consumer %q: %w", name, li.Offset, uapi.CString(info.Label[:]), consumer, hal.ErrBusy)
	}
	return nil
}

func queryCap(path string) (uapi.V4L2Capability, error) {
	var c uapi.V4L2Capability
	fd, err := os.OpenFile(path, os.O_RDWR|unix.O_NONBLOCK, 0)
	if err != nil {
		return c, err
	}
	defer fd.Close()
	if err := uapi.Ioctl(int(fd.Fd()), uapi.VIDIOCQueryCap, unsafe.Pointer(&c)); err != nil {
		return c, os.NewSyscallError("ioctl VIDIOC_QUERYCAP "+path, err)
	}
	return c, nil
}

func isCapture(c uapi.V4L2Capability) bool {
	return c.NodeCaps()&(uapi.V4L2CapVideoCapture|uapi.V4L2CapVideoCaptureMPlane) != 0
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
			return "", fmt.Errorf("%s (%s, %s) is not a capture device", p, uapi.CString(c.Driver[:]), uapi.CString(c.Card[:]))
		}
		return fmt.Sprintf("%s (%s, %s)", p, uapi.CString(c.Driver[:]), uapi.CString(c.Card[:])), nil
	}
	var drivers []string
	var errs []error
	for _, p := range f.glob("dev/video*") {
		c, err := queryCap(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		d := uapi.CString(c.Driver[:])
		drivers = append(drivers, d)
		if d == driver && isCapture(c) {
			return fmt.Sprintf("%s (%s, %s)", filepath.Join("/dev", filepath.Base(p)), d, uapi.CString(c.Card[:])), nil
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
