//go:build linux

package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// lockData takes an exclusive lock on the data directory so two daemons
// never share it. The lock is the kernel's: it goes when the process does,
// however it ends. The file holds the holder's pid for the error message.
// It is opened without following a symbolic link, and used only when it
// is a regular file of this user with one name: anything planted there
// is refused, never written through.
func lockData(dir string) (release func(), err error) {
	path := dir + "/tobe-body.lock"
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0o640)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("lock %s: a symbolic link is there; not following it (remove it)", path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, os.NewSyscallError("fstat", err))
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		f.Close()
		return nil, fmt.Errorf("lock %s: not a regular file (mode %o); remove it", path, st.Mode)
	case int(st.Uid) != os.Geteuid():
		f.Close()
		return nil, fmt.Errorf("lock %s: owned by uid %d, not by this daemon's user (uid %d); remove it", path, st.Uid, os.Geteuid())
	case st.Nlink != 1:
		f.Close()
		return nil, fmt.Errorf("lock %s: has %d names (a hard link to another file?); remove it", path, st.Nlink)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		b := make([]byte, 32)
		n, _ := f.ReadAt(b, 0)
		f.Close()
		if err == unix.EWOULDBLOCK {
			return nil, fmt.Errorf("another tobe-body (pid %s) is running with data directory %s", strings.TrimSpace(string(b[:n])), dir)
		}
		return nil, fmt.Errorf("lock %s: %w", path, os.NewSyscallError("flock", err))
	}
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() { f.Close() }, nil
}

// checkDataDir refuses a data directory another user could change: one
// not owned by the daemon's user, or writable by its group or others.
// Whoever can write there can plant links and files the daemon would
// open as its own (the ledger, the lock, the identity, the sockets).
func checkDataDir(dir string) error {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return fmt.Errorf("data directory %s: %w", dir, os.NewSyscallError("stat", err))
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("data directory %s: not a directory", dir)
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("data directory %s: owned by uid %d, not by this daemon's user (uid %d); chown it, or choose another with --data", dir, st.Uid, os.Geteuid())
	case st.Mode&0o022 != 0:
		return fmt.Errorf("data directory %s: writable by its group or by others (mode %04o); chmod go-w %s", dir, st.Mode&0o7777, dir)
	}
	return nil
}

// sdNotify tells systemd about the daemon's state (READY=1, STOPPING=1,
// WATCHDOG=1) when it runs as a Type=notify unit; otherwise it does nothing.
func sdNotify(state string) error {
	addr := os.Getenv("NOTIFY_SOCKET")
	if addr == "" {
		return nil
	}
	if strings.HasPrefix(addr, "@") {
		addr = "\x00" + addr[1:]
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("sd_notify: %w", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(state)); err != nil {
		return fmt.Errorf("sd_notify: %w", err)
	}
	return nil
}

// isTerminal tells whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
