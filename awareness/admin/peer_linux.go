//go:build linux

package admin

import (
	"net"

	"golang.org/x/sys/unix"
)

// peerCred is the uid and gid of the process at the other end of a Unix
// socket, as the kernel says (SO_PEERCRED); -1, -1 when they cannot be
// read.
func peerCred(c net.Conn) (uid, gid int) {
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
