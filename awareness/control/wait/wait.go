// Package wait keeps the agent's wait conditions on the body: "tell me
// when there is motion at the door in the next two hours". A condition
// belongs to a work item and expires; it names the event types and
// channels it waits for and a matcher over the event's payload (clauses
// of the kinds equals, in, prefix, numeric threshold and zone). Like the
// work items it is a ledger fact: added, matched and removed by ledger
// commands whose events carry it as it stands, kept by the projection
// wait_conditions, restored from it at a start.
//
// Events (class audit):
//
//	wait.added     a condition, at version 1
//	wait.matched   it matched an event (last_matched_at, the event)
//	wait.removed   removed by its owner, expired, or its work item ended
package wait

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/tobe-body/tobe-body/awareness/control/work"
	"github.com/tobe-body/tobe-body/ledger"
)

// Priority is the condition's hint of how much a match matters.
type Priority string

// The priorities, as the agent's attention levels.
const (
	Low    Priority = "low"
	Medium Priority = "medium"
	High   Priority = "high"
	Max    Priority = "max"
)

// Dedupe says which matches count.
type Dedupe string

// The dedupe strategies.
const (
	// Every match counts (outside the cooldown).
	DedupeNone Dedupe = "none"
	// The first match counts, and ends the condition.
	DedupeOnce Dedupe = "once"
	// One match counts per value of DedupeField in each cooldown.
	DedupeField Dedupe = "field"
)

// Condition is a wait condition as it stands.
type Condition struct {
	ID string `cbor:"id" json:"id"`
	// Owner is the work item it belongs to: required.
	Owner string `cbor:"owner" json:"owner"`
	// Types are the event types it waits for: a type, or a prefix
	// ending in a dot ("camera.").
	Types []string `cbor:"event_types" json:"event_types"`
	// Channels select the channels: ids or prefixes ending in a dot;
	// none: any channel.
	Channels []string `cbor:"channels,omitempty" json:"channels,omitempty"`
	Match    []Clause `cbor:"match,omitempty" json:"match,omitempty"`
	Priority Priority `cbor:"priority" json:"priority"`
	// CooldownMS: after a match, matches within this are suppressed.
	CooldownMS  int64  `cbor:"cooldown_ms,omitempty" json:"cooldown_ms,omitempty"`
	Dedupe      Dedupe `cbor:"dedupe" json:"dedupe"`
	DedupeField string `cbor:"dedupe_field,omitempty" json:"dedupe_field,omitempty"`
	// FollowUp, when set, is the work item the body makes each time the
	// condition wakes the agent or asks a person: a child of Owner, made
	// for the event, so that what the match calls for is tracked even
	// when nobody answers at once.
	FollowUp *FollowUp `cbor:"follow_up,omitempty" json:"follow_up,omitempty"`
	// Evidence, when set, is what the body captures when the condition
	// wakes the agent or asks a person (a snapshot of the camera whose
	// event matched), through the runner as whoever added the condition,
	// under that principal's grants; the decision names what was kept.
	Evidence *Evidence `cbor:"evidence,omitempty" json:"evidence,omitempty"`
	// ExpiresAt is when it ends, Unix milliseconds: required.
	ExpiresAt     int64  `cbor:"expires_at" json:"expires_at"`
	LastMatchedAt int64  `cbor:"last_matched_at,omitempty" json:"last_matched_at,omitempty"`
	LastEvent     string `cbor:"last_event,omitempty" json:"last_event,omitempty"`
	Matches       uint64 `cbor:"matches,omitempty" json:"matches,omitempty"`
	CreatedAt     int64  `cbor:"created_at" json:"created_at"`
	Version       uint64 `cbor:"version" json:"version"`
	// Removed is why it ended ("" while it waits).
	Removed string `cbor:"removed,omitempty" json:"removed,omitempty"`
	// Since is the ledger's sequence of its wait.added: it matches only
	// events the ledger took after that, also when the gate decides
	// again, after a restart, on events from before it. A sequence, not
	// a time: a wall clock that steps back would make every later event
	// look older than the condition.
	Since uint64 `cbor:"since_seq,omitempty" json:"since_seq,omitempty"`
}

// Evidence is the capture a condition asks for when it matches: a
// capability (camera.snapshot, audio.clip) on the channel of the event
// that matched, with its params; and who asked, whose grants it runs
// under (set by the body from the principal that added the condition).
type Evidence struct {
	Capability string            `cbor:"capability" json:"capability"`
	Params     map[string]string `cbor:"params,omitempty" json:"params,omitempty"`
	By         string            `cbor:"by" json:"by"`
	Kind       string            `cbor:"kind" json:"kind"`
	Trust      ledger.Level      `cbor:"trust" json:"trust"`
}

