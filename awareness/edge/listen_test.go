package edge

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The attack: a live daemon's socket that another daemon cannot connect
// to (here its backlog is full; permissions do the same to another user)
// was taken for a stale one and deleted, cutting its administrators off.
// Only a refused connection means stale now; the live socket stays, and
// once it is truly dead it is replaced.
func TestListenLeavesALiveSocketItCannotReach(t *testing.T) {
	path := filepath.Join(t.TempDir(), "admin.sock")
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	full := false
	for range 64 {
		c, err := net.Dial("unix", path)
		if errors.Is(err, syscall.EAGAIN) {
			full = true
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	if !full {
		t.Fatal("the listener's backlog never filled")
	}
	before, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := Listen("admin socket", path, -1)
	if err == nil {
		ln.Close()
		t.Fatal("Listen took over a live socket")
	}
	if want := "admin socket " + path + ": cannot tell whether a tobe-body is answering on it, so not removing it"; !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got %v, want %q", err, want)
	}
	after, err := os.Lstat(path)
	if err != nil || !os.SameFile(before, after) {
		t.Fatalf("the live socket is gone or replaced: %v", err)
	}

	// Dead now: connecting is refused, and the socket is replaced.
	unix.Close(fd)
	ln, err = Listen("admin socket", path, -1)
	if err != nil {
		t.Fatalf("a dead socket: %v", err)
	}
	ln.Close()
}
