package sense

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/tobe-body/tobe-body/hal"
)

// Timing of the indicator.
const (
	// BlinkPeriod is half a blink: on, then off, this long each.
	BlinkPeriod = 125 * time.Millisecond
	// MinBlink is the least a capture blinks, so that a snapshot taken in
	// a frame's time is seen.
	MinBlink = 2 * time.Second
)

// Indicator shows on an output whether the body sees and hears: on
// while its cameras and microphones are open, blinking while evidence
// is being captured, off while they are paused (or the body has none).
// It is the body's own signal, not an action: the output it drives is
// taken from the runner and the e-stop. Privacy and Capture may be
// called from any goroutine; Run drives the output.
type Indicator struct {
	out hal.LineOut
	on  hal.Level // the level away from the output's safe level
	log *slog.Logger

	mu        sync.Mutex
	open      bool      // a camera or microphone is open
	capturing int       // captures in progress
	until     time.Time // blink at least until then
	wake      chan struct{}
}

// NewIndicator drives out, whose on is its level away from safe.
func NewIndicator(out hal.LineOut, log *slog.Logger) *Indicator {
	on := hal.High
	if out.Safe() == hal.High {
		on = hal.Low
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Indicator{out: out, on: on, log: log, wake: make(chan struct{}, 1)}
}

// Privacy takes the privacy state: on unless paused (a Privacy watcher).
func (i *Indicator) Privacy(st PrivacyState) {
	i.mu.Lock()
	i.open = !st.Paused && len(st.Devices) > 0
	i.mu.Unlock()
	i.poke()
}

// Capture says a capture begins: the indicator blinks until done is
// called and for MinBlink at least.
func (i *Indicator) Capture() (done func()) {
	i.mu.Lock()
	i.capturing++
	i.until = time.Now().Add(MinBlink)
	i.mu.Unlock()
	i.poke()
	var once sync.Once
	return func() {
		once.Do(func() {
			i.mu.Lock()
			i.capturing--
			i.mu.Unlock()
			i.poke()
		})
	}
}

func (i *Indicator) poke() {
	select {
	case i.wake <- struct{}{}:
	default:
	}
}

// mode is what the output shows now: off, on or blinking, and until when
// a blink must go on.
func (i *Indicator) mode(now time.Time) (open, blink bool, until time.Time) {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.open, i.open && (i.capturing > 0 || now.Before(i.until)), i.until
}

// Run drives the output until ctx is done, then leaves it at its safe
// level (off).
func (i *Indicator) Run(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	lit := false
	set := func(on bool) {
		l := i.on
		if !on {
			l = i.out.Safe()
		}
		if err := i.out.Out(l); err != nil {
			i.log.Warn("the privacy indicator cannot be driven", "output", i.out.Name(), "err", err)
		}
		lit = on
	}
	set(false)
	for {
		now := time.Now()
		open, blink, until := i.mode(now)
		wait := time.Hour
		switch {
		case blink:
			set(!lit)
			wait = BlinkPeriod
			if d := until.Sub(now); d > 0 && d < wait {
				wait = d
			}
		case lit != open:
			set(open)
		}
		t.Reset(wait)
		select {
		case <-ctx.Done():
			set(false)
			return
		case <-t.C:
		case <-i.wake:
		}
	}
}
