//go:build linux

package edge

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// PeerCred is the uid and gid of the process at the other end of a Unix
// socket, as the kernel says (SO_PEERCRED); -1, -1 when they cannot be
// read.
func PeerCred(c net.Conn) (uid, gid int) {
	uid, gid = -1, -1
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return
	}
	rc, err := uc.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
			uid, gid = int(cred.Uid), int(cred.Gid)
		}
	})
	return
}

// HungUp tells whether the peer of c has closed its end for good
// (POLLHUP: both directions shut; a peer that only stopped writing still
// reads its answers and has not hung up).
func HungUp(c net.Conn) bool {
	sc, ok := c.(interface {
		SyscallConn() (syscall.RawConn, error)
	})
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	hup := false
	rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd)}}
		if n, err := unix.Poll(fds, 0); err == nil && n > 0 {
			hup = fds[0].Revents&unix.POLLHUP != 0
		}
	})
	return hup
}