// Captures are the capabilities a condition may ask for as evidence.
var Captures = []string{"camera.snapshot", "audio.clip"}

// FollowUp is the goal and acceptance criteria of the work item a
// condition's wake makes.
type FollowUp struct {
	Goal     string   `cbor:"goal" json:"goal"`
	DoneWhen []string `cbor:"done_when" json:"done_when"`
}

// Limits on a condition.
const (
	MaxTypes    = 16
	MaxChannels = 16
	MaxIDLen    = 64
	// MaxSpan is how far ahead a condition may expire: a wait longer
	// than this is a schedule, not a wait.
	MaxSpan = 90 * 24 * time.Hour
)

// Errors, each wrapped with what was wrong.
var (
	ErrInvalid  = errors.New("wait: invalid")
	ErrNotFound = errors.New("wait: no such wait condition")
	ErrExists   = errors.New("wait: a wait condition with that id exists")
	ErrRemoved  = errors.New("wait: the wait condition was removed")
)

func invalid(field, format string, a ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, a...))
}

// selector checks an event type or channel selector: lowercase letters,
// digits, '_', '-', dots between words, or ending in a dot (a prefix).
func selector(field, s string) error {
	if s == "" || len(s) > MaxIDLen {
		return invalid(field, "%q: 1 to %d bytes", s, MaxIDLen)
	}
	for i, c := range s {
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' && i > 0
		if !ok || c == '.' && i > 0 && s[i-1] == '.' {
			return invalid(field, "%q: lowercase words between dots, or a prefix ending in one", s)
		}
	}
	return nil
}

// check checks the condition's own fields, at now.
func (c *Condition) check(now time.Time) error {
	if c.ID == "" || len(c.ID) > MaxIDLen || strings.ContainsAny(c.ID, "/ \t\n") {
		return invalid("id", "%q: 1 to %d bytes, no slash or space", c.ID, MaxIDLen)
	}
	if c.Owner == "" {
		return invalid("owner", "a wait condition belongs to a work item")
	}
	if c.ExpiresAt == 0 {
		return invalid("expires_at", "a wait condition expires")
	}
	if c.ExpiresAt <= now.UnixMilli() {
		return invalid("expires_at", "%s is past", time.UnixMilli(c.ExpiresAt).UTC().Format(time.RFC3339))
	}
	if time.UnixMilli(c.ExpiresAt).Sub(now) > MaxSpan {
		return invalid("expires_at", "more than %d days ahead", int(MaxSpan.Hours()/24))
	}
	if len(c.Types) == 0 || len(c.Types) > MaxTypes {
		return invalid("event_types", "1 to %d types, not %d", MaxTypes, len(c.Types))
	}
	for i, t := range c.Types {
		if err := selector(fmt.Sprintf("event_types[%d]", i), t); err != nil {
			return err
		}
	}
	if len(c.Channels) > MaxChannels {
		return invalid("channels", "at most %d", MaxChannels)
	}
	for i, ch := range c.Channels {
		if err := selector(fmt.Sprintf("channels[%d]", i), ch); err != nil {
			return err
		}
	}
	if len(c.Match) > MaxClauses {
		return invalid("match", "%d clauses, at most %d", len(c.Match), MaxClauses)
	}
	for i := range c.Match {
		if err := c.Match[i].check(); err != nil {
			return invalid(fmt.Sprintf("match[%d]", i), "%v", err)
		}
	}
	switch c.Priority {
	case "":
		c.Priority = Medium
	case Low, Medium, High, Max:
	default:
		return invalid("priority", "%q: low, medium, high or max", c.Priority)
	}
	if c.CooldownMS < 0 {
		return invalid("cooldown_ms", "negative")
	}
	if ev := c.Evidence; ev != nil {
		if !slices.Contains(Captures, ev.Capability) {
			return invalid("evidence.capability", "%q: one of %q", ev.Capability, Captures)
		}
		if len(ev.Params) > 8 {
			return invalid("evidence.params", "%d params, at most 8", len(ev.Params))
		}
		for k, v := range ev.Params {
			if len(k) > maxField || len(v) > 256 {
				return invalid("evidence.params", "a param of %d bytes named in %d: at most 256 and %d", len(v), len(k), maxField)
			}
		}
		if ev.By == "" {
			return invalid("evidence.by", "who asked for the evidence is needed")
		}
		if a := ev.Params["after_ms"]; ev.Capability == "audio.clip" && a != "" && a != "0" {
			// The gate decides in the order of the ledger: it captures at
			// once, and a clip of what comes after would hold it up.
			return invalid("evidence.params.after_ms", "a condition's clip is of the moments before the match (before_ms, from the microphone's ring)")
		}
	}
	if f := c.FollowUp; f != nil {
		if err := work.CheckGoal(f.Goal, f.DoneWhen); err != nil {
			return invalid("follow_up", "%s", strings.TrimPrefix(err.Error(), work.ErrInvalid.Error()+": "))
		}
	}
	switch c.Dedupe {
	case "":
		c.Dedupe = DedupeNone
	case DedupeNone, DedupeOnce:
	case DedupeField:
		if c.DedupeField == "" || len(c.DedupeField) > maxField {
			return invalid("dedupe_field", "dedupe field names the payload field whose values count once a cooldown")
		}
	default:
		return invalid("dedupe", "%q: none, once or field", c.Dedupe)
	}
	return nil
}

