package body

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/ledger"
)

// Clock turns the monotonic times drivers stamp events with (V4L2 buffer
// times, evdev and GPIO event times, audio frame times) into UTC, and says
// how far that UTC can be trusted.
//
// The offset between the monotonic clock and UTC is measured when the
// clock is made, again by Run every interval, and at once when the wall
// clock is set (on Linux the kernel says so: a timerfd armed with
// TFD_TIMER_CANCEL_ON_SET), from the closest of a few paired readings. A
// setting of the wall clock is a Step, handed to Run's caller with its
// size. The uncertainty comes from the kernel's own account of its time
// (adjtimex): while NTP keeps the clock synchronised it is the kernel's
// maximum error; while the kernel says the clock is not synchronised
// (STA_UNSYNC: before NTP has run, or since it lost its servers long
// enough), the wall clock may be off by any amount (a board without a
// real-time clock boots at the time fake-hwclock saved, or at 1970), so
// the uncertainty is unbounded and every stamp says the clock is
// unsynchronised. The clock domain is the kernel's boot id: monotonic
// times of different boots are not comparable.
//
// A Clock is safe for concurrent use.
type Clock struct {
	domain string
	src    clockSource

	mu       sync.Mutex
	offset   int64         // UTC ns minus monotonic ns
	window   time.Duration // the width of the pairing that measured offset
	measured hal.Mono
	sync     ClockSync
}

// ClockSync is the kernel's view of its time.
type ClockSync struct {
	// Synced is false while the kernel says the clock is not synchronised
	// (STA_UNSYNC), for example before NTP has run.
	Synced bool
	// MaxError is the kernel's bound on the clock's error; it means
	// nothing while the clock is not synchronised.
	MaxError time.Duration
	// EstError is the kernel's estimate of the clock's error.
	EstError time.Duration
}

// Stamp is a monotonic time converted to UTC.
type Stamp struct {
	UTC         time.Time
	MonotonicNS int64
	// Domain is the boot id of the monotonic clock.
	Domain string
	// Uncertainty bounds the error of UTC; Unbounded while the clock is
	// not synchronised.
	Uncertainty time.Duration
	// Unsynced: the wall clock was not synchronised, so UTC may be off by
	// any amount.
	Unsynced bool
}

// Unbounded is the uncertainty of a stamp of an unsynchronised clock.
const Unbounded = time.Duration(math.MaxInt64)

// UnboundedMS is clock_uncertainty_ms of an event stamped while the clock
// was not synchronised: the largest the field holds, meaning no bound.
const UnboundedMS = math.MaxUint32

// Apply sets an event's time fields from the stamp: occurred_at,
// monotonic_ns, clock_domain, clock_uncertainty_ms and clock_unsynced.
func (s Stamp) Apply(ev *ledger.Event) {
	ev.OccurredAt, ev.MonotonicNS, ev.ClockDomain, ev.ClockUncertaintyMS, ev.ClockUnsynced = s.UTC.UnixNano(), s.MonotonicNS, s.Domain, s.UncertaintyMS(), s.Unsynced
}

// UncertaintyMS is Uncertainty in whole milliseconds, rounded up;
// UnboundedMS when the clock was not synchronised, and no bound below it
// is claimed for a finite uncertainty too large for the field.
func (s Stamp) UncertaintyMS() uint32 {
	if s.Unsynced || s.Uncertainty >= Unbounded-time.Millisecond {
		return UnboundedMS
	}
	ms := (s.Uncertainty + time.Millisecond - 1) / time.Millisecond
	if ms >= UnboundedMS {
		ms = UnboundedMS - 1
	}
	return uint32(ms)
}

// clockSource reads the clocks; tests replace it.
type clockSource struct {
	mono   func() hal.Mono
	utc    func() time.Time
	sync   func() (ClockSync, error)
	bootID func() (string, error)
	// watch, when not nil, sends on set every time the wall clock is set
	// until ctx is done, and returns nil then; an error says it cannot
	// watch (Run then measures only every interval).
	watch func(ctx context.Context, set chan<- struct{}) error
}

// NewClock measures the offset and reads the boot id.
func NewClock() (*Clock, error) { return newClock(systemClock) }

func newClock(src clockSource) (*Clock, error) {
	id, err := src.bootID()
	if err != nil {
		return nil, fmt.Errorf("body: clock domain: %w", err)
	}
	c := &Clock{domain: id, src: src}
	c.Measure()
	return c, nil
}

// Domain is the boot id.
func (c *Clock) Domain() string { return c.domain }

// BootID is the boot id (Domain).
func (c *Clock) BootID() string { return c.domain }

// Now is the wall time, with the monotonic reading time.Now gives: t.Sub
// of two of its readings is the real time between them whatever the wall
// clock did. Decisions on spans (expiries, windows) take the monotonic
// reading; the wall reading is for records.
func (c *Clock) Now() time.Time { return c.src.utc() }

// Mono is the monotonic clock (CLOCK_MONOTONIC), which no setting of the
// wall clock moves; it starts again at each boot.
func (c *Clock) Mono() hal.Mono { return c.src.mono() }

// Synced reads from the kernel now whether the wall clock is
// synchronised, and keeps what it read for the next stamps; a kernel that
// cannot say counts as not synchronised.
func (c *Clock) Synced() bool {
	s := c.readSync()
	c.mu.Lock()
	c.sync = s
	c.mu.Unlock()
	return s.Synced
}

