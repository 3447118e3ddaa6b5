//go:build linux

package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// lockData takes an exclusive lock on the data directory so two daemons
// never share it. The lock is the kernel's: it goes when the process does,
// however it ends. The file holds the holder's pid for the error message.
func lockData(dir string) (release func(), err error) {
	path := dir + "/tobe-body.lock"
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
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
