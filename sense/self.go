package sense

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/tobe-body/tobe-body/body"
)

// Hysteresis keeps a value hovering at a threshold from flapping.
const (
	hotHysteresisC   = 3.0
	diskHysteresisMB = 64
)

// Condition is the payload of the self-state events that turn on and off:
// body.hot, body.throttled, body.disk_low, body.clock_unsynced.
type Condition struct {
	// Active is true when the condition began, false when it cleared.
	Active bool   `cbor:"active" json:"active"`
	What   string `cbor:"what" json:"what"`
	// Value is the measurement that crossed (°C, MiB free, ms of clock
	// uncertainty); Limit the threshold.
	Value float64 `cbor:"value,omitempty" json:"value,omitempty"`
	Limit float64 `cbor:"limit,omitempty" json:"limit,omitempty"`
}

// LevelChange is the payload of body.degradation.
type LevelChange struct {
	Level string   `cbor:"level" json:"level"`
	From  string   `cbor:"from,omitempty" json:"from,omitempty"`
	Why   []string `cbor:"why,omitempty" json:"why,omitempty"`
}

// SelfChannel samples the body's own state at a low rate and emits events
// only when something changes: a zone gets hot or cools, throttling or
// under-voltage starts or stops, the data partition runs low, the clock
// loses or regains sync, and the degradation level moves (the first sample
// reports the level it starts at).
type SelfChannel struct {
	out     *Outlet
	sampler *body.Sampler
	every   time.Duration

	mu   sync.Mutex
	last body.SelfState
	have bool

	hot      map[string]bool
	throttle bool
	uv       bool
	diskLow  bool
	unsynced bool
}

// NewSelfChannel samples with s every interval (0: the default).
func NewSelfChannel(out *Outlet, s *body.Sampler, every time.Duration) *SelfChannel {
	if every <= 0 {
		every = body.DefaultSampleEvery
	}
	return &SelfChannel{out: out, sampler: s, every: every, hot: map[string]bool{}}
}

// Last returns the latest sample (for status and the action runner's
// health rule) and whether there is one.
func (c *SelfChannel) Last() (body.SelfState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last, c.have
}

// Prime takes the first sample now, so Last has one before Run starts.
func (c *SelfChannel) Prime() { c.observe(c.sampler.Sample()) }

// Run samples until ctx is done (at once, unless Prime already did).
func (c *SelfChannel) Run(ctx context.Context) error {
	t := time.NewTicker(c.every)
	defer t.Stop()
	if _, primed := c.Last(); primed {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
	for {
		c.observe(c.sampler.Sample())
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// observe compares a sample with the state so far and emits the changes.
func (c *SelfChannel) observe(st body.SelfState) {
	c.mu.Lock()
	prev, had := c.last, c.have
	c.last, c.have = st, true
	c.mu.Unlock()
	lim := c.sampler.Limits
	at := st.At
	emit := func(typ string, p Condition) { c.out.Emit(typ, at, 0, p) }

	for zone, temp := range st.Temps {
		switch {
		case !c.hot[zone] && lim.HotC > 0 && temp >= lim.HotC:
			c.hot[zone] = true
			emit("body.hot", Condition{Active: true, What: zone, Value: round1(temp), Limit: lim.HotC})
		case c.hot[zone] && temp < lim.HotC-hotHysteresisC:
			c.hot[zone] = false
			emit("body.hot", Condition{Active: false, What: zone, Value: round1(temp), Limit: lim.HotC})
		}
	}
	if t := st.Throttle; t != nil {
		if uv := t.UnderVoltage; uv != c.uv {
			c.uv = uv
			emit("body.throttled", Condition{Active: uv, What: "under-voltage"})
		}
		if th := t.Throttled || t.FreqCapped || t.SoftTempLimit; th != c.throttle {
			c.throttle = th
			emit("body.throttled", Condition{Active: th, What: throttleWhat(*t)})
		}
	}
	if st.DiskTotal > 0 {
		freeMB := float64(st.DiskFree >> 20)
		limitMB := float64(lim.DiskLowBytes >> 20)
		switch {
		case !c.diskLow && st.DiskFree < lim.DiskLowBytes:
			c.diskLow = true
			emit("body.disk_low", Condition{Active: true, What: "data partition", Value: freeMB, Limit: limitMB})
		case c.diskLow && freeMB >= limitMB+diskHysteresisMB:
			c.diskLow = false
			emit("body.disk_low", Condition{Active: false, What: "data partition", Value: freeMB, Limit: limitMB})
		}
	}
	if u := !st.Clock.Synced; u != c.unsynced || !had && u {
		c.unsynced = u
		emit("body.clock_unsynced", Condition{Active: u, What: "system clock", Value: float64(st.Clock.MaxError.Milliseconds())})
	}
	if !had || st.Level != prev.Level {
		p := LevelChange{Level: st.Level.String(), Why: st.Why}
		if had {
			p.From = prev.Level.String()
		}
		c.out.Emit("body.degradation", at, 0, p)
	}
}

func throttleWhat(t body.Throttle) string {
	switch {
	case t.Throttled:
		return fmt.Sprintf("throttled (%s)", t.Source)
	case t.SoftTempLimit:
		return fmt.Sprintf("soft temperature limit (%s)", t.Source)
	case t.FreqCapped:
		return fmt.Sprintf("frequency capped (%s)", t.Source)
	}
	return fmt.Sprintf("not throttled (%s)", t.Source)
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }
