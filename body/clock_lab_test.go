//go:build lab

package body

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tobe-body/tobe-body/hal"
)

// In the lab VM (scripts/lab/run.sh), which may set its own clock: the
// kernel's timerfd tells the clock of each setting of the wall clock, and
// the clock reports it with its size, at once rather than at its next
// periodic measurement (an hour away here).

// setWall moves the kernel's wall clock by d, as `date -s` or NTP's step
// does.
func setWall(t *testing.T, d time.Duration) {
	t.Helper()
	ts := unix.NsecToTimespec(time.Now().Add(d).UnixNano())
	if err := unix.ClockSettime(unix.CLOCK_REALTIME, &ts); err != nil {
		t.Fatalf("clock_settime: %v", err)
	}
}

func TestLabClockSeesTheKernelSetTheClock(t *testing.T) {
	c, err := NewClock()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	found := make(chan Step, 4)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.Run(ctx, time.Hour, func(s Step) { found <- s })
	}()
	defer func() {
		cancel()
		wg.Wait()
	}()
	time.Sleep(100 * time.Millisecond) // the watcher's timerfd is armed
	for _, step := range []time.Duration{25 * time.Hour, -25 * time.Hour, 30 * 24 * time.Hour, -30 * 24 * time.Hour, -10 * time.Minute, 10 * time.Minute} {
		t.Run(fmt.Sprint(step), func(t *testing.T) {
			at := c.StampNow()
			set := time.Now()
			setWall(t, step)
			select {
			case s := <-found:
				took := time.Since(set)
				if d := (s.Size - step).Abs(); d > 50*time.Millisecond || s.Noticed != "kernel" {
					t.Errorf("set by %v: reported %+v", step, s)
				}
				if d := c.Stamp(hal.Mono(at.MonotonicNS)).UTC.Sub(at.UTC) - step; d.Abs() > 50*time.Millisecond {
					t.Errorf("the same instant moved by %v, want %v", c.Stamp(hal.Mono(at.MonotonicNS)).UTC.Sub(at.UTC), step)
				}
				t.Logf("set by %v: reported %v after %v (noticed by the %s, synced %v)", step, s.Size, took, s.Noticed, s.Synced)
			case <-time.After(5 * time.Second):
				t.Fatalf("setting the clock by %v was not reported within 5 s", step)
			}
		})
	}
}

// Settings of the clock in quick succession, each made before the watcher
// has looked at the one before (the kernel then fails the watcher's next
// read, or its arming, with ECANCELED): none is lost, and the watcher
// still reports the settings that come after them.
func TestLabClockSettingsInQuickSuccession(t *testing.T) {
	c, err := NewClock()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu    sync.Mutex
		total time.Duration
		steps int
	)
	reported := make(chan struct{}, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.Run(ctx, time.Hour, func(s Step) {
			if s.Noticed != "kernel" {
				t.Errorf("a step noticed by %q, want the kernel: %+v", s.Noticed, s)
			}
			mu.Lock()
			total += s.Size
			steps++
			mu.Unlock()
			select {
			case reported <- struct{}{}:
			default:
			}
		})
	}()
	defer func() {
		cancel()
		wg.Wait()
	}()
	time.Sleep(100 * time.Millisecond) // the watcher's timerfd is armed
	sum := func() (time.Duration, int) {
		mu.Lock()
		defer mu.Unlock()
		return total, steps
	}
	// Rounds of settings with no pause; the watcher wakes somewhere inside
	// each, so some of its reads and armings find the clock set again.
	var want time.Duration
	for round := range 20 {
		for i := range 10 {
			d := time.Duration(round*10+i+1) * time.Second
			if i%2 == 1 {
				d = -d / 2
			}
			setWall(t, d)
			want += d
		}
		time.Sleep(time.Duration(round%4) * time.Millisecond)
	}
	deadline := time.Now().Add(5 * time.Second) // compared on the monotonic reading
	for {
		got, n := sum()
		if (got - want).Abs() < 50*time.Millisecond {
			t.Logf("200 settings adding up to %v: %d steps reported, adding up to %v", want, n, got)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("200 settings adding up to %v: %d steps reported, adding up to %v", want, n, got)
		}
		select {
		case <-reported:
		case <-time.After(100 * time.Millisecond):
		}
	}
	// After all that, one more setting is still reported, by the kernel.
	_, before := sum()
	setWall(t, -want)
	select {
	case <-reported:
	case <-time.After(5 * time.Second):
		t.Fatal("a setting after the quick ones was not reported within 5 s: the watcher stopped")
	}
	for {
		got, n := sum()
		if n > before && (got).Abs() < 50*time.Millisecond {
			break
		}
		select {
		case <-reported:
		case <-time.After(5 * time.Second):
			t.Fatalf("after putting the clock back by %v: steps add up to %v", -want, got)
		}
	}
}
