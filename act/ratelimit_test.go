package act

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/ledger"
)

func TestLimiterBucket(t *testing.T) {
	clock := &testClock{t: t0}
	l, err := NewLimiter(RateLimits{Default: RateLimit{Burst: 3, PerSecond: 2},
		ByCapability: map[string]RateLimit{"gpio.pulse": {Burst: 1, PerSecond: 0.1}}}, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	take := func(subject, capability string, want bool) {
		t.Helper()
		if got := l.Take(subject, capability); got != want {
			t.Fatalf("%s %s at +%v: got %v, want %v", subject, capability, clock.Now().Sub(t0), got, want)
		}
	}
	for range 3 {
		take("agent:pi", "gpio.set", true)
	}
	take("agent:pi", "gpio.set", false)
	// Another capability and another subject have their own buckets.
	take("agent:pi", "audio.tone", true)
	take("mqtt:home", "gpio.set", true)
	// Half a second earns one token at 2 a second.
	clock.Add(499 * time.Millisecond)
	take("agent:pi", "gpio.set", false)
	clock.Add(time.Millisecond)
	take("agent:pi", "gpio.set", true)
	take("agent:pi", "gpio.set", false)
	// A long pause refills to the burst, not beyond.
	clock.Add(time.Hour)
	for range 3 {
		take("agent:pi", "gpio.set", true)
	}
	take("agent:pi", "gpio.set", false)
	// A capability's own limit.
	take("agent:pi", "gpio.pulse", true)
	clock.Add(9 * time.Second)
	take("agent:pi", "gpio.pulse", false)
	clock.Add(time.Second)
	take("agent:pi", "gpio.pulse", true)
	// A clock that goes back earns nothing.
	clock.Add(-time.Hour)
	take("agent:pi", "gpio.pulse", false)
	clock.Add(5 * time.Second)
	take("agent:pi", "gpio.pulse", false)
	clock.Add(5 * time.Second)
	take("agent:pi", "gpio.pulse", true)
}

func TestLimiterEvictsIdleBuckets(t *testing.T) {
	clock := &testClock{t: t0}
	l, err := NewLimiter(RateLimits{Default: RateLimit{Burst: 2, PerSecond: 1}, MaxBuckets: 10}, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if !l.Take(fmt.Sprintf("agent:a%d", i), "gpio.set") {
			t.Fatal("first take refused")
		}
	}
	// Full of buckets in use: a new subject is refused, not let in by
	// forgetting someone's spent tokens.
	if l.Take("agent:new", "gpio.set") {
		t.Error("a new bucket past the bound was made")
	}
	if l.Len() != 10 {
		t.Errorf("%d buckets, want 10", l.Len())
	}
	// A second later every bucket is full again: they go, and the new
	// subject gets one.
	clock.Add(time.Second)
	if !l.Take("agent:new", "gpio.set") || l.Len() != 1 {
		t.Errorf("after refill: %d buckets, want 1", l.Len())
	}
	// The periodic sweep lets idle buckets go without the bound.
	clock.Add(sweepEvery)
	l.Take("agent:other", "gpio.set")
	if l.Len() != 1 {
		t.Errorf("after a sweep: %d buckets, want 1", l.Len())
	}
}

// TestLimiterConcurrently: many goroutines on one bucket with the clock
// stopped get exactly the burst; run with -race.
func TestLimiterConcurrently(t *testing.T) {
	l, err := NewLimiter(RateLimits{Default: RateLimit{Burst: 100, PerSecond: 1}}, func() time.Time { return t0 })
	if err != nil {
		t.Fatal(err)
	}
	var got atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if l.Take("agent:pi", "gpio.set") {
					got.Add(1)
				}
				l.Take(fmt.Sprintf("agent:x%d", got.Load()%7), "audio.tone")
			}
		})
	}
	wg.Wait()
	if got.Load() != 100 {
		t.Errorf("%d tokens taken, want the burst of 100", got.Load())
	}
}

func TestRateLimitsCheck(t *testing.T) {
	ok := RateLimit{Burst: 1, PerSecond: 1}
	for _, tc := range []struct {
		limits RateLimits
		want   string
	}{
		{RateLimits{}, "default: burst 0"},
		{RateLimits{Default: RateLimit{Burst: 1}}, "per_second 0"},
		{RateLimits{Default: RateLimit{Burst: 1, PerSecond: math.NaN()}}, "per_second NaN"},
		{RateLimits{Default: RateLimit{Burst: 1, PerSecond: math.Inf(1)}}, "per_second +Inf"},
		{RateLimits{Default: ok, ByCapability: map[string]RateLimit{"gpio.*": ok}}, "by_capability"},
		{RateLimits{Default: ok, ByCapability: map[string]RateLimit{"gpio.set": {Burst: -1, PerSecond: 1}}}, "by_capability gpio.set: burst -1"},
		{RateLimits{Default: ok, MaxBuckets: -1}, "max_buckets"},
	} {
		if _, err := NewLimiter(tc.limits, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error with %q", tc.limits, err, tc.want)
		}
	}
}

// TestAuthorize: the rate limit comes after the policy: a refused request
// takes no token; an allowed one over the limit is rate_limited; a stop
// is never limited.
func TestAuthorize(t *testing.T) {
	clock := &testClock{t: t0}
	l, err := NewLimiter(RateLimits{Default: RateLimit{Burst: 5, PerSecond: 1}}, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	req, st := allowed()
	// A burst of 1000 risky requests: the first five run, then the limit
	// engages and every refusal names it.
	counts := map[Reason]int{}
	for i := range 1000 {
		req.Invocation = fmt.Sprint("inv-", i)
		d := Authorize(req, st, l)
		counts[d.Reason]++
		if !d.Allow && d.Reason == ReasonRateLimited && !strings.Contains(d.Detail, "agent:pi") {
			t.Fatalf("detail %q", d.Detail)
		}
	}
	if counts[""] != 5 || counts[ReasonRateLimited] != 995 {
		t.Errorf("decisions %v, want 5 allowed and 995 rate_limited", counts)
	}
	// Refused by policy: no token taken, the policy's reason kept.
	clock.Add(time.Hour)
	low := req
	low.Principal.Trust = ledger.Low
	for range 100 {
		if d := Authorize(low, st, l); d.Reason != ReasonRiskExceedsTrust {
			t.Fatalf("got %v, want risk_exceeds_trust", d)
		}
	}
	for range 5 {
		if d := Authorize(req, st, l); !d.Allow {
			t.Fatalf("the refusals used up the allowance: %v", d)
		}
	}
	// A stop, over the limit, is allowed.
	trip := req
	trip.Capability = Capability{Name: CapabilityEStopTrip, Risk: R2}
	for range 10 {
		if d := Authorize(trip, st, l); !d.Allow {
			t.Fatalf("trip: %v", d)
		}
	}
	if d := Authorize(req, st, nil); !d.Allow {
		t.Errorf("without a limiter: %v", d)
	}
}
