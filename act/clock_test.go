package act

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/haltest/stepclock"
	"github.com/tobe-body/tobe-body/ledger"
)

// bodyClock is the step clock as the body's clock, with elapsed time a
// test moves by hand as well: Advance(d) is d of real time on both the
// wall and the monotonic clock; Step (stepclock's) moves the wall alone.
type bodyClock struct {
	*stepclock.Clock
	mu      sync.Mutex
	elapsed time.Duration
}

func newBodyClock() *bodyClock { return &bodyClock{Clock: stepclock.New()} }

func (c *bodyClock) el() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.elapsed
}

// Now keeps stepclock's monotonic reading: Add moves both readings.
func (c *bodyClock) Now() time.Time { return c.Clock.Now().Add(c.el()) }
func (c *bodyClock) Mono() hal.Mono { return c.Clock.Mono().Add(c.el()) }

func (c *bodyClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.elapsed += d
	c.mu.Unlock()
}

// The steps an NTP step or `date -s` makes on a board without a
// real-time clock.
var steps = []time.Duration{-10 * time.Minute, 25 * time.Hour, 30 * 24 * time.Hour, 365 * 24 * time.Hour}

const day = 24 * time.Hour

var relayGrant = Grant{Subject: "agent:pi", Capability: "gpio.set", Scope: "gpio.relay1", By: "admin:uid=0", ByTrust: ledger.High}

