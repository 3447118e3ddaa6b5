//go:build linux

package gpio

import (
	"context"
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/tobe-body/tobe-body/hal"
)

// A waiter must stay wakeable after the line was read or written: those
// ioctls must not put the descriptor in blocking mode (as f.Fd() would),
// where no deadline reaches a read. A pipe stands in for the line's file:
// the ioctl fails on it, but the descriptor's mode is what is tested.
func TestHaltWakesWaiterAfterIoctl(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	defer r.Close()
	in := &lineIn{name: "T", f: r, edges: true}
	if _, err := in.Read(); err == nil {
		t.Fatal("GET_VALUES on a pipe succeeded")
	}
	if !nonblocking(t, r) {
		t.Fatal("the ioctl left the descriptor in blocking mode")
	}
	done := make(chan error, 1)
	go func() {
		_, err := in.WaitForEdge(context.Background())
		done <- err
	}()
	in.Halt()
	if err := <-done; !errors.Is(err, hal.ErrHalted) {
		t.Fatalf("WaitForEdge after Halt: %v, want ErrHalted", err)
	}
	// And a cancelled context wakes a waiter the same way.
	in2 := &lineIn{name: "T2", f: r, edges: true}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, err := in2.WaitForEdge(ctx)
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitForEdge after cancel: %v, want context.Canceled", err)
	}
}

func nonblocking(t *testing.T, f *os.File) bool {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fl int
	rc.Control(func(fd uintptr) { fl, err = unix.FcntlInt(fd, unix.F_GETFL, 0) })
	if err != nil {
		t.Fatal(err)
	}
	return fl&unix.O_NONBLOCK != 0
}
