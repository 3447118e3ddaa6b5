package act

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// RateLimit is a token bucket: up to Burst requests at once, refilled at
// PerSecond requests a second.
type RateLimit struct {
	Burst     int     `json:"burst"`
	PerSecond float64 `json:"per_second"`
}

func (r RateLimit) check() error {
	if r.Burst < 1 {
		return fmt.Errorf("burst %d: at least 1", r.Burst)
	}
	if !(r.PerSecond > 0) || math.IsInf(r.PerSecond, 0) {
		return fmt.Errorf("per_second %v: more than 0 and finite", r.PerSecond)
	}
	return nil
}

// RateLimits are the limits per principal subject and capability, from
// the config: every subject gets its own bucket for each capability,
// with the capability's limit or Default.
type RateLimits struct {
	Default RateLimit `json:"default"`
	// ByCapability sets the limit of a capability by its exact name.
	ByCapability map[string]RateLimit `json:"by_capability,omitempty"`
	// MaxBuckets bounds the memory the limiter keeps; 0 means 4096.
	MaxBuckets int `json:"max_buckets,omitempty"`
}

// Check says which limit is malformed, or nil.
func (r RateLimits) Check() error {
	if err := r.Default.check(); err != nil {
		return fmt.Errorf("default: %w", err)
	}
	for name, l := range r.ByCapability {
		if err := checkName(name); err != nil {
			return fmt.Errorf("by_capability: %w", err)
		}
		if err := l.check(); err != nil {
			return fmt.Errorf("by_capability %s: %w", name, err)
		}
	}
	if r.MaxBuckets < 0 {
		return errors.New("max_buckets: not negative")
	}
	return nil
}

// sweepEvery is how often, by the limiter's clock, buckets that have
// refilled are let go.
const sweepEvery = time.Minute

// Limiter keeps the token buckets. It is safe for concurrent use. Its
// memory is bounded: a bucket that has refilled is the same as a new
// one and is let go, once a minute and whenever MaxBuckets are held;
// when MaxBuckets are held and none has refilled, a request that would
// need a new bucket is refused (fail closed) rather than one in use
// forgotten.
type Limiter struct {
	limits RateLimits
	now    func() time.Time

	mu        sync.Mutex
	buckets   map[bucketKey]*bucket
	lastSweep time.Time
}

type bucketKey struct{ subject, capability string }

type bucket struct {
	tokens float64
	at     time.Time // when tokens was last brought up to date
	limit  RateLimit
}

// NewLimiter returns a limiter for limits on the clock now (nil:
// time.Now). Malformed limits are an error.
func NewLimiter(limits RateLimits, now func() time.Time) (*Limiter, error) {
	if err := limits.Check(); err != nil {
		return nil, fmt.Errorf("act: rate limits: %w", err)
	}
	if limits.MaxBuckets == 0 {
		limits.MaxBuckets = 4096
	}
	if now == nil {
		now = time.Now
	}
	return &Limiter{limits: limits, now: now, buckets: map[bucketKey]*bucket{}, lastSweep: now()}, nil
}

// Take takes a token from the bucket of subject and capability and tells
// whether there was one.
func (l *Limiter) Take(subject, capability string) bool {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastSweep) >= sweepEvery || now.Before(l.lastSweep) {
		l.sweep(now)
	}
	k := bucketKey{subject, capability}
	b, ok := l.buckets[k]
	if !ok {
		if len(l.buckets) >= l.limits.MaxBuckets {
			l.sweep(now)
			if len(l.buckets) >= l.limits.MaxBuckets {
				return false
			}
		}
		lim, ok := l.limits.ByCapability[capability]
		if !ok {
			lim = l.limits.Default
		}
		b = &bucket{tokens: float64(lim.Burst), at: now, limit: lim}
		l.buckets[k] = b
	}
	b.refill(now)
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// refill adds what the time since the last refill earned. A clock that
// went back earns nothing and restarts the count from now.
func (b *bucket) refill(now time.Time) {
	if d := now.Sub(b.at); d > 0 {
		b.tokens = min(float64(b.limit.Burst), b.tokens+d.Seconds()*b.limit.PerSecond)
	}
	b.at = now
}

// sweep lets go of the buckets that are full again. The caller holds mu.
func (l *Limiter) sweep(now time.Time) {
	for k, b := range l.buckets {
		b.refill(now)
		if b.tokens >= float64(b.limit.Burst) {
			delete(l.buckets, k)
		}
	}
	l.lastSweep = now
}

// Len returns how many buckets the limiter holds.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}

// admissionKey is the capability an admission limiter keeps its buckets
// under: one bucket per principal, whatever it asks for.
const admissionKey = ""

// NewAdmission returns the limiter of Environment.Admission: a token
// bucket per principal subject with limit l, on the clock now (nil:
// time.Now), its memory bounded as a Limiter's is. A malformed limit is
// an error.
func NewAdmission(l RateLimit, now func() time.Time) (*Limiter, error) {
	if err := l.check(); err != nil {
		return nil, fmt.Errorf("act: admission limit: %w", err)
	}
	return NewLimiter(RateLimits{Default: l}, now)
}

// Authorize is Decide, then the rate limit: a request Decide allows takes
// a token from its principal's bucket for its capability, and is refused
// with rate_limited when there is none. A refused request takes no
// token, so a burst of refused requests keeps its own reasons and does
// not use up the principal's allowance. A stop (estop.trip) is never
// rate limited. l may be nil: no rate limits.
func Authorize(req Request, st State, l *Limiter) Decision {
	d := Decide(req, st)
	if !d.Allow || l == nil || req.Capability.Name == CapabilityEStopTrip {
		return d
	}
	if !l.Take(req.Principal.Subject, req.Capability.Name) {
		return refuse(ReasonRateLimited, "%s asked for %s too often", req.Principal.Subject, req.Capability.Name)
	}
	return d
}
