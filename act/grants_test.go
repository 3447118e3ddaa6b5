package act

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/ledger"
)

// testClock is a clock tests move by hand.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// The testClock counts itself synchronised and has no boot id, so the
// grants made on it are judged by their wall expiry alone: the tests of
// the steps use stepclock.
func (c *testClock) Synced() bool   { return true }
func (c *testClock) BootID() string { return "" }
func (c *testClock) Mono() hal.Mono { return hal.Mono(c.Now().Sub(t0)) }

// at is a reading of a synchronised clock at t, of no boot: what grants
// are judged by their wall expiry at.
func at(t time.Time) Reading { return Reading{Wall: t, Synced: true} }

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func openTestLedger(t *testing.T, path string) *ledger.Store {
	t.Helper()
	s, err := ledger.Open(ledger.Options{Path: path, Projections: Projections()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// newTestGrants opens a real ledger in a temporary directory and the
// grants in it, on a clock standing at t0.
func newTestGrants(t *testing.T) (*Grants, *ledger.Store) {
	t.Helper()
	store := openTestLedger(t, filepath.Join(t.TempDir(), "ledger.db"))
	g, err := LoadGrants(store, &testClock{t: t0})
	if err != nil {
		t.Fatal(err)
	}
	return g, store
}

func grantEvents(t *testing.T, store *ledger.Store) []ledger.Stored {
	t.Helper()
	evs, err := store.Events(ledger.Filter{Types: []string{"grant."}})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func TestGrantsAddRevokeAndReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	store := openTestLedger(t, path)
	clock := &testClock{t: t0}
	g, err := LoadGrants(store, clock)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.All()) != 0 {
		t.Fatalf("a new ledger has grants: %+v", g.All())
	}
	ctx := t.Context()
	relay, err := g.Add(ctx, Grant{Subject: "agent:pi", Capability: "gpio.set", Scope: "gpio.relay1",
		By: "admin:uid=0", ByTrust: ledger.High, Reason: "the heater"}, Expiry{At: t0.Add(24 * time.Hour).In(time.FixedZone("CET", 3600))})
	if err != nil {
		t.Fatal(err)
	}
	if relay.ID == "" || !relay.Added.Equal(t0) || relay.Expires.Location() != time.UTC || !relay.Expires.Equal(t0.Add(24*time.Hour)) {
		t.Errorf("added %+v", relay)
	}
	clock.Add(time.Minute)
	led, err := g.Add(ctx, Grant{Subject: "agent:pi", Capability: "gpio.*", Scope: "gpio.led", By: "admin:uid=0", ByTrust: ledger.High}, Expiry{})
	if err != nil {
		t.Fatal(err)
	}
	tone, err := g.Add(ctx, Grant{Subject: "rule:doorbell", Capability: "audio.tone", Scope: "*", By: "admin:uid=1000", ByTrust: ledger.High}, Expiry{})
	if err != nil {
		t.Fatal(err)
	}
	clock.Add(time.Minute)
	revoked, err := g.Revoke(ctx, led.ID, "admin:uid=0", "not any more")
	if err != nil {
		t.Fatal(err)
	}
	if !revoked.Revoked || !revoked.RevokedAt.Equal(t0.Add(2*time.Minute)) || revoked.RevokedBy != "admin:uid=0" || revoked.RevokeReason != "not any more" {
		t.Errorf("revoked %+v", revoked)
	}
	if got := ids(g.Active(at(t0.Add(time.Hour)))); !reflect.DeepEqual(got, []string{relay.ID, tone.ID}) {
		t.Errorf("active now %v, want the relay and the tone", got)
	}
	if got := ids(g.Active(at(t0.Add(24 * time.Hour)))); !reflect.DeepEqual(got, []string{tone.ID}) {
		t.Errorf("active in a day %v, want the tone: the relay expired", got)
	}
	all := g.All()
	if got := ids(all); !reflect.DeepEqual(got, []string{relay.ID, led.ID, tone.ID}) {
		t.Errorf("all %v", got)
	}

	// The ledger has the events, with the fields a person reads.
	evs := grantEvents(t, store)
	if len(evs) != 4 {
		t.Fatalf("%d grant events, want 3 added and 1 revoked", len(evs))
	}
	var added grantAdded
	if err := ledger.UnmarshalPayload(evs[0].Payload, &added); err != nil {
		t.Fatal(err)
	}
	want := grantAdded{ID: relay.ID, Subject: "agent:pi", Capability: "gpio.set", Scope: "gpio.relay1", Expires: "2026-03-02T12:00:00Z", By: "admin:uid=0", ByTrust: "high", Reason: "the heater"}
	if evs[0].Type != EventGrantAdded || added != want {
		t.Errorf("first event %s %+v, want %+v", evs[0].Type, added, want)
	}
	var rev grantRevoked
	if err := ledger.UnmarshalPayload(evs[3].Payload, &rev); err != nil {
		t.Fatal(err)
	}
	if evs[3].Type != EventGrantRevoked || rev != (grantRevoked{ID: led.ID, By: "admin:uid=0", Reason: "not any more"}) {
		t.Errorf("last event %s %+v", evs[3].Type, rev)
	}
	if c := ledger.DefaultClasses().Of(evs[3].Type); c.Name != "audit" {
		t.Errorf("grant events are of class %s, want audit", c.Name)
	}

	// Reopened, the ledger gives the same grants.
	store.Close()
	store = openTestLedger(t, path)
	again, err := LoadGrants(store, clock)
	if err != nil {
		t.Fatal(err)
	}
	if !sameGrants(again.All(), all) {
		t.Errorf("after reopening:\n%+v\nwant\n%+v", again.All(), all)
	}
}

func ids(gs []Grant) []string {
	var out []string
	for _, g := range gs {
		out = append(out, g.ID)
	}
	return out
}

func sameGrants(a, b []Grant) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if !x.Added.Equal(y.Added) || !x.Expires.Equal(y.Expires) || !x.RevokedAt.Equal(y.RevokedAt) {
			return false
		}
		x.Added, x.Expires, x.RevokedAt = y.Added, y.Expires, y.RevokedAt
		if x != y {
			return false
		}
	}
	return true
}

