//go:build linux

package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

func mkfifo(path string) error { return unix.Mkfifo(path, 0o644) }

func umask(mask int) int { return unix.Umask(mask) }

// The monitor's line goes to a terminal: a pseudo-terminal is one; a
// pipe, /dev/null and a writer that is no file are not.
func TestIsTerminal(t *testing.T) {
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	defer ptmx.Close()
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetUint32(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("the pseudo-terminal's other end: %v", err)
	}
	defer tty.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	for _, tc := range []struct {
		name string
		w    io.Writer
		want bool
	}{
		{"a pseudo-terminal", tty, true},
		{"a pipe", w, false},
		{"/dev/null", null, false},
		{"a buffer", &bytes.Buffer{}, false},
	} {
		if got := isTerminal(tc.w); got != tc.want {
			t.Errorf("%s: isTerminal %v, want %v", tc.name, got, tc.want)
		}
	}
}
