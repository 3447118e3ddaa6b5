package work

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tobe-body/tobe-body/ledger"
)

// The event types.
const (
	EventCreated = "work.created"
	EventChanged = "work.changed"
	EventMoved   = "work.moved"
	EventDue     = "work.due"
	EventStale   = "work.stale"
)

// Record is the payload of every work event: the item as it is after
// the change, and what the change was.
type Record struct {
	Item Item `cbor:"item" json:"item"`
	// From is the status it left (work.moved).
	From Status `cbor:"from,omitempty" json:"from,omitempty"`
	// Reason says why it moved.
	Reason string `cbor:"reason,omitempty" json:"reason,omitempty"`
	// Changed names the fields a work.changed changed.
	Changed []string `cbor:"changed,omitempty" json:"changed,omitempty"`
	// By is who asked for the change.
	By string `cbor:"by,omitempty" json:"by,omitempty"`
}

// Aggregate is the ledger aggregate of an item: its versions are the
// item's.
func Aggregate(id string) string { return "work/" + id }

// Spec is what a new item is made of.
type Spec struct {
	ID          string       `json:"id,omitempty"` // empty: one is made
	Goal        string       `json:"goal"`
	DoneWhen    []string     `json:"done_when"`
	Status      Status       `json:"status,omitempty"` // draft or open (the default)
	Owner       string       `json:"owner,omitempty"`
	Requires    *Requirement `json:"requires,omitempty"`
	Parent      string       `json:"parent,omitempty"`
	DependsOn   []string     `json:"depends_on,omitempty"`
	AuthProfile string       `json:"auth_profile,omitempty"`
	Budget      *Budget      `json:"interrupt_budget,omitempty"`
	NextCheckAt int64        `json:"next_check_at,omitempty"`
	// Source is the event a follow-up is made for: a follow-up the body
	// makes by itself (FollowUp) names it, and a parent.
	Source   string `json:"source,omitempty"`
	FollowUp bool   `json:"-"`
}

// Create is the command that makes a work item from spec, by a
// principal, at a time; its Item, once executed, is the item made.
type Create struct {
	Spec Spec
	By   string
	At   time.Time
	Item Item
}

// NewCreate makes the command, with an id for the item when spec has none.
func NewCreate(spec Spec, by string, at time.Time) *Create {
	if spec.ID == "" {
		spec.ID = ledger.NewID().String()
	}
	return &Create{Spec: spec, By: by, At: at}
}

// Decide checks the item and its references against the items as they
// stand, and records it.
func (c *Create) Decide(v *ledger.View) ([]ledger.Event, error) {
	s := c.Spec
	at := c.At.UnixMilli()
	it := Item{ID: s.ID, Goal: s.Goal, DoneWhen: slices.Clone(s.DoneWhen), Status: s.Status, Owner: s.Owner, Requires: s.Requires,
		Parent: s.Parent, DependsOn: slices.Clone(s.DependsOn), AuthProfile: s.AuthProfile, Budget: s.Budget,
		NextCheckAt: s.NextCheckAt, CreatedAt: at, LastProgressAt: at, Version: 1, Source: s.Source}
	if s.FollowUp && (s.Source == "" || s.Parent == "") {
		return nil, invalid("follow-up", "an item the body makes by itself names its source event and its parent")
	}
	switch it.Status {
	case "":
		it.Status = Open
	case Draft, Open:
	default:
		return nil, invalid("status", "a new item is draft or open, not %q", it.Status)
	}
	if err := it.check(); err != nil {
		return nil, err
	}
	if v.AggregateVersion(Aggregate(it.ID)) != 0 {
		return nil, fmt.Errorf("%w: %s", ErrExists, it.ID)
	}
	if err := checkRefs(v, &it); err != nil {
		return nil, err
	}
	c.Item = it
	return record(EventCreated, Record{Item: it, By: c.By}, c.At)
}

