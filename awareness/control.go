package awareness

import (
	"context"
	"errors"
	"time"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness/control/gate"
	"github.com/tobe-body/tobe-body/awareness/control/wait"
	"github.com/tobe-body/tobe-body/awareness/control/work"
	"github.com/tobe-body/tobe-body/ledger"
)

// The control plane's operations: the agent's work items and wait
// conditions, and the gate's explanations. They change what the body
// watches for and tells its agent, never what it may do: an agent or a
// local administrator at low trust.
var (
	OpWorkCreate = Op[work.Spec, work.Item]{Name: "work.create", Kind: Interact, Least: AdminOrAgent, Tool: Tool{Name: "work_create"},
		Description: "Leave a work item on the body: a goal and at least one acceptance criterion (done_when); status draft or open (the default). parent and depends_on name other items (at most 3 deep, no cycle)."}
	OpWorkUpdate = Op[WorkUpdateIn, work.Item]{Name: "work.update", Kind: Interact, Least: AdminOrAgent, Tool: Tool{Name: "work_update"},
		Description: "Change a work item at its version (a stale version is refused with the item as it is): its fields, progress (marks it fresh), and its status (with a reason; blocked names blocked_on)."}
	OpWorkClose = Op[WorkCloseIn, work.Item]{Name: "work.close", Kind: Interact, Least: AdminOrAgent, Tool: Tool{Name: "work_close"},
		Description: "Close a running or verifiable work item at its version: its criteria met (through verifiable), with a reason. Cancel one instead with work.update status cancelled."}
	OpWorkList = Op[WorkListIn, WorkList]{Name: "work.list", Kind: Observe, Least: AdminOrAgent, Tool: Tool{Name: "list_work", ReadOnly: true, Idempotent: true},
		Description: "The work items, with whether each is stale; all: closed and cancelled ones too."}
	OpWorkShow = Op[IDIn, work.Item]{Name: "work.show", Kind: Observe, Least: AdminOrAgent, Tool: Tool{Name: "show_work", ReadOnly: true, Idempotent: true},
		Description: "One work item as it stands."}
	OpWaitAdd = Op[WaitAddIn, wait.Condition]{Name: "wait.add", Kind: Interact, Least: AdminOrAgent, Tool: Tool{Name: "wait_add"},
		Description: "Leave a wait condition for a work item: the event types and channels it waits for (a name, or a prefix ending in a dot), clauses over the event's payload (equals, in, prefix, above/below, zone), a priority hint, a cooldown and an expiry (expires_in, a duration, or expires_at, RFC 3339): required, at most 90 days."}
	OpWaitRemove = Op[WaitRemoveIn, wait.Condition]{Name: "wait.remove", Kind: Interact, Least: AdminOrAgent, Tool: Tool{Name: "wait_remove"},
		Description: "Remove a wait condition."}
	OpWaitList = Op[WaitListIn, WaitList]{Name: "wait.list", Kind: Observe, Least: AdminOrAgent, Tool: Tool{Name: "list_waits", ReadOnly: true, Idempotent: true},
		Description: "The wait conditions that wait; all: removed ones too, with why they ended."}
	OpExplain = Op[ExplainIn, gate.Decision]{Name: "gate.explain", Kind: Observe, Least: AdminOrAgent, Tool: Tool{Name: "explain", ReadOnly: true, Idempotent: true},
		Description: "Why the body woke its agent for an event, or did not: the gate's decision and the path of rules that led to it."}
)

// WorkUpdateIn changes a work item.
type WorkUpdateIn struct {
	ID      string `json:"id"`
	Version uint64 `json:"version"`
	work.Patch
	// Status moves it (after the fields change), for Reason; a move to
	// blocked takes blocked_on for what it waits for.
	Status work.Status `json:"status,omitempty"`
	Reason string      `json:"reason,omitempty"`
}

// WorkCloseIn closes a work item.
type WorkCloseIn struct {
	ID      string `json:"id"`
	Version uint64 `json:"version"`
	Reason  string `json:"reason,omitempty"`
}

// WorkListIn selects work items.
type WorkListIn struct {
	All bool `json:"all,omitempty"`
}

// WorkList is the work items.
type WorkList struct {
	Items []WorkView `json:"items"`
}

