//go:build linux && cgo

package gpio

/*
#include "tripwire.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/tobe-body/tobe-body/hal"
)

// gate is an output's latch, kept in C memory so that the tripwire's
// thread can halt the line without Go: Out and Halt exclude each other
// with the line's own lock (priority-inheriting), held only for the write.
type gate struct {
	name string
	c    *C.tb_out
}

// rawFd is the descriptor's number, without f.Fd()'s switch to blocking
// mode. It stays valid while f is open.
func rawFd(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	if err := rc.Control(func(u uintptr) { fd = int(u) }); err != nil {
		return -1, err
	}
	return fd, nil
}

func newGate(name string, f *os.File, safe hal.Level) (*gate, error) {
	fd, err := rawFd(f)
	if err != nil {
		return nil, fmt.Errorf("gpio: line %s: %w", name, err)
	}
	c := C.tb_out_new(C.int(fd), C.int(levelBit(safe)))
	if c == nil {
		return nil, fmt.Errorf("gpio: line %s: %w", name, syscall.ENOMEM)
	}
	return &gate{name: name, c: c}, nil
}

func (g *gate) err(r C.int) error {
	switch r {
	case 0:
		return nil
	case C.TB_EHALTED:
		return fmt.Errorf("gpio: line %s: %w", g.name, hal.ErrHalted)
	case C.TB_ECLOSED:
		return fmt.Errorf("gpio: line %s: %w", g.name, hal.ErrClosed)
	}
	return fmt.Errorf("gpio: line %s: %w", g.name, os.NewSyscallError("ioctl GPIO_V2_LINE_SET_VALUES", syscall.Errno(r)))
}

func (g *gate) out(v hal.Level) error { return g.err(C.tb_out_set(g.c, C.int(levelBit(v)))) }

func (g *gate) halt() error {
	if err := g.err(C.tb_out_halt(g.c)); err != nil && !errors.Is(err, syscall.EBADF) {
		return err
	}
	return nil // a closed line was left at its safe level
}

func (g *gate) rearm() error { return g.err(C.tb_out_rearm(g.c)) }

// close halts the line for good; the caller closes the file after it.
func (g *gate) close() { C.tb_out_close(g.c) }

// release drops Go's reference; a tripwire may still hold one.
func (g *gate) release() { C.tb_out_release(g.c) }