// expiredEvents are the grant.expired payloads in the ledger.
func expiredEvents(t *testing.T, store *ledger.Store) []grantExpired {
	t.Helper()
	var out []grantExpired
	for _, e := range grantEvents(t, store) {
		if e.Type != EventGrantExpired {
			continue
		}
		var p grantExpired
		if err := ledger.UnmarshalPayload(e.Payload, &p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// near tells whether d is within a second of want.
func near(d, want time.Duration) bool { return d > want-time.Second && d <= want+time.Second }

// TestGrantExpiryAcrossClockSteps: a grant given "24h" while the clock
// is synchronised, then a step of the wall clock, within the process, across
// a restart of the daemon in the same boot, and across a reboot with the
// clock synchronised or not yet. In the boot it was given in the earlier
// of its wall expiry and its monotonic deadline ends it (a forward step
// early, and grant.expired says by how much; a backward step never
// extends it); after a reboot it is not in force while the clock is not
// synchronised, and the wall decides once it is.
func TestGrantExpiryAcrossClockSteps(t *testing.T) {
	type restart int
	const (
		none restart = iota
		sameBoot
		rebootUnsynced
		rebootSynced
	)
	for _, step := range steps {
		for _, rs := range []restart{none, sameBoot, rebootUnsynced, rebootSynced} {
			name := fmt.Sprintf("%v/%s", step, []string{"in the process", "restart in the boot", "reboot unsynchronised", "reboot synchronised"}[rs])
			t.Run(name, func(t *testing.T) {
				ctx := t.Context()
				path := filepath.Join(t.TempDir(), "ledger.db")
				store := openTestLedger(t, path)
				clock := newBodyClock()
				g, err := LoadGrants(store, clock)
				if err != nil {
					t.Fatal(err)
				}
				gr, err := g.Add(ctx, relayGrant, Expiry{In: day})
				if err != nil {
					t.Fatal(err)
				}
				if gr.BootID != clock.BootID() || !near(gr.MonoDeadline-clock.Mono().Duration(), day) || !near(gr.Expires.Sub(clock.Now()), day) {
					t.Fatalf("added %+v: want a wall expiry and a monotonic deadline a day on, of boot %s", gr, clock.BootID())
				}
				clock.Step(step)
				if rs != none {
					store.Close()
					store = openTestLedger(t, path)
					if rs == rebootUnsynced || rs == rebootSynced {
						clock.Reboot()
					}
					clock.SetSynced(rs != rebootUnsynced)
					if g, err = LoadGrants(store, clock); err != nil {
						t.Fatal(err)
					}
				}
				swept, err := g.Sweep(ctx)
				if err != nil {
					t.Fatal(err)
				}
				active := func() bool { return len(g.Active(g.Reading())) == 1 }
				forward := step > 0 // every forward step here is past the day
				switch {
				case rs == rebootUnsynced:
					// Of another boot: its expiry cannot be judged.
					if active() || len(swept) != 0 || !g.All()[0].SuspendedAt(g.Reading()) {
						t.Fatalf("after a reboot, unsynchronised: active %v, swept %v; want suspended, nothing recorded", active(), swept)
					}
					clock.SetSynced(true)
					swept, err = g.Sweep(ctx)
					if err != nil {
						t.Fatal(err)
					}
					fallthrough
				case rs == rebootSynced:
					// The wall alone decides.
					if active() == forward {
						t.Fatalf("after a reboot, synchronised: active %v after a step of %v", active(), step)
					}
					if forward && (len(swept) != 1 || swept[0].ExpiredBy != ExpiredByWall || swept[0].EndedEarly != 0) {
						t.Fatalf("swept %+v, want it expired by the wall (no monotonic deadline in this boot)", swept)
					}
				case forward:
					// The wall ends it early; the record says by how much.
					if active() || len(swept) != 1 || swept[0].ExpiredBy != ExpiredByWall || !near(swept[0].EndedEarly, day) {
						t.Fatalf("active %v, swept %+v; want it ended by the wall about a day early", active(), swept)
					}
					if ev := expiredEvents(t, store); len(ev) != 1 || ev[0].By != ExpiredByWall || !near(time.Duration(ev[0].EarlyNS), day) || ev[0].BootID != clock.BootID() {
						t.Fatalf("grant.expired %+v", ev)
					}
				default:
					// A backward step does not extend it: the monotonic
					// deadline ends it a day on, with the wall 10 min short.
					if !active() || len(swept) != 0 {
						t.Fatalf("active %v, swept %+v right after a step of %v", active(), swept, step)
					}
					clock.Advance(day - time.Second)
					if !active() {
						t.Fatal("ended before its day")
					}
					clock.Advance(time.Second)
					if active() {
						t.Fatal("in force after its monotonic deadline: the backward step extended it")
					}
					swept, err = g.Sweep(ctx)
					if err != nil || len(swept) != 1 || swept[0].ExpiredBy != ExpiredByMonotonic {
						t.Fatalf("swept %+v, %v; want it ended by the monotonic clock", swept, err)
					}
					if ev := expiredEvents(t, store); len(ev) != 1 || !near(time.Duration(ev[0].WallLeftNS), -step) {
						t.Fatalf("grant.expired %+v, want the wall's 10 min left named", ev)
					}
				}
				if active() {
					return
				}
				// Once expired, expired: stepping back a year, restarting,
				// even rebooting brings nothing back and records nothing more.
				n := len(expiredEvents(t, store))
				clock.Step(-step - 365*day)
				store.Close()
				store = openTestLedger(t, path)
				clock.Reboot()
				if g, err = LoadGrants(store, clock); err != nil {
					t.Fatal(err)
				}
				if swept, err := g.Sweep(ctx); err != nil || len(swept) != 0 || active() || !g.All()[0].Expired || len(expiredEvents(t, store)) != n {
					t.Fatalf("after stepping back and a reboot: swept %v %v, active %v, %+v", swept, err, active(), g.All()[0])
				}
				if v, err := store.Verify(ctx); err != nil || !v.OK() {
					t.Fatalf("verify: %+v %v", v, err)
				}
			})
		}
	}
}

// TestGrantAddOnAnUnsynchronisedClock: while the wall clock is not
// synchronised a relative expiry is refused, naming why and the way out;
// an absolute one is taken from a local administrator only, without a
// monotonic deadline, and is then judged by the wall in its boot; a
// grant without expiry is taken.
func TestGrantAddOnAnUnsynchronisedClock(t *testing.T) {
	ctx := t.Context()
	g, store := newTestGrants(t)
	clock := newBodyClock()
	g.clock = clock
	clock.SetSynced(false)
	for _, exp := range []string{"24h", "30d", "90m"} {
		e, err := ParseExpiry(exp)
		if err != nil {
			t.Fatal(err)
		}
		_, err = g.Add(ctx, relayGrant, e)
		var r *Refusal
		if !errors.As(err, &r) || !errors.Is(err, ErrClockUnsynchronized) || r.Reason != ReasonClockUnsynchronized ||
			r.Detail != "the body's clock is not synchronised (no NTP yet): a relative expiry cannot be measured; give an absolute time (RFC 3339) as a local administrator, or wait for time synchronisation" {
			t.Errorf("%s while unsynchronised: %v", exp, err)
		}
	}
	at := clock.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	byRule := relayGrant
	byRule.By = "rule:night-light"
	if _, err := g.Add(ctx, byRule, Expiry{At: at}); !errors.Is(err, ErrClockUnsynchronized) || !strings.Contains(err.Error(), "only from a local administrator") {
		t.Errorf("an absolute expiry from a rule while unsynchronised: %v", err)
	}
	if n := len(grantEvents(t, store)); n != 0 {
		t.Fatalf("refusals recorded %d events", n)
	}
	gr, err := g.Add(ctx, relayGrant, Expiry{At: at})
	if err != nil {
		t.Fatalf("an absolute expiry from a local administrator: %v", err)
	}
	if gr.MonoDeadline != 0 || gr.BootID != clock.BootID() || !gr.Expires.Equal(at) || !gr.ActiveAt(g.Reading()) {
		t.Fatalf("added %+v: want the wall expiry alone, in force in its boot", gr)
	}
	if _, err := g.Add(ctx, relayGrant, Expiry{}); err != nil {
		t.Fatalf("no expiry while unsynchronised: %v", err)
	}
	clock.Step(3 * time.Hour)
	if swept, err := g.Sweep(ctx); err != nil || len(swept) != 1 || swept[0].ID != gr.ID || swept[0].ExpiredBy != ExpiredByWall {
		t.Fatalf("after the wall passed it: %+v %v", swept, err)
	}

	// Synchronised, an absolute expiry has a monotonic deadline too.
	clock.SetSynced(true)
	at = clock.Now().Add(time.Hour).UTC()
	gr, err = g.Add(ctx, relayGrant, Expiry{At: at})
	if err != nil || !near(gr.MonoDeadline-clock.Mono().Duration(), time.Hour) {
		t.Fatalf("absolute, synchronised: %+v %v", gr, err)
	}
	clock.Step(-time.Hour)
	clock.Advance(time.Hour)
	if gr := g.All()[len(g.All())-1]; gr.ActiveAt(g.Reading()) {
		t.Fatal("a step back kept an absolute expiry past its monotonic deadline")
	}
}

// TestPolicyOnAnUnsynchronisedClock: through the runner, the clock rule
// refuses from its risk class while the body's clock is not synchronised
// and the refusal is recorded like any other.
func TestPolicyOnAnUnsynchronisedClock(t *testing.T) {
	for _, tc := range []struct {
		rule   ClockRule
		synced bool
		risk   Risk
		want   Reason
	}{
		{"", false, R2, ""},
		{ClockRefuseFromR2, false, R2, ReasonClockUnsynchronized},
		{ClockRefuseFromR2, true, R2, ""},
		{ClockRefuseFromR3, false, R1, ""},
		{ClockRefuseNever, false, R2, ""},
		{ClockRefuseFromR1, false, R1, ReasonClockUnsynchronized},
	} {
		t.Run(fmt.Sprintf("%q/synced=%v/%s", tc.rule, tc.synced, tc.risk), func(t *testing.T) {
			b := newBench(t)
			clock := newBodyClock()
			clock.SetSynced(tc.synced)
			env := b.r.env
			env.Now, env.Clock = nil, clock
			env.Rules.UnsyncedClockRefuseFrom = tc.rule
			env.Grants = func() []Grant {
				return []Grant{{ID: "g", Subject: "agent:pi", Capability: "*", Scope: "*", By: "admin:uid=0", ByTrust: ledger.Max}}
			}
			b.r = NewRunner(env, b.store)
			b.estop.e.SetRunner(b.r, env.Leases)
			if err := b.r.Register(riskyAct{&irreversible{}, tc.risk}); err != nil {
				t.Fatal(err)
			}
			b.reg.Register(body.Channel{ID: "test.vault", Kind: "test", State: body.Enabled})
			res := b.r.Submit(t.Context(), Invocation{Principal: Principal{Kind: AgentSession, Subject: "agent:pi", Session: "s1", Trust: ledger.Max},
				Capability: "test.irreversible", Target: "test.vault"})
			if res.Reason != tc.want || (tc.want == "") != (res.Status == Succeeded) {
				t.Fatalf("got %+v, want %s", res, orAllowed(tc.want))
			}
			if tc.want != "" {
				if got := actionTypes(t, b.store, res.ActionID); strings.Join(got, " ") != "action.proposed action.refused" {
					t.Errorf("records %v", got)
				}
			}
		})
	}
}

// riskyAct is the test capability at another risk class.
type riskyAct struct {
	*irreversible
	risk Risk
}

func (a riskyAct) Capability() Capability {
	c := a.irreversible.Capability()
	c.Risk = a.risk
	return c
}

// The monotonic clocks: leases, the rate limiter, approval expiry and
// session heartbeats measure elapsed time, so no step of the wall clock
// lengthens or shortens them.

func TestLeasesIgnoreClockSteps(t *testing.T) {
	for _, step := range append(steps, -365*day) {
		t.Run(step.String(), func(t *testing.T) {
			clock := newBodyClock()
			lt := NewLeaseTable(0)
			h := Holder{Subject: "agent:pi", Session: "s1"}
			l, d := lt.Acquire("gpio.relay1", h, time.Minute, clock.Now())
			if !d.Allow {
				t.Fatal(d)
			}
			clock.Step(step)
			if d := lt.Check("gpio.relay1", h, l.Epoch, clock.Now()); !d.Allow {
				t.Fatalf("after a step of %v: %v", step, d)
			}
			clock.Advance(time.Minute)
			if d := lt.Check("gpio.relay1", h, l.Epoch, clock.Now()); d.Allow {
				t.Fatalf("a minute on, after a step of %v, the lease is still live", step)
			}
		})
	}
}

func TestRateLimiterIgnoresClockSteps(t *testing.T) {
	for _, step := range append(steps, -365*day) {
		t.Run(step.String(), func(t *testing.T) {
			clock := newBodyClock()
			l, err := NewLimiter(RateLimits{Default: RateLimit{Burst: 1, PerSecond: 1}}, clock.Now)
			if err != nil {
				t.Fatal(err)
			}
			if !l.Take("agent:pi", "gpio.set") || l.Take("agent:pi", "gpio.set") {
				t.Fatal("want one token of a burst of 1")
			}
			clock.Step(step)
			if l.Take("agent:pi", "gpio.set") {
				t.Fatalf("a step of %v earned a token", step)
			}
			clock.Advance(time.Second)
			if !l.Take("agent:pi", "gpio.set") {
				t.Fatalf("a second on, after a step of %v, no token", step)
			}
		})
	}
}

func TestApprovalExpiryIgnoresClockSteps(t *testing.T) {
	for _, step := range append(steps, -365*day) {
		t.Run(step.String(), func(t *testing.T) {
			b := newApprovalBench(t)
			clock := newBodyClock()
			env := b.r.env
			env.Now, env.Clock = nil, clock
			b.r = NewRunner(env, b.store)
			b.estop.e.SetRunner(b.r, env.Leases)
			if err := b.r.Register(b.act); err != nil {
				t.Fatal(err)
			}
			w := b.ask(t, "k")
			clock.Step(step)
			if res, err := b.r.SweepApprovals(t.Context()); err != nil || len(res) != 0 || len(b.r.Waiting()) != 1 {
				t.Fatalf("after a step of %v: swept %+v %v, waiting %d", step, res, err, len(b.r.Waiting()))
			}
			clock.Advance(DefaultApprovalTTL)
			if res, err := b.r.SweepApprovals(t.Context()); err != nil || len(res) != 1 || res[0].ActionID != w.ActionID || res[0].Reason != ReasonApprovalExpired {
				t.Fatalf("its time on, after a step of %v: %+v %v", step, res, err)
			}
		})
	}
}

func TestSessionHeartbeatsIgnoreClockSteps(t *testing.T) {
	for _, step := range append(steps, -365*day) {
		t.Run(step.String(), func(t *testing.T) {
			clock := newBodyClock()
			log := &enderLog{ended: map[string]time.Time{}}
			s := NewSessions(log, 0, nil)
			s.now = clock.Now
			s.Beat("pi")
			clock.Step(step)
			// One pass of Run's loop: ctx is done already, so it ends
			// what is due and returns.
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			s.Run(ctx)
			if _, ended := log.at("pi"); ended {
				t.Fatalf("a step of %v ended a session that beat just now", step)
			}
			clock.Advance(s.Window())
			s.Run(ctx)
			if _, ended := log.at("pi"); !ended {
				t.Fatalf("a window on, after a step of %v, the silent session lives", step)
			}
		})
	}
}