// WorkView is an item with what is derived from it.
type WorkView struct {
	work.Item
	Stale bool `json:"stale"`
}

// IDIn names one thing.
type IDIn struct {
	ID string `json:"id"`
}

// WaitAddIn is a new wait condition.
type WaitAddIn struct {
	ID          string        `json:"id,omitempty"`
	Owner       string        `json:"owner"`
	EventTypes  []string      `json:"event_types"`
	Channels    []string      `json:"channels,omitempty"`
	Match       []wait.Clause `json:"match,omitempty"`
	Priority    wait.Priority `json:"priority,omitempty"`
	CooldownMS  int64         `json:"cooldown_ms,omitempty"`
	Dedupe      wait.Dedupe   `json:"dedupe,omitempty"`
	DedupeField string        `json:"dedupe_field,omitempty"`
	ExpiresIn   string        `json:"expires_in,omitempty"`
	ExpiresAt   string        `json:"expires_at,omitempty"`
	// FollowUp: each wake of the condition makes a work item under
	// Owner with this goal and these criteria, naming the event.
	FollowUp *wait.FollowUp `json:"follow_up,omitempty"`
	// Evidence: each wake also captures this (camera.snapshot or
	// audio.clip, with its params) on the channel of the event that
	// matched, as the caller and under its grants; the observation names
	// what was kept.
	Evidence *WaitEvidenceIn `json:"evidence,omitempty"`
}

// WaitEvidenceIn is the capture a wait condition asks for when it wakes.
type WaitEvidenceIn struct {
	Capability string            `json:"capability" jsonschema:"camera.snapshot or audio.clip"`
	Params     map[string]string `json:"params,omitempty" jsonschema:"the capability's params (crop: motion; after_ms: 3000)"`
}

// WaitRemoveIn removes a wait condition.
type WaitRemoveIn struct {
	ID  string `json:"id"`
	Why string `json:"why,omitempty"`
}

// WaitListIn selects wait conditions.
type WaitListIn struct {
	All bool `json:"all,omitempty"`
}

// WaitList is the wait conditions.
type WaitList struct {
	Conditions []wait.Condition `json:"conditions"`
}

// ExplainIn names the event to explain.
type ExplainIn struct {
	EventID string `json:"event_id"`
}

// StaleAfter is how long an active work item may go without progress
// before it is stale, unless the parts say otherwise.
const StaleAfter = 24 * time.Hour

// controlErr turns the control plane's errors into refusals that name
// their reason.
func controlErr(err error) error {
	var stale *work.StaleError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &stale):
		return refuse(ReasonConflict, "%v (it is at version %d, status %s)", stale, stale.Current.Version, stale.Current.Status)
	case errors.Is(err, work.ErrNotFound), errors.Is(err, wait.ErrNotFound):
		return refuse(ReasonNotFound, "%v", err)
	case errors.Is(err, work.ErrInvalid), errors.Is(err, wait.ErrInvalid), errors.Is(err, work.ErrMove), errors.Is(err, work.ErrFinal),
		errors.Is(err, work.ErrExists), errors.Is(err, wait.ErrExists), errors.Is(err, wait.ErrRemoved):
		return refuse(ReasonInvalidParams, "%v", err)
	}
	return refuse(ReasonFailed, "%v", err)
}

// ReasonConflict: the caller's version of what it changes is not the
// current one; Detail says what is.
const ReasonConflict act.Reason = "conflict"

func (b *Parts) exec(ctx context.Context, cmd ledger.Command) error {
	if b.Store == nil {
		return errNoLedger
	}
	_, err := b.Store.Execute(context.WithoutCancel(ctx), cmd)
	return controlErr(err)
}

// An agent's work items are its own: one it creates is owned by it
// unless it names no other owner (it may not), and it changes, closes and
// leaves or removes wait conditions only for the items it owns or that
// have no owner. A local administrator may do all of it. Items are
// checked as they stand before the command: an owner changes only by its
// owner, so the check cannot be overtaken by another's change.
func mayChange(p act.Principal, it work.Item) error {
	if p.Kind == act.LocalAdmin || it.Owner == "" || it.Owner == p.Subject {
		return nil
	}
	return refuse(ReasonNotAuthorized, "work item %s belongs to %s, not %s: only its owner or a local administrator changes it", it.ID, it.Owner, p.Subject)
}

