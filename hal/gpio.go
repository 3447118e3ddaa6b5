package hal

import (
	"context"
	"fmt"
	"time"

	"periph.io/x/conn/v3/gpio"
)

// Level, Pull and Edge are periph.io's own types, so a line from
// periph.io/x/host/v3/gpioioctl satisfies the contracts below without
// conversion.
type (
	// Level is Low or High.
	Level = gpio.Level
	// Pull is the bias of an input: Float, PullDown or PullUp.
	Pull = gpio.Pull
	// Edge is RisingEdge, FallingEdge or BothEdges.
	Edge = gpio.Edge
)

// Levels, pulls and edges, re-exported so consumers need not import periph.
const (
	Low          = gpio.Low
	High         = gpio.High
	Float        = gpio.Float
	PullDown     = gpio.PullDown
	PullUp       = gpio.PullUp
	PullNoChange = gpio.PullNoChange
	NoEdge       = gpio.NoEdge
	RisingEdge   = gpio.RisingEdge
	FallingEdge  = gpio.FallingEdge
	BothEdges    = gpio.BothEdges
)

// InConfig is how an input line is requested.
type InConfig struct {
	Pull Pull
	// Edge selects which edges WaitForEdge reports; NoEdge turns edge
	// detection off and WaitForEdge returns ErrUnsupported.
	Edge Edge
	// Debounce drops changes that do not hold for this long; 0 is off.
	Debounce time.Duration
	// Reconcile is how often a line watched for both edges is read while
	// WaitForEdge waits, to catch an edge the driver never reported (a lost
	// interrupt, an overflowed queue): a level that differs from the last
	// edge's, with no event pending, is delivered as a Reconciled edge.
	// 0 is DefaultReconcile; a negative value turns it off.
	Reconcile time.Duration
}

// DefaultReconcile is how often an idle line is read back by default.
const DefaultReconcile = time.Second

// OutConfig is how an output line is requested. The driver drives the line
// to Safe in the same request that claims it, so there is no moment where
// the body owns the line at an unknown level.
type OutConfig struct {
	Safe Level
}

// OutRequest is one line of a Chip's Outs: its name and how it is
// requested.
type OutRequest struct {
	Line   string
	Config OutConfig
}

// EdgeEvent is one change of an input line.
type EdgeEvent struct {
	Line  string
	Edge  Edge  // RisingEdge or FallingEdge
	Level Level // the level after the edge
	// Time is the kernel's timestamp of the edge where the driver has one,
	// otherwise the time it was read.
	Time Mono
	// Seq counts the edges of this line from 1. A gap means the driver lost
	// edges (a kernel buffer overflow); the level is then re-read.
	Seq uint64
	// Reconciled marks an edge no event told of: a periodic read found
	// the line at Level, unlike the last edge. Time is when it was read
	// and Seq is the last event's; the edge happened before, unseen.
	Reconciled bool
	// Halted is set on an edge to the stop level of a line armed as a
	// Tripwire: what the driver did before it delivered the edge.
	Halted *HaltReport
}

// Tripwire is what a LineIn offers when its driver can stop the body on
// its own: ArmTrip has the driver drive outs to their safe levels and
// latch them (as their Halt does), then read each back, the moment it sees
// the line at stop, by an edge or by its periodic read, on a thread of its
// own that waits in the kernel and runs no Go code. Neither the Go
// scheduler nor anything else in the process can then delay a stop. Edges
// are still delivered by WaitForEdge; those to stop carry Halted. A read
// error of the line halts outs too, then WaitForEdge returns the error.
// ArmTrip returns the outputs it covers: those of its own driver; the
// caller halts the others. It is called once, before the first
// WaitForEdge; ErrUnsupported when the driver cannot (a build without cgo).
type Tripwire interface {
	ArmTrip(stop Level, outs []LineOut) (covered []LineOut, err error)
	// TripThread says how the tripwire's thread runs ("SCHED_FIFO 50",
	// or "SCHED_OTHER (no permission for SCHED_FIFO)").
	TripThread() string
}

