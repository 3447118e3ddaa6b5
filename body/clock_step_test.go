package body

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/haltest/stepclock"
	"github.com/tobe-body/tobe-body/ledger"
)

// The steps of RELIABILITY.md's T1: an administrator's correction, a Pi
// that was off for a day, a month, a year.
var steps = []time.Duration{-10 * time.Minute, 25 * time.Hour, 30 * 24 * time.Hour, 365 * 24 * time.Hour}

// stepSource reads a step clock as the kernel's clocks; watch, when set,
// tells of each step as TFD_TIMER_CANCEL_ON_SET does.
func stepSource(sc *stepclock.Clock, watch bool) clockSource {
	src := clockSource{
		mono: sc.Mono,
		utc:  sc.Now,
		sync: func() (ClockSync, error) {
			if sc.Synced() {
				return ClockSync{Synced: true, MaxError: 4 * time.Millisecond}, nil
			}
			return ClockSync{MaxError: 16 * time.Second}, nil
		},
		bootID: func() (string, error) { return sc.BootID(), nil },
	}
	if watch {
		ch := sc.Watch()
		src.watch = func(ctx context.Context, set chan<- struct{}) error {
			for {
				select {
				case <-ctx.Done():
					return nil
				case <-ch:
					set <- struct{}{}
				}
			}
		}
	}
	return src
}

// runClock runs c until the test ends and hands over the steps it finds.
func runClock(t *testing.T, c *Clock, every time.Duration) <-chan Step {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	found := make(chan Step, 8)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.Run(ctx, every, func(s Step) { found <- s })
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return found
}

func nextStep(t *testing.T, found <-chan Step) Step {
	t.Helper()
	select {
	case s := <-found:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no step was reported")
		return Step{}
	}
}

// A setting of the wall clock is measured at once and reported with its
// size, whether the kernel says so or a measurement finds it; stamps
// after it are of the new wall clock, and monotonic times stay what they
// were.
func TestClockFollowsASteppedWallClock(t *testing.T) {
	for _, noticed := range []string{"kernel", "measure"} {
		for _, step := range steps {
			t.Run(fmt.Sprintf("%s %v", noticed, step), func(t *testing.T) {
				sc := stepclock.New()
				c, err := newClock(stepSource(sc, noticed == "kernel"))
				if err != nil {
					t.Fatal(err)
				}
				every := time.Hour // the kernel says; the ticker is not waited for
				if noticed == "measure" {
					every = 5 * time.Millisecond
				}
				found := runClock(t, c, every)
				at := sc.Mono()
				before := c.Stamp(at)
				sc.Step(step)
				s := nextStep(t, found)
				if d := (s.Size - step).Abs(); d > 5*time.Millisecond {
					t.Errorf("step of %v reported as %v", step, s.Size)
				}
				if s.Noticed != noticed || !s.Synced {
					t.Errorf("step %+v, want noticed by %s, synced", s, noticed)
				}
				if d := s.After.Sub(s.Before) - s.Size; d != 0 {
					t.Errorf("before %v and after %v are not %v apart", s.Before, s.After, s.Size)
				}
				after := c.Stamp(at)
				if d := after.UTC.Sub(before.UTC) - step; d.Abs() > 5*time.Millisecond {
					t.Errorf("the same monotonic instant reads %v after the step, %v before: moved %v, want %v", after.UTC, before.UTC, after.UTC.Sub(before.UTC), step)
				}
				if now := c.StampNow().UTC; now.Sub(sc.Now().Round(0)).Abs() > 5*time.Millisecond {
					t.Errorf("now stamps as %v, the wall clock reads %v", now, sc.Now())
				}
				if after.MonotonicNS != int64(at) || after.Domain != sc.BootID() {
					t.Errorf("the stamp's monotonic time or domain changed: %+v", after)
				}
				ev := c.StepEvent(s)
				var p ClockStepped
				if err := ledger.UnmarshalPayload(ev.Payload, &p); err != nil || p.SizeNS != int64(s.Size) || p.Size != s.Size.String() || p.Noticed != noticed {
					t.Errorf("event %s payload %+v (%v), want the step's size", ev.Type, p, err)
				}
				if ev.Type != EventClockStepped || ev.ClockDomain != sc.BootID() || ev.MonotonicNS == 0 {
					t.Errorf("event %+v: want %s stamped with the clock's domain and monotonic time", ev, EventClockStepped)
				}
			})
		}
	}
}

