//go:build linux

// Package gpio drives GPIO lines through the Linux GPIO character device
// (uAPI v2): a chip is found by its label and lines by their names, never
// by number. Inputs get pull, both-edge events with the kernel's monotonic
// timestamps and sequence numbers, and the kernel's debounce; outputs are
// requested at their safe level in the same ioctl that claims them, so
// there is no moment at an unknown level, and every write can be read
// back. Halt drives an output safe and latches it until Rearm.
//
// The ioctls are issued here rather than through periph.io's gpioioctl,
// whose lines swallow read errors, turn an output into an input when read,
// cannot claim an output at a level, and drop the edge, time and sequence
// of events. periph.io's Level, Pull and Edge types are the contract's.
package gpio

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/probe"
)

// The kernel's uAPI (linux/gpio.h, v2).
const (
	ioctlGetLine   = 0xc250b407 // GPIO_V2_GET_LINE_IOCTL
	ioctlSetConfig = 0xc110b40d // GPIO_V2_LINE_SET_CONFIG_IOCTL
	ioctlGetValues = 0xc010b40e // GPIO_V2_LINE_GET_VALUES_IOCTL
	ioctlSetValues = 0xc010b40f // GPIO_V2_LINE_SET_VALUES_IOCTL

	flagInput       = 1 << 2
	flagOutput      = 1 << 3
	flagEdgeRising  = 1 << 4
	flagEdgeFalling = 1 << 5
	flagPullUp      = 1 << 8
	flagPullDown    = 1 << 9
	flagBiasOff     = 1 << 10

	attrOutputValues = 2
	attrDebounce     = 3

	eventRising  = 1
	eventFalling = 2
	eventSize    = 48
	eventBuffer  = 64
)

type lineAttr struct {
	ID      uint32
	Padding uint32
	Value   uint64 // flags, values, or debounce_period_us
}

type lineConfigAttr struct {
	Attr lineAttr
	Mask uint64
}

type lineConfig struct {
	Flags    uint64
	NumAttrs uint32
	Padding  [5]uint32
	Attrs    [10]lineConfigAttr
}

type lineRequest struct {
	Offsets         [64]uint32
	Consumer        [32]byte
	Config          lineConfig
	NumLines        uint32
	EventBufferSize uint32
	Padding         [5]uint32
	Fd              int32
}

type lineValues struct {
	Bits uint64
	Mask uint64
}

func ioctl(fd uintptr, req uintptr, arg unsafe.Pointer) error {
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, fd, req, uintptr(arg)); e != 0 {
		return e
	}
	return nil
}

// Consumer is the name the body's lines carry in the kernel (gpioinfo).
const Consumer = "tobe-body"