// Wants tells whether the condition waits for events of this type on
// this channel (the index's test, without the payload).
func (c *Condition) Wants(typ, channel string) bool {
	return selects(c.Types, typ) && (len(c.Channels) == 0 || selects(c.Channels, channel))
}

func selects(sels []string, s string) bool {
	return slices.ContainsFunc(sels, func(sel string) bool {
		if strings.HasSuffix(sel, ".") {
			return strings.HasPrefix(s, sel)
		}
		return s == sel
	})
}

// Holds tells whether every clause holds for the event's fields.
func (c *Condition) Holds(f *Fields) bool {
	for i := range c.Match {
		if !c.Match[i].Holds(f) {
			return false
		}
	}
	return true
}

// Aggregate is the ledger aggregate of a condition.
func Aggregate(id string) string { return "wait/" + id }

// The event types.
const (
	EventAdded   = "wait.added"
	EventMatched = "wait.matched"
	EventRemoved = "wait.removed"
)

// Record is the payload of every wait event: the condition as it stands
// after it.
type Record struct {
	Condition Condition `cbor:"condition" json:"condition"`
	// Event is the event it matched (wait.matched).
	Event string `cbor:"event,omitempty" json:"event,omitempty"`
	By    string `cbor:"by,omitempty" json:"by,omitempty"`
}

// Add is the command that adds a condition; its owner must be a work
// item that is not closed or cancelled. Its Condition, once executed, is
// the condition added.
type Add struct {
	Condition Condition
	By        string
	At        time.Time
}

// NewAdd makes the command, with an id when the condition has none.
func NewAdd(c Condition, by string, at time.Time) *Add {
	if c.ID == "" {
		c.ID = ledger.NewID().String()
	}
	return &Add{Condition: c, By: by, At: at}
}

// Decide checks the condition and its owner, and records it.
func (a *Add) Decide(v *ledger.View) ([]ledger.Event, error) {
	c := a.Condition
	c.Types, c.Channels, c.Match = slices.Clone(c.Types), slices.Clone(c.Channels), slices.Clone(c.Match)
	if c.Evidence != nil {
		ev := *c.Evidence
		ev.Params = maps.Clone(ev.Params)
		c.Evidence = &ev
	}
	c.LastMatchedAt, c.LastEvent, c.Matches, c.Removed, c.Since = 0, "", 0, "", 0
	c.CreatedAt, c.Version = a.At.UnixMilli(), 1
	if err := c.check(a.At); err != nil {
		return nil, err
	}
	owner, ok, err := work.Lookup(v, c.Owner)
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, invalid("owner", "no work item %s", c.Owner)
	case owner.Status.Final():
		return nil, invalid("owner", "work item %s is %s", c.Owner, owner.Status)
	}
	if v.AggregateVersion(Aggregate(c.ID)) != 0 {
		return nil, fmt.Errorf("%w: %s", ErrExists, c.ID)
	}
	a.Condition = c
	return record(EventAdded, Record{Condition: c, By: a.By}, a.At)
}

// Matched is the command that records a match of event at a time: the
// gate's, once it decided the match counts.
type Matched struct {
	ID    string
	Event string
	At    time.Time
	// Condition, once executed, is the condition after the match.
	Condition Condition
}

