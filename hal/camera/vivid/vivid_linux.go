//go:build linux

package vivid

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tobe-body/tobe-body/hal/internal/uapi"
)

func open(node string) (int, error) {
	fd, err := unix.Open(node, unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: node, Err: err}
	}
	return fd, nil
}

func ioctl(fd int, req uintptr, arg unsafe.Pointer) error {
	if err := uapi.Ioctl(fd, req, arg); err != nil {
		return os.NewSyscallError("ioctl", err)
	}
	return nil
}

func closeFD(fd int) error { return unix.Close(fd) }