func TestGrantRefusals(t *testing.T) {
	g, store := newTestGrants(t)
	ok := Grant{Subject: "agent:pi", Capability: "gpio.set", Scope: "gpio.relay1", By: "admin:uid=0", ByTrust: ledger.Max}
	for _, tc := range []struct {
		name   string
		change func(*Grant)
		field  string
	}{
		{"empty subject", func(g *Grant) { g.Subject = "" }, "subject: empty"},
		{"subject without kind", func(g *Grant) { g.Subject = "pi" }, "subject"},
		{"subject of an unknown kind", func(g *Grant) { g.Subject = "robot:pi" }, "subject"},
		{"subject with a space", func(g *Grant) { g.Subject = "agent:p i" }, "subject"},
		{"subject with an empty name", func(g *Grant) { g.Subject = "agent:" }, "subject"},
		{"empty capability", func(g *Grant) { g.Capability = "" }, "capability: empty"},
		{"capability with a trailing dot", func(g *Grant) { g.Capability = "gpio." }, `write "gpio.*"`},
		{"capability with a wildcard inside", func(g *Grant) { g.Capability = "gpio.*.set" }, "capability"},
		{"capability glob", func(g *Grant) { g.Capability = "gpio*" }, `"*" stands alone`},
		{"capability upper case", func(g *Grant) { g.Capability = "GPIO.set" }, "capability"},
		{"estop.reset", func(g *Grant) { g.Capability = "estop.reset" }, "capability: estop.reset cannot be granted"},
		{"empty scope", func(g *Grant) { g.Scope = "" }, "scope: empty"},
		{"scope with an empty word", func(g *Grant) { g.Scope = "gpio..relay1" }, "scope"},
		{"scope with a slash", func(g *Grant) { g.Scope = "../gpio" }, "scope"},
		{"scope **", func(g *Grant) { g.Scope = "**" }, "scope"},
		{"expiry set by the caller", func(g *Grant) { g.Expires = t0.Add(time.Hour) }, "expires"},
		{"monotonic deadline set by the caller", func(g *Grant) { g.MonoDeadline = time.Hour }, "expires"},
		{"already expired", func(g *Grant) { g.Expired = true }, "expired"},
		{"no by", func(g *Grant) { g.By = "" }, "by: empty"},
		{"reason with a newline", func(g *Grant) { g.Reason = "a\nb" }, "reason"},
		{"reason not UTF-8", func(g *Grant) { g.Reason = "\xff" }, "reason"},
		{"reason too long", func(g *Grant) { g.Reason = strings.Repeat("x", maxReasonLen+1) }, "reason"},
		{"id given", func(g *Grant) { g.ID = "mine" }, "id"},
		{"already revoked", func(g *Grant) { g.Revoked = true }, "revoked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gr := ok
			tc.change(&gr)
			_, err := g.Add(t.Context(), gr, Expiry{})
			if !errors.Is(err, ErrInvalidGrant) || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("got %v, want an invalid grant naming %q", err, tc.field)
			}
		})
	}
	for _, exp := range []Expiry{{At: t0.Add(-time.Second)}, {At: t0}, {In: -time.Hour}, {In: time.Hour, At: t0.Add(time.Hour)}} {
		if _, err := g.Add(t.Context(), ok, exp); !errors.Is(err, ErrInvalidGrant) || !strings.Contains(err.Error(), "expires") {
			t.Errorf("expiry %+v: got %v, want an invalid grant naming expires", exp, err)
		}
	}
	if n := len(grantEvents(t, store)); n != 0 || len(g.All()) != 0 {
		t.Errorf("refused grants left %d events and %d grants", n, len(g.All()))
	}
	if _, err := g.Add(t.Context(), ok, Expiry{}); err != nil {
		t.Errorf("the valid grant: %v", err)
	}
}

