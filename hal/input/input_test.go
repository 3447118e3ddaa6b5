//go:build linux

package input

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/internal/uapi"
)

func TestTakeDropsUntilReport(t *testing.T) {
	d := &device{keys: map[uint16]bool{}}
	ev := func(typ, code uint16, value int32) []byte {
		b := make([]byte, uapi.InputEventSize)
		tail := b[uapi.InputEventSize-8:]
		tail[0], tail[1] = byte(typ), byte(typ>>8)
		tail[2], tail[3] = byte(code), byte(code>>8)
		tail[4], tail[5], tail[6], tail[7] = byte(value), byte(value>>8), byte(value>>16), byte(value>>24)
		return b
	}
	d.take(ev(1, 30, 1)) // KEY_A down
	d.take(ev(0, 0, 0))  // SYN_REPORT
	d.take(ev(0, 3, 0))  // SYN_DROPPED
	d.take(ev(1, 30, 0)) // dropped
	if len(d.q) != 2 || !d.drop {
		t.Fatalf("queue %v, dropping %v", d.q, d.drop)
	}
	if !d.keys[30] {
		t.Error("a dropped event changed the key state")
	}
}

// The ioctls at open must leave the descriptor to the runtime's poller, so
// Halt still wakes a reader (f.Fd() would have made it blocking for good).
func TestHaltWakesReaderAfterIoctl(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	defer r.Close()
	clock := int32(1)
	if err := uapi.FileIoctl(r, uapi.EVIOCSClockID, unsafe.Pointer(&clock)); err == nil {
		t.Fatal("EVIOCSCLOCKID on a pipe succeeded")
	}
	if !nonblocking(t, r) {
		t.Fatal("the ioctl left the descriptor in blocking mode")
	}
	d := &device{info: hal.InputInfo{Path: "pipe"}, f: r, keys: map[uint16]bool{}}
	done := make(chan error, 1)
	go func() {
		_, err := d.ReadEvent(context.Background())
		done <- err
	}()
	d.Halt()
	if err := <-done; !errors.Is(err, hal.ErrHalted) {
		t.Fatalf("ReadEvent after Halt: %v, want ErrHalted", err)
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

// A context that ends wakes the read it was given to, and only that one:
// the next ReadEvent waits for events again rather than finding the
// wake-up still armed and reporting a halt.
func TestReadAfterAContextEnded(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	defer r.Close()
	d := &device{info: hal.InputInfo{Path: "pipe"}, f: r, keys: map[uint16]bool{}}
	for i := range 3 {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
		_, err := d.ReadEvent(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("read %d, its context ended: %v, want DeadlineExceeded", i, err)
		}
	}
	raw := make([]byte, uapi.InputEventSize)
	tail := raw[uapi.InputEventSize-8:]
	binary.NativeEndian.PutUint16(tail[0:], hal.EvKey)
	binary.NativeEndian.PutUint16(tail[2:], 0x100)
	binary.NativeEndian.PutUint32(tail[4:], 1)
	if _, err := w.Write(raw); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	e, err := d.ReadEvent(ctx)
	if err != nil || e.Type != hal.EvKey || e.Code != 0x100 || e.Value != 1 {
		t.Fatalf("after the timed-out reads: %v %v, want BTN_0 down", e, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := d.ReadEvent(context.Background())
		done <- err
	}()
	d.Halt()
	if err := <-done; !errors.Is(err, hal.ErrHalted) {
		t.Fatalf("ReadEvent after Halt: %v, want ErrHalted", err)
	}
	if _, err := d.ReadEvent(t.Context()); !errors.Is(err, hal.ErrHalted) {
		t.Fatalf("ReadEvent once halted: %v, want ErrHalted", err)
	}
}
