//go:build linux

// Package gpio drives GPIO lines through the Linux GPIO character device
// (uAPI v2): a chip is found by its label and lines by their names, never
// by number. Inputs get pull, both-edge events with the kernel's monotonic
// timestamps and sequence numbers, and the kernel's debounce; outputs are
// requested at their safe level in the same ioctl that claims them, so
// there is no moment at an unknown level, and every write can be read
// back. Outputs asked for together (Outs) share one request, so one
// GPIO_V2_LINE_SET_VALUES drives them all safe and one GET_VALUES reads
// them back; each line keeps its own latch, writes and errors. Halt
// drives an output safe and latches it until Rearm. A line
// watched for both edges is also read while it is idle, so an edge the
// kernel never reported (a lost interrupt, an overflowed queue) still
// reaches the consumer, marked Reconciled.
//
// The ioctls are issued here rather than through periph.io's gpioioctl,
// whose lines swallow read errors, turn an output into an input when read,
// cannot claim an output at a level, and drop the edge, time and sequence
// of events. periph.io's Level, Pull and Edge types are the contract's.
package gpio

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/internal/uapi"
	"github.com/tobe-body/tobe-body/hal/probe"
)

// eventBuffer is the kernel's queue of a line's events, in events.
const eventBuffer = 64

// Consumer is the name the body's lines carry in the kernel (gpioinfo).
const Consumer = "tobe-body"

// Chip is a GPIO chip opened by label.
type Chip struct {
	label, path string

	mu   sync.Mutex
	ins  []*lineIn     // requested inputs, to halt and close
	reqs []*outRequest // requested outputs, to halt and close
}

// Open finds the chip labelled label.
func Open(label string) (hal.Chip, error) {
	path, err := probe.Finder{Root: "/"}.Chip(label)
	if err != nil {
		return nil, err
	}
	return &Chip{label: label, path: path}, nil
}

func (c *Chip) Label() string { return c.label }

// request claims one line by name with the config.
func (c *Chip) request(name string, cfg uapi.GPIOV2LineConfig) (*os.File, error) {
	off, err := probe.Finder{Root: "/"}.LineOffset(c.path, name)
	if err != nil {
		return nil, err
	}
	return c.requestLines([]string{name}, []uint32{off}, cfg)
}

// requestLines claims the lines at offs (named names) in one request with
// the config. A line another consumer holds is named with its holder.
func (c *Chip) requestLines(names []string, offs []uint32, cfg uapi.GPIOV2LineConfig) (*os.File, error) {
	chip, err := os.Open(c.path)
	if err != nil {
		return nil, err
	}
	defer chip.Close()
	req := uapi.GPIOV2LineRequest{NumLines: uint32(len(offs)), EventBufferSize: eventBuffer, Config: cfg}
	copy(req.Offsets[:], offs)
	copy(req.Consumer[:], Consumer)
	what := lineWords(names)
	if err := uapi.Ioctl(int(chip.Fd()), uapi.GPIOV2GetLine, unsafe.Pointer(&req)); err != nil {
		if errors.Is(err, unix.EBUSY) {
			// Say who holds it.
			for _, name := range names {
				if perr := (probe.Finder{Root: "/"}).Line(c.path, name); perr != nil {
					return nil, perr
				}
			}
			return nil, fmt.Errorf("gpio: %s on %s: %w", what, c.label, hal.ErrBusy)
		}
		return nil, fmt.Errorf("gpio: request %s on %s: %w", what, c.label, os.NewSyscallError("ioctl GPIO_V2_GET_LINE", err))
	}
	if err := unix.SetNonblock(int(req.Fd), true); err != nil {
		unix.Close(int(req.Fd))
		return nil, err
	}
	return os.NewFile(uintptr(req.Fd), c.label+":"+strings.Join(names, ",")), nil
}

func bias(p hal.Pull) uint64 {
	switch p {
	case hal.PullUp:
		return uapi.GPIOV2LineFlagBiasPullUp
	case hal.PullDown:
		return uapi.GPIOV2LineFlagBiasPullDown
	case hal.Float:
		return uapi.GPIOV2LineFlagBiasDisabled
	}
	return 0
}

