package body

import (
	"errors"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/hal"
)

// fakeClocks steps the monotonic clock by the widths given, one per read
// pair, and keeps UTC a fixed offset ahead of it.
type fakeClocks struct {
	mono   hal.Mono
	steps  []time.Duration // how long each utc read takes, in turn
	offset time.Duration
	sync   ClockSync
	err    error
}

func (f *fakeClocks) source() clockSource {
	return clockSource{
		mono: func() hal.Mono { return f.mono },
		utc: func() time.Time {
			// The read happens in the middle of its step.
			step := time.Duration(0)
			if len(f.steps) > 0 {
				step, f.steps = f.steps[0], f.steps[1:]
			}
			f.mono = f.mono.Add(step / 2)
			u := time.Unix(0, int64(f.mono)).Add(f.offset)
			f.mono = f.mono.Add(step - step/2)
			return u
		},
		sync:   func() (ClockSync, error) { return f.sync, f.err },
		bootID: func() (string, error) { return "7b1c3f2e-0000-4000-8000-000000000001", nil },
	}
}

func TestClockStamp(t *testing.T) {
	base := hal.Mono(1000 * time.Second)
	offset := time.Duration(1_780_000_000) * time.Second // UTC in late 2026
	for _, tc := range []struct {
		name     string
		steps    []time.Duration
		sync     ClockSync
		syncErr  error
		wantUnc  time.Duration
		wantSkew time.Duration // |UTC - truth| at most
	}{
		{"synced, quiet reads", []time.Duration{2 * time.Microsecond}, ClockSync{Synced: true, MaxError: 5 * time.Millisecond}, nil, 5*time.Millisecond + time.Microsecond, 0},
		{"the narrowest of five pairings wins", []time.Duration{900 * time.Microsecond, 40 * time.Microsecond, 2 * time.Millisecond, 400 * time.Microsecond, 100 * time.Microsecond},
			ClockSync{Synced: true, MaxError: time.Millisecond}, nil, time.Millisecond + 20*time.Microsecond, 0},
		{"unsynced: unbounded, whatever the kernel's error says", []time.Duration{2 * time.Microsecond}, ClockSync{Synced: false, MaxError: 300 * time.Millisecond}, nil, Unbounded, 0},
		{"unsynced at the kernel's cap", []time.Duration{2 * time.Microsecond}, ClockSync{Synced: false, MaxError: 16 * time.Second}, nil, Unbounded, 0},
		{"adjtimex fails: unsynced", []time.Duration{2 * time.Microsecond}, ClockSync{}, errors.New("EPERM"), Unbounded, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			steps := tc.steps
			for len(steps) < 5 {
				steps = append(steps, steps[0])
			}
			f := &fakeClocks{mono: base, steps: steps, offset: offset, sync: tc.sync, err: tc.syncErr}
			c, err := newClock(f.source())
			if err != nil {
				t.Fatal(err)
			}
			at := base.Add(-3 * time.Second) // an event from before the measurement
			s := c.Stamp(at)
			truth := time.Unix(0, int64(at)).Add(offset)
			if d := s.UTC.Sub(truth).Abs(); d > tc.wantSkew {
				t.Errorf("UTC %v, want %v (off by %v)", s.UTC, truth, d)
			}
			if s.Uncertainty != tc.wantUnc {
				t.Errorf("uncertainty %v, want %v", s.Uncertainty, tc.wantUnc)
			}
			if s.Unsynced != (tc.wantUnc == Unbounded) {
				t.Errorf("unsynced %v, want %v", s.Unsynced, tc.wantUnc == Unbounded)
			}
			if s.MonotonicNS != int64(at) || s.Domain != c.Domain() {
				t.Errorf("stamp %+v lost the monotonic time or the domain", s)
			}
		})
	}
}

func TestUncertaintyMSRoundsUp(t *testing.T) {
	for _, tc := range []struct {
		d        time.Duration
		want     uint32
		unsynced bool
	}{{0, 0, false}, {time.Microsecond, 1, false}, {time.Millisecond, 1, false}, {time.Millisecond + 1, 2, false}, {16 * time.Second, 16000, false},
		{1 << 62, UnboundedMS - 1, false}, {Unbounded, UnboundedMS, false}, {time.Millisecond, UnboundedMS, true}} {
		if got := (Stamp{Uncertainty: tc.d, Unsynced: tc.unsynced}).UncertaintyMS(); got != tc.want {
			t.Errorf("%v (unsynced %v): %d ms, want %d", tc.d, tc.unsynced, got, tc.want)
		}
	}
}

func TestClockWithoutBootID(t *testing.T) {
	src := (&fakeClocks{}).source()
	src.bootID = func() (string, error) { return "", errors.New("no /proc") }
	if _, err := newClock(src); err == nil {
		t.Fatal("a clock without a domain")
	}
}

// On this machine: the system clock stamps now as now.
func TestSystemClock(t *testing.T) {
	c, err := NewClock()
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Domain()) != 36 {
		t.Errorf("domain %q is not a boot id", c.Domain())
	}
	before := time.Now()
	s := c.StampNow()
	after := time.Now()
	if s.UTC.Before(before.Add(-time.Millisecond)) || s.UTC.After(after.Add(time.Millisecond)) {
		t.Errorf("now stamped %v, outside %v..%v", s.UTC, before, after)
	}
	sync := c.Sync()
	if !sync.Synced && (s.Uncertainty != Unbounded || !s.Unsynced) {
		t.Errorf("unsynced clock claims %v", s.Uncertainty)
	}
	t.Logf("clock: domain %s, synced %v, max error %v, uncertainty %v", c.Domain(), sync.Synced, sync.MaxError, s.Uncertainty)
}
