// Package stepclock is a clock for tests whose wall reading steps, as an
// NTP step or an administrator's `date -s` steps the kernel's, while its
// monotonic reading runs on untouched.
//
// Its Now is time.Now with the wall reading moved by the steps taken so
// far and the monotonic reading left as it was, so t.Sub, Before and After
// between two of its times measure real elapsed time, exactly as they do
// between two of time.Now's across a real step. Code that strips the
// monotonic reading (Round(0), a round trip through UnixNano or an
// encoding) compares wall readings instead, and a test that steps this
// clock sees it.
//
// The monotonic reading of a time.Time cannot be set through the time
// package's API; Now moves only the wall part of time.Time's
// representation, and checks once that the layout is the one it knows.
package stepclock

import (
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/tobe-body/tobe-body/hal"
)

// Clock is a steppable clock. The zero value is not usable; use New.
// A Clock is safe for concurrent use.
type Clock struct {
	mu      sync.Mutex
	step    time.Duration
	synced  bool
	boot    int
	monoOff hal.Mono
	watch   []chan time.Duration
}

// New returns a clock that reads as time.Now and is synchronised.
func New() *Clock {
	if err := layoutOK(); err != nil {
		panic(err)
	}
	return &Clock{synced: true, boot: 1}
}

// Now is time.Now with the wall reading moved by every step so far; its
// monotonic reading is time.Now's.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	d := c.step
	c.mu.Unlock()
	return shift(time.Now(), d)
}

// Mono is the monotonic clock, never stepped (it restarts on Reboot).
func (c *Clock) Mono() hal.Mono {
	c.mu.Lock()
	defer c.mu.Unlock()
	return hal.MonoNow() - c.monoOff
}

// Step moves the wall reading by d (forward when positive) and tells every
// Watch channel, as the kernel's TFD_TIMER_CANCEL_ON_SET does.
func (c *Clock) Step(d time.Duration) {
	c.mu.Lock()
	c.step += d
	watch := c.watch
	c.mu.Unlock()
	for _, ch := range watch {
		select {
		case ch <- d:
		default:
		}
	}
}

// Offset is the sum of the steps taken: how far the wall reading is from
// the machine's.
func (c *Clock) Offset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.step
}

// Watch returns a channel that receives the size of each step (a step
// while the last is unread is dropped, as the kernel reports only that the
// clock was set).
func (c *Clock) Watch() <-chan time.Duration {
	ch := make(chan time.Duration, 1)
	c.mu.Lock()
	c.watch = append(c.watch, ch)
	c.mu.Unlock()
	return ch
}

// SetSynced says whether the clock counts as synchronised (the kernel's
// STA_UNSYNC cleared).
func (c *Clock) SetSynced(ok bool) {
	c.mu.Lock()
	c.synced = ok
	c.mu.Unlock()
}

// Synced reports what SetSynced last said; a new clock is synchronised.
func (c *Clock) Synced() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.synced
}

// Reboot gives the clock a new boot id and restarts Mono from zero, as a
// reboot does; the wall reading is unchanged.
func (c *Clock) Reboot() {
	c.mu.Lock()
	c.boot++
	c.monoOff = hal.MonoNow()
	c.mu.Unlock()
}

// BootID is a boot id in the kernel's form, new after each Reboot.
func (c *Clock) BootID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("00000000-0000-4000-8000-%012x", c.boot)
}

// timeRepr is time.Time's representation: wall holds, with the
// hasMonotonic bit set, seconds since 1885 and nanoseconds; ext holds the
// monotonic reading.
type timeRepr struct {
	wall uint64
	ext  int64
	loc  *time.Location
}

const hasMonotonic = 1 << 63

// shift returns t with its wall reading moved by d and its monotonic
// reading kept. t.Add(d) moves both; the monotonic reading of t is put
// back into the result.
func shift(t time.Time, d time.Duration) time.Time {
	if d == 0 {
		return t
	}
	u := t.Add(d)
	tr := (*timeRepr)(unsafe.Pointer(&t))
	ur := (*timeRepr)(unsafe.Pointer(&u))
	if tr.wall&hasMonotonic == 0 || ur.wall&hasMonotonic == 0 {
		// Outside 1885..2157 time.Time keeps no monotonic reading.
		panic(fmt.Sprintf("stepclock: a step of %v leaves the years a monotonic reading can be kept in", d))
	}
	ur.ext = tr.ext
	return u
}

// layoutOK checks that shift does what it says on this Go's time.Time.
func layoutOK() error {
	if unsafe.Sizeof(time.Time{}) != unsafe.Sizeof(timeRepr{}) {
		return fmt.Errorf("stepclock: time.Time is %d bytes, not the %d this package knows", unsafe.Sizeof(time.Time{}), unsafe.Sizeof(timeRepr{}))
	}
	t := time.Now()
	u := shift(t, 24*time.Hour)
	if u.Sub(t) != 0 || !u.Equal(t) || u.Round(0).Sub(t.Round(0)) != 24*time.Hour {
		return fmt.Errorf("stepclock: time.Time's layout is not the one this package knows (a shifted time measured %v by its monotonic reading, %v by its wall)", u.Sub(t), u.Round(0).Sub(t.Round(0)))
	}
	return nil
}