// In requests a line as an input with pull, edges and debounce.
func (c *Chip) In(name string, cfg hal.InConfig) (hal.LineIn, error) {
	lc := uapi.GPIOV2LineConfig{Flags: uapi.GPIOV2LineFlagInput | bias(cfg.Pull)}
	switch cfg.Edge {
	case hal.RisingEdge:
		lc.Flags |= uapi.GPIOV2LineFlagEdgeRising
	case hal.FallingEdge:
		lc.Flags |= uapi.GPIOV2LineFlagEdgeFalling
	case hal.BothEdges:
		lc.Flags |= uapi.GPIOV2LineFlagEdgeRising | uapi.GPIOV2LineFlagEdgeFalling
	}
	if cfg.Debounce > 0 {
		lc.Attrs[0] = uapi.GPIOV2LineConfigAttribute{Attr: uapi.GPIOV2LineAttribute{ID: uapi.GPIOV2LineAttrIDDebounce, Value: uint64(cfg.Debounce / time.Microsecond)}, Mask: 1}
		lc.NumAttrs = 1
	}
	f, err := c.request(name, lc)
	if err != nil {
		return nil, err
	}
	in := &lineIn{name: name, f: f, edges: cfg.Edge != hal.NoEdge, both: cfg.Edge == hal.BothEdges}
	if cfg.Edge == hal.BothEdges {
		in.reconcile = cfg.Reconcile
		if in.reconcile == 0 {
			in.reconcile = hal.DefaultReconcile
		}
		if in.reconcile < 0 {
			in.reconcile = 0
		}
		if in.level, err = getValue(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("gpio: line %s on %s: %w", name, c.label, err)
		}
	}
	c.mu.Lock()
	c.ins = append(c.ins, in)
	c.mu.Unlock()
	return in, nil
}

// Out requests a line as an output driven to cfg.Safe by the request.
func (c *Chip) Out(name string, cfg hal.OutConfig) (hal.LineOut, error) {
	outs, errs := c.Outs([]hal.OutRequest{{Line: name, Config: cfg}})
	return outs[0], errs[0]
}

// maxLines is how many lines one request of the kernel's holds.
const maxLines = len(uapi.GPIOV2LineRequest{}.Offsets)

// Outs requests the lines as outputs, each driven to its safe level by
// the request that claims it: up to maxLines in one request. A line the
// kernel refuses is found and named (a line another consumer holds, by
// its line info; any other refusal of a line's, by claiming the lines one
// by one), and the others are claimed without it.
func (c *Chip) Outs(reqs []hal.OutRequest) ([]hal.LineOut, []error) {
	outs, errs := make([]hal.LineOut, len(reqs)), make([]error, len(reqs))
	var todo []int // indices of reqs still to claim
	offs := make([]uint32, len(reqs))
	seen := map[string]int{}
	for i, r := range reqs {
		if j, ok := seen[r.Line]; ok {
			errs[i] = fmt.Errorf("gpio: line %s on %s is asked for twice (outputs %d and %d)", r.Line, c.label, j, i)
			continue
		}
		seen[r.Line] = i
		off, err := probe.Finder{Root: "/"}.LineOffset(c.path, r.Line)
		if err != nil {
			errs[i] = err
			continue
		}
		offs[i] = off
		todo = append(todo, i)
	}
	for len(todo) > 0 {
		n := min(len(todo), maxLines)
		batch := todo[:n]
		q, err := c.claim(reqs, offs, batch)
		if err == nil {
			for j, i := range batch {
				outs[i] = &lineOut{name: reqs[i].Line, safe: reqs[i].Config.Safe, req: q, i: j}
			}
			todo = todo[n:]
			continue
		}
		if len(batch) == 1 || errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) || errors.Is(err, unix.ENOMEM) {
			// One line, or a refusal of the process's (out of descriptors
			// or memory), not of a line's: a request per line would only
			// need more of what is short.
			for _, i := range batch {
				errs[i] = err
			}
			todo = todo[n:]
			continue
		}
		// Name the refused: lines held by another consumer say so in their
		// line info; without one, each line is claimed on its own.
		var rest []int
		for _, i := range batch {
			if perr := (probe.Finder{Root: "/"}).Line(c.path, reqs[i].Line); perr != nil {
				errs[i] = perr
			} else {
				rest = append(rest, i)
			}
		}
		if len(rest) == len(batch) {
			for _, i := range batch {
				q, err := c.claim(reqs, offs, []int{i})
				if err != nil {
					errs[i] = err
					continue
				}
				outs[i] = &lineOut{name: reqs[i].Line, safe: reqs[i].Config.Safe, req: q}
			}
			rest = nil
		}
		todo = append(rest, todo[n:]...)
	}
	return outs, errs
}