// Chip is a GPIO chip opened by label.
type Chip struct {
	label, path string

	mu    sync.Mutex
	lines []hal.Halter // requested lines, to halt and close
	outs  []*lineOut
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
func (c *Chip) request(name string, cfg lineConfig) (*os.File, uint32, error) {
	off, err := probe.Finder{Root: "/"}.LineOffset(c.path, name)
	if err != nil {
		return nil, 0, err
	}
	chip, err := os.Open(c.path)
	if err != nil {
		return nil, 0, err
	}
	defer chip.Close()
	req := lineRequest{NumLines: 1, EventBufferSize: eventBuffer, Config: cfg}
	req.Offsets[0] = off
	copy(req.Consumer[:], Consumer)
	if err := ioctl(chip.Fd(), ioctlGetLine, unsafe.Pointer(&req)); err != nil {
		if errors.Is(err, unix.EBUSY) {
			// Say who holds it.
			if perr := (probe.Finder{Root: "/"}).Line(c.path, name); perr != nil {
				return nil, 0, perr
			}
			return nil, 0, fmt.Errorf("gpio: line %s on %s: %w", name, c.label, hal.ErrBusy)
		}
		return nil, 0, fmt.Errorf("gpio: request line %s on %s: %w", name, c.label, os.NewSyscallError("ioctl GPIO_V2_GET_LINE", err))
	}
	if err := unix.SetNonblock(int(req.Fd), true); err != nil {
		unix.Close(int(req.Fd))
		return nil, 0, err
	}
	return os.NewFile(uintptr(req.Fd), c.label+":"+name), off, nil
}

func bias(p hal.Pull) uint64 {
	switch p {
	case hal.PullUp:
		return flagPullUp
	case hal.PullDown:
		return flagPullDown
	case hal.Float:
		return flagBiasOff
	}
	return 0
}

// In requests a line as an input with pull, edges and debounce.
func (c *Chip) In(name string, cfg hal.InConfig) (hal.LineIn, error) {
	lc := lineConfig{Flags: flagInput | bias(cfg.Pull)}
	switch cfg.Edge {
	case hal.RisingEdge:
		lc.Flags |= flagEdgeRising
	case hal.FallingEdge:
		lc.Flags |= flagEdgeFalling
	case hal.BothEdges:
		lc.Flags |= flagEdgeRising | flagEdgeFalling
	}
	if cfg.Debounce > 0 {
		lc.Attrs[0] = lineConfigAttr{Attr: lineAttr{ID: attrDebounce, Value: uint64(cfg.Debounce / time.Microsecond)}, Mask: 1}
		lc.NumAttrs = 1
	}
	f, _, err := c.request(name, lc)
	if err != nil {
		return nil, err
	}
	in := &lineIn{name: name, f: f, edges: cfg.Edge != hal.NoEdge}
	c.mu.Lock()
	c.lines = append(c.lines, in)
	c.mu.Unlock()
	return in, nil
}

// Out requests a line as an output driven to cfg.Safe by the request.
func (c *Chip) Out(name string, cfg hal.OutConfig) (hal.LineOut, error) {
	lc := lineConfig{Flags: flagOutput, NumAttrs: 1}
	lc.Attrs[0] = lineConfigAttr{Attr: lineAttr{ID: attrOutputValues, Value: levelBit(cfg.Safe)}, Mask: 1}
	f, _, err := c.request(name, lc)
	if err != nil {
		return nil, err
	}
	o := &lineOut{name: name, f: f, safe: cfg.Safe}
	c.mu.Lock()
	c.lines = append(c.lines, o)
	c.outs = append(c.outs, o)
	c.mu.Unlock()
	return o, nil
}

func levelBit(l hal.Level) uint64 {
	if l == hal.High {
		return 1
	}
	return 0
}

// Halt drives every output safe and latches it; inputs go on.
func (c *Chip) Halt() error {
	c.mu.Lock()
	outs := append([]*lineOut(nil), c.outs...)
	c.mu.Unlock()
	var first error
	for _, o := range outs {
		if err := o.Halt(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Close halts the outputs and releases every line.
func (c *Chip) Close() error {
	err := c.Halt()
	c.mu.Lock()
	lines := c.lines
	c.lines, c.outs = nil, nil
	c.mu.Unlock()
	for _, l := range lines {
		switch l := l.(type) {
		case *lineIn:
			l.close()
		case *lineOut:
			l.close()
		}
	}
	return err
}

func getValue(f *os.File) (hal.Level, error) {
	v := lineValues{Mask: 1}
	if err := ioctl(f.Fd(), ioctlGetValues, unsafe.Pointer(&v)); err != nil {
		return hal.Low, os.NewSyscallError("ioctl GPIO_V2_LINE_GET_VALUES", err)
	}
	return hal.Level(v.Bits&1 == 1), nil
}

// lineIn is a requested input line.
type lineIn struct {
	name  string
	f     *os.File
	edges bool

	mu     sync.Mutex // one waiter at a time
	halted sync.Once
	buf    [eventSize * 16]byte
	queued [][]byte
}

func (in *lineIn) Name() string { return in.name }

func (in *lineIn) Halt() error {
	in.halted.Do(func() { in.f.SetReadDeadline(time.Unix(1, 0)) })
	return nil
}

func (in *lineIn) close() { in.Halt(); in.f.Close() }

func (in *lineIn) Read() (hal.Level, error) { return getValue(in.f) }

// WaitForEdge reads the next edge event from the kernel's queue for the
// line. A halted line returns hal.ErrHalted.
func (in *lineIn) WaitForEdge(ctx context.Context) (hal.EdgeEvent, error) {
	if !in.edges {
		return hal.EdgeEvent{}, fmt.Errorf("gpio: line %s was requested without edges: %w", in.name, hal.ErrUnsupported)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	for len(in.queued) == 0 {
		stop := context.AfterFunc(ctx, func() { in.f.SetReadDeadline(time.Unix(1, 0)) })
		n, err := in.f.Read(in.buf[:])
		stop()
		if err != nil {
			if ctx.Err() != nil {
				return hal.EdgeEvent{}, ctx.Err()
			}
			if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, os.ErrClosed) {
				return hal.EdgeEvent{}, hal.ErrHalted
			}
			return hal.EdgeEvent{}, fmt.Errorf("gpio: line %s: %w", in.name, err)
		}
		for off := 0; off+eventSize <= n; off += eventSize {
			in.queued = append(in.queued, bytes.Clone(in.buf[off:off+eventSize]))
		}
	}
	raw := in.queued[0]
	in.queued = in.queued[1:]
	le := binary.LittleEndian
	e := hal.EdgeEvent{Line: in.name, Time: hal.Mono(le.Uint64(raw[0:])), Seq: uint64(le.Uint32(raw[20:]))}
	if le.Uint32(raw[8:]) == eventRising {
		e.Edge, e.Level = hal.RisingEdge, hal.High
	} else {
		e.Edge, e.Level = hal.FallingEdge, hal.Low
	}
	return e, nil
}

// lineOut is a requested output line. mu is the line's own lock: Out and
// Halt exclude each other with it and with nothing else.
type lineOut struct {
	name string
	f    *os.File
	safe hal.Level

	mu     sync.Mutex
	halted bool
	closed bool
}

func (o *lineOut) Name() string    { return o.name }
func (o *lineOut) Safe() hal.Level { return o.safe }

func (o *lineOut) set(v hal.Level) error {
	lv := lineValues{Bits: levelBit(v), Mask: 1}
	if err := ioctl(o.f.Fd(), ioctlSetValues, unsafe.Pointer(&lv)); err != nil {
		return fmt.Errorf("gpio: line %s: %w", o.name, os.NewSyscallError("ioctl GPIO_V2_LINE_SET_VALUES", err))
	}
	return nil
}

func (o *lineOut) Out(v hal.Level) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case o.closed:
		return fmt.Errorf("gpio: line %s: %w", o.name, hal.ErrClosed)
	case o.halted:
		return fmt.Errorf("gpio: line %s: %w", o.name, hal.ErrHalted)
	}
	return o.set(v)
}

func (o *lineOut) ReadBack() (hal.Level, error) { return getValue(o.f) }

func (o *lineOut) Halt() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return nil
	}
	o.halted = true
	return o.set(o.safe)
}

func (o *lineOut) Rearm() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return fmt.Errorf("gpio: line %s: %w", o.name, hal.ErrClosed)
	}
	o.halted = false
	return nil
}

func (o *lineOut) close() {
	o.Halt()
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.f.Close()
}

var _ hal.Chip = (*Chip)(nil)