func TestGrantRevokeRefusals(t *testing.T) {
	g, store := newTestGrants(t)
	gr, err := g.Add(t.Context(), Grant{Subject: "agent:pi", Capability: "gpio.set", Scope: "gpio.relay1", By: "admin:uid=0", ByTrust: ledger.Max}, Expiry{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Revoke(t.Context(), "nope", "admin:uid=0", ""); !errors.Is(err, ErrUnknownGrant) {
		t.Errorf("unknown id: %v", err)
	}
	if _, err := g.Revoke(t.Context(), gr.ID, "", ""); !errors.Is(err, ErrInvalidGrant) || !strings.Contains(err.Error(), "by") {
		t.Errorf("no by: %v", err)
	}
	if _, err := g.Revoke(t.Context(), gr.ID, "admin:uid=0", "bell\a"); !errors.Is(err, ErrInvalidGrant) || !strings.Contains(err.Error(), "reason") {
		t.Errorf("bad reason: %v", err)
	}
	if _, err := g.Revoke(t.Context(), gr.ID, "admin:uid=0", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Revoke(t.Context(), gr.ID, "admin:uid=0", ""); !errors.Is(err, ErrGrantRevoked) {
		t.Errorf("second revoke: %v", err)
	}
	// The ledger refuses a second revocation by itself too: the grant is
	// an aggregate at version 2.
	p, _ := ledger.MarshalPayload(grantRevoked{ID: gr.ID, By: "admin:uid=0"})
	_, err = store.Append(t.Context(), ledger.Event{Type: EventGrantRevoked, AggregateID: grantAggregate(gr.ID), AggregateVersion: 2, Payload: p})
	if !errors.Is(err, ledger.ErrConflict) {
		t.Errorf("a second revocation straight into the ledger: %v, want a conflict", err)
	}
	if n := len(grantEvents(t, store)); n != 2 {
		t.Errorf("%d grant events, want 2", n)
	}
}

// TestLoadGrantsFailsClosed: a grant record that cannot be read, or does
// not follow from the ones before, is an error naming the event; it
// is never skipped (a skipped revocation would give a grant back).
func TestLoadGrantsFailsClosed(t *testing.T) {
	added := func(id string) ledger.Event {
		p, _ := ledger.MarshalPayload(grantAdded{ID: id, Subject: "agent:pi", Capability: "gpio.set", Scope: "gpio.relay1", By: "admin:uid=0"})
		return ledger.Event{Type: EventGrantAdded, Payload: p}
	}
	revoked := func(id string) ledger.Event {
		p, _ := ledger.MarshalPayload(grantRevoked{ID: id, By: "admin:uid=0"})
		return ledger.Event{Type: EventGrantRevoked, Payload: p}
	}
	badPattern := added("b")
	badPattern.Payload, _ = ledger.MarshalPayload(grantAdded{ID: "b", Subject: "agent:pi", Capability: "gpio.", Scope: "*", By: "admin:uid=0"})
	badExpiry := added("c")
	badExpiry.Payload, _ = ledger.MarshalPayload(grantAdded{ID: "c", Subject: "agent:pi", Capability: "gpio.set", Scope: "*", By: "admin:uid=0", Expires: "soon"})
	extraField := added("d")
	extraField.Payload, _ = ledger.MarshalPayload(map[string]string{"id": "d", "subject": "agent:pi", "capability": "*", "scope": "*", "by": "admin:uid=0", "trust": "max"})
	for _, tc := range []struct {
		name   string
		events []ledger.Event
		want   string
	}{
		{"revocation of a grant never added", []ledger.Event{added("a"), revoked("x")}, `(grant.revoked): revokes grant "x", which was never added`},
		{"revoked twice", []ledger.Event{added("a"), revoked("a"), revoked("a")}, `(grant.revoked): revokes grant "a" a second time`},
		{"added twice", []ledger.Event{added("a"), added("a")}, `(grant.added): grant id "a" is empty or used already`},
		{"unknown grant event", []ledger.Event{added("a"), {Type: "grant.renewed"}}, "(grant.renewed): not a grant event"},
		{"malformed pattern", []ledger.Event{badPattern}, "capability"},
		{"malformed expiry", []ledger.Event{badExpiry}, "expires"},
		{"unknown field", []ledger.Event{extraField}, "(grant.added): ledger: bad record"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := openTestLedger(t, filepath.Join(t.TempDir(), "ledger.db"))
			for _, e := range tc.events {
				if _, err := store.Append(t.Context(), e); err != nil {
					t.Fatal(err)
				}
			}
			g, err := LoadGrants(store, &testClock{t: t0})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v (%v), want an error with %q", g, err, tc.want)
			}
		})
	}
	if _, err := LoadGrants(nil, nil); err == nil {
		t.Error("LoadGrants of no ledger")
	}
}

func TestGrantsOnAClosedLedger(t *testing.T) {
	g, store := newTestGrants(t)
	gr, err := g.Add(t.Context(), Grant{Subject: "agent:pi", Capability: "gpio.set", Scope: "gpio.relay1", By: "admin:uid=0", ByTrust: ledger.Max}, Expiry{})
	if err != nil {
		t.Fatal(err)
	}
	store.Close()
	if _, err := g.Add(t.Context(), Grant{Subject: "agent:pi", Capability: "*", Scope: "*", By: "admin:uid=0", ByTrust: ledger.Max}, Expiry{}); !errors.Is(err, ledger.ErrClosed) {
		t.Errorf("add: %v, want the ledger's ErrClosed", err)
	}
	if _, err := g.Revoke(t.Context(), gr.ID, "admin:uid=0", ""); !errors.Is(err, ledger.ErrClosed) {
		t.Errorf("revoke: %v, want the ledger's ErrClosed", err)
	}
	if all := g.All(); len(all) != 1 || all[0].Revoked {
		t.Errorf("what was not written changed the grants: %+v", all)
	}
}

// TestGrantsConcurrently adds and revokes from many goroutines while
// others read; run with -race.
func TestGrantsConcurrently(t *testing.T) {
	g, store := newTestGrants(t)
	ctx, cancel := context.WithCancel(t.Context())
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			for ctx.Err() == nil {
				for _, gr := range g.Active(at(t0)) {
					if gr.ID == "" {
						t.Error("a grant without id")
					}
				}
			}
		})
	}
	var writers sync.WaitGroup
	for i := range 8 {
		writers.Go(func() {
			gr, err := g.Add(ctx, Grant{Subject: fmt.Sprintf("agent:a%d", i), Capability: "gpio.set", Scope: "*", By: "admin:uid=0", ByTrust: ledger.High}, Expiry{})
			if err != nil {
				t.Error(err)
				return
			}
			if i%2 == 0 {
				if _, err := g.Revoke(ctx, gr.ID, "admin:uid=0", ""); err != nil {
					t.Error(err)
				}
			}
		})
	}
	writers.Wait()
	cancel()
	readers.Wait()
	if len(g.All()) != 8 || len(g.Active(at(t0))) != 4 || len(grantEvents(t, store)) != 12 {
		t.Errorf("%d grants, %d active, %d events; want 8, 4, 12", len(g.All()), len(g.Active(at(t0))), len(grantEvents(t, store)))
	}
}