// Patch is a change to an item's fields: nil leaves a field as it is;
// an empty value clears it (Requires and Budget: a zero value).
// Progress marks progress now (last_progress_at).
type Patch struct {
	Goal        *string      `json:"goal,omitempty"`
	DoneWhen    []string     `json:"done_when,omitempty"`
	Owner       *string      `json:"owner,omitempty"`
	Requires    *Requirement `json:"requires,omitempty"`
	BlockedOn   *string      `json:"blocked_on,omitempty"`
	DependsOn   *[]string    `json:"depends_on,omitempty"`
	AuthProfile *string      `json:"auth_profile,omitempty"`
	Budget      *Budget      `json:"interrupt_budget,omitempty"`
	NextCheckAt *int64       `json:"next_check_at,omitempty"`
	Progress    bool         `json:"progress,omitempty"`
}

// IsZero tells whether the patch changes nothing.
func (p *Patch) IsZero() bool {
	return p.Goal == nil && p.DoneWhen == nil && p.Owner == nil && p.Requires == nil && p.BlockedOn == nil && p.DependsOn == nil &&
		p.AuthProfile == nil && p.Budget == nil && p.NextCheckAt == nil && !p.Progress
}

// Change is the command that changes an item's fields, when it is at
// version Expected; its Item, once executed, is the item changed.
type Change struct {
	ID       string
	Expected uint64
	Patch    Patch
	By       string
	At       time.Time
	Item     Item
}

// Decide applies the patch to the item as it stands.
func (c *Change) Decide(v *ledger.View) ([]ledger.Event, error) {
	it, err := current(v, c.ID, c.Expected)
	if err != nil {
		return nil, err
	}
	if it.Status.Final() {
		return nil, fmt.Errorf("%w: %s is %s", ErrFinal, it.ID, it.Status)
	}
	p := c.Patch
	var changed []string
	set := func(name string, ok bool, apply func()) {
		if ok {
			apply()
			changed = append(changed, name)
		}
	}
	set("goal", p.Goal != nil, func() { it.Goal = *p.Goal })
	set("done_when", p.DoneWhen != nil, func() { it.DoneWhen = slices.Clone(p.DoneWhen) })
	set("owner", p.Owner != nil, func() { it.Owner = *p.Owner })
	set("requires", p.Requires != nil, func() {
		if *p.Requires == (Requirement{}) {
			it.Requires = nil
		} else {
			r := *p.Requires
			it.Requires = &r
		}
	})
	set("blocked_on", p.BlockedOn != nil, func() { it.BlockedOn = *p.BlockedOn })
	set("depends_on", p.DependsOn != nil, func() { it.DependsOn = slices.Clone(*p.DependsOn) })
	set("auth_profile", p.AuthProfile != nil, func() { it.AuthProfile = *p.AuthProfile })
	set("interrupt_budget", p.Budget != nil, func() {
		if *p.Budget == (Budget{}) {
			it.Budget = nil
		} else {
			b := *p.Budget
			it.Budget = &b
		}
	})
	set("next_check_at", p.NextCheckAt != nil, func() { it.NextCheckAt = *p.NextCheckAt })
	set("last_progress_at", p.Progress, func() { it.LastProgressAt, it.StaleSince = c.At.UnixMilli(), 0 })
	if len(changed) == 0 {
		return nil, invalid("patch", "changes nothing")
	}
	if err := it.check(); err != nil {
		return nil, err
	}
	if p.DependsOn != nil {
		if err := checkRefs(v, &it); err != nil {
			return nil, err
		}
	}
	it.Version++
	c.Item = it
	return record(EventChanged, Record{Item: it, Changed: changed, By: c.By}, c.At)
}

// Move is the command that moves an item to another status, when it is
// at version Expected, for a reason; BlockedOn says what a move to
// blocked waits for. Its Item, once executed, is the item moved.
type Move struct {
	ID        string
	Expected  uint64
	To        Status
	Reason    string
	BlockedOn string
	By        string
	At        time.Time
	Item      Item
}

