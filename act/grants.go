package act

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/tobe-body/tobe-body/ledger"
)

// Grant events in the ledger; their class is audit (kept for ever, sent,
// never dropped).
const (
	// EventGrantAdded records a new grant: id, subject, capability,
	// scope, expires, by, reason.
	EventGrantAdded = "grant.added"
	// EventGrantRevoked records a revocation: id, by, reason.
	EventGrantRevoked = "grant.revoked"
	// EventGrantExpired records that a grant was found past its expiry
	// the first time: id, the clock that ended it (by: wall or
	// monotonic), and how early the wall ended it before its monotonic
	// deadline (early_ns). Once recorded the grant stays expired
	// whatever the clock does later.
	EventGrantExpired = "grant.expired"
)

// The clocks that end a grant (Grant.ExpiredBy).
const (
	ExpiredByWall      = "wall"
	ExpiredByMonotonic = "monotonic"
)

// Errors of grants. Callers branch on them with errors.Is.
var (
	// ErrInvalidGrant is wrapped by every refusal of a grant that is
	// malformed; the error names the field.
	ErrInvalidGrant = errors.New("act: invalid grant")
	// ErrUnknownGrant: no grant has that id.
	ErrUnknownGrant = errors.New("act: no such grant")
	// ErrGrantRevoked: the grant was revoked already.
	ErrGrantRevoked = errors.New("act: grant already revoked")
	// ErrClockUnsynchronized is wrapped (in a *Refusal with reason
	// clock_unsynchronized) by the refusal of an expiry that cannot be
	// measured while the wall clock is not synchronised.
	ErrClockUnsynchronized = errors.New("act: the body's clock is not synchronised")
)

// Limits of names, subjects and reasons.
const (
	maxNameLen   = 128
	maxReasonLen = 1024
	maxExpiryDay = 36500 // 100 years of days in an expiry like "30d"
)

// CheckPattern says what is wrong with a capability or scope pattern, or
// returns nil. A pattern is one of:
//
//   - a name: words of lower-case letters, digits, "_" and "-", each
//     starting with a letter or digit, joined by dots ("gpio.relay1");
//     it matches that name only;
//   - a name followed by ".*" ("gpio.*"): every name that starts with the
//     name and a dot, at any depth ("gpio.relay1", "gpio.a.b"), but not
//     the name itself;
//   - "*": every name.
//
// "*" anywhere else, and a trailing dot ("gpio."), are errors.
func CheckPattern(p string) error {
	if p == "*" {
		return nil
	}
	name, prefix := strings.CutSuffix(p, ".*")
	if err := checkName(name); err != nil {
		if !prefix && strings.HasSuffix(p, ".") && checkName(strings.TrimSuffix(p, ".")) == nil {
			return fmt.Errorf("%q ends in a dot: write %q for every name under it", p, p+"*")
		}
		if strings.Contains(p, "*") {
			return fmt.Errorf("%q: \"*\" stands alone or as the last word after a dot (\"gpio.*\")", p)
		}
		return err
	}
	return nil
}

// MatchPattern tells whether the pattern p matches name. A malformed
// pattern matches nothing.
func MatchPattern(p, name string) bool {
	if CheckPattern(p) != nil {
		return false
	}
	if p == "*" {
		return true
	}
	if prefix, ok := strings.CutSuffix(p, "*"); ok {
		return len(name) > len(prefix) && strings.HasPrefix(name, prefix)
	}
	return p == name
}

// checkName says what is wrong with a capability or target name.
func checkName(s string) error {
	if s == "" {
		return errors.New("empty")
	}
	if len(s) > maxNameLen {
		return fmt.Errorf("longer than %d bytes", maxNameLen)
	}
	start := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '.':
			if start {
				return fmt.Errorf("%q has an empty word", s)
			}
			start = true
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			start = false
		case (c == '_' || c == '-') && !start:
		default:
			return fmt.Errorf("%q: names are words of lower-case letters, digits, \"_\" and \"-\" joined by dots (gpio.relay1)", s)
		}
	}
	if start {
		return fmt.Errorf("%q ends in a dot", s)
	}
	return nil
}