var patternCases = []struct {
	pattern string
	ok      bool
	match   []string
	miss    []string
}{
	{"*", true, []string{"gpio.set", "a", "estop.reset"}, nil},
	{"gpio.*", true, []string{"gpio.relay1", "gpio.a.b"}, []string{"gpio", "gpiox.relay1", "audio.gpio.x"}},
	{"gpio.relay1", true, []string{"gpio.relay1"}, []string{"gpio.relay10", "gpio.relay", "gpio.relay1.x"}},
	{"a.b-c_d.*", true, []string{"a.b-c_d.e"}, []string{"a.b-c_d"}},
	{"relay-feedback", true, []string{"relay-feedback"}, nil},
	{"9v", true, []string{"9v"}, nil},
	{"", false, nil, []string{""}},
	{"gpio.", false, nil, []string{"gpio.relay1"}},
	{"gpio*", false, nil, []string{"gpio.relay1", "gpioa"}},
	{"*.set", false, nil, []string{"gpio.set"}},
	{"gpio.*.set", false, nil, []string{"gpio.a.set"}},
	{"**", false, nil, []string{"gpio"}},
	{".*", false, nil, []string{".x"}},
	{".gpio", false, nil, []string{".gpio"}},
	{"gpio..x", false, nil, nil},
	{"-gpio", false, nil, []string{"-gpio"}},
	{"gpio._x", false, nil, nil},
	{"Gpio", false, nil, []string{"Gpio"}},
	{"gpio relay", false, nil, []string{"gpio relay"}},
	{"gpio/relay", false, nil, nil},
	{"gpio.relay\x00", false, nil, []string{"gpio.relay\x00"}},
	{strings.Repeat("a", maxNameLen), true, []string{strings.Repeat("a", maxNameLen)}, nil},
	{strings.Repeat("a", maxNameLen+1), false, nil, nil},
}

