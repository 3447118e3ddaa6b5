//go:build linux

package gpio

import (
	"context"
	"errors"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tobe-body/tobe-body/hal"
)

// The structures must match the kernel's byte for byte; the request
// numbers encode their sizes.
func TestUAPILayout(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  uintptr
		want uintptr
	}{
		{"gpio_v2_line_attribute", unsafe.Sizeof(lineAttr{}), 16},
		{"gpio_v2_line_config_attribute", unsafe.Sizeof(lineConfigAttr{}), 24},
		{"gpio_v2_line_config", unsafe.Sizeof(lineConfig{}), 272},
		{"gpio_v2_line_request", unsafe.Sizeof(lineRequest{}), 592},
		{"gpio_v2_line_values", unsafe.Sizeof(lineValues{}), 16},
		{"request fd offset", unsafe.Offsetof(lineRequest{}.Fd), 588},
		{"GPIO_V2_GET_LINE_IOCTL size", (ioctlGetLine >> 16) & 0x3fff, 592},
		{"GPIO_V2_LINE_SET_CONFIG_IOCTL size", (ioctlSetConfig >> 16) & 0x3fff, 272},
		{"GPIO_V2_LINE_GET_VALUES_IOCTL size", (ioctlGetValues >> 16) & 0x3fff, 16},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, tc.got, tc.want)
		}
	}
}

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
