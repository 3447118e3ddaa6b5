package edge

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"
)

// Listen listens on the Unix socket at path with mode 0660, in group gid
// (-1: the daemon's own); what names the socket in errors ("admin
// socket"). A socket left by a daemon that died (connecting to it is
// refused: ECONNREFUSED) is removed. One that answers belongs to a
// running daemon and is an error; so is one that cannot be told apart
// from a live one (connecting fails otherwise: its backlog is full,
// permission is denied), and anything there that is not a socket.
func Listen(what, path string, gid int) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("%s %s: something that is not a socket is there (%s); not removing it", what, path, fi.Mode().Type())
		}
		c, err := net.DialTimeout("unix", path, time.Second)
		switch {
		case err == nil:
			c.Close()
			return nil, fmt.Errorf("%s %s: another tobe-body is answering on it", what, path)
		case !errors.Is(err, syscall.ECONNREFUSED):
			return nil, fmt.Errorf("%s %s: cannot tell whether a tobe-body is answering on it, so not removing it: %w", what, path, err)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("%s: remove stale %s: %w", what, path, err)
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		ln.Close()
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if gid >= 0 {
		if err := os.Chown(path, -1, gid); err != nil {
			ln.Close()
			return nil, fmt.Errorf("%s: %w", what, err)
		}
	}
	return ln, nil
}
