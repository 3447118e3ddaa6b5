package body

import (
	"context"
	"fmt"
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
// clock is made and again by Run, from the closest of a few paired
// readings. The uncertainty comes from the kernel's own account of its
// time (adjtimex): while NTP keeps the clock synchronised it is the
// kernel's maximum error; while it does not, the kernel lets that error
// grow (to 16 s), and so does every event's clock_uncertainty_ms. An
// unsynchronised clock is never hidden. The clock domain is the kernel's
// boot id: monotonic times of different boots are not comparable.
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
	// MaxError is the kernel's bound on the clock's error.
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
	// Uncertainty bounds the error of UTC.
	Uncertainty time.Duration
}

// Apply sets an event's time fields from the stamp: occurred_at,
// monotonic_ns, clock_domain and clock_uncertainty_ms.
func (s Stamp) Apply(ev *ledger.Event) {
	ev.OccurredAt, ev.MonotonicNS, ev.ClockDomain, ev.ClockUncertaintyMS = s.UTC.UnixNano(), s.MonotonicNS, s.Domain, s.UncertaintyMS()
}

// UncertaintyMS is Uncertainty in whole milliseconds, rounded up.
func (s Stamp) UncertaintyMS() uint32 {
	ms := (s.Uncertainty + time.Millisecond - 1) / time.Millisecond
	if ms > 1<<31 {
		ms = 1 << 31
	}
	return uint32(ms)
}

// clockSource reads the clocks; tests replace it.
type clockSource struct {
	mono   func() hal.Mono
	utc    func() time.Time
	sync   func() (ClockSync, error)
	bootID func() (string, error)
}

// unsyncedError is the uncertainty claimed when the kernel cannot say:
// the kernel's own cap for an unsynchronised clock.
const unsyncedError = 16 * time.Second

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

// Measure re-measures the offset and re-reads the sync state.
func (c *Clock) Measure() {
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
	s, err := c.src.sync()
	if err != nil {
		s = ClockSync{MaxError: unsyncedError}
	}
	c.mu.Lock()
	c.offset, c.window, c.measured, c.sync = offset, best, c.src.mono(), s
	c.mu.Unlock()
}

// Sync returns the sync state of the last measurement.
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
	u := s.MaxError
	if !s.Synced && u < unsyncedError {
		u = unsyncedError
	}
	return Stamp{
		UTC:         time.Unix(0, int64(m)+offset).UTC(),
		MonotonicNS: int64(m),
		Domain:      c.domain,
		Uncertainty: u + window/2,
	}
}

// Now stamps the monotonic time now.
func (c *Clock) Now() Stamp { return c.Stamp(c.src.mono()) }

// Run re-measures every interval until ctx is done.
func (c *Clock) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.Measure()
		}
	}
}