// Decide checks the move against the allowed transitions.
func (m *Move) Decide(v *ledger.View) ([]ledger.Event, error) {
	if !m.To.Valid() {
		return nil, invalid("status", "%q is not a status", m.To)
	}
	if len(m.Reason) > MaxText {
		return nil, invalid("reason", "%d bytes, at most %d", len(m.Reason), MaxText)
	}
	it, err := current(v, m.ID, m.Expected)
	if err != nil {
		return nil, err
	}
	from := it.Status
	if from.Final() {
		return nil, fmt.Errorf("%w: %s is %s", ErrFinal, it.ID, from)
	}
	if !from.CanMove(m.To) {
		return nil, fmt.Errorf("%w: %s cannot go from %s to %s (from %s: %v)", ErrMove, it.ID, from, m.To, from, moves[from])
	}
	it.Status = m.To
	switch {
	case m.To == Blocked:
		it.BlockedOn = m.BlockedOn
	case from == Blocked:
		it.BlockedOn = ""
	}
	if err := it.check(); err != nil {
		return nil, err
	}
	it.LastProgressAt, it.StaleSince = m.At.UnixMilli(), 0 // a move is progress
	it.Version++
	m.Item = it
	return record(EventMoved, Record{Item: it, From: from, Reason: m.Reason, By: m.By}, m.At)
}

// Due is the scheduler's command for an item whose next_check_at came:
// it is cleared, and work.due says so, once.
type Due struct {
	ID       string
	Expected uint64
	At       time.Time
	Item     Item
}

// Decide records the check that fell due.
func (c *Due) Decide(v *ledger.View) ([]ledger.Event, error) {
	it, err := current(v, c.ID, c.Expected)
	if err != nil {
		return nil, err
	}
	if it.NextCheckAt == 0 || it.NextCheckAt > c.At.UnixMilli() || it.Status.Final() {
		return nil, fmt.Errorf("%w: %s has no check due", ErrInvalid, it.ID)
	}
	due := it.NextCheckAt
	it.NextCheckAt = 0
	it.Version++
	c.Item = it
	return record(EventDue, Record{Item: it, Reason: fmt.Sprintf("next_check_at %s came", time.UnixMilli(due).UTC().Format(time.RFC3339)), By: "scheduler"}, c.At)
}

// Stale is the scheduler's command for an item without progress for
// longer than After: work.stale says so, once until progress comes.
type Stale struct {
	ID       string
	Expected uint64
	After    time.Duration
	At       time.Time
	Item     Item
}

// Decide records that the item went stale.
func (c *Stale) Decide(v *ledger.View) ([]ledger.Event, error) {
	it, err := current(v, c.ID, c.Expected)
	if err != nil {
		return nil, err
	}
	if it.StaleSince != 0 || !it.Stale(c.At, c.After) {
		return nil, fmt.Errorf("%w: %s is not newly stale", ErrInvalid, it.ID)
	}
	it.StaleSince = c.At.UnixMilli()
	it.Version++
	c.Item = it
	return record(EventStale, Record{Item: it, Reason: fmt.Sprintf("no progress since %s (stale after %v)",
		time.UnixMilli(it.LastProgressAt).UTC().Format(time.RFC3339), c.After), By: "scheduler"}, c.At)
}

