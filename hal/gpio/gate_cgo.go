//go:build linux && cgo

package gpio

/*
#cgo noescape tb_req_get
#cgo nocallback tb_req_get
#include "tripwire.h"
*/
import "C"

import (
	"os"
	"runtime"
	"syscall"

	"github.com/tobe-body/tobe-body/hal"
)

// gate is an output request's latch, kept in C memory so that the
// tripwire's thread can halt its lines without Go: writes and halts
// exclude each other with the request's own lock (priority-inheriting),
// held only for the call. The C memory is Go's to free once nothing of
// Go's can reach the gate (a line kept after its chip was closed still
// answers ErrClosed) and no tripwire holds it.
type gate struct {
	c *C.tb_req
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
	g := &gate{c: c}
	runtime.AddCleanup(g, func(c *C.tb_req) { C.tb_req_release(c) }, c)
	return g, nil
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

// Each call below keeps g alive until C returns: g.c is freed by g's
// cleanup, which may otherwise run while C still uses it.

// out drives line i to v, unless the line is latched.
func (g *gate) out(i int, v hal.Level) error {
	r := C.tb_req_set(g.c, C.int(i), C.int(levelBit(v)))
	runtime.KeepAlive(g)
	return setErr(gateErr(r))
}

// halt drives the lines of mask safe and latches them, in one call. A
// closed request was left at its safe levels: hal.ErrClosed.
func (g *gate) halt(mask uint64) error {
	r := C.tb_req_halt(g.c, C.uint64_t(mask))
	runtime.KeepAlive(g)
	return setErr(closedErr(gateErr(r)))
}

// get reads the lines of mask back, in one call. (bits stays on the
// stack: tb_req_get is declared noescape, so a read-back allocates
// nothing.)
func (g *gate) get(mask uint64) (uint64, error) {
	var bits C.uint64_t
	r := C.tb_req_get(g.c, C.uint64_t(mask), &bits)
	runtime.KeepAlive(g)
	if err := closedErr(gateErr(r)); err != nil {
		return 0, getErr(err)
	}
	return uint64(bits), nil
}

func (g *gate) rearm(i int) error {
	r := C.tb_req_rearm(g.c, C.int(i))
	runtime.KeepAlive(g)
	return gateErr(r)
}

// close halts every line for good; the caller closes the file after it.
// The C memory stays until the gate is unreachable (newGate's cleanup).
func (g *gate) close() {
	C.tb_req_close(g.c)
	runtime.KeepAlive(g)
}
