// Package work keeps the agent's work items on the body: what it is
// doing, what would finish it, what it waits for and what it depends on.
// The ledger is their fact source: every change is a ledger command
// (Create, Change, Move) whose event carries the item as it is after the
// change, checked against the item's version (optimistic concurrency: a
// stale version is refused with the current item), and the projection
// work_items keeps every item as it stands, so that a start reads them
// and never the history.
//
// Events (class audit: kept for ever, sent):
//
//	work.created   an item, at version 1
//	work.changed   its fields changed (goal, criteria, owner, ...)
//	work.moved     its status changed, with the reason
//	work.due       its next_check_at came (the scheduler): cleared, once
//	work.stale     no progress for longer than the stale bound (the
//	               scheduler), once until progress comes
package work

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Status is where a work item is in its life.
type Status string

// The statuses. closed and cancelled are final.
const (
	Draft         Status = "draft"          // written down, not yet taken on
	Open          Status = "open"           // taken on, not yet ready to work on
	Ready         Status = "ready"          // can be worked on now
	Running       Status = "running"        // being worked on
	Blocked       Status = "blocked"        // waits for something named in blocked_on
	WaitingDevice Status = "waiting_device" // waits for the body or one of its devices
	AwaitingUser  Status = "awaiting_user"  // waits for a person
	Verifiable    Status = "verifiable"     // done, to be checked against done_when
	Closed        Status = "closed"         // checked: done
	Cancelled     Status = "cancelled"      // given up
)

// Statuses lists every status, in the order of an item's life.
var Statuses = []Status{Draft, Open, Ready, Running, Blocked, WaitingDevice, AwaitingUser, Verifiable, Closed, Cancelled}

// moves are the allowed transitions: from each status, where it may go.
// An item is closed only from verifiable (its criteria are checked
// first); a failed check sends it back to running or ready. Every status
// but the final ones may be cancelled.
var moves = map[Status][]Status{
	Draft:         {Open, Cancelled},
	Open:          {Ready, Blocked, WaitingDevice, AwaitingUser, Cancelled},
	Ready:         {Running, Open, Blocked, WaitingDevice, AwaitingUser, Cancelled},
	Running:       {Verifiable, Ready, Blocked, WaitingDevice, AwaitingUser, Cancelled},
	Blocked:       {Open, Ready, Cancelled},
	WaitingDevice: {Ready, Running, Blocked, Cancelled},
	AwaitingUser:  {Ready, Running, Blocked, Cancelled},
	Verifiable:    {Closed, Running, Ready, Cancelled},
	Closed:        nil,
	Cancelled:     nil,
}

// Valid tells whether s is one of the statuses.
func (s Status) Valid() bool { _, ok := moves[s]; return ok }

// Final tells whether nothing follows s.
func (s Status) Final() bool { return s == Closed || s == Cancelled }

// CanMove tells whether an item may go from s to to.
func (s Status) CanMove(to Status) bool { return slices.Contains(moves[s], to) }

// Active tells whether an item in s is being pursued: it can go stale.
func (s Status) Active() bool {
	switch s {
	case Open, Ready, Running, Blocked, WaitingDevice, AwaitingUser, Verifiable:
		return true
	}
	return false
}

// BlockedOnDependencies is what a blocked item waiting for its
// dependencies says it is blocked on: the scheduler makes it ready when
// the last of them closes.
const BlockedOnDependencies = "depends_on"

// Requirement is what an item needs of a body: a capability (gpio.set),
// or one of this body's devices by its channel id (camera.front).
type Requirement struct {
	Capability string `cbor:"capability,omitempty" json:"capability,omitempty"`
	Device     string `cbor:"device,omitempty" json:"device,omitempty"`
}

// Budget is how many interruptions an item may cause in a window.
type Budget struct {
	Max     int   `cbor:"max" json:"max"`
	WindowS int64 `cbor:"window_s" json:"window_s"`
}

// Item is a work item as it stands.
type Item struct {
	ID       string   `cbor:"id" json:"id"`
	Goal     string   `cbor:"goal" json:"goal"`
	DoneWhen []string `cbor:"done_when" json:"done_when"`
	Status   Status   `cbor:"status" json:"status"`
	// Owner is who pursues it (a principal's name).
	Owner     string       `cbor:"owner,omitempty" json:"owner,omitempty"`
	Requires  *Requirement `cbor:"requires,omitempty" json:"requires,omitempty"`
	BlockedOn string       `cbor:"blocked_on,omitempty" json:"blocked_on,omitempty"`
	Parent    string       `cbor:"parent,omitempty" json:"parent,omitempty"`
	DependsOn []string     `cbor:"depends_on,omitempty" json:"depends_on,omitempty"`
	// AuthProfile names the authorization profile its actions run under.
	AuthProfile string  `cbor:"auth_profile,omitempty" json:"auth_profile,omitempty"`
	Budget      *Budget `cbor:"interrupt_budget,omitempty" json:"interrupt_budget,omitempty"`
	// Times are Unix milliseconds by the wall clock of the change (0:
	// none): what decides on them (the scheduler) reads them with the
	// body's clock and its steps.
	NextCheckAt    int64 `cbor:"next_check_at,omitempty" json:"next_check_at,omitempty"`
	CreatedAt      int64 `cbor:"created_at" json:"created_at"`
	LastProgressAt int64 `cbor:"last_progress_at" json:"last_progress_at"`
	// Version is the item's version: 1 when created, one more each change.
	Version uint64 `cbor:"version" json:"version"`
	// StaleSince is when the scheduler found it stale (0: it is not, or
	// progress came since): it says so once.
	StaleSince int64 `cbor:"stale_since,omitempty" json:"stale_since,omitempty"`
	// Source is the event a follow-up the body made was made for.
	Source string `cbor:"source,omitempty" json:"source,omitempty"`
}