// Decide records the match on the condition as it stands.
func (m *Matched) Decide(v *ledger.View) ([]ledger.Event, error) {
	c, err := current(v, m.ID)
	if err != nil {
		return nil, err
	}
	c.LastMatchedAt, c.LastEvent = m.At.UnixMilli(), m.Event
	c.Matches++
	c.Version++
	if c.Dedupe == DedupeOnce {
		c.Removed = "matched once"
	}
	m.Condition = c
	return record(EventMatched, Record{Condition: c, Event: m.Event}, m.At)
}

// Remove is the command that ends a condition, with why: its owner's
// request, its expiry, or its work item's end.
type Remove struct {
	ID  string
	Why string
	By  string
	At  time.Time
	// Condition, once executed, is the condition as it ended.
	Condition Condition
}

// Decide ends the condition.
func (r *Remove) Decide(v *ledger.View) ([]ledger.Event, error) {
	c, err := current(v, r.ID)
	if err != nil {
		return nil, err
	}
	if r.Why == "" {
		r.Why = "removed"
	}
	c.Removed = r.Why
	c.Version++
	r.Condition = c
	return record(EventRemoved, Record{Condition: c, By: r.By}, r.At)
}

// current reads a condition that still waits.
func current(v *ledger.View, id string) (Condition, error) {
	b := v.Get(Projection, []byte(id))
	if b == nil {
		return Condition{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	var c Condition
	if err := ledger.UnmarshalPayload(b, &c); err != nil {
		return Condition{}, fmt.Errorf("wait: condition %s: %w", id, err)
	}
	if c.Removed != "" {
		return Condition{}, fmt.Errorf("%w: %s (%s)", ErrRemoved, id, c.Removed)
	}
	return c, nil
}

func record(typ string, r Record, at time.Time) ([]ledger.Event, error) {
	p, err := ledger.MarshalPayload(r)
	if err != nil {
		return nil, err
	}
	return []ledger.Event{{ID: ledger.NewID(), Type: typ, OccurredAt: at.UnixNano(), Provenance: ledger.Told, Trust: ledger.High,
		Privacy: ledger.Internal, AggregateID: Aggregate(r.Condition.ID), AggregateVersion: r.Condition.Version, Payload: p}}, nil
}

// Read decodes a wait event's record, the event's sequence in the ledger
// being seq; a wait.added's condition gets its Since from it, and the
// later records keep the condition's.
func Read(e *ledger.Event, seq uint64) (Record, error) {
	var r Record
	if err := ledger.UnmarshalPayload(e.Payload, &r); err != nil {
		return Record{}, fmt.Errorf("wait: %s %s: %w", e.Type, e.ID, err)
	}
	if e.Type == EventAdded {
		r.Condition.Since = seq
	}
	return r, nil
}

// Projection is the name of the projection that keeps every condition
// as it stands, by id: a removed one until retention of the projection
// (it says why it ended).
const Projection = "wait_conditions"

// Conditions is the projection: register it in ledger.Options.Projections.
type Conditions struct{}

func (Conditions) Name() string    { return Projection }
func (Conditions) Types() []string { return []string{EventAdded, EventMatched, EventRemoved} }

func (Conditions) Apply(kv ledger.KV, e *ledger.Event) error {
	seq, ok := ledger.SeqOf(kv)
	if !ok {
		return fmt.Errorf("wait: %s %s: applied outside a ledger (no sequence)", e.Type, e.ID)
	}
	r, err := Read(e, seq)
	if err != nil {
		return err
	}
	b, err := ledger.MarshalPayload(r.Condition)
	if err != nil {
		return err
	}
	return kv.Put([]byte(r.Condition.ID), b)
}

// Get returns a condition as it stands, a removed one too; ErrNotFound
// when there is none of that id.
func Get(r work.Reader, id string) (Condition, error) {
	c, found, err := ledger.ReadRecord[Condition](r, Projection, []byte(id))
	switch {
	case err != nil:
		return Condition{}, fmt.Errorf("wait: %w", err)
	case !found:
		return Condition{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return c, nil
}

// List returns the conditions as they stand, by id; keep selects (nil:
// all, removed ones too).
func List(r work.Reader, keep func(*Condition) bool) ([]Condition, error) {
	var out []Condition
	err := r.ReadProjection(Projection, func(kv ledger.ReadKV) error {
		return kv.ForEach(func(k, b []byte) error {
			var c Condition
			if err := ledger.UnmarshalPayload(b, &c); err != nil {
				return fmt.Errorf("condition %s: %w", k, err)
			}
			if keep == nil || keep(&c) {
				out = append(out, c)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("wait: %w", err)
	}
	return out, nil
}