// mayOwn refuses an agent's giving an item to another owner.
func mayOwn(p act.Principal, owner *string) error {
	if p.Kind == act.LocalAdmin || owner == nil || *owner == p.Subject {
		return nil
	}
	return refuse(ReasonNotAuthorized, "owner %q: an agent's work items are its own (%s); a local administrator gives them to another", *owner, p.Subject)
}

// ownedItem reads the item id for a change by p: nil when p may change
// it or it is not there (the command then says so).
func (b *Parts) ownedItem(p act.Principal, id string) error {
	it, err := work.Get(b.Store, id)
	if err != nil {
		return nil
	}
	return mayChange(p, it)
}

func (b *Parts) workCreate(ctx context.Context, p act.Principal, in work.Spec) (work.Item, error) {
	in.FollowUp = false
	if in.Owner == "" && p.Kind != act.LocalAdmin {
		in.Owner = p.Subject
	}
	if in.Owner != "" {
		if err := mayOwn(p, &in.Owner); err != nil {
			return work.Item{}, err
		}
	}
	c := work.NewCreate(in, p.Subject, b.Now())
	return c.Item, b.exec(ctx, c)
}

func (b *Parts) workUpdate(ctx context.Context, p act.Principal, in WorkUpdateIn) (work.Item, error) {
	now := b.Now()
	it := work.Item{ID: in.ID, Version: in.Version}
	blockedOn := ""
	if in.Status == work.Blocked && in.Patch.BlockedOn != nil {
		blockedOn, in.Patch.BlockedOn = *in.Patch.BlockedOn, nil
	}
	patched := !in.Patch.IsZero()
	if !patched && in.Status == "" {
		return it, refuse(ReasonInvalidParams, "nothing to change: fields, progress or a status")
	}
	if b.Store == nil {
		return it, errNoLedger
	}
	if err := b.ownedItem(p, in.ID); err != nil {
		return it, err
	}
	if err := mayOwn(p, in.Patch.Owner); err != nil {
		return it, err
	}
	if patched {
		c := &work.Change{ID: in.ID, Expected: in.Version, Patch: in.Patch, By: p.Subject, At: now}
		if err := b.exec(ctx, c); err != nil {
			return it, err
		}
		it = c.Item
	}
	if in.Status != "" {
		m := &work.Move{ID: in.ID, Expected: it.Version, To: in.Status, Reason: in.Reason, BlockedOn: blockedOn, By: p.Subject, At: now}
		if err := b.exec(ctx, m); err != nil {
			return it, err
		}
		it = m.Item
	}
	return it, nil
}

func (b *Parts) workClose(ctx context.Context, p act.Principal, in WorkCloseIn) (work.Item, error) {
	if b.Store == nil {
		return work.Item{}, errNoLedger
	}
	it, err := work.Get(b.Store, in.ID)
	if err != nil {
		return it, controlErr(err)
	}
	if err := mayChange(p, it); err != nil {
		return it, err
	}
	if it.Version != in.Version {
		return it, controlErr(&work.StaleError{Expected: in.Version, Current: it})
	}
	var path []work.Status
	switch it.Status {
	case work.Running:
		path = []work.Status{work.Verifiable, work.Closed}
	case work.Verifiable:
		path = []work.Status{work.Closed}
	default:
		return it, refuse(ReasonInvalidParams, "work item %s is %s: only a running or verifiable item closes (cancel it instead)", it.ID, it.Status)
	}
	for _, to := range path {
		m := &work.Move{ID: it.ID, Expected: it.Version, To: to, Reason: in.Reason, By: p.Subject, At: b.Now()}
		if err := b.exec(ctx, m); err != nil {
			return it, err
		}
		it = m.Item
	}
	return it, nil
}