// claim requests the lines reqs[at...] as outputs at their safe levels,
// in one request, and keeps it.
func (c *Chip) claim(reqs []hal.OutRequest, offs []uint32, at []int) (*outRequest, error) {
	names, lineOffs := make([]string, len(at)), make([]uint32, len(at))
	var safe uint64
	for j, i := range at {
		names[j], lineOffs[j] = reqs[i].Line, offs[i]
		safe |= levelBit(reqs[i].Config.Safe) << j
	}
	lc := uapi.GPIOV2LineConfig{Flags: uapi.GPIOV2LineFlagOutput, NumAttrs: 1}
	lc.Attrs[0] = uapi.GPIOV2LineConfigAttribute{Attr: uapi.GPIOV2LineAttribute{ID: uapi.GPIOV2LineAttrIDOutputValues, Value: safe}, Mask: lineMask(len(at))}
	f, err := c.requestLines(names, lineOffs, lc)
	if err != nil {
		return nil, err
	}
	g, err := newGate(f, len(at), safe)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("gpio: %s on %s: %w", lineWords(names), c.label, err)
	}
	q := &outRequest{chip: c.label, names: names, f: f, g: g}
	c.mu.Lock()
	c.reqs = append(c.reqs, q)
	c.mu.Unlock()
	return q, nil
}

// lineMask is the bits of a request's first n lines.
func lineMask(n int) uint64 {
	if n >= 64 {
		return ^uint64(0)
	}
	return 1<<n - 1
}

func levelBit(l hal.Level) uint64 {
	if l == hal.High {
		return 1
	}
	return 0
}