// checkSubject says what is wrong with a principal's subject: it is
// "kind:name" with a known kind ("agent:pi", "admin:uid=0") and a name
// of letters, digits and ._=@+-.
func checkSubject(s string) error {
	if s == "" {
		return errors.New("empty")
	}
	kind, name, ok := strings.Cut(s, ":")
	switch PrincipalKind(kind) {
	case AgentSession, MQTTCommand, LocalAdmin, LocalRule:
	default:
		return fmt.Errorf("%q: want kind:name with a kind of agent, mqtt, admin or rule (agent:pi)", s)
	}
	if !ok || name == "" || len(name) > maxNameLen {
		return fmt.Errorf("%q: the name after %q must be 1..%d bytes", s, kind+":", maxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._=@+-", c) >= 0) {
			return fmt.Errorf("%q: a subject's name holds letters, digits and ._=@+- only", s)
		}
	}
	return nil
}

// checkText says what is wrong with a free text such as a reason.
func checkText(s string) error {
	switch {
	case len(s) > maxReasonLen:
		return fmt.Errorf("longer than %d bytes", maxReasonLen)
	case !utf8.ValidString(s):
		return errors.New("not valid UTF-8")
	case strings.ContainsFunc(s, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }):
		return errors.New("holds control characters")
	}
	return nil
}

// Expiry is a new grant's expiry as it was given (ParseExpiry). Both
// fields zero: never.
type Expiry struct {
	// In is a duration from the moment the grant is added ("24h",
	// "30d"): a relative expiry, measured on the body's clock.
	In time.Duration
	// At is an absolute wall time (RFC 3339), in UTC.
	At time.Time
}

// Never tells whether e is no expiry.
func (e Expiry) Never() bool { return e.In == 0 && e.At.IsZero() }