// Stale tells whether an active item has made no progress for longer
// than after, at now.
func (it *Item) Stale(now time.Time, after time.Duration) bool {
	return it.Status.Active() && after > 0 && now.Sub(time.UnixMilli(it.LastProgressAt)) > after
}

// Limits on what an item holds: it is written to the ledger with every
// change, and read at every start.
const (
	MaxText     = 1000 // bytes of a goal or a criterion
	MaxCriteria = 16
	MaxDepends  = 16
	MaxIDLen    = 64
	// MaxDepth bounds a chain of parents, and of dependencies: an item
	// with no parent is at depth 1.
	MaxDepth = 3
)

// Errors. Each is wrapped with what was wrong, naming the field.
var (
	ErrInvalid  = errors.New("work: invalid")
	ErrNotFound = errors.New("work: no such work item")
	ErrExists   = errors.New("work: a work item with that id exists")
	ErrMove     = errors.New("work: move not allowed")
	ErrFinal    = errors.New("work: the work item is closed or cancelled")
	ErrStale    = errors.New("work: stale version")
)

// StaleError is a change that expected another version of the item: it
// carries the item as it is now, to decide again on.
type StaleError struct {
	Expected uint64
	Current  Item
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("work: %s is at version %d, not %d: read it again and decide on it", e.Current.ID, e.Current.Version, e.Expected)
}

func (e *StaleError) Unwrap() error { return ErrStale }

func invalid(field, format string, a ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, a...))
}

// checkID checks an item's id: letters, digits, '-', '_', '.', ':'.
func checkID(field, id string) error {
	if id == "" {
		return invalid(field, "empty")
	}
	if len(id) > MaxIDLen {
		return invalid(field, "%d bytes, at most %d", len(id), MaxIDLen)
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_.:", c)) {
			return invalid(field, "%q is not allowed in an id (letters, digits, - _ . :)", c)
		}
	}
	return nil
}

func checkText(field, s string) error {
	switch {
	case strings.TrimSpace(s) == "":
		return invalid(field, "empty")
	case len(s) > MaxText:
		return invalid(field, "%d bytes, at most %d", len(s), MaxText)
	case !utf8.ValidString(s):
		return invalid(field, "not UTF-8")
	}
	return nil
}

// CheckGoal checks an item's goal and its acceptance criteria (at
// least one); the error names the field.
func CheckGoal(goal string, doneWhen []string) error {
	if err := checkText("goal", goal); err != nil {
		return err
	}
	if len(doneWhen) == 0 {
		return invalid("done_when", "at least one acceptance criterion")
	}
	if len(doneWhen) > MaxCriteria {
		return invalid("done_when", "%d criteria, at most %d", len(doneWhen), MaxCriteria)
	}
	for i, c := range doneWhen {
		if err := checkText(fmt.Sprintf("done_when[%d]", i), c); err != nil {
			return err
		}
	}
	return nil
}

// check checks the item's own fields (not its references).
func (it *Item) check() error {
	if err := checkID("id", it.ID); err != nil {
		return err
	}
	if err := CheckGoal(it.Goal, it.DoneWhen); err != nil {
		return err
	}
	if !it.Status.Valid() {
		return invalid("status", "%q is not a status", it.Status)
	}
	for _, f := range []struct{ name, v string }{{"owner", it.Owner}, {"blocked_on", it.BlockedOn}, {"auth_profile", it.AuthProfile}} {
		if len(f.v) > MaxText {
			return invalid(f.name, "%d bytes, at most %d", len(f.v), MaxText)
		}
	}
	if r := it.Requires; r != nil {
		switch {
		case (r.Capability == "") == (r.Device == ""):
			return invalid("requires", "a capability or a device, one of them")
		case len(r.Capability) > MaxIDLen || len(r.Device) > MaxIDLen:
			return invalid("requires", "longer than %d bytes", MaxIDLen)
		}
	}
	if b := it.Budget; b != nil && (b.Max < 0 || b.WindowS <= 0) {
		return invalid("interrupt_budget", "max ≥ 0 interruptions in a window_s > 0 seconds")
	}
	if it.Parent != "" {
		if err := checkID("parent", it.Parent); err != nil {
			return err
		}
		if it.Parent == it.ID {
			return invalid("parent", "an item is not its own parent")
		}
	}
	if len(it.DependsOn) > MaxDepends {
		return invalid("depends_on", "%d items, at most %d", len(it.DependsOn), MaxDepends)
	}
	for i, d := range it.DependsOn {
		if err := checkID(fmt.Sprintf("depends_on[%d]", i), d); err != nil {
			return err
		}
		if d == it.ID {
			return invalid("depends_on", "an item does not depend on itself")
		}
		if slices.Contains(it.DependsOn[:i], d) {
			return invalid("depends_on", "%s twice", d)
		}
	}
	if it.Status == Blocked && it.BlockedOn == "" {
		return invalid("blocked_on", "a blocked item says what it is blocked on")
	}
	if it.NextCheckAt < 0 {
		return invalid("next_check_at", "before 1970")
	}
	return nil
}
