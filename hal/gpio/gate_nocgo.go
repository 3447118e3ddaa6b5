//go:build linux && !cgo

package gpio

import (
	"fmt"
	"os"
	"sync"
	"unsafe"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/internal/uapi"
)

// gate is an output's latch without cgo: Out and Halt exclude each other
// with the line's own lock, held only for the write.
type gate struct {
	name   string
	f      *os.File
	safe   hal.Level
	mu     sync.Mutex
	halted bool
	closed bool
}

func newGate(name string, f *os.File, safe hal.Level) (*gate, error) {
	return &gate{name: name, f: f, safe: safe}, nil
}

func (g *gate) write(v hal.Level) error {
	lv := uapi.GPIOV2LineValues{Bits: levelBit(v), Mask: 1}
	if err := uapi.FileIoctl(g.f, uapi.GPIOV2LineSetValues, unsafe.Pointer(&lv)); err != nil {
		return fmt.Errorf("gpio: line %s: %w", g.name, os.NewSyscallError("ioctl GPIO_V2_LINE_SET_VALUES", err))
	}
	return nil
}

func (g *gate) out(v hal.Level) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.closed:
		return fmt.Errorf("gpio: line %s: %w", g.name, hal.ErrClosed)
	case g.halted:
		return fmt.Errorf("gpio: line %s: %w", g.name, hal.ErrHalted)
	}
	return g.write(v)
}

func (g *gate) halt() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	g.halted = true
	return g.write(g.safe)
}

func (g *gate) rearm() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return fmt.Errorf("gpio: line %s: %w", g.name, hal.ErrClosed)
	}
	g.halted = false
	return nil
}

// close halts the line for good; the caller closes the file after it.
func (g *gate) close() {
	g.halt()
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

func (g *gate) release() {}
