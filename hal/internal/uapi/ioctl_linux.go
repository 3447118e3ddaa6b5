//go:build linux

package uapi

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Ioctl issues one request on fd with arg, a pointer to the request's
// structure that the call keeps alive, and retries it when a signal
// interrupted it (EINTR). A failure is the kernel's errno as a
// syscall.Errno: the caller names the request (os.NewSyscallError).
//
// fd must not come from (*os.File).Fd on a file the runtime polls: that
// switches it to blocking mode for good. Such a file's descriptor is
// reached through SyscallConn.
func Ioctl(fd int, req uintptr, arg unsafe.Pointer) error {
	for {
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(arg))
		switch e {
		case 0:
			return nil
		case unix.EINTR:
			continue
		}
		return e
	}
}

// FileIoctlValue issues a request whose argument is a value, not a
// pointer (I2C_SLAVE's address), on f as FileIoctl does.
func FileIoctlValue(f *os.File, req, val uintptr) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ierr error
	err = rc.Control(func(fd uintptr) {
		for {
			_, _, e := unix.Syscall(unix.SYS_IOCTL, fd, req, val)
			if e == unix.EINTR {
				continue
			}
			if e != 0 {
				ierr = e
			}
			return
		}
	})
	if err != nil {
		return err
	}
	return ierr
}

// FileIoctl issues Ioctl on a file the runtime polls, through
// SyscallConn: f.Fd() would put the descriptor in blocking mode for good,
// and a read would then sit in the kernel where neither a deadline, Halt
// nor a context reaches it.
func FileIoctl(f *os.File, req uintptr, arg unsafe.Pointer) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ierr error
	if err := rc.Control(func(fd uintptr) { ierr = Ioctl(int(fd), req, arg) }); err != nil {
		return err
	}
	return ierr
}
