//go:build linux && !cgo

package gpio

import (
	"os"
	"sync"
	"unsafe"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/internal/uapi"
)

// gate is an output request's latch without cgo: writes and halts
// exclude each other with the request's own lock, held only for the call.
// It keeps the request's descriptor as a number, used only under mu and
// only until close (after which the caller closes the file), so that a
// call allocates nothing.
type gate struct {
	fd     int
	lines  uint64 // every line of the request
	safe   uint64
	mu     sync.Mutex
	halted uint64
	closed bool
}

func newGate(f *os.File, n int, safe uint64) (*gate, error) {
	fd, err := rawFd(f)
	if err != nil {
		return nil, err
	}
	lines := lineMask(n)
	return &gate{fd: fd, lines: lines, safe: safe & lines}, nil
}

func (g *gate) set(mask, bits uint64) error {
	lv := uapi.GPIOV2LineValues{Bits: bits & mask, Mask: mask}
	return uapi.Ioctl(g.fd, uapi.GPIOV2LineSetValues, unsafe.Pointer(&lv))
}

func (g *gate) out(i int, v hal.Level) error {
	bit := uint64(1) << i
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.closed:
		return hal.ErrClosed
	case g.halted&bit != 0:
		return hal.ErrHalted
	}
	return setErr(g.set(bit, levelBit(v)<<i))
}

func (g *gate) halt(mask uint64) error {
	mask &= g.lines
	g.mu.Lock()
	defer g.mu.Unlock()
	g.halted |= mask
	if g.closed {
		return hal.ErrClosed
	}
	return setErr(g.set(mask, g.safe))
}

func (g *gate) get(mask uint64) (uint64, error) {
	mask &= g.lines
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return 0, hal.ErrClosed
	}
	lv := uapi.GPIOV2LineValues{Mask: mask}
	if err := uapi.Ioctl(g.fd, uapi.GPIOV2LineGetValues, unsafe.Pointer(&lv)); err != nil {
		return 0, getErr(err)
	}
	return lv.Bits & mask, nil
}

func (g *gate) rearm(i int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return hal.ErrClosed
	}
	g.halted &^= 1 << i
	return nil
}

// close halts every line for good; the caller closes the file after it.
func (g *gate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		g.halted = g.lines
		g.set(g.lines, g.safe)
		g.closed = true
	}
}