func TestPatterns(t *testing.T) {
	for _, tc := range patternCases {
		err := CheckPattern(tc.pattern)
		if (err == nil) != tc.ok {
			t.Errorf("CheckPattern(%q) = %v, want ok %v", tc.pattern, err, tc.ok)
		}
		for _, n := range tc.match {
			if !MatchPattern(tc.pattern, n) {
				t.Errorf("%q does not match %q", tc.pattern, n)
			}
		}
		for _, n := range tc.miss {
			if MatchPattern(tc.pattern, n) {
				t.Errorf("%q matches %q", tc.pattern, n)
			}
		}
	}
}

// FuzzPattern: CheckPattern never panics; a pattern it refuses matches
// nothing; one it accepts matches what its meaning says.
func FuzzPattern(f *testing.F) {
	for _, tc := range patternCases {
		f.Add(tc.pattern, "gpio.relay1")
	}
	f.Fuzz(func(t *testing.T, p, name string) {
		err := CheckPattern(p)
		m := MatchPattern(p, name)
		if err != nil {
			if m {
				t.Fatalf("malformed %q (%v) matches %q", p, err, name)
			}
			return
		}
		if !strings.ContainsRune(p, '*') && !MatchPattern(p, p) {
			t.Fatalf("name %q does not match itself", p)
		}
		if prefix, ok := strings.CutSuffix(p, "*"); ok && prefix != "" && !MatchPattern(p, prefix+"x") {
			t.Fatalf("%q does not match %q", p, prefix+"x")
		}
		var want bool
		switch {
		case p == "*":
			want = true
		case strings.HasSuffix(p, ".*"):
			want = strings.HasPrefix(name, p[:len(p)-1]) && len(name) > len(p)-1
		default:
			want = name == p
		}
		if m != want {
			t.Fatalf("MatchPattern(%q, %q) = %v, want %v", p, name, m, want)
		}
	})
}