// Drift is not a step: with the kernel watching, periodic measurements
// report nothing; without it, a move under MeasuredStep is not a step.
func TestClockDriftIsNoStep(t *testing.T) {
	sc := stepclock.New()
	c, err := newClock(stepSource(sc, false))
	if err != nil {
		t.Fatal(err)
	}
	found := runClock(t, c, 2*time.Millisecond)
	sc.Step(300 * time.Millisecond)
	sc.Step(MeasuredStep + 100*time.Millisecond)
	s := nextStep(t, found)
	if s.Size < MeasuredStep {
		t.Errorf("a move of %v was reported as a step", s.Size)
	}
}

// An unsynchronised clock says so in every stamp, and its uncertainty is
// unbounded; the ledger's stamp says the same.
func TestUnsyncedClockStampsSaySo(t *testing.T) {
	sc := stepclock.New()
	sc.SetSynced(false)
	c, err := newClock(stepSource(sc, false))
	if err != nil {
		t.Fatal(err)
	}
	if c.Synced() {
		t.Fatal("Synced() with the kernel saying unsynchronised")
	}
	s := c.StampNow()
	if !s.Unsynced || s.Uncertainty != Unbounded || s.UncertaintyMS() != UnboundedMS {
		t.Errorf("stamp %+v: want unsynced, unbounded", s)
	}
	var ev ledger.Event
	s.Apply(&ev)
	if !ev.ClockUnsynced || ev.ClockUncertaintyMS != UnboundedMS {
		t.Errorf("event: unsynced %v, uncertainty %d ms; want true, %d", ev.ClockUnsynced, ev.ClockUncertaintyMS, uint32(UnboundedMS))
	}
	if ls := c.LedgerStamp(); !ls.Unsynced || ls.UncertaintyMS != UnboundedMS || ls.Domain != sc.BootID() || ls.MonotonicNS == 0 {
		t.Errorf("ledger stamp %+v: want unsynced, unbounded, of this boot", ls)
	}
	// Synchronised again: Synced reads the kernel at once.
	sc.SetSynced(true)
	if !c.Synced() {
		t.Fatal("Synced() false after the kernel synchronised")
	}
	if s := c.StampNow(); s.Unsynced || s.Uncertainty == Unbounded {
		t.Errorf("stamp %+v after synchronisation", s)
	}
	_ = hal.Mono(0)
}

// A restart after a step (the daemon started again in the same boot) and
// a reboot: the new clock reads the stepped wall clock, and the domain
// says which boot its monotonic times are of.
func TestClockAcrossARestartAndAReboot(t *testing.T) {
	for _, step := range steps {
		t.Run(fmt.Sprint(step), func(t *testing.T) {
			sc := stepclock.New()
			c1, err := newClock(stepSource(sc, true))
			if err != nil {
				t.Fatal(err)
			}
			sc.Step(step)
			c2, err := newClock(stepSource(sc, true))
			if err != nil {
				t.Fatal(err)
			}
			if d := c2.StampNow().UTC.Sub(sc.Now().Round(0)).Abs(); d > 5*time.Millisecond {
				t.Errorf("restarted after a step of %v: stamps %v off the wall clock", step, d)
			}
			if c2.Domain() != c1.Domain() {
				t.Errorf("a restart in one boot changed the domain from %s to %s", c1.Domain(), c2.Domain())
			}
			sc.Reboot()
			c3, err := newClock(stepSource(sc, true))
			if err != nil {
				t.Fatal(err)
			}
			if c3.Domain() == c1.Domain() {
				t.Errorf("after a reboot the domain is still %s", c3.Domain())
			}
		})
	}
}