func (b *Parts) workList(_ context.Context, _ act.Principal, in WorkListIn) (WorkList, error) {
	if b.Store == nil {
		return WorkList{}, errNoLedger
	}
	items, err := work.List(b.Store, func(it *work.Item) bool { return in.All || !it.Status.Final() })
	if err != nil {
		return WorkList{}, controlErr(err)
	}
	out := WorkList{Items: []WorkView{}}
	now, after := b.Now(), b.StaleAfter
	if after <= 0 {
		after = StaleAfter
	}
	for _, it := range items {
		out.Items = append(out.Items, WorkView{Item: it, Stale: it.Stale(now, after)})
	}
	return out, nil
}

func (b *Parts) workShow(_ context.Context, _ act.Principal, in IDIn) (work.Item, error) {
	if b.Store == nil {
		return work.Item{}, errNoLedger
	}
	it, err := work.Get(b.Store, in.ID)
	return it, controlErr(err)
}

func (b *Parts) waitAdd(ctx context.Context, p act.Principal, in WaitAddIn) (wait.Condition, error) {
	now := b.Now()
	c := wait.Condition{ID: in.ID, Owner: in.Owner, Types: in.EventTypes, Channels: in.Channels, Match: in.Match, Priority: in.Priority,
		CooldownMS: in.CooldownMS, Dedupe: in.Dedupe, DedupeField: in.DedupeField, FollowUp: in.FollowUp}
	if ev := in.Evidence; ev != nil {
		c.Evidence = &wait.Evidence{Capability: ev.Capability, Params: ev.Params, By: p.Subject, Kind: string(p.Kind), Trust: p.Trust}
	}
	switch {
	case in.ExpiresIn != "" && in.ExpiresAt != "":
		return c, refuse(ReasonInvalidParams, "expires_in or expires_at, not both")
	case in.ExpiresIn != "":
		d, err := time.ParseDuration(in.ExpiresIn)
		if err != nil || d <= 0 {
			return c, refuse(ReasonInvalidParams, "expires_in %q: a positive duration (90s, 10m, 2h)", in.ExpiresIn)
		}
		c.ExpiresAt = now.Add(d).UnixMilli()
	case in.ExpiresAt != "":
		t, err := time.Parse(time.RFC3339, in.ExpiresAt)
		if err != nil {
			return c, refuse(ReasonInvalidParams, "expires_at %q: an RFC 3339 time", in.ExpiresAt)
		}
		c.ExpiresAt = t.UnixMilli()
	}
	if b.Store == nil {
		return c, errNoLedger
	}
	if err := b.ownedItem(p, c.Owner); err != nil {
		return c, err
	}
	a := wait.NewAdd(c, p.Subject, now)
	if err := b.exec(ctx, a); err != nil {
		return a.Condition, err
	}
	return a.Condition, nil
}

func (b *Parts) waitRemove(ctx context.Context, p act.Principal, in WaitRemoveIn) (wait.Condition, error) {
	why := in.Why
	if why == "" {
		why = "removed by " + p.Subject
	}
	if b.Store == nil {
		return wait.Condition{}, errNoLedger
	}
	if c, err := wait.Get(b.Store, in.ID); err == nil { // none: the command says so
		if err := b.ownedItem(p, c.Owner); err != nil {
			return c, err
		}
	}
	r := &wait.Remove{ID: in.ID, Why: why, By: p.Subject, At: b.Now()}
	err := b.exec(ctx, r)
	return r.Condition, err
}

func (b *Parts) waitList(_ context.Context, _ act.Principal, in WaitListIn) (WaitList, error) {
	if b.Store == nil {
		return WaitList{}, errNoLedger
	}
	cs, err := wait.List(b.Store, func(c *wait.Condition) bool { return in.All || c.Removed == "" })
	if err != nil {
		return WaitList{}, controlErr(err)
	}
	if cs == nil {
		cs = []wait.Condition{}
	}
	return WaitList{Conditions: cs}, nil
}

func (b *Parts) explain(_ context.Context, _ act.Principal, in ExplainIn) (gate.Decision, error) {
	if b.Store == nil {
		return gate.Decision{}, errNoLedger
	}
	if in.EventID == "" {
		return gate.Decision{}, refuse(ReasonInvalidParams, "event_id: which event")
	}
	d, err := gate.Explain(b.Store, b.Pool, in.EventID, b.Now())
	if err != nil {
		return d, refuse(ReasonFailed, "%v", err)
	}
	return d, nil
}