var expiryCases = []struct {
	in   string
	want time.Time
	err  string
}{
	{"", time.Time{}, ""},
	{"never", time.Time{}, ""},
	{"24h", t0.Add(24 * time.Hour), ""},
	{"90m", t0.Add(90 * time.Minute), ""},
	{"1h30m", t0.Add(90 * time.Minute), ""},
	{"30d", t0.Add(30 * 24 * time.Hour), ""},
	{"2026-03-02T00:00:00+01:00", time.Date(2026, 3, 1, 23, 0, 0, 0, time.UTC), ""},
	{"0s", time.Time{}, "not in the future"},
	{"0d", time.Time{}, "not in the future"},
	{"-1h", time.Time{}, "not in the future"},
	{"2026-03-01T12:00:00Z", time.Time{}, "not in the future"},
	{"2020-01-01T00:00:00Z", time.Time{}, "not in the future"},
	{"36501d", time.Time{}, "at most 36500 days"},
	{"99999999999999999999d", time.Time{}, "at most"},
	{"d", time.Time{}, "neither"},
	{"1.5d", time.Time{}, "neither"},
	{"tomorrow", time.Time{}, "neither"},
	{"2026-03-02", time.Time{}, "neither"},
	{"forever", time.Time{}, "neither"},
}

// expiryAt is the wall expiry e gives a grant added at now, or the
// reason a grant refuses it.
func expiryAt(e Expiry, now time.Time) (time.Time, error) {
	w := e.At
	if e.In > 0 {
		w = now.Add(e.In).UTC()
	}
	g := Grant{Subject: "agent:pi", Capability: "gpio.set", Scope: "*", By: "admin:uid=0", Expires: w, ByTrust: ledger.Max}
	return w, g.check(now)
}

