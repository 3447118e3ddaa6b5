// Package edgetest makes peers of other uids for tests of a socket of
// package edge, without running them as other users: a peer binds its
// end of the socket to an abstract address that carries its uid, and
// Cred, the socket's credentials seam, reads it back. The hostile tests
// with real uids (package admintest) show the same through SO_PEERCRED.
package edgetest

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
)

var seq atomic.Int64

const prefix = "@tobe-edge-test-"

// Cred is the uid of a peer that Dial connected, as its gid too; a peer
// that did not come through Dial is this process's uid and gid.
func Cred(c net.Conn) (uid, gid int) {
	name := ""
	if a := c.RemoteAddr(); a != nil {
		name = a.String()
	}
	i := strings.LastIndex(name, "-uid-")
	if !strings.HasPrefix(name, prefix) || i < 0 {
		return os.Getuid(), os.Getgid()
	}
	uid, err := strconv.Atoi(name[i+len("-uid-"):])
	if err != nil {
		return -1, -1
	}
	return uid, uid
}

// Dial connects to the socket at path as a peer of uid, as Cred reads it.
func Dial(path string, uid int) (*net.UnixConn, error) {
	local := &net.UnixAddr{Net: "unix", Name: fmt.Sprintf("%s%d-%d-uid-%d", prefix, os.Getpid(), seq.Add(1), uid)}
	return net.DialUnix("unix", local, &net.UnixAddr{Net: "unix", Name: path})
}