// current reads the item, and refuses a stale expected version with the
// item as it is.
func current(v *ledger.View, id string, expected uint64) (Item, error) {
	it, ok, err := Lookup(v, id)
	switch {
	case err != nil:
		return Item{}, err
	case !ok:
		return Item{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	case it.Version != expected:
		return Item{}, &StaleError{Expected: expected, Current: it}
	}
	return it, nil
}

// Lookup reads an item as it stands in a command's transaction.
func Lookup(v *ledger.View, id string) (Item, bool, error) {
	b := v.Get(Projection, []byte(id))
	if b == nil {
		return Item{}, false, nil
	}
	var it Item
	if err := ledger.UnmarshalPayload(b, &it); err != nil {
		return Item{}, false, fmt.Errorf("work: item %s: %w", id, err)
	}
	return it, true, nil
}

// checkRefs checks an item's parent and dependencies against the items
// as they stand: each exists, the chain of parents and the chains of
// dependencies are at most MaxDepth long, and no dependency leads back
// to the item.
func checkRefs(v *ledger.View, it *Item) error {
	if it.Parent != "" {
		depth, id := 1, it.Parent
		for id != "" {
			p, ok, err := Lookup(v, id)
			if err != nil {
				return err
			}
			if !ok {
				return invalid("parent", "no work item %s", id)
			}
			if p.ID == it.ID {
				return invalid("parent", "%s is its own ancestor", it.ID)
			}
			depth++
			if depth > MaxDepth {
				return invalid("parent", "%s would be at depth %d; at most %d", it.ID, depth, MaxDepth)
			}
			id = p.Parent
		}
	}
	memo := map[string]int{}
	var depth func(id string, path []string) (int, error)
	depth = func(id string, path []string) (int, error) {
		if id == it.ID {
			return 0, invalid("depends_on", "a cycle: %v", append(path, id))
		}
		if d, ok := memo[id]; ok {
			return d, nil
		}
		d, ok, err := Lookup(v, id)
		if err != nil {
			return 0, err
		}
		if !ok {
			return 0, invalid("depends_on", "no work item %s", id)
		}
		most := 0
		for _, dep := range d.DependsOn {
			n, err := depth(dep, append(path, id))
			if err != nil {
				return 0, err
			}
			most = max(most, n)
		}
		memo[id] = most + 1
		return most + 1, nil
	}
	most := 0
	for _, dep := range it.DependsOn {
		n, err := depth(dep, []string{it.ID})
		if err != nil {
			return err
		}
		most = max(most, n)
	}
	if most+1 > MaxDepth {
		return invalid("depends_on", "a chain of %d dependencies from %s; at most %d", most+1, it.ID, MaxDepth)
	}
	return nil
}

// record makes the event of a change.
func record(typ string, r Record, at time.Time) ([]ledger.Event, error) {
	p, err := ledger.MarshalPayload(r)
	if err != nil {
		return nil, err
	}
	return []ledger.Event{{ID: ledger.NewID(), Type: typ, OccurredAt: at.UnixNano(), Provenance: ledger.Told, Trust: ledger.High,
		Privacy: ledger.Internal, AggregateID: Aggregate(r.Item.ID), AggregateVersion: r.Item.Version, Payload: p}}, nil
}

// Projection is the name of the projection that keeps every item as it
// stands, by id.
const Projection = "work_items"

// Items is the projection: register it in ledger.Options.Projections.
type Items struct{}

func (Items) Name() string { return Projection }
func (Items) Types() []string {
	return []string{EventCreated, EventChanged, EventMoved, EventDue, EventStale}
}

func (Items) Apply(kv ledger.KV, e *ledger.Event) error {
	var r Record
	if err := ledger.UnmarshalPayload(e.Payload, &r); err != nil {
		return fmt.Errorf("work: %s %s: %w", e.Type, e.ID, err)
	}
	b, err := ledger.MarshalPayload(r.Item)
	if err != nil {
		return err
	}
	return kv.Put([]byte(r.Item.ID), b)
}

// Reader reads projections: a ledger.Store.
type Reader = ledger.ProjectionReader

// Get returns one item as it stands.
func Get(r Reader, id string) (Item, error) {
	it, found, err := ledger.ReadRecord[Item](r, Projection, []byte(id))
	switch {
	case err != nil:
		return Item{}, fmt.Errorf("work: %w", err)
	case !found:
		return Item{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return it, nil
}

// List returns the items as they stand, by id; keep selects (nil: all).
func List(r Reader, keep func(*Item) bool) ([]Item, error) {
	var out []Item
	err := r.ReadProjection(Projection, func(kv ledger.ReadKV) error {
		return kv.ForEach(func(k, b []byte) error {
			var it Item
			if err := ledger.UnmarshalPayload(b, &it); err != nil {
				return fmt.Errorf("item %s: %w", k, err)
			}
			if keep == nil || keep(&it) {
				out = append(out, it)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("work: %w", err)
	}
	return out, nil
}

// AsStale finds a *StaleError in err.
func AsStale(err error) (*StaleError, bool) {
	var s *StaleError
	ok := errors.As(err, &s)
	return s, ok
}