func TestParseExpiry(t *testing.T) {
	for _, tc := range expiryCases {
		e, err := ParseExpiry(tc.in)
		var got time.Time
		if err == nil {
			got, err = expiryAt(e, t0)
		}
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseExpiry(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || !got.Equal(tc.want) || !got.IsZero() && got.Location() != time.UTC {
			t.Errorf("ParseExpiry(%q) = %v, %v; want %v in UTC", tc.in, got, err, tc.want)
		}
	}
}

// FuzzParseExpiry: never panics; what it accepts is never, a positive
// duration that a grant accepts, or a time in UTC.
func FuzzParseExpiry(f *testing.F) {
	for _, tc := range expiryCases {
		f.Add(tc.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := ParseExpiry(s)
		if err != nil {
			return
		}
		if e.In < 0 || e.In > 0 && !e.At.IsZero() || !e.At.IsZero() && e.At.Location() != time.UTC {
			t.Fatalf("ParseExpiry(%q) = %+v", s, e)
		}
		if got, err := expiryAt(e, t0); e.In > 0 && err != nil {
			t.Fatalf("ParseExpiry(%q) = %v, which a grant refuses: %v", s, got, err)
		}
	})
}

// A principal is offered a capability on a target when its trust is
// enough for the risk and a grant in force covers it; not otherwise.
func TestGrantsOffered(t *testing.T) {
	b := newApprovalBench(t) // its runner has the R3 test.irreversible on test.vault
	g, _ := newTestGrants(t)
	if _, err := g.Add(t.Context(), Grant{Subject: "mqtt:home", Capability: "test.*", Scope: "test.vault", By: "admin:uid=0", ByTrust: ledger.Max}, Expiry{}); err != nil {
		t.Fatal(err)
	}
	// Given at high trust: it covers no R3, as the policy reads it.
	if _, err := g.Add(t.Context(), Grant{Subject: "mqtt:weak", Capability: "test.*", Scope: "test.vault", By: "admin:uid=1000", ByTrust: ledger.High}, Expiry{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		subject string
		trust   ledger.Level
		target  string
		want    bool
	}{
		{"mqtt:home", ledger.Max, "test.vault", true},
		{"mqtt:home", ledger.High, "test.vault", false}, // R3 wants max
		{"mqtt:other", ledger.Max, "test.vault", false}, // no grant of its own
		{"mqtt:home", ledger.Max, "test.safe", false},   // not covered
		{"mqtt:weak", ledger.Max, "test.vault", false},  // its grant was given below max
	} {
		if got := g.Offered(b.r, g.Reading(), tc.subject, tc.trust, "test.irreversible", tc.target); got != tc.want {
			t.Errorf("%s at %v on %s: got %v, want %v", tc.subject, tc.trust, tc.target, got, tc.want)
		}
	}
}

// A grant that ended leaves the grants once the archive takes the record
// that ended it; one in force stays however old; verify rebuilds the
// same over the archive and the file.
func TestEndedGrantsLeaveWithTheArchive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	clock := &testClock{t: t0}
	open := func() (*ledger.Store, *Grants) {
		t.Helper()
		s, err := ledger.Open(ledger.Options{Path: path, Projections: Projections(), Now: clock.Now, NoOutbox: true,
			AuditKeep: 30 * 24 * time.Hour, ArchiveSegment: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		g, err := LoadGrants(s, clock)
		if err != nil {
			t.Fatal(err)
		}
		return s, g
	}
	store, g := open()
	ctx := t.Context()
	add := func(scope string, exp Expiry) Grant {
		t.Helper()
		gr, err := g.Add(ctx, Grant{Subject: "agent:pi", Capability: "gpio.set", Scope: scope, By: "admin:uid=0", ByTrust: ledger.High}, exp)
		if err != nil {
			t.Fatal(err)
		}
		return gr
	}
	kept := add("gpio.led", Expiry{})
	revoked := add("gpio.relay1", Expiry{})
	expired := add("gpio.relay2", Expiry{In: time.Hour})
	tidied := add("gpio.relay3", Expiry{In: time.Hour})
	if _, err := g.Revoke(ctx, revoked.ID, "admin:uid=0", "not any more"); err != nil {
		t.Fatal(err)
	}
	clock.Add(2 * time.Hour)
	if out, err := g.Sweep(ctx); err != nil || len(out) != 2 {
		t.Fatalf("sweep: %v %v, want the two expired", ids(out), err)
	}
	clock.Add(31 * 24 * time.Hour)
	// Revoked a month after it expired (version 3): the archive takes the
	// expiry and leaves this in the file.
	if _, err := g.Revoke(ctx, tidied.ID, "admin:uid=0", "tidying up"); err != nil {
		t.Fatal(err)
	}
	young := add("gpio.relay4", Expiry{In: time.Minute})
	clock.Add(2 * time.Minute)
	if out, err := g.Sweep(ctx); err != nil || len(out) != 1 {
		t.Fatalf("sweep: %v %v, want the young one expired", ids(out), err)
	}
	if res, err := store.Archive(ctx); err != nil || res.Events != 7 {
		t.Fatalf("archive: %+v %v, want the four added, the two expired and the first revocation", res, err)
	}
	if r, err := store.Verify(ctx); err != nil || !r.OK() {
		t.Fatalf("verify: %v %v", r.Problems, err)
	}
	// This run still knows them; a start knows those in force and the
	// young one's end.
	if got := ids(g.All()); len(got) != 5 {
		t.Errorf("before a restart: %v", got)
	}
	store.Close()
	store, g = open()
	if got, want := ids(g.All()), []string{kept.ID, young.ID}; !reflect.DeepEqual(got, want) {
		t.Errorf("after the archive took the ends: %v, want the one in force and the one ended lately %v", got, want)
	}
	if _, err := g.Revoke(ctx, expired.ID, "admin:uid=0", "late"); !errors.Is(err, ErrUnknownGrant) {
		t.Errorf("revoking a grant whose end was archived: %v, want ErrUnknownGrant", err)
	}
	// Verify again once the late revocation's record is archived too.
	clock.Add(31 * 24 * time.Hour)
	add("gpio.relay5", Expiry{})
	if _, err := store.Archive(ctx); err != nil {
		t.Fatal(err)
	}
	if r, err := store.Verify(ctx); err != nil || !r.OK() {
		t.Fatalf("verify: %v %v", r.Problems, err)
	}
}