func (c *Clock) readSync() ClockSync {
	s, err := c.src.sync()
	if err != nil {
		return ClockSync{}
	}
	return s
}

// Measure re-measures the offset and re-reads the sync state, and returns
// how far the wall clock moved against the monotonic clock since the last
// measurement.
func (c *Clock) Measure() time.Duration {
	best := time.Duration(1<<63 - 1)
	var offset int64
	for range 5 {
		m1 := c.src.mono()
		u := c.src.utc()
		m2 := c.src.mono()
		if w := m2.Sub(m1); w < best {
			best = w
			offset = u.UnixNano() - int64(m1) - int64(w/2)
		}
	}
	s := c.readSync()
	c.mu.Lock()
	moved := time.Duration(offset - c.offset)
	if c.measured == 0 && c.offset == 0 {
		moved = 0
	}
	c.offset, c.window, c.measured, c.sync = offset, best, c.src.mono(), s
	c.mu.Unlock()
	return moved
}

// Sync returns the sync state the clock last read.
func (c *Clock) Sync() ClockSync {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sync
}

// Stamp converts a monotonic time of this boot to UTC.
func (c *Clock) Stamp(m hal.Mono) Stamp {
	c.mu.Lock()
	offset, window, s := c.offset, c.window, c.sync
	c.mu.Unlock()
	st := Stamp{
		UTC:         time.Unix(0, int64(m)+offset).UTC(),
		MonotonicNS: int64(m),
		Domain:      c.domain,
		Uncertainty: s.MaxError + window/2,
	}
	if !s.Synced {
		st.Uncertainty, st.Unsynced = Unbounded, true
	}
	return st
}

// StampNow stamps the monotonic time now.
func (c *Clock) StampNow() Stamp { return c.Stamp(c.src.mono()) }

// LedgerStamp is the stamp the ledger gives an event that carries no
// time of its own (audit records, the ledger's own): the monotonic time
// now, the domain, the uncertainty and whether the clock is synchronised.
func (c *Clock) LedgerStamp() ledger.TimeStamp {
	s := c.StampNow()
	return ledger.TimeStamp{MonotonicNS: s.MonotonicNS, Domain: s.Domain, UncertaintyMS: s.UncertaintyMS(), Unsynced: s.Unsynced}
}

// Step is a setting of the wall clock the body noticed: NTP's first
// correction after a boot from a saved time, an administrator's `date -s`.
type Step struct {
	// Size is how far the wall clock moved against the monotonic clock:
	// forward when positive.
	Size time.Duration
	// Before and After are the same monotonic instant read as UTC before
	// and after the step.
	Before, After time.Time
	// Synced is whether the kernel counts the clock synchronised after it.
	Synced bool
	// Noticed says how: "kernel" (it said the clock was set) or
	// "measure" (a re-measurement found the offset moved by at least
	// MeasuredStep, where the kernel cannot say).
	Noticed string
}

// MeasuredStep is the least move of the offset between two periodic
// measurements taken for a step where the kernel does not report
// settings; NTP's slewing moves it by at most 0.5 ms a second.
const MeasuredStep = time.Second

// EventClockStepped records a Step (payload ClockStepped).
const EventClockStepped = "body.clock_stepped"

// StepEvent is the ledger record of a step, stamped after it.
func (c *Clock) StepEvent(s Step) ledger.Event {
	p, _ := ledger.MarshalPayload(ClockStepped{SizeNS: int64(s.Size), Size: s.Size.String(),
		Before: s.Before.UTC().Format(time.RFC3339Nano), After: s.After.UTC().Format(time.RFC3339Nano),
		Synced: s.Synced, Noticed: s.Noticed})
	ev := ledger.Event{Type: EventClockStepped, ChannelID: "body.clock", Provenance: ledger.Observed, Payload: p}
	c.StampNow().Apply(&ev)
	return ev
}

// Run re-measures every interval, and at once when the kernel says the
// wall clock was set, until ctx is done; onStep (when not nil) is called
// on Run's goroutine with every step found. Where the kernel cannot say
// (off Linux, or a kernel without the timerfd flag), a step is a move of
// the offset of at least MeasuredStep between two measurements. Run
// returns when ctx is done, having stopped watching.
func (c *Clock) Run(ctx context.Context, every time.Duration, onStep func(Step)) {
	t := time.NewTicker(every)
	defer t.Stop()
	set := make(chan struct{}, 1)
	var watchErr chan error
	if c.src.watch != nil {
		watchErr = make(chan error, 1)
		wctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			watchErr <- c.src.watch(wctx, set)
		}()
		defer func() {
			stop()
			wg.Wait()
		}()
	}
	kernel := watchErr != nil
	measure := func(noticed string) {
		c.mu.Lock()
		at := c.src.mono()
		before := time.Unix(0, int64(at)+c.offset)
		c.mu.Unlock()
		moved := c.Measure().Round(time.Microsecond) // below that is the pairing's noise
		if moved == 0 || noticed == "measure" && moved.Abs() < MeasuredStep {
			return
		}
		if onStep != nil {
			onStep(Step{Size: moved, Before: before.UTC(), After: before.Add(moved).UTC(), Synced: c.Sync().Synced, Noticed: noticed})
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-watchErr:
			// The kernel cannot tell: find steps by measuring.
			kernel, watchErr = false, nil
		case <-set:
			measure("kernel")
		case <-t.C:
			if kernel {
				c.Measure() // drift and slewing; the kernel reports steps
			} else {
				measure("measure")
			}
		}
	}
}
