//go:build linux && cgo

package gpio

/*
#include "tripwire.h"
*/
import "C"

import (
	"os"
	"syscall"

	"github.com/tobe-body/tobe-body/hal"
)

// gate is an output request's latch, kept in C memory so that the
// tripwire's thread can halt its lines without Go: writes and halts
// exclude each other with the request's own lock (priority-inheriting),
// held only for the call.
type gate struct {
	c *C.tb_req
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

// newGate is the latch of the request f of n lines, whose safe levels are
// the bits of safe.
func newGate(f *os.File, n int, safe uint64) (*gate, error) {
	fd, err := rawFd(f)
	if err != nil {
		return nil, err
	}
	c := C.tb_req_new(C.int(fd), C.int(n), C.uint64_t(safe))
	if c == nil {
		return nil, syscall.ENOMEM
	}
	return &gate{c: c}, nil
}

func gateErr(r C.int) error {
	switch r {
	case 0:
		return nil
	case C.TB_EHALTED:
		return hal.ErrHalted
	case C.TB_ECLOSED:
		return hal.ErrClosed
	}
	return syscall.Errno(r)
}

// out drives line i to v, unless the line is latched.
func (g *gate) out(i int, v hal.Level) error {
	return setErr(gateErr(C.tb_req_set(g.c, C.int(i), C.int(levelBit(v)))))
}

// halt drives the lines of mask safe and latches them, in one call. A
// closed request was left at its safe levels: hal.ErrClosed.
func (g *gate) halt(mask uint64) error {
	return setErr(closedErr(gateErr(C.tb_req_halt(g.c, C.uint64_t(mask)))))
}

// get reads the lines of mask back, in one call.
func (g *gate) get(mask uint64) (uint64, error) {
	var bits C.uint64_t
	if err := closedErr(gateErr(C.tb_req_get(g.c, C.uint64_t(mask), &bits))); err != nil {
		return 0, getErr(err)
	}
	return uint64(bits), nil
}

func (g *gate) rearm(i int) error { return gateErr(C.tb_req_rearm(g.c, C.int(i))) }

// close halts every line for good; the caller closes the file after it.
func (g *gate) close() { C.tb_req_close(g.c) }

// release drops Go's reference; a tripwire may still hold one.
func (g *gate) release() { C.tb_req_release(g.c) }