// HaltReport is what a tripwire did on a stop: each covered output's
// read-back after it was driven safe, and when the last was read.
type HaltReport struct {
	Safe    Mono
	Outputs []HaltedOutput
}

// HaltedOutput is one output's part of a HaltReport. Err is set when the
// output could not be driven or read back; ReadBack is then meaningless.
type HaltedOutput struct {
	Name     string
	ReadBack Level
	Err      error
}

func (e EdgeEvent) String() string {
	if e.Reconciled {
		return fmt.Sprintf("%s %s->%s (reconciled after #%d) at %s", e.Line, edgeName(e.Edge), e.Level, e.Seq, e.Time)
	}
	return fmt.Sprintf("%s %s->%s #%d at %s", e.Line, edgeName(e.Edge), e.Level, e.Seq, e.Time)
}

func edgeName(e Edge) string {
	switch e {
	case RisingEdge:
		return "rising"
	case FallingEdge:
		return "falling"
	case BothEdges:
		return "both"
	}
	return "none"
}

// LineIn is a GPIO line requested as an input.
type LineIn interface {
	Halter
	// Name is the line's name on its chip, as the board profile names it.
	Name() string
	// Read returns the level of the line now.
	Read() (Level, error)
	// WaitForEdge blocks until the line changes, ctx is done (ctx.Err()),
	// or the line is halted (ErrHalted). Edges that arrive while nobody
	// waits are queued by the driver up to a bound, then counted as lost
	// (see EdgeEvent.Seq).
	WaitForEdge(ctx context.Context) (EdgeEvent, error)
}

// LineOut is a GPIO line requested as an output.
//
// Halt drives the line to its safe level and latches it: Out returns
// ErrHalted until Rearm. Halt and Out exclude each other with a lock of the
// line's own (or of its request's, where the driver holds several lines in
// one), held only for the write and shared with nothing slow, so an Out
// racing an e-stop either completed before the Halt (which undoes it) or
// is refused.
type LineOut interface {
	Halter
	Name() string
	// Out drives the line. It returns after the kernel accepted the value;
	// ReadBack tells whether the line is at it. After Halt: ErrHalted.
	Out(Level) error
	// Rearm lifts the latch of Halt; the line stays at its safe level
	// until the next Out.
	Rearm() error
	// ReadBack reads the level back from the line, not from memory.
	ReadBack() (Level, error)
	// Safe is the level Halt drives the line to.
	Safe() Level
}

// Chip is a GPIO controller found by its label (never by number: chip
// numbers change between kernels). Lines are requested by name.
type Chip interface {
	// Halt drives every output requested from the chip to its safe level
	// and latches it (see LineOut). Inputs go on reporting.
	Halter
	Label() string
	// In requests the named line as an input. ErrAbsent: no such line;
	// ErrBusy: another consumer holds it (the error names the consumer).
	In(line string, cfg InConfig) (LineIn, error)
	// Out requests the named line as an output at cfg.Safe.
	Out(line string, cfg OutConfig) (LineOut, error)
	// Outs requests the named lines as outputs, each at its own safe
	// level, together: a driver that can holds them in one request of the
	// kernel's, so that halting them all is one write and reading them
	// back one read (their LineOuts are Grouped). outs[i] is reqs[i]'s
	// line, or nil and errs[i] says why (ErrAbsent, ErrBusy naming the
	// holder, a line named twice); a line refused keeps none of the
	// others from being claimed.
	Outs(reqs []OutRequest) (outs []LineOut, errs []error)
	// Close halts and releases every line requested from the chip.
	Close() error
}

// LED is one of the board's own LEDs (/sys/class/leds) that the body took
// over: an output whose High is on and whose safe level is off (Low).
// Close switches it off and gives it back to the system (its kernel
// trigger).
type LED interface {
	LineOut
	Close() error
}
