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

// ParseExpiry reads when a grant expires: "" or "never" for never, a
// duration from now ("90m", "24h", or whole days "30d"), or an RFC 3339
// time. The result is in UTC and after now; anything else is an error.
func ParseExpiry(s string, now time.Time) (time.Time, error) {
	if s == "" || s == "never" {
		return time.Time{}, nil
	}
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok && days != "" && strings.Trim(days, "0123456789") == "" {
		n, err := strconv.Atoi(days)
		if err != nil || n > maxExpiryDay {
			return time.Time{}, fmt.Errorf("%q: at most %d days", s, maxExpiryDay)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else if pd, err := time.ParseDuration(s); err == nil {
		d = pd
	} else if t, err := time.Parse(time.RFC3339, s); err == nil {
		if !t.After(now) {
			return time.Time{}, fmt.Errorf("%q is not in the future", s)
		}
		return t.UTC(), nil
	} else {
		return time.Time{}, fmt.Errorf("%q is neither a duration (24h, 30d), an RFC 3339 time nor never", s)
	}
	if d <= 0 {
		return time.Time{}, fmt.Errorf("%q is not in the future", s)
	}
	return now.Add(d).UTC(), nil
}

// ExpiredAt tells whether the grant has expired at now: its expiry is
// set and not after now.
func (g Grant) ExpiredAt(now time.Time) bool {
	return !g.Expires.IsZero() && !now.Before(g.Expires)
}

// ActiveAt tells whether the grant is in force at now: neither revoked
// nor expired.
func (g Grant) ActiveAt(now time.Time) bool { return !g.Revoked && !g.ExpiredAt(now) }

// check says which field of a new grant is wrong.
func (g Grant) check(now time.Time) error {
	bad := func(field string, err error) error { return fmt.Errorf("%w: %s: %v", ErrInvalidGrant, field, err) }
	switch {
	case g.ID != "" || !g.Added.IsZero():
		return bad("id", errors.New("set by the store, not by the caller"))
	case g.Revoked || !g.RevokedAt.IsZero() || g.RevokedBy != "" || g.RevokeReason != "":
		return bad("revoked", errors.New("a new grant is not revoked"))
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
		return bad("expires", fmt.Errorf("%s is not in the future", g.Expires.UTC().Format(time.RFC3339)))
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
}

type grantRevoked struct {
	ID     string `cbor:"id"`
	By     string `cbor:"by"`
	Reason string `cbor:"reason,omitempty"`
}

// grantAggregate is the ledger aggregate of one grant: its added event is
// version 1 and its revocation version 2, so the ledger itself refuses a
// second grant with the same id and a second revocation.
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
type Grants struct {
	log grantLog
	now func() time.Time

	write sync.Mutex // held by Add and Revoke from their check to their apply

	mu     sync.RWMutex
	grants []Grant // in the order they were added
	byID   map[string]int
}

// LoadGrants reads the grants from the ledger's grants projection (see
// Projections: the store must keep it). now is the clock new grants are
// judged and dated by (nil: time.Now). A grant event that could not be
// read or did not follow from the ones before it is an error naming the
// event: grants fail closed, and a revocation is never skipped.
func LoadGrants(store *ledger.Store, now func() time.Time) (*Grants, error) {
	if store == nil {
		return nil, errors.New("act: grants: the ledger is not open")
	}
	return loadGrants(store, now)
}

func loadGrants(log grantLog, now func() time.Time) (*Grants, error) {
	if now == nil {
		now = time.Now
	}
	g := &Grants{log: log, now: now, byID: map[string]int{}}
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

// grantOf is the grant a grant.added payload at makes, or what is wrong
// with it.
func grantOf(p grantAdded, at time.Time) (Grant, error) {
	gr := Grant{ID: p.ID, Subject: p.Subject, Capability: p.Capability, Scope: p.Scope, By: p.By, ByTrust: ledger.High, Reason: p.Reason, Added: at}
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
	default:
		return errors.New("not a grant event this body knows")
	}
	return nil
}

// Add records a new grant and returns it with its id and time. The id,
// the time and the revocation fields are the store's to set; a grant that
// has any of them, or whose subject, capability or scope pattern, expiry,
// by or reason is malformed, is refused with an error wrapping
// ErrInvalidGrant that names the field. Add returns once the grant is on
// disk; it does not give up when ctx ends after the grant was handed to
// the ledger, so its answer always says what the ledger holds.
func (g *Grants) Add(ctx context.Context, gr Grant) (Grant, error) {
	g.write.Lock()
	defer g.write.Unlock()
	now := g.now()
	if err := gr.check(now); err != nil {
		return Grant{}, err
	}
	gr.ID = ledger.NewID().String()
	p := grantAdded{ID: gr.ID, Subject: gr.Subject, Capability: gr.Capability, Scope: gr.Scope, By: gr.By, ByTrust: gr.ByTrust.String(), Reason: gr.Reason}
	if !gr.Expires.IsZero() {
		gr.Expires = gr.Expires.UTC()
		p.Expires = gr.Expires.Format(time.RFC3339Nano)
	}
	e, err := g.record(ctx, EventGrantAdded, gr.ID, 1, now, gr.ByTrust, p)
	if err != nil {
		return Grant{}, fmt.Errorf("act: grant add: %w", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.apply(&e); err != nil {
		return Grant{}, fmt.Errorf("act: grant add: %w", err)
	}
	return g.grants[g.byID[gr.ID]], nil
}

// Revoke records that the grant id is revoked by by (a subject) for
// reason, and returns the grant as it is now. An unknown id is
// ErrUnknownGrant, a grant revoked already ErrGrantRevoked. Like Add it
// returns once the revocation is on disk.
func (g *Grants) Revoke(ctx context.Context, id, by, reason string) (Grant, error) {
	g.write.Lock()
	defer g.write.Unlock()
	g.mu.RLock()
	i, ok := g.byID[id]
	var revoked bool
	if ok {
		revoked = g.grants[i].Revoked
	}
	g.mu.RUnlock()
	switch {
	case !ok:
		return Grant{}, fmt.Errorf("%w: %q", ErrUnknownGrant, id)
	case revoked:
		return Grant{}, fmt.Errorf("%w: %s", ErrGrantRevoked, id)
	}
	if err := checkSubject(by); err != nil {
		return Grant{}, fmt.Errorf("%w: by: %v", ErrInvalidGrant, err)
	}
	if err := checkText(reason); err != nil {
		return Grant{}, fmt.Errorf("%w: reason: %v", ErrInvalidGrant, err)
	}
	e, err := g.record(ctx, EventGrantRevoked, id, 2, g.now(), 0, grantRevoked{ID: id, By: by, Reason: reason})
	if err != nil {
		return Grant{}, fmt.Errorf("act: grant revoke: %w", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.apply(&e); err != nil {
		return Grant{}, fmt.Errorf("act: grant revoke: %w", err)
	}
	return g.grants[i], nil
}

// record appends one grant event and returns it as written.
func (g *Grants) record(ctx context.Context, typ, id string, version uint64, now time.Time, trust ledger.Level, payload any) (ledger.Event, error) {
	p, err := ledger.MarshalPayload(payload)
	if err != nil {
		return ledger.Event{}, err
	}
	e := ledger.Event{ID: ledger.NewID(), Type: typ, OccurredAt: now.UnixNano(), Provenance: ledger.Told, Trust: trust, Privacy: ledger.Internal,
		AggregateID: grantAggregate(id), AggregateVersion: version, Payload: p}
	// Once handed over, wait for the commit: an answer that says "failed"
	// about a grant that was written would be worse than a slow one.
	if _, err := g.log.Append(context.WithoutCancel(ctx), e); err != nil {
		return ledger.Event{}, err
	}
	return e, nil
}

// Active returns the grants in force at now, in the order they were
// added.
func (g *Grants) Active(now time.Time) []Grant {
	g.mu.RLock()
	defer g.mu.RUnlock()
	var out []Grant
	for _, gr := range g.grants {
		if gr.ActiveAt(now) {
			out = append(out, gr)
		}
	}
	return out
}

// All returns every grant, expired and revoked ones too, in the order
// they were added: what State.Grants wants.
func (g *Grants) All() []Grant {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return slices.Clone(g.grants)
}