// ParseExpiry reads when a grant expires: "" or "never" for never, a
// duration from now ("90m", "24h", or whole days "30d"), or an RFC 3339
// time (in UTC in the result). A duration that is not positive is an
// error; whether an absolute time is in the future is Grants.Add's to
// judge, on the body's clock.
func ParseExpiry(s string) (Expiry, error) {
	if s == "" || s == "never" {
		return Expiry{}, nil
	}
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok && days != "" && strings.Trim(days, "0123456789") == "" {
		n, err := strconv.Atoi(days)
		if err != nil || n > maxExpiryDay {
			return Expiry{}, fmt.Errorf("%q: at most %d days", s, maxExpiryDay)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else if pd, err := time.ParseDuration(s); err == nil {
		d = pd
	} else if t, err := time.Parse(time.RFC3339, s); err == nil {
		return Expiry{At: t.UTC()}, nil
	} else {
		return Expiry{}, fmt.Errorf("%q is neither a duration (24h, 30d), an RFC 3339 time nor never", s)
	}
	if d <= 0 {
		return Expiry{}, fmt.Errorf("%q is not in the future", s)
	}
	return Expiry{In: d}, nil
}

// ExpiredAt tells whether the grant has expired at c: it was recorded
// expired (grant.expired), or its expiry has passed by either clock
// (see Grants for which clock judges when).
func (g Grant) ExpiredAt(c Reading) bool {
	if g.Expired {
		return true
	}
	ended, _, _ := g.endAt(c)
	return ended
}

// SuspendedAt tells whether the grant's expiry cannot be judged at c: it
// has an expiry, it is of another boot (or was recorded without one) so
// that only its wall expiry is left, and the wall clock is not
// synchronised. It is then not in force; it comes back when the clock is
// synchronised, if the wall says it has not expired.
func (g Grant) SuspendedAt(c Reading) bool {
	return !g.Revoked && !g.Expired && !g.Expires.IsZero() && !c.sameBoot(g.BootID) && !c.Synced
}

// ActiveAt tells whether the grant is in force at c: neither revoked,
// expired nor suspended.
func (g Grant) ActiveAt(c Reading) bool { return !g.Revoked && !g.ExpiredAt(c) && !g.SuspendedAt(c) }

// endAt tells whether the grant's expiry has passed at c (leaving aside
// whether it was recorded expired) and, when it has, which clock ended
// it and by how much the wall ended it before its monotonic deadline.
//
// In the boot it was given in, with a monotonic deadline, the earlier of
// the wall expiry and the monotonic deadline ends it: a forward step of
// the wall ends it early (and says by how much: what its monotonic
// deadline still had to run), a backward step never extends it. Otherwise only the wall expiry is left: in its own boot
// (an absolute expiry given while the clock was not synchronised) it
// decides; in another boot it decides only while the wall clock is
// synchronised.
func (g Grant) endAt(c Reading) (ended bool, by string, early time.Duration) {
	if g.Expires.IsZero() {
		return false, "", 0
	}
	wallPast := !c.Wall.Before(g.Expires)
	if c.sameBoot(g.BootID) && g.MonoDeadline > 0 {
		switch {
		case c.Mono >= g.MonoDeadline:
			// The deadline alone ends it; whether the wall passed first
			// while nobody looked cannot be told.
			return true, ExpiredByMonotonic, 0
		case wallPast:
			// Early by what the monotonic clock still had to run: a
			// step is found at once (Sweep runs right after one), a
			// slow drift within a sweep's interval.
			return true, ExpiredByWall, g.MonoDeadline - c.Mono
		}
		return false, "", 0
	}
	if !c.sameBoot(g.BootID) && !c.Synced {
		return false, "", 0
	}
	return wallPast, ExpiredByWall, 0
}

// check says which field of a new grant is wrong.
func (g Grant) check(now time.Time) error {
	bad := func(field string, err error) error { return fmt.Errorf("%w: %s: %v", ErrInvalidGrant, field, err) }
	switch {
	case g.ID != "" || !g.Added.IsZero():
		return bad("id", errors.New("set by the store, not by the caller"))
	case g.Revoked || !g.RevokedAt.IsZero() || g.RevokedBy != "" || g.RevokeReason != "":
		return bad("revoked", errors.New("a new grant is not revoked"))
	case g.Expired || !g.EndedAt.IsZero() || g.ExpiredBy != "" || g.EndedEarly != 0:
		return bad("expired", errors.New("a new grant is not expired"))
	}
	if err := checkSubject(g.Subject); err != nil {
		return bad("subject", err)
	}
	if err := CheckPattern(g.Capability); err != nil {
		return bad("capability", err)
	}
	if g.Capability == CapabilityEStopReset {
		return bad("capability", errors.New("estop.reset cannot be granted: only a local, deliberate act resets the e-stop"))
	}
	if err := CheckPattern(g.Scope); err != nil {
		return bad("scope", err)
	}
	if !g.Expires.IsZero() && !g.Expires.After(now) {
		return bad("expires", fmt.Errorf("%s is not in the future on the body's clock (%s)", g.Expires.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339)))
	}
	if err := checkSubject(g.By); err != nil {
		return bad("by", err)
	}
	if g.ByTrust < ledger.Low || g.ByTrust > ledger.Max {
		return bad("by_trust", fmt.Errorf("%s: a granter has low to max trust", g.ByTrust))
	}
	if err := checkText(g.Reason); err != nil {
		return bad("reason", err)
	}
	return nil
}

// Payloads of the grant events.
type grantAdded struct {
	ID         string `cbor:"id"`
	Subject    string `cbor:"subject"`
	Capability string `cbor:"capability"`
	Scope      string `cbor:"scope"`
	Expires    string `cbor:"expires,omitempty"` // RFC 3339 UTC; absent: never
	By         string `cbor:"by"`
	// ByTrust is the granter's trust by name; absent in grants recorded
	// before it was (they read as high).
	ByTrust string `cbor:"by_trust,omitempty"`
	Reason  string `cbor:"reason,omitempty"`
	// BootID is the boot the grant was given in, for a grant with an
	// expiry; absent in grants recorded before it was (they are of
	// another boot).
	BootID string `cbor:"boot_id,omitempty"`
	// MonoDeadlineNS is the expiry on the monotonic clock of boot
	// BootID (CLOCK_MONOTONIC, ns); absent when the grant was given
	// while the wall clock was not synchronised, or without expiry.
	MonoDeadlineNS int64 `cbor:"mono_deadline_ns,omitempty"`
}

type grantRevoked struct {
	ID     string `cbor:"id"`
	By     string `cbor:"by"`
	Reason string `cbor:"reason,omitempty"`
}

type grantExpired struct {
	ID string `cbor:"id"`
	// By is the clock that ended the grant: wall or monotonic.
	By string `cbor:"by"`
	// EarlyNS is how long before its monotonic deadline the wall ended
	// it (a forward step of the wall clock); absent otherwise.
	EarlyNS int64 `cbor:"early_ns,omitempty"`
	// WallLeftNS is how long the wall said was left when the monotonic
	// deadline ended it (a backward step, or a slow wall); absent
	// otherwise.
	WallLeftNS int64 `cbor:"wall_left_ns,omitempty"`
	// BootID and MonoNS are the monotonic clock's reading when it was
	// found expired; Synced whether the wall clock was synchronised.
	BootID string `cbor:"boot_id,omitempty"`
	MonoNS int64  `cbor:"mono_ns,omitempty"`
	Synced bool   `cbor:"synced"`
}

// grantAggregate is the ledger aggregate of one grant: its added event is
// version 1, and its expiry (when it is recorded) and revocation follow
// in the order they happened, so the ledger itself refuses a second
// grant with the same id and a second revocation or expiry.
func grantAggregate(id string) string { return "grant:" + id }

// grantLog is what Grants needs of the ledger.
type grantLog interface {
	Append(ctx context.Context, events ...ledger.Event) ([]ledger.Result, error)
	ReadProjection(name string, fn func(ledger.ReadKV) error) error
}

// Grants are the grants of the body, kept as ledger events and in
// memory. It is the only writer of grant events while it is open. It is
// safe for concurrent use: changes are made one at a time, and reads do
// not wait for a change being written.
//
// Time is judged by the body's Clock, whose wall reading steps (NTP, a
// board without a real-time clock, `date -s`). A grant with an expiry
// keeps it as a wall time and, when it was given while the wall clock
// was synchronised, as a deadline on the monotonic clock of the boot it
// was given in. In that boot the earlier of the two ends it; in another
// boot only the wall expiry is left, and while the wall clock is not
// synchronised such a grant is not in force (SuspendedAt). Sweep records
// a grant found past its expiry (grant.expired), after which it stays
// expired whatever the clock does.
type Grants struct {
	log   grantLog
	clock Clock

	write sync.Mutex // held by Add, Revoke and Sweep from their check to their apply

	mu     sync.RWMutex
	grants []Grant // in the order they were added
	byID   map[string]int
}

// LoadGrants reads the grants from the ledger's grants projection (see
// Projections: the store must keep it), with their recorded expiries.
// clock is the clock new grants are dated by and every grant is judged
// by; nil is an error. A grant event that could not be read or did not
// follow from the ones before it is an error naming the event: grants
// fail closed, and a revocation is never skipped.
func LoadGrants(store *ledger.Store, clock Clock) (*Grants, error) {
	if store == nil {
		return nil, errors.New("act: grants: the ledger is not open")
	}
	return loadGrants(store, clock)
}

func loadGrants(log grantLog, clock Clock) (*Grants, error) {
	if clock == nil {
		return nil, errors.New("act: grants: no clock")
	}
	g := &Grants{log: log, clock: clock, byID: map[string]int{}}
	err := log.ReadProjection(projGrants, func(kv ledger.ReadKV) error {
		var err error
		g.grants, err = readGrants(kv)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("act: grants: %w", err)
	}
	for i, gr := range g.grants {
		g.byID[gr.ID] = i
	}
	return g, nil
}

// Reading is a reading of the clock the grants are judged by, now.
func (g *Grants) Reading() Reading { return ReadClock(g.clock) }

// grantOf is the grant a grant.added payload at makes, or what is wrong
// with it.
func grantOf(p grantAdded, at time.Time) (Grant, error) {
	gr := Grant{ID: p.ID, Subject: p.Subject, Capability: p.Capability, Scope: p.Scope, By: p.By, ByTrust: ledger.High, Reason: p.Reason, Added: at,
		BootID: p.BootID, MonoDeadline: time.Duration(p.MonoDeadlineNS)}
	if p.ByTrust != "" {
		t, err := ledger.ParseLevel(p.ByTrust)
		if err != nil {
			return Grant{}, fmt.Errorf("by_trust: %w", err)
		}
		gr.ByTrust = t
	}
	if p.Expires != "" {
		t, err := time.Parse(time.RFC3339Nano, p.Expires)
		if err != nil {
			return Grant{}, fmt.Errorf("expires: %w", err)
		}
		gr.Expires = t.UTC()
	}
	switch {
	case p.MonoDeadlineNS < 0:
		return Grant{}, fmt.Errorf("mono_deadline_ns: %d is negative", p.MonoDeadlineNS)
	case p.MonoDeadlineNS > 0 && (p.BootID == "" || p.Expires == ""):
		return Grant{}, errors.New("mono_deadline_ns: given without boot_id and expires")
	}
	if err := checkSubject(gr.Subject); err != nil {
		return Grant{}, fmt.Errorf("subject: %w", err)
	}
	if err := CheckPattern(gr.Capability); err != nil {
		return Grant{}, fmt.Errorf("capability: %w", err)
	}
	if err := CheckPattern(gr.Scope); err != nil {
		return Grant{}, fmt.Errorf("scope: %w", err)
	}
	return gr, nil
}

// setExpired marks gr expired as p and at say.
func (gr *Grant) setExpired(p grantExpired, at time.Time) {
	gr.Expired, gr.EndedAt, gr.ExpiredBy, gr.EndedEarly = true, at, p.By, time.Duration(p.EarlyNS)
}

// checkExpired says why a grant.expired p does not follow for gr.
func checkExpired(gr Grant, p grantExpired) error {
	switch {
	case gr.Revoked:
		return fmt.Errorf("expires grant %q, which was revoked", p.ID)
	case gr.Expired:
		return fmt.Errorf("expires grant %q a second time", p.ID)
	case gr.Expires.IsZero():
		return fmt.Errorf("expires grant %q, which has no expiry", p.ID)
	case p.By != ExpiredByWall && p.By != ExpiredByMonotonic:
		return fmt.Errorf("by: %q is neither %s nor %s", p.By, ExpiredByWall, ExpiredByMonotonic)
	}
	return nil
}

// nextVersion is the aggregate version of gr's next event: its added
// event is 1, and its expiry and revocation each count one.
func (gr Grant) nextVersion() uint64 {
	v := uint64(2)
	if gr.Expired {
		v++
	}
	if gr.Revoked {
		v++
	}
	return v
}

// apply changes the grants by one event it wrote. The caller holds mu.
func (g *Grants) apply(e *ledger.Event) error {
	switch e.Type {
	case EventGrantAdded:
		var p grantAdded
		if err := ledger.UnmarshalPayload(e.Payload, &p); err != nil {
			return err
		}
		if _, dup := g.byID[p.ID]; dup || p.ID == "" {
			return fmt.Errorf("grant id %q is empty or used already", p.ID)
		}
		gr, err := grantOf(p, e.Occurred())
		if err != nil {
			return err
		}
		g.byID[gr.ID] = len(g.grants)
		g.grants = append(g.grants, gr)
	case EventGrantRevoked:
		var p grantRevoked
		if err := ledger.UnmarshalPayload(e.Payload, &p); err != nil {
			return err
		}
		i, ok := g.byID[p.ID]
		if !ok {
			return fmt.Errorf("revokes grant %q, which was never added", p.ID)
		}
		gr := &g.grants[i]
		if gr.Revoked {
			return fmt.Errorf("revokes grant %q a second time", p.ID)
		}
		gr.Revoked, gr.RevokedAt, gr.RevokedBy, gr.RevokeReason = true, e.Occurred(), p.By, p.Reason
	case EventGrantExpired:
		var p grantExpired
		if err := ledger.UnmarshalPayload(e.Payload, &p); err != nil {
			return err
		}
		i, ok := g.byID[p.ID]
		if !ok {
			return fmt.Errorf("expires grant %q, which was never added", p.ID)
		}
		if err := checkExpired(g.grants[i], p); err != nil {
			return err
		}
		g.grants[i].setExpired(p, e.Occurred())
	default:
		return errors.New("not a grant event this body knows")
	}
	return nil
}

// Add records a new grant with the expiry exp and returns it with its
// id, time and expiry. The id, the time, the expiry fields and the
// revocation and expiry records are the store's to set; a grant that has
// any of them, or whose subject, capability or scope pattern, by or
// reason is malformed, or whose expiry is not in the future on the
// body's clock, is refused with an error wrapping ErrInvalidGrant that
// names the field.
//
// While the body's wall clock is synchronised, an expiry (relative or
// absolute) is kept as a wall time and as a deadline on this boot's
// monotonic clock. While it is not, a relative expiry cannot be
// measured and is refused, and an absolute one is taken only from a
// local administrator (gr.By of kind admin), kept as a wall time alone;
// either refusal is a *Refusal with reason clock_unsynchronized wrapping
// ErrClockUnsynchronized. A grant without expiry is taken either way.
//
// Add returns once the grant is on disk; it does not give up when ctx
// ends after the grant was handed to the ledger, so its answer always
// says what the ledger holds.
func (g *Grants) Add(ctx context.Context, gr Grant, exp Expiry) (Grant, error) {
	g.write.Lock()
	defer g.write.Unlock()
	c := g.Reading()
	if !gr.Expires.IsZero() || gr.BootID != "" || gr.MonoDeadline != 0 {
		return Grant{}, fmt.Errorf("%w: expires: set from the expiry given, not by the caller", ErrInvalidGrant)
	}
	if exp.In < 0 || exp.In > 0 && !exp.At.IsZero() {
		return Grant{}, fmt.Errorf("%w: expires: want a positive duration or a time, not both", ErrInvalidGrant)
	}
	if !exp.Never() {
		switch {
		case c.Synced && exp.In > 0:
			gr.Expires, gr.MonoDeadline = c.Wall.Add(exp.In), c.Mono+exp.In
		case c.Synced:
			gr.Expires, gr.MonoDeadline = exp.At, c.Mono+exp.At.Sub(c.Wall)
		case exp.In > 0:
			return Grant{}, &Refusal{Reason: ReasonClockUnsynchronized, Err: ErrClockUnsynchronized,
				Detail: "the body's clock is not synchronised (no NTP yet): a relative expiry cannot be measured; give an absolute time (RFC 3339) as a local administrator, or wait for time synchronisation"}
		case !strings.HasPrefix(gr.By, string(LocalAdmin)+":"):
			return Grant{}, &Refusal{Reason: ReasonClockUnsynchronized, Err: ErrClockUnsynchronized,
				Detail: "the body's clock is not synchronised (no NTP yet): an expiry is taken only from a local administrator, as an absolute time (RFC 3339), until time synchronisation"}
		default:
			// A deadline derived from a wall clock that may be wrong
			// would be as wrong: the wall expiry alone is kept.
			gr.Expires = exp.At
		}
		gr.Expires = gr.Expires.UTC()
		gr.BootID = c.BootID
		if gr.BootID == "" || gr.MonoDeadline <= 0 {
			gr.MonoDeadline = 0
		}
	}
	if err := gr.check(c.Wall); err != nil {
		return Grant{}, err
	}
	gr.ID = ledger.NewID().String()
	p := grantAdded{ID: gr.ID, Subject: gr.Subject, Capability: gr.Capability, Scope: gr.Scope, By: gr.By, ByTrust: gr.ByTrust.String(), Reason: gr.Reason,
		BootID: gr.BootID, MonoDeadlineNS: int64(gr.MonoDeadline)}
	if !gr.Expires.IsZero() {
		p.Expires = gr.Expires.Format(time.RFC3339Nano)
	}
	if err := g.record(ctx, EventGrantAdded, gr.ID, 1, c, ledger.Told, gr.ByTrust, p); err != nil {
		return Grant{}, fmt.Errorf("act: grant add: %w", err)
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.grants[g.byID[gr.ID]], nil
}

// Revoke records that the grant id is revoked by by (a subject) for
// reason, and returns the grant as it is now. An unknown id is
// ErrUnknownGrant, a grant revoked already ErrGrantRevoked; an expired
// grant may still be revoked. Like Add it returns once the revocation is
// on disk.
func (g *Grants) Revoke(ctx context.Context, id, by, reason string) (Grant, error) {
	g.write.Lock()
	defer g.write.Unlock()
	g.mu.RLock()
	i, ok := g.byID[id]
	var gr Grant
	if ok {
		gr = g.grants[i]
	}
	g.mu.RUnlock()
	switch {
	case !ok:
		return Grant{}, fmt.Errorf("%w: %q", ErrUnknownGrant, id)
	case gr.Revoked:
		return Grant{}, fmt.Errorf("%w: %s", ErrGrantRevoked, id)
	}
	if err := checkSubject(by); err != nil {
		return Grant{}, fmt.Errorf("%w: by: %v", ErrInvalidGrant, err)
	}
	if err := checkText(reason); err != nil {
		return Grant{}, fmt.Errorf("%w: reason: %v", ErrInvalidGrant, err)
	}
	if err := g.record(ctx, EventGrantRevoked, id, gr.nextVersion(), g.Reading(), ledger.Told, 0, grantRevoked{ID: id, By: by, Reason: reason}); err != nil {
		return Grant{}, fmt.Errorf("act: grant revoke: %w", err)
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.grants[i], nil
}

// Sweep records grant.expired for every grant, not revoked, that is
// found past its expiry now by either clock and was not recorded expired
// before, and returns those grants as they are now, in the order they
// were added. A grant whose expiry cannot be judged now (SuspendedAt) is
// left for a later sweep. The daemon calls it every minute and right
// after the wall clock steps (Run), so that a grant a step ended stays
// ended when the clock steps back. On an error it returns what it
// recorded before it; the rest are found again by the next sweep. It is
// safe to call concurrently with everything else.
func (g *Grants) Sweep(ctx context.Context) ([]Grant, error) {
	g.write.Lock()
	defer g.write.Unlock()
	c := g.Reading()
	type due struct {
		i       int
		version uint64
		p       grantExpired
	}
	var found []due
	g.mu.RLock()
	for i, gr := range g.grants {
		if gr.Revoked || gr.Expired {
			continue
		}
		ended, by, early := gr.endAt(c)
		if !ended {
			continue
		}
		p := grantExpired{ID: gr.ID, By: by, EarlyNS: int64(early), BootID: c.BootID, MonoNS: int64(c.Mono), Synced: c.Synced}
		if left := gr.Expires.Sub(c.Wall); by == ExpiredByMonotonic && left > 0 {
			p.WallLeftNS = int64(left)
		}
		found = append(found, due{i, gr.nextVersion(), p})
	}
	g.mu.RUnlock()
	var out []Grant
	for _, d := range found {
		if err := g.record(ctx, EventGrantExpired, d.p.ID, d.version, c, ledger.Observed, ledger.High, d.p); err != nil {
			return out, fmt.Errorf("act: grant %s expired: %w", d.p.ID, err)
		}
		g.mu.RLock()
		out = append(out, g.grants[d.i])
		g.mu.RUnlock()
	}
	return out, nil
}

// Run sweeps (Sweep) every interval and whenever stepped delivers (the
// wall clock was set; nil: never), until ctx ends; it hands what each
// sweep recorded expired, and its error, to report when there is either
// (nil: dropped). The caller owns the goroutine it runs in.
func (g *Grants) Run(ctx context.Context, every time.Duration, stepped <-chan time.Duration, report func([]Grant, error)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-stepped:
		}
		out, err := g.Sweep(ctx)
		if report != nil && (len(out) > 0 || err != nil) {
			report(out, err)
		}
	}
}

// record appends one grant event, stamped with the clock reading c, and
// applies it to the grants. It holds mu across both: whoever follows the
// ledger and sees the event committed, then asks for the grants (Active),
// waits for it to be applied rather than reading the grants from before
// it.
func (g *Grants) record(ctx context.Context, typ, id string, version uint64, c Reading, prov ledger.Provenance, trust ledger.Level, payload any) error {
	p, err := ledger.MarshalPayload(payload)
	if err != nil {
		return err
	}
	e := ledger.Event{ID: ledger.NewID(), Type: typ, OccurredAt: c.Wall.UnixNano(), Provenance: prov, Trust: trust, Privacy: ledger.Internal,
		AggregateID: grantAggregate(id), AggregateVersion: version, Payload: p}
	if c.BootID != "" {
		e.MonotonicNS, e.ClockDomain = int64(c.Mono), c.BootID
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	// Once handed over, wait for the commit: an answer that says "failed"
	// about a grant that was written would be worse than a slow one.
	if _, err := g.log.Append(context.WithoutCancel(ctx), e); err != nil {
		return err
	}
	return g.apply(&e)
}

// Active returns the grants in force at c, in the order they were
// added.
func (g *Grants) Active(c Reading) []Grant {
	g.mu.RLock()
	defer g.mu.RUnlock()
	var out []Grant
	for _, gr := range g.grants {
		if gr.ActiveAt(c) {
			out = append(out, gr)
		}
	}
	return out
}

// Offered reports whether a principal of subject at trust is offered
// capability on target at c (a button it may press, say): its trust is
// enough for the risk the runner's capability has on target, and a grant
// covers it as the policy reads grants (in force, given at a trust that
// could allow that risk). It only offers: the policy still decides every
// use.
func (g *Grants) Offered(r *Runner, c Reading, subject string, trust ledger.Level, capability, target string) bool {
	risk, _ := r.RiskCovered(capability, target)
	if trust < MinTrust(risk) {
		return false
	}
	req := Request{Principal: Principal{Subject: subject, Trust: trust}, Capability: Capability{Name: capability, Risk: risk}, Target: target}
	return coveringGrant(req, g.All(), c).Allow
}

// Allows decides whether p may use capability, of risk, on target
// where the runner does not act for it (looking at kept evidence,
// evidence.view), weighing trust and grants as Decide does: the trust
// the risk needs first (risk_exceeds_trust); then a local administrator
// needs no grant below R3, and anyone else a grant of its subject in
// force that covers capability on target, given at a trust that could
// allow the risk. On a nil *Grants (the grants could not be read) no
// grant is in force.
func (g *Grants) Allows(p Principal, capability string, risk Risk, target string) Decision {
	if need := MinTrust(risk); p.Trust < need {
		return refuse(ReasonRiskExceedsTrust, "%s needs %s trust; %s has %s", capability, need, p.Subject, p.Trust)
	}
	if p.Kind == LocalAdmin && risk < R3 {
		return Decision{Allow: true, Detail: "a local administrator needs no grant below R3"}
	}
	req := Request{Principal: p, Capability: Capability{Name: capability, Risk: risk}, Target: target}
	if g == nil {
		return coveringGrant(req, nil, Reading{})
	}
	return coveringGrant(req, g.All(), g.Reading())
}

// All returns every grant, expired and revoked ones too, in the order
// they were added: what State.Grants wants.
func (g *Grants) All() []Grant {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return slices.Clone(g.grants)
}