// Halt drives every output safe and latches it, one call per request;
// inputs go on.
func (c *Chip) Halt() error {
	c.mu.Lock()
	reqs := append([]*outRequest(nil), c.reqs...)
	c.mu.Unlock()
	var first error
	for _, q := range reqs {
		if err := q.halt(lineMask(len(q.names))); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Close halts the outputs and releases every line.
func (c *Chip) Close() error {
	err := c.Halt()
	c.mu.Lock()
	ins, reqs := c.ins, c.reqs
	c.ins, c.reqs = nil, nil
	c.mu.Unlock()
	for _, in := range ins {
		in.close()
	}
	for _, q := range reqs {
		q.close()
	}
	return err
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

func getValue(f *os.File) (hal.Level, error) {
	v := uapi.GPIOV2LineValues{Mask: 1}
	if err := uapi.FileIoctl(f, uapi.GPIOV2LineGetValues, unsafe.Pointer(&v)); err != nil {
		return hal.Low, os.NewSyscallError("ioctl GPIO_V2_LINE_GET_VALUES", err)
	}
	return hal.Level(v.Bits&1 == 1), nil
}

// lineIn is a requested input line.
type lineIn struct {
	name      string
	f         *os.File
	edges     bool
	reconcile time.Duration // 0: off

	// dl orders who sets the read deadline: Halt and a done context set
	// it in the past, the reconcile timer in the future, and the past wins.
	dl     sync.Mutex
	halted bool

	mu     sync.Mutex // one waiter at a time; guards below
	buf    [uapi.GPIOV2LineEventSize * 16]byte
	queued []hal.EdgeEvent
	level  hal.Level // after the last edge delivered (or as requested)
	seq    uint64    // of the last kernel event
	both   bool      // both edges are watched
	// trip is the line's tripwire once armed: its thread reads the line,
	// and WaitForEdge reads the thread's records.
	trip *tripwire
}

// reader is what WaitForEdge reads: the line, or its tripwire's records.
func (in *lineIn) reader() *os.File {
	if in.trip != nil {
		return in.trip.r
	}
	return in.f
}

func (in *lineIn) Name() string { return in.name }

func (in *lineIn) Halt() error {
	in.dl.Lock()
	in.halted = true
	in.reader().SetReadDeadline(time.Unix(1, 0))
	in.dl.Unlock()
	return nil
}

// deadline arms the next read: in the past when halted or ctx is done,
// else after the reconcile period (or never).
func (in *lineIn) deadline(ctx context.Context) {
	in.dl.Lock()
	defer in.dl.Unlock()
	r := in.reader()
	switch {
	case in.halted || ctx.Err() != nil:
		r.SetReadDeadline(time.Unix(1, 0))
	case in.reconcile > 0 && in.trip == nil:
		r.SetReadDeadline(time.Now().Add(in.reconcile))
	default:
		r.SetReadDeadline(time.Time{})
	}
}

func (in *lineIn) stop() {
	in.dl.Lock()
	in.reader().SetReadDeadline(time.Unix(1, 0))
	in.dl.Unlock()
}

// close halts the line, ends its tripwire and releases it.
func (in *lineIn) close() {
	in.Halt()
	in.dl.Lock()
	t := in.trip
	in.dl.Unlock()
	if t != nil {
		t.stop()
	}
	in.f.Close()
}

func (in *lineIn) Read() (hal.Level, error) { return getValue(in.f) }

// WaitForEdge returns the next edge: from the kernel's queue for the line,
// or, when the line sits at a level no event told of, a Reconciled one.
// A halted line returns hal.ErrHalted.
func (in *lineIn) WaitForEdge(ctx context.Context) (hal.EdgeEvent, error) {
	if !in.edges {
		return hal.EdgeEvent{}, fmt.Errorf("gpio: line %s was requested without edges: %w", in.name, hal.ErrUnsupported)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	for len(in.queued) == 0 {
		in.deadline(ctx)
		stop := context.AfterFunc(ctx, in.stop)
		var err error
		if in.trip != nil {
			err = in.trip.read(in)
		} else {
			var n int
			if n, err = in.f.Read(in.buf[:]); err == nil {
				in.take(in.buf[:n])
			}
		}
		stop()
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return hal.EdgeEvent{}, ctx.Err()
		case errors.Is(err, os.ErrClosed):
			return hal.EdgeEvent{}, hal.ErrHalted
		case errors.Is(err, os.ErrDeadlineExceeded):
			in.dl.Lock()
			halted := in.halted
			in.dl.Unlock()
			if halted {
				return hal.EdgeEvent{}, hal.ErrHalted
			}
			if err := in.reconcileOnce(); err != nil {
				return hal.EdgeEvent{}, err
			}
		default:
			return hal.EdgeEvent{}, fmt.Errorf("gpio: line %s: %w", in.name, err)
		}
	}
	e := in.queued[0]
	in.queued = in.queued[1:]
	return e, nil
}

// take queues the kernel events in b.
func (in *lineIn) take(b []byte) {
	for off := 0; off+uapi.GPIOV2LineEventSize <= len(b); off += uapi.GPIOV2LineEventSize {
		k := uapi.DecodeGPIOV2LineEvent(b[off:])
		e := hal.EdgeEvent{Line: in.name, Time: hal.Mono(k.TimestampNS), Seq: uint64(k.LineSeqno)}
		if k.ID == uapi.GPIOV2LineEventRisingEdge {
			e.Edge, e.Level = hal.RisingEdge, hal.High
		} else {
			e.Edge, e.Level = hal.FallingEdge, hal.Low
		}
		in.level, in.seq = e.Level, e.Seq
		in.queued = append(in.queued, e)
	}
}

// reconcileOnce reads the line; at a level other than the last edge's,
// it first takes any event the kernel has queued meanwhile (which would
// explain it) and only without one queues a Reconciled edge.
func (in *lineIn) reconcileOnce() error {
	lv, err := getValue(in.f)
	if err != nil {
		return fmt.Errorf("gpio: line %s: reconcile: %w", in.name, err)
	}
	if lv == in.level {
		return nil
	}
	rc, err := in.f.SyscallConn()
	if err != nil {
		return fmt.Errorf("gpio: line %s: %w", in.name, err)
	}
	var n int
	var rerr error
	// Control, not Read: the deadline that woke us has passed, and the
	// descriptor is non-blocking, so this read never waits.
	if err := rc.Control(func(fd uintptr) { n, rerr = unix.Read(int(fd), in.buf[:]) }); err != nil {
		return fmt.Errorf("gpio: line %s: %w", in.name, err)
	}
	if rerr == nil && n > 0 {
		in.take(in.buf[:n])
		return nil
	}
	if rerr != nil && !errors.Is(rerr, unix.EAGAIN) {
		return fmt.Errorf("gpio: line %s: reconcile: %w", in.name, os.NewSyscallError("read", rerr))
	}
	e := hal.EdgeEvent{Line: in.name, Level: lv, Edge: hal.FallingEdge, Time: hal.MonoNow(), Seq: in.seq, Reconciled: true}
	if lv == hal.High {
		e.Edge = hal.RisingEdge
	}
	in.level = lv
	in.queued = append(in.queued, e)
	return nil
}

// outRequest is the kernel's request of one or more of a chip's outputs:
// one write drives any of its lines, one read reads them back. Its gate
// is its latch: writes and halts exclude each other with the gate's own
// lock and nothing else.
type outRequest struct {
	chip  string
	names []string // the request's lines, in its order
	f     *os.File
	g     *gate
	once  sync.Once
}

// linesOf names the lines of mask, for an error.
func (q *outRequest) linesOf(mask uint64) string {
	var ns []string
	for i, n := range q.names {
		if mask&(1<<i) != 0 {
			ns = append(ns, n)
		}
	}
	return lineWords(ns)
}

// lineWords is "line A" or "lines A, B".
func lineWords(names []string) string {
	if len(names) == 1 {
		return "line " + names[0]
	}
	return "lines " + strings.Join(names, ", ")
}

// halt drives the lines of mask safe and latches them, in one call. A
// closed request was left at its safe levels.
func (q *outRequest) halt(mask uint64) error {
	if err := q.g.halt(mask); err != nil && !errors.Is(err, hal.ErrClosed) {
		return fmt.Errorf("gpio: %s on %s: %w", q.linesOf(mask), q.chip, err)
	}
	return nil
}

// HaltOutputs halts outs, lines of this request, with one write and reads
// them back with one read: see hal.OutputGroup.
func (q *outRequest) HaltOutputs(outs []hal.LineOut, rep []hal.HaltedOutput) {
	var mask uint64
	for _, o := range outs {
		if lo, ok := o.(*lineOut); ok && lo.req == q {
			mask |= 1 << lo.i
		}
	}
	var err error
	var bits uint64
	if mask != 0 { // the kernel refuses a write of no line
		if err = q.g.halt(mask); err == nil {
			bits, err = q.g.get(mask)
		}
	}
	for k, o := range outs {
		lo, ok := o.(*lineOut)
		switch {
		case !ok || lo.req != q:
			rep[k] = hal.HaltOne(o) // not of this request: halted by itself
		case err != nil:
			rep[k] = hal.HaltedOutput{Name: lo.name, Err: fmt.Errorf("gpio: line %s: %w", lo.name, err)}
		default:
			rep[k] = hal.HaltedOutput{Name: lo.name, ReadBack: hal.Level(bits&(1<<lo.i) != 0)}
		}
	}
}

// close halts the lines for good and releases them.
func (q *outRequest) close() {
	q.once.Do(func() {
		q.g.close()
		q.f.Close()
	})
}

// lineOut is one line of an output request.
type lineOut struct {
	name string
	safe hal.Level
	req  *outRequest
	i    int // the line's place in its request
}

func (o *lineOut) Name() string    { return o.name }
func (o *lineOut) Safe() hal.Level { return o.safe }

func (o *lineOut) Out(v hal.Level) error {
	if err := o.req.g.out(o.i, v); err != nil {
		return fmt.Errorf("gpio: line %s: %w", o.name, err)
	}
	return nil
}

func (o *lineOut) ReadBack() (hal.Level, error) {
	bits, err := o.req.g.get(1 << o.i)
	if err != nil {
		return hal.Low, fmt.Errorf("gpio: line %s: %w", o.name, err)
	}
	return hal.Level(bits != 0), nil
}

func (o *lineOut) Halt() error { return o.req.halt(1 << o.i) }

func (o *lineOut) Rearm() error {
	if err := o.req.g.rearm(o.i); err != nil {
		return fmt.Errorf("gpio: line %s: %w", o.name, err)
	}
	return nil
}

// Group is the line's request: see hal.Grouped.
func (o *lineOut) Group() hal.OutputGroup { return o.req }

// setErr and getErr name the call a kernel's refusal (an errno, as the
// gates return it) came from. No error costs nothing: a halt allocates
// only when it fails.
func setErr(err error) error {
	if errno, ok := err.(syscall.Errno); ok {
		return os.NewSyscallError("ioctl GPIO_V2_LINE_SET_VALUES", errno)
	}
	return err
}

func getErr(err error) error {
	if errno, ok := err.(syscall.Errno); ok {
		return os.NewSyscallError("ioctl GPIO_V2_LINE_GET_VALUES", errno)
	}
	return err
}

// closedErr is hal.ErrClosed for a request already closed (EBADF).
func closedErr(err error) error {
	if errno, ok := err.(syscall.Errno); ok && errno == syscall.EBADF {
		return hal.ErrClosed
	}
	return err
}

var _ hal.Chip = (*Chip)(nil)
var _ hal.Grouped = (*lineOut)(nil)
var _ hal.Tripwire = (*lineIn)(nil)
