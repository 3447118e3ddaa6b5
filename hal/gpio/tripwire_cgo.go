//go:build linux && cgo

package gpio

/*
#include "tripwire.h"
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tobe-body/tobe-body/hal"
)

// tripwire is an armed line's thread (tripwire.c) and the pipe its
// records come through.
type tripwire struct {
	c     *C.tb_trip
	r, w  *os.File
	stopL hal.Level
	outs  []string // the covered outputs' names, in the thread's order
	recs  []C.tb_rec
	sched string
	err   error // the thread ended on it: returned once its stop is delivered
}

func stopEdge(l hal.Level) hal.Edge {
	if l == hal.High {
		return hal.RisingEdge
	}
	return hal.FallingEdge
}

// stop ends the thread and closes the pipe.
func (t *tripwire) stop() {
	C.tb_trip_stop(t.c)
	t.r.Close()
	t.w.Close()
}

// ArmTrip starts the line's tripwire: see hal.Tripwire. The line must be
// watched for both edges, and no WaitForEdge may be waiting.
func (in *lineIn) ArmTrip(stop hal.Level, outs []hal.LineOut) ([]hal.LineOut, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	switch {
	case !in.both:
		return nil, fmt.Errorf("gpio: line %s: a tripwire needs both edges: %w", in.name, hal.ErrUnsupported)
	case in.trip != nil:
		return nil, fmt.Errorf("gpio: line %s: the tripwire is already armed", in.name)
	}
	var reqs []*C.tb_req
	var lines []C.int
	var covered []hal.LineOut
	var names []string
	for _, o := range outs {
		if lo, ok := o.(*lineOut); ok {
			reqs = append(reqs, lo.req.g.c)
			lines = append(lines, C.int(lo.i))
			covered = append(covered, o)
			names = append(names, lo.name)
		}
	}
	if len(reqs) > C.TB_MAX_OUTS {
		return nil, fmt.Errorf("gpio: line %s: a tripwire covers at most %d outputs, not %d", in.name, C.TB_MAX_OUTS, len(reqs))
	}
	inFd, err := rawFd(in.f)
	if err != nil {
		return nil, fmt.Errorf("gpio: line %s: %w", in.name, err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("gpio: line %s: tripwire: %w", in.name, err)
	}
	wFd, err := rawFd(w)
	if err == nil {
		// Room for a few thousand records before the thread keeps only the
		// last; the pipe's default holds 180. Refused above the system's
		// limit, which is fine.
		unix.FcntlInt(uintptr(wFd), unix.F_SETPIPE_SZ, 1<<20)
	}
	if err != nil {
		r.Close()
		w.Close()
		return nil, err
	}
	var reqp **C.tb_req
	var linep *C.int
	if len(reqs) > 0 {
		// Go memory holding C pointers and numbers: cgo lets C read it
		// during the call, and the thread copies what it keeps.
		reqp, linep = &reqs[0], &lines[0]
	}
	var cerr C.int
	t := C.tb_trip_start(C.int(inFd), C.int(levelBit(in.level)), C.int(levelBit(stop)), C.int(in.reconcile.Milliseconds()), C.int(wFd), reqp, linep, C.int(len(reqs)), &cerr)
	runtime.KeepAlive(covered) // their requests' C memory, until the thread holds it
	if t == nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("gpio: line %s: tripwire: %w", in.name, syscall.Errno(cerr))
	}
	var policy, prio, serr C.int
	C.tb_trip_sched(t, &policy, &prio, &serr)
	sched := "SCHED_OTHER"
	switch {
	case policy == 1:
		sched = fmt.Sprintf("SCHED_FIFO %d", prio)
	case serr != 0:
		sched = fmt.Sprintf("SCHED_OTHER (SCHED_FIFO refused: %v)", syscall.Errno(serr))
	}
	in.dl.Lock()
	in.trip = &tripwire{c: t, r: r, w: w, stopL: stop, outs: names, recs: make([]C.tb_rec, 8), sched: sched}
	in.dl.Unlock()
	return covered, nil
}

// TripThread says how the tripwire's thread runs, or that none is armed.
func (in *lineIn) TripThread() string {
	in.dl.Lock()
	defer in.dl.Unlock()
	if in.trip == nil {
		return "not armed"
	}
	return in.trip.sched
}

// read waits for the thread's records (with the deadline the caller set
// on r) and queues their edges.
func (t *tripwire) read(in *lineIn) error {
	if t.err != nil {
		return t.err
	}
	size := int(unsafe.Sizeof(t.recs[0]))
	buf := unsafe.Slice((*byte)(unsafe.Pointer(&t.recs[0])), len(t.recs)*size)
	n, err := t.r.Read(buf)
	if err != nil {
		return err
	}
	for i := range n / size {
		if err := t.take(in, &t.recs[i]); err != nil {
			return err
		}
	}
	return nil
}

func (t *tripwire) take(in *lineIn, rec *C.tb_rec) error {
	flags := uint32(rec.flags)
	e := hal.EdgeEvent{Line: in.name, Time: hal.Mono(rec.edge_ns), Seq: uint64(rec.seq), Reconciled: flags&C.TB_REC_RECONCILED != 0,
		Edge: hal.FallingEdge, Level: hal.Low}
	if flags&C.TB_REC_HIGH != 0 {
		e.Edge, e.Level = hal.RisingEdge, hal.High
	}
	if flags&C.TB_REC_LOST_STOP != 0 && flags&C.TB_REC_HALTED == 0 {
		// A stop the reader fell too far behind to see: its outputs were
		// halted, its report is gone. Deliver the stop before this edge.
		in.queued = append(in.queued, hal.EdgeEvent{Line: in.name, Time: e.Time, Seq: e.Seq, Reconciled: true, Edge: stopEdge(t.stopL), Level: t.stopL})
	}
	if flags&C.TB_REC_HALTED != 0 {
		rep := &hal.HaltReport{Safe: hal.Mono(rec.safe_ns), Outputs: make([]hal.HaltedOutput, 0, int(rec.nouts))}
		for i := range int(rec.nouts) {
			o := hal.HaltedOutput{Name: t.outs[i], ReadBack: hal.Level(rec.readback[i] == 1)}
			if errno := syscall.Errno(rec.errs[i]); errno != 0 {
				o.Err = fmt.Errorf("gpio: line %s: %w", t.outs[i], errno)
				if errno == syscall.EBADF {
					o.Err = fmt.Errorf("gpio: line %s: %w", t.outs[i], hal.ErrClosed)
				}
			}
			rep.Outputs = append(rep.Outputs, o)
		}
		e.Halted = rep
	}
	if flags&C.TB_REC_END != 0 {
		// The line could not be read: the outputs were halted first.
		e.Level, e.Edge, e.Reconciled = t.stopL, stopEdge(t.stopL), true
		in.queued = append(in.queued, e)
		t.err = fmt.Errorf("gpio: line %s: %w", in.name, os.NewSyscallError("read", syscall.Errno(rec.err)))
		return nil
	}
	in.level, in.seq = e.Level, e.Seq
	in.queued = append(in.queued, e)
	return nil
}
