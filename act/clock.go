package act

import (
	"time"

	"github.com/tobe-body/tobe-body/hal"
)

// Clock is the body's clock as the policy and grants judge time by it.
// A board has no real-time clock: its wall clock is stepped by NTP hours
// to years after boot, and by an administrator's `date -s`, while the
// monotonic clock runs on untouched. Implementations must be safe for
// concurrent use.
type Clock interface {
	// Now is the wall time with a monotonic reading (as time.Now's):
	// t.Sub between two of its readings is real elapsed time whatever
	// the wall clock did.
	Now() time.Time
	// Synced says whether the kernel counts the wall clock synchronised.
	Synced() bool
	// BootID is the kernel's boot id: monotonic readings of another boot
	// cannot be compared with this one's.
	BootID() string
	// Mono is CLOCK_MONOTONIC: the time since boot, never stepped. It
	// runs on across a restart of the daemon within one boot, so a
	// deadline kept as a reading of it survives the restart.
	Mono() hal.Mono
}

// Reading is one reading of a Clock: what a grant and the policy are
// judged at. Decide reads the time only from it.
type Reading struct {
	// Wall is Clock.Now.
	Wall time.Time
	// Mono is Clock.Mono, of boot BootID.
	Mono   time.Duration
	BootID string
	// Synced: the kernel counts the wall clock synchronised.
	Synced bool
}

// ReadClock reads c once.
func ReadClock(c Clock) Reading {
	return Reading{Wall: c.Now(), Mono: c.Mono().Duration(), BootID: c.BootID(), Synced: c.Synced()}
}

// sameBoot tells whether monotonic readings of boot id can be compared
// with r's: the boot ids are equal and known.
func (r Reading) sameBoot(id string) bool { return id != "" && id == r.BootID }

// nowClock is a clock of now that counts itself synchronised, with hal's
// monotonic clock and no boot id: what a runner without a Clock judges
// by (bare Environment tests). A body gives its own.
type nowClock struct{ now func() time.Time }

func (c nowClock) Now() time.Time { return c.now() }
func (nowClock) Synced() bool     { return true }
func (nowClock) BootID() string   { return "" }
func (nowClock) Mono() hal.Mono   { return hal.MonoNow() }
