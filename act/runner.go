package act

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/ledger"
)

// Status is where an invocation is in its lifecycle.
type Status string

// Lifecycle: proposed → (waiting_approval → approved) → running →
// succeeded / failed / cancelled / compensated, or unknown when the
// outcome cannot be confirmed.
const (
	Proposed        Status = "proposed"
	WaitingApproval Status = "waiting_approval"
	Approved        Status = "approved"
	Running         Status = "running"
	Succeeded       Status = "succeeded"
	Failed          Status = "failed"
	Cancelled       Status = "cancelled"
	Refused         Status = "refused"
	Compensated     Status = "compensated"
	Unknown         Status = "unknown"
)

// Final tells whether nothing follows s.
func (s Status) Final() bool {
	switch s {
	case Succeeded, Failed, Cancelled, Refused, Compensated, Unknown:
		return true
	}
	return false
}

// Invocation is one request to act.
type Invocation struct {
	// ActionID is given by the runner.
	ActionID string `cbor:"action_id" json:"action_id"`
	// IdempotencyKey makes a repeat return the recorded result instead of
	// acting again; the runner derives one from the action id if empty.
	IdempotencyKey string            `cbor:"idempotency_key" json:"idempotency_key"`
	WorkItemID     string            `cbor:"workitem_id,omitempty" json:"workitem_id,omitempty"`
	Principal      Principal         `cbor:"-" json:"-"`
	Capability     string            `cbor:"capability" json:"capability"`
	Target         string            `cbor:"target" json:"target"`
	Params         map[string]string `cbor:"params,omitempty" json:"params,omitempty"`
	// Precondition and ExpectedPostcondition are what the channel checks
	// before and verifies after, in its words ("relay1 low" / "relay1 high").
	Precondition          string `cbor:"precondition,omitempty" json:"precondition,omitempty"`
	ExpectedPostcondition string `cbor:"expected_postcondition,omitempty" json:"expected_postcondition,omitempty"`
	// Timeout bounds the action (Do); 0 means DefaultTimeout. A request
	// of a Timed action that would not finish within it is refused
	// before it runs.
	Timeout  time.Duration `cbor:"-" json:"-"`
	Mode     Mode          `cbor:"mode" json:"mode"`
	CausedBy *Observation  `cbor:"-" json:"-"`
	Approval string        `cbor:"approval,omitempty" json:"approval,omitempty"`
	Note     string        `cbor:"note,omitempty" json:"note,omitempty"`

	// prepared is what a Preparer loaded for this invocation; never
	// recorded.
	prepared any
	// grant is the grant the policy allowed it under ("" for none: a
	// local administrator's, a stop); evidence what its action kept
	// (SetEvidence).
	grant, evidence string
}

// Grant is the id of the grant the policy allowed inv under, or "" when
// none was needed (a local administrator below R3). Set before Prepare.
func (inv *Invocation) Grant() string { return inv.grant }

// SetEvidence names the evidence an action kept for inv (a snapshot's
// id): its result carries it (Result.Evidence).
func (inv *Invocation) SetEvidence(id string) { inv.evidence = id }

// SetPrepared keeps what a Preparer loaded for inv.
func (inv *Invocation) SetPrepared(v any) { inv.prepared = v }

// Prepared is what a Preparer loaded for inv, or nil.
func (inv *Invocation) Prepared() any { return inv.prepared }

// Verification is the independent check after an action.
type Verification struct {
	// Result is "verified", "failed" or "unknown".
	Result   string `cbor:"result" json:"result"`
	Evidence string `cbor:"evidence" json:"evidence"`
}

// Result is what became of an invocation.
type Result struct {
	ActionID     string        `cbor:"action_id" json:"action_id"`
	Status       Status        `cbor:"status" json:"status"`
	Decision     Decision      `cbor:"-" json:"decision"`
	Reason       Reason        `cbor:"reason,omitempty" json:"reason,omitempty"`
	Detail       string        `cbor:"detail,omitempty" json:"detail,omitempty"`
	Verification *Verification `cbor:"verification,omitempty" json:"verification,omitempty"`
	Receipt      string        `cbor:"receipt,omitempty" json:"receipt,omitempty"`
	// Evidence is the id of what the action kept to be looked at (a
	// camera.snapshot's image, an audio.clip's sound), when it kept one.
	Evidence string `cbor:"evidence,omitempty" json:"evidence,omitempty"`
	// CancelledBy is who cancelled the action, with caller_cancelled:
	// the principal that asked for it, which cancelled its own request.
	CancelledBy *Cancellation `cbor:"cancelled_by,omitempty" json:"cancelled_by,omitempty"`
	// Repeat is true when this is the recorded result of an earlier
	// invocation with the same idempotency key: nothing was done again.
	Repeat bool `cbor:"-" json:"repeat,omitempty"`
}

// Action is one action channel's capability, as the runner drives it.
type Action interface {
	Capability() Capability
	// Channel is the registry id of the channel that offers the
	// capability on target ("gpio.relay1"), or an error naming what is
	// wrong with target or params.
	Channel(target string, params map[string]string) (string, error)
	// Do acts; it returns a receipt for the record. It must stop when ctx
	// is cancelled (e-stop, timeout, the owning session's end, its
	// caller's cancellation of the request) and leave the world safe.
	Do(ctx context.Context, inv *Invocation) (string, error)
	// Verify reads the world back, independently of Do's own report.
	Verify(ctx context.Context, inv *Invocation) Verification
}

// Timed is an Action that knows before it runs how long a request keeps
// it busy (a pulse, a tone, a clip). The runner refuses one that would
// not finish within the invocation's timeout with invalid_request, before
// anything is recorded as running: it could only be cut short and fail.
// Limits of the target itself (an output's MaxOn, a speaker's MaxClip)
// are Channel's to check.
type Timed interface {
	// Duration is how long Do of inv takes when it is not cut short, and
	// what in its params says so, for a refusal to name
	// ("params.duration_ms 999999999"). An error means target or params
	// are wrong; Channel names what. For a Preparer it is asked after
	// Prepare, so it may use what Prepare loaded.
	Duration(inv *Invocation) (d time.Duration, what string, err error)
}

// Preparer is an Action whose request needs something read from outside
// the request before it can run or be timed (a clip from its file). The
// runner calls Prepare only once the policy has allowed the request (for
// an R3 one, once it is approved), before the lease and before anything
// is recorded as running; a request the policy refuses never reaches a
// file. An error refuses the request with invalid_request. What Prepare
// loads it keeps in inv (SetPrepared) for Duration and Do.
type Preparer interface {
	Prepare(inv *Invocation) error
}

// DefaultTimeout bounds an invocation that gives no Timeout.
const DefaultTimeout = 30 * time.Second

// timeoutOf is inv's effective timeout.
func timeoutOf(inv *Invocation) time.Duration {
	if inv.Timeout > 0 {
		return inv.Timeout
	}
	return DefaultTimeout
}

// fits says why a request of a Timed action cannot finish within inv's
// effective timeout, or nil when it can (or a is not Timed).
func fits(a Action, inv *Invocation) error {
	t, ok := a.(Timed)
	if !ok {
		return nil
	}
	d, what, err := t.Duration(inv)
	if err != nil {
		return err
	}
	if timeout := timeoutOf(inv); d >= timeout {
		return fmt.Errorf("%s: lasts %v, which does not fit in the action's timeout of %v", what, d, timeout)
	}
	return nil
}

// Compensator is an Action that can undo what it did when it failed: the
// runner calls Compensate after a failed action or verification of a
// reversible capability, and records the invocation compensated when it
// succeeds. It returns what it did, read back.
type Compensator interface {
	Compensate(ctx context.Context, inv *Invocation) (string, error)
}

// Journal is where the runner records every step: the ledger.
type Journal interface {
	Append(ctx context.Context, events ...ledger.Event) ([]ledger.Result, error)
}

// Environment is what the policy needs to know about the body now.
type Environment struct {
	EStop    *EStop
	Registry *body.Registry
	// Health returns the self-state level.
	Health func() body.Degradation
	// Grants returns every grant (Grants.All).
	Grants func() []Grant
	Rules  SafetyRules
	// Limiter is the rate limit per principal and capability, taken by
	// the requests the policy allows; nil: none.
	Limiter *Limiter
	// Admission is the rate limit per principal, taken by every request
	// before anything of it is recorded, the ones the policy will refuse
	// included (NewAdmission); nil: none. A request over it is refused
	// with rate_limited and counted in its principal's refusal summary,
	// not recorded on its own.
	Admission *Limiter
	Leases    *LeaseTable
	// Clock is the body's clock: grants and the policy judge by it, and
	// everything else the runner times (leases, approvals, refusal
	// summaries) by its Now, which carries the monotonic reading. nil
	// (tests of a bare Environment only): a clock of Now that counts
	// itself synchronised and has no boot id.
	Clock Clock
	// Now is the runner's time for leases, approvals and refusal
	// summaries; nil: Clock.Now. Tests set it to move time by hand.
	Now      func() time.Time
	NewID    func() string
	LeaseTTL time.Duration
	// ApprovalTTL is how long an R3 invocation waits for a local
	// administrator before it is cancelled with approval_expired; 0 means
	// DefaultApprovalTTL.
	ApprovalTTL time.Duration

	// CapabilityModes are the config's modes by capability name (shadow,
	// disabled); a capability not named is enabled.
	CapabilityModes map[string]body.State
}

// Runner is the only path to side effects. Submit runs an invocation
// through policy, a lease, the action and its verification, recording
// each step in the journal before it is taken; CancelAll (the e-stop) and
// EndSession cancel what runs and what waits for approval, and a caller
// cancels what its own request runs by ending Submit's context with
// CallerCancel. An R3
// invocation waits for a local administrator (Approve, Deny); Run
// expires and records what waits.
type Runner struct {
	env     Environment
	journal Journal

	// approving serialises the records of waiting invocations (their
	// waiting_approval, approved and cancelled records) so that each
	// invocation's records are in lifecycle order. CancelAll and
	// EndSession never take it.
	approving sync.Mutex

	mu       sync.Mutex // the runner's own: never held while the journal or an action is waited on
	actions  map[string]Action
	sims     map[string]Action // the same capabilities over the simulated driver
	running  map[string]*run   // by action id
	byKey    map[string]*flight
	ledgerOK bool
	waiting  map[string]*pending // by action id: R3 invocations waiting for approval
	ended    []*pending          // cancelled while waiting; their records are still to be written
	wake     chan struct{}       // tells Run that ended or waiting changed
	// decided remembers what became of the last invocations that left
	// the queue, oldest first in decidedOrder.
	decided      map[string]*pending
	decidedOrder []string
	// refusals are the tallies of the refusals not recorded one by one,
	// by principal subject (refusals.go).
	refusals map[string]*tally
}

type run struct {
	inv    *Invocation
	cancel context.CancelCauseFunc
}

// flight is one idempotency key's invocation: later callers with the
// same key wait for its result.
type flight struct {
	done  chan struct{}
	res   Result // guarded by Runner.mu
	ended time.Time
	// settled is set when an invocation that waited for approval came to
	// its end: res is then that end, not what Submit first answered.
	settled bool
}

// keepFlights is how long a finished invocation's result is kept in memory
// for repeats; later repeats are found through the ledger's dedupe keys
// (kept as long as the audit records that set them: for ever).
const keepFlights = 10 * time.Minute

// NewRunner makes a runner that records to j.
func NewRunner(env Environment, j Journal) *Runner {
	if env.Clock == nil {
		env.Clock = nowClock{now: time.Now}
		if env.Now != nil {
			env.Clock = nowClock{now: env.Now}
		}
	}
	if env.Now == nil {
		env.Now = env.Clock.Now
	}
	if env.NewID == nil {
		env.NewID = func() string { return ledger.NewID().String() }
	}
	if env.LeaseTTL == 0 {
		env.LeaseTTL = 30 * time.Second
	}
	if env.ApprovalTTL <= 0 {
		env.ApprovalTTL = DefaultApprovalTTL
	}
	return &Runner{env: env, journal: j, actions: map[string]Action{}, sims: map[string]Action{}, running: map[string]*run{}, byKey: map[string]*flight{}, ledgerOK: true,
		waiting: map[string]*pending{}, wake: make(chan struct{}, 1), refusals: map[string]*tally{}}
}

// Register adds an action channel's capability; a second one with the
// same name is refused.
func (r *Runner) Register(a Action) error { return r.register(r.actions, "capability", a) }

// RegisterSimulated adds the simulated twin of a capability: an action
// of the same name over the simulated driver, which simulation-mode
// requests run against instead of the hardware. A capability without one
// refuses simulation mode.
func (r *Runner) RegisterSimulated(a Action) error {
	return r.register(r.sims, "simulated capability", a)
}

func (r *Runner) register(to map[string]Action, what string, a Action) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	name := a.Capability().Name
	if _, dup := to[name]; dup {
		return fmt.Errorf("act: %s %q registered twice", what, name)
	}
	to[name] = a
	return nil
}

// Capabilities lists what the runner can do, by name.
func (r *Runner) Capabilities() []Capability {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Capability
	for _, a := range r.actions {
		out = append(out, a.Capability())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// RiskCovered is the highest risk of what a grant of capability (a
// pattern) on scope (a pattern) would cover on this body now, and what
// that is ("gpio.set on gpio.relay1"); R0 and "" when it covers nothing
// the runner has. A capability whose risk depends on its target (an
// output's own risk) counts the targets scope covers.
func (r *Runner) RiskCovered(capability, scope string) (Risk, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := make([]string, 0, len(r.actions))
	for name := range r.actions {
		names = append(names, name)
	}
	sort.Strings(names)
	top, what := R0, ""
	for _, name := range names {
		if !MatchPattern(capability, name) {
			continue
		}
		a := r.actions[name]
		rt, perTarget := a.(interface{ RiskOf(string) Risk })
		ts, listed := a.(interface{ Targets() []string })
		if !perTarget || !listed {
			if risk := a.Capability().Risk; risk > top || what == "" {
				top, what = risk, name
			}
			continue
		}
		for _, t := range ts.Targets() {
			if !MatchPattern(scope, t) {
				continue
			}
			if risk := rt.RiskOf(t); risk > top || what == "" {
				top, what = risk, name+" on "+t
			}
		}
	}
	return top, what
}

// cancelCause carries the reason into the record, and who cancelled
// with caller_cancelled.
type cancelCause struct {
	reason Reason
	by     *Cancellation
}

func (c cancelCause) Error() string { return string(c.reason) }

// CancelAll cancels every running invocation and every one waiting for
// approval (the e-stop's path: it takes only the runner's own lock and
// waits for nothing) and returns their ids. The waiting ones can no
// longer be approved; their cancelled records are written by Run (or the
// next Approve, Deny or SweepApprovals), never on this path.
func (r *Runner) CancelAll(reason Reason) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, 0, len(r.running)+len(r.waiting))
	for id, ru := range r.running {
		ru.cancel(cancelCause{reason: reason})
		ids = append(ids, id)
	}
	for id, p := range r.waiting {
		r.endWaitingLocked(p, reason, "cancelled while it waited for approval: "+string(reason))
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// EndSession cancels what the session owns (its transport dropped): what
// runs, and what waits for approval.
func (r *Runner) EndSession(session string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for id, ru := range r.running {
		if ru.inv.Principal.Session == session {
			ru.cancel(cancelCause{reason: ReasonSessionEnded})
			ids = append(ids, id)
		}
	}
	for id, p := range r.waiting {
		if p.inv.Principal.Session == session {
			r.endWaitingLocked(p, "session_ended", "the session that asked for it ended while it waited for approval")
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// Runs tells whether session has an action running, or waiting for an
// approval.
func (r *Runner) Runs(session string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ru := range r.running {
		if ru.inv.Principal.Session == session {
			return true
		}
	}
	for _, p := range r.waiting {
		if p.inv.Principal.Session == session {
			return true
		}
	}
	return false
}

// CancelGrant cancels what runs under grant id (its revocation) with
// reason, and returns the actions it cancelled.
func (r *Runner) CancelGrant(id string, reason Reason) []string {
	if id == "" {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for aid, run := range r.running {
		if run.inv.grant == id {
			run.cancel(cancelCause{reason: reason})
			out = append(out, aid)
		}
	}
	return out
}

// CancelTarget cancels what runs on target for anyone but a local
// administrator (a person took the resource over: the agent's actions on
// it stop, a person's own go on) and returns their ids.
func (r *Runner) CancelTarget(target string, reason Reason) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for id, ru := range r.running {
		if ru.inv.Target == target && ru.inv.Principal.Kind != LocalAdmin {
			ru.cancel(cancelCause{reason: reason})
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// Submit runs inv and returns what became of it. A repeat of an
// idempotency key already seen returns that invocation's result (waiting
// for it if it still runs) and acts no second time.
//
// Before anything of it is recorded, inv is checked against the bounds
// of a request (CheckInvocation) and takes a token of its principal's
// admission limit (Environment.Admission; a stop, estop.trip, takes
// none): a request that fails either is refused with invalid_request or
// rate_limited, without an action id, and only counted in its
// principal's refusal summary (FlushRefusals). Repeats take a token too.
//
// The action runs to its end whether or not ctx ends first (what stops
// it is the e-stop, its timeout, its session's end), unless ctx ends
// with a CallerCancel cause: its caller cancelled the request, and the
// action is cancelled with caller_cancelled (Result.CancelledBy).
func (r *Runner) Submit(ctx context.Context, inv Invocation) Result {
	if err := CheckInvocation(&inv); err != nil {
		return r.refuseUnrecorded(inv.Principal, inv.Capability, ReasonInvalidRequest, err.Error())
	}
	if l := r.env.Admission; l != nil && inv.Capability != CapabilityEStopTrip && !l.Take(inv.Principal.Subject, admissionKey) {
		return r.refuseUnrecorded(inv.Principal, inv.Capability, ReasonRateLimited,
			fmt.Sprintf("%s sent more requests than its admission limit allows; this one was not recorded, only counted in its %s summary", inv.Principal.Subject, EventRefusals))
	}
	if inv.IdempotencyKey == "" {
		inv.IdempotencyKey = r.env.NewID()
	}
	key := inv.Principal.Subject + "\x00" + inv.IdempotencyKey
	r.mu.Lock()
	if f, ok := r.byKey[key]; ok {
		r.mu.Unlock()
		select {
		case <-f.done:
			r.mu.Lock()
			res := f.res
			r.mu.Unlock()
			res.Repeat = true
			return res
		case <-ctx.Done():
			return Result{Status: Unknown, Detail: "gave up waiting for the first invocation with this key: " + ctx.Err().Error(), Repeat: true}
		}
	}
	f := &flight{done: make(chan struct{})}
	r.byKey[key] = f
	if len(r.byKey) > 1024 {
		now := r.env.Now()
		for k, old := range r.byKey {
			if !old.ended.IsZero() && now.Sub(old.ended) > keepFlights {
				delete(r.byKey, k)
			}
		}
	}
	r.mu.Unlock()
	res := r.submit(ctx, &inv, key)
	r.mu.Lock()
	if !f.settled {
		f.res = res
	}
	f.ended = r.env.Now()
	r.mu.Unlock()
	close(f.done)
	return res
}

// refuseUnrecorded answers a request refused before anything of it was
// recorded, and counts it in its principal's refusal summary.
func (r *Runner) refuseUnrecorded(p Principal, capability string, reason Reason, detail string) Result {
	r.countRefusal(p, capability, reason)
	return Result{Status: Refused, Reason: reason, Detail: detail, Decision: Decision{Reason: reason, Detail: detail}}
}

// settle records in the key's flight what became of an invocation that
// waited for approval, so a repeat returns it.
func (r *Runner) settle(key string, res Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f, ok := r.byKey[key]; ok {
		f.res, f.settled, f.ended = res, true, r.env.Now()
	}
}

func (r *Runner) submit(ctx context.Context, inv *Invocation, key string) Result {
	inv.ActionID = r.env.NewID()
	if inv.Mode == "" {
		inv.Mode = Live
	}
	r.mu.Lock()
	a := r.actions[inv.Capability]
	var noSim error
	if inv.Mode == Simulation {
		// Never the hardware: the simulated twin, or nothing.
		if a = r.sims[inv.Capability]; a == nil && r.actions[inv.Capability] != nil {
			a = r.actions[inv.Capability] // decided as itself, then refused
			noSim = fmt.Errorf("mode simulation: %s has no simulated driver on this body", inv.Capability)
		}
	}
	r.mu.Unlock()
	var capab Capability
	var channel string
	var chErr error
	if a != nil {
		capab = a.Capability()
		if rt, ok := a.(interface{ RiskOf(string) Risk }); ok {
			capab.Risk = rt.RiskOf(inv.Target)
		}
		channel, chErr = a.Channel(inv.Target, inv.Params)
		if _, later := a.(Preparer); chErr == nil && !later {
			chErr = fits(a, inv) // a Preparer's is known once it is prepared (execute)
		}
	} else {
		capab = Capability{Name: inv.Capability, Risk: R3}
	}
	// proposed, with the decision: the record comes before anything else.
	d := r.decide(inv, capab, channel, nil)
	switch {
	case a == nil:
		d = Decision{Reason: ReasonUnknownCapability, Detail: fmt.Sprintf("no channel offers %q", inv.Capability)}
	case chErr != nil && (d.Allow || d.AwaitsApproval || d.Reason == ReasonUnknownCapability):
		d = Decision{Reason: ReasonInvalidRequest, Detail: chErr.Error()}
	case noSim != nil && (d.Allow || d.AwaitsApproval):
		d = Decision{Reason: ReasonInvalidRequest, Detail: noSim.Error()}
	case inv.Approval != "" && (d.Allow || d.Reason == ReasonApprovalRequired):
		// An approval is given by a local administrator to an invocation
		// that waits (Approve), never carried in by a request.
		d = Decision{Reason: ReasonInvalidRequest, Detail: "approval: set by the body when a local administrator approves a waiting invocation, never by a request"}
	case d.AwaitsApproval:
		d = r.mayWait(inv, capab, d)
	}
	proposed := map[string]any{"decision": decisionView(d), "risk": capab.Risk.String(), "principal": inv.Principal.Subject,
		"session": inv.Principal.Session, "mode": string(inv.Mode)}
	if o := inv.CausedBy; o != nil {
		// What the decision weighed of the cause, so the record says why
		// it was allowed or refused.
		proposed["caused_by"] = causeRecord{EventID: o.EventID, Provenance: o.Provenance.String(), Observed: o.Observed, Trust: o.Trust.String()}
	}
	dup, err := r.recordProposed(ctx, inv, proposed)
	switch {
	case errors.Is(err, ledger.ErrInvalid):
		// The ledger refused the record for what it holds: the request
		// is at fault, not the ledger, which takes the next one.
		res := r.refuseUnrecorded(inv.Principal, inv.Capability, ReasonInvalidRequest, err.Error())
		res.ActionID = inv.ActionID
		return res
	case err != nil:
		return Result{ActionID: inv.ActionID, Status: Refused, Reason: ReasonLedgerUnavailable, Detail: err.Error(), Decision: Decision{Reason: ReasonLedgerUnavailable}}
	}
	if dup != nil {
		return *dup // the same key was proposed before (before a restart): its record is the answer
	}
	if d.AwaitsApproval {
		return r.wait(ctx, &pending{inv: inv, a: a, capab: capab, channel: channel, d: d, key: key})
	}
	if !d.Allow {
		res := Result{ActionID: inv.ActionID, Status: Refused, Decision: d, Reason: d.Reason, Detail: d.Detail}
		r.recordResult(inv, res)
		return res
	}
	return r.execute(ctx, inv, a, capab, d)
}

// execute takes an allowed invocation through its lease, its running
// record, the action and its verification.
func (r *Runner) execute(ctx context.Context, inv *Invocation, a Action, capab Capability, d Decision) Result {
	inv.grant = d.Grant
	if p, ok := a.(Preparer); ok {
		err := p.Prepare(inv)
		if err == nil {
			err = fits(a, inv)
		}
		if err != nil {
			res := Result{ActionID: inv.ActionID, Status: Refused, Reason: ReasonInvalidRequest, Detail: err.Error(),
				Decision: Decision{Reason: ReasonInvalidRequest, Detail: err.Error()}}
			r.recordResult(inv, res)
			return res
		}
	}
	// A lease on a shared resource, checked again (fencing) just before
	// acting, and released on every return: a shadow, an e-stop before
	// the start, a record that could not be written and a failed fencing
	// check end the invocation as surely as the action's end does. A
	// simulation shares no resource with the hardware: it takes none.
	var epoch uint64
	leased := false
	if capab.Shared && r.env.Leases != nil && inv.Mode != Simulation {
		holder := HolderOf(inv.Principal)
		l, ld := r.env.Leases.Acquire(inv.Target, holder, r.env.LeaseTTL, r.env.Now())
		switch {
		case ld.Allow:
			epoch, leased = l.Epoch, true
			// A lease the e-stop or a person took meanwhile is no longer
			// this holder's at this epoch: Release then changes nothing.
			defer r.env.Leases.Release(inv.Target, holder, epoch)
		case ld.Reason == ReasonHumanControl && inv.Principal.Kind == LocalAdmin:
			// A person at the device took the resource over; a local
			// administrator is a person at the device too, and acts beside
			// the hold, without a lease, leaving the hold in place.
			d.Detail += "; beside a person's hold (" + ld.Detail + ")"
		default:
			res := Result{ActionID: inv.ActionID, Status: Refused, Decision: ld, Reason: ld.Reason, Detail: ld.Detail}
			r.recordResult(inv, res)
			return res
		}
	}
	if inv.Mode == Shadow {
		res := Result{ActionID: inv.ActionID, Status: Succeeded, Decision: d, Receipt: "shadow: recorded, nothing done",
			Verification: &Verification{Result: "unknown", Evidence: "shadow mode acts on nothing"}}
		r.recordResult(inv, res)
		return res
	}
	// running: durable before the side effect.
	actx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	r.mu.Lock()
	r.running[inv.ActionID] = &run{inv: inv, cancel: cancel}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.running, inv.ActionID)
		r.mu.Unlock()
		cancel(nil)
	}()
	// The action outlives its caller's context, but not the caller's own
	// cancellation of its request (CallerCancel): that cancels it too.
	stopWatching := context.AfterFunc(ctx, func() {
		if by := callerCancelled(ctx, inv); by != nil {
			cancel(cancelCause{reason: ReasonCallerCancelled, by: by})
		}
	})
	defer stopWatching()
	// The e-stop may have tripped since the decision: it is checked again
	// with the invocation registered, so a trip now either sees it and
	// cancels it, or came before and is seen here.
	if r.env.EStop != nil && r.env.EStop.Latched() {
		res := Result{ActionID: inv.ActionID, Status: Cancelled, Reason: ReasonEStopLatched, Detail: "the e-stop tripped before the action started"}
		r.recordResult(inv, res)
		return res
	}
	if by := callerCancelled(ctx, inv); by != nil {
		res := Result{ActionID: inv.ActionID, Status: Cancelled, Reason: ReasonCallerCancelled, CancelledBy: by,
			Detail: "its caller cancelled the request before the action started" + by.why()}
		r.recordResult(inv, res)
		return res
	}
	if err := r.record(ctx, inv, Running, nil); err != nil {
		res := Result{ActionID: inv.ActionID, Status: Refused, Reason: ReasonLedgerUnavailable, Detail: err.Error()}
		return res
	}
	if leased {
		if fd := r.env.Leases.Check(inv.Target, HolderOf(inv.Principal), epoch, r.env.Now()); !fd.Allow {
			res := Result{ActionID: inv.ActionID, Status: Cancelled, Reason: fd.Reason, Detail: fd.Detail}
			r.recordResult(inv, res)
			return res
		}
	}
	// The timeout bounds the action itself, not the records before it,
	// so what was found to fit in it when it was decided does.
	timeout := timeoutOf(inv)
	dctx, stopTimeout := context.WithTimeout(actx, timeout)
	defer stopTimeout()
	receipt, err := a.Do(dctx, inv)
	res := Result{ActionID: inv.ActionID, Decision: d, Receipt: receipt, Evidence: inv.evidence}
	switch {
	case context.Cause(dctx) != nil && errors.As(context.Cause(dctx), new(cancelCause)):
		var cc cancelCause
		errors.As(context.Cause(dctx), &cc)
		res.Status, res.Reason = Cancelled, cc.reason
		res.Detail = "cancelled: " + string(cc.reason)
		if cc.by != nil {
			res.CancelledBy = cc.by
			res.Detail += " by " + cc.by.Subject + cc.by.why()
		}
	case errors.Is(dctx.Err(), context.DeadlineExceeded):
		res.Status, res.Detail = Failed, fmt.Sprintf("timed out after %v", timeout)
	case err != nil:
		res.Status, res.Detail = Failed, err.Error()
	}
	// Independent verification, whatever Do said.
	vctx, vcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	v := a.Verify(vctx, inv)
	vcancel()
	res.Verification = &v
	if res.Status == "" {
		switch v.Result {
		case "verified":
			res.Status = Succeeded
		case "failed":
			res.Status, res.Detail = Failed, "verification failed: "+v.Evidence
		default:
			res.Status, res.Detail = Unknown, "the result could not be confirmed: "+v.Evidence
		}
	}
	// A reversible action that acted but failed its verification is undone
	// where it can be: compensated, which is not success either.
	if c, ok := a.(Compensator); ok && res.Status == Failed && v.Result == "failed" && err == nil && capab.Reversible {
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		what, err := c.Compensate(cctx, inv)
		ccancel()
		if err != nil {
			res.Detail += "; compensation failed: " + err.Error()
		} else {
			res.Status, res.Detail = Compensated, res.Detail+"; compensated: "+what
		}
	}
	r.recordResult(inv, res)
	return res
}

// causeRecord is the cause an invocation named (its CausedBy), as its
// proposal records it: the event, its provenance and trust by name, and
// whether the body observed or verified what it says.
type causeRecord struct {
	EventID    string `cbor:"event_id" json:"event_id"`
	Provenance string `cbor:"provenance" json:"provenance"`
	Observed   bool   `cbor:"observed" json:"observed"`
	Trust      string `cbor:"trust" json:"trust"`
}

func decisionView(d Decision) map[string]string {
	m := map[string]string{"allow": fmt.Sprint(d.Allow)}
	if d.Reason != "" {
		m["reason"] = string(d.Reason)
	}
	if d.Detail != "" {
		m["detail"] = d.Detail
	}
	if d.AwaitsApproval {
		m["awaits_approval"] = "true"
	}
	return m
}

// decide asks the policy with the body's state now. Without approvals it
// is a new request's decision, rate limited; with them it is the decision
// again at the moment a local administrator approved, which is not
// counted a second time.
func (r *Runner) decide(inv *Invocation, c Capability, channel string, approvals []Approval) Decision {
	st := State{Clock: ReadClock(r.env.Clock), Rules: r.env.Rules, Health: body.LevelCritical, EStopLatched: true}
	if e := r.env.EStop; e != nil {
		st.EStopLatched, st.EStopVerified = e.Latched(), e.Verified()
	}
	if r.env.Health != nil {
		st.Health = r.env.Health()
	}
	if r.env.Grants != nil {
		st.Grants = r.env.Grants()
	}
	if r.env.Registry != nil && channel != "" {
		if ch, err := r.env.Registry.Get(channel); err == nil {
			st.Channel, st.ChannelHealth = ch.State, ch.Health
		}
	}
	st.CapabilityMode = r.env.CapabilityModes[c.Name]
	r.mu.Lock()
	st.LedgerWritable = r.ledgerOK
	r.mu.Unlock()
	st.Approvals = approvals
	req := Request{Principal: inv.Principal, Capability: c, Target: inv.Target, Mode: inv.Mode, CausedBy: inv.CausedBy,
		Approval: inv.Approval, Invocation: inv.ActionID, Note: inv.Note}
	if approvals != nil {
		return Decide(req, st)
	}
	return Authorize(req, st, r.env.Limiter)
}

// record appends one lifecycle step. A failure to write marks the ledger
// unwritable for the policy (nothing above R0 until a write succeeds
// again); a record the ledger refuses for what it holds does not.
func (r *Runner) record(ctx context.Context, inv *Invocation, s Status, extra map[string]any) error {
	_, err := r.append(ctx, inv, s, extra, "")
	return err
}

// append writes one action record (with a dedupe key for the proposal)
// and notes for the policy whether the ledger took it.
func (r *Runner) append(ctx context.Context, inv *Invocation, s Status, extra map[string]any, dedupe string) ([]ledger.Result, error) {
	payload := map[string]any{"status": string(s), "invocation": inv}
	for k, v := range extra {
		payload[k] = v
	}
	p, err := ledger.MarshalPayload(payload)
	if err != nil {
		return nil, err
	}
	ev := ledger.Event{Type: "action." + string(s), ChannelID: inv.Capability, Provenance: ledger.Told, Trust: inv.Principal.Trust,
		Privacy: ledger.Internal, AggregateID: "action:" + inv.ActionID, DedupeKey: dedupe, Payload: p}
	res, err := r.journal.Append(context.WithoutCancel(ctx), ev)
	r.noteLedger(err)
	switch {
	case errors.Is(err, ledger.ErrInvalid):
		return nil, fmt.Errorf("act: the ledger refused the record of %s %s: %w", inv.ActionID, s, err)
	case err != nil:
		return nil, fmt.Errorf("act: the record of %s %s could not be written: %w", inv.ActionID, s, err)
	}
	return res, nil
}

// noteLedger notes for the policy whether the ledger takes records, from
// what an append returned: an error wrapping ledger.ErrInvalid is about
// the record (an id too long, a payload too big), which the ledger
// refused before writing anything, and changes nothing.
func (r *Runner) noteLedger(err error) {
	if errors.Is(err, ledger.ErrInvalid) {
		return
	}
	r.mu.Lock()
	r.ledgerOK = err == nil
	r.mu.Unlock()
}

// recordProposed records the proposal. When the ledger already holds a
// proposal with the same idempotency key (a repeat after a restart, when
// the runner's memory of it is gone), it returns that invocation's
// recorded outcome instead, and nothing is done again.
func (r *Runner) recordProposed(ctx context.Context, inv *Invocation, extra map[string]any) (*Result, error) {
	res, err := r.append(ctx, inv, Proposed, extra, "action:"+inv.Principal.Subject+":"+inv.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	if len(res) == 1 && res[0].Archived {
		// Its records are in the archive, which the runner does not
		// read at a request: the key is refused, nothing is done.
		return &Result{Status: Unknown, Repeat: true, Detail: "a repeat of an idempotency key used before the ledger's audit_keep: " +
			"nothing was done again; what became of the first is in the archive (tobe-body ledger events --archive)"}, nil
	}
	if len(res) == 1 && res[0].Duplicate {
		prev := r.recorded(res[0].Seq)
		prev.Repeat = true
		return &prev, nil
	}
	return nil, nil
}

// recorded finds what became of the invocation proposed at seq: the
// proposal names its action, and the action_results projection holds the
// status of its last record and the last result recorded.
func (r *Runner) recorded(seq uint64) Result {
	unknown := Result{Status: Unknown, Detail: "a repeat of an earlier invocation whose outcome could not be read back"}
	store, ok := r.journal.(interface {
		Events(ledger.Filter) ([]ledger.Stored, error)
	})
	if !ok || seq == 0 {
		return unknown
	}
	first, err := store.Events(ledger.Filter{After: seq - 1, Limit: 1})
	if err != nil || len(first) != 1 || first[0].Seq != seq {
		return unknown
	}
	id := actionOf(&first[0].Event)
	if id == "" {
		return unknown
	}
	res, err := r.Lookup(id)
	if err != nil {
		return unknown
	}
	if !res.Status.Final() {
		res.Detail = "a repeat of an invocation that has not finished"
	}
	return res
}

// ErrNoLedger: the runner records to no ledger it can read back.
var ErrNoLedger = errors.New("act: the ledger is not open")

// ErrNoSuchAction: no action of that id, or of that principal's key.
var ErrNoSuchAction = errors.New("act: no such action")

// projections is the ledger as the runner reads its projections back.
type projections = ledger.ProjectionReader

// Lookup returns what became of the action id, as the ledger holds it:
// its last status and result (ErrNoSuchAction when the ledger has none).
func (r *Runner) Lookup(id string) (Result, error) {
	store, ok := r.journal.(projections)
	if !ok {
		return Result{}, ErrNoLedger
	}
	ar, found, err := ledger.ReadRecord[actionResult](store, projResults, []byte(id))
	switch {
	case err != nil:
		return Result{}, fmt.Errorf("act: the result of %s: %w", id, err)
	case !found:
		return Result{}, fmt.Errorf("%w: %q", ErrNoSuchAction, id)
	}
	res := Result{ActionID: id, Status: ar.Status}
	if ar.Result != nil {
		var prev Result
		if ledger.UnmarshalPayload(ar.Result, &prev) == nil {
			prev.Status, prev.ActionID = ar.Status, id
			res = prev
		}
	}
	return res, nil
}

// LookupKey returns what became of the action subject asked for with the
// idempotency key (keys are each principal's own).
func (r *Runner) LookupKey(subject, key string) (Result, error) {
	store, ok := r.journal.(projections)
	if !ok {
		return Result{}, ErrNoLedger
	}
	var id string
	if err := store.ReadProjection(projKeys, func(kv ledger.ReadKV) error {
		id = string(kv.Get(keyOf(subject, key)))
		return nil
	}); err != nil {
		return Result{}, fmt.Errorf("act: the action of key %q: %w", key, err)
	}
	if id == "" {
		return Result{}, fmt.Errorf("%w with idempotency key %q of %s", ErrNoSuchAction, key, subject)
	}
	return r.Lookup(id)
}

func (r *Runner) recordResult(inv *Invocation, res Result) {
	extra := map[string]any{"result": res}
	r.record(context.Background(), inv, res.Status, extra)
}

// Recover runs at start, before any request: invocations the ledger
// shows as started but never finished (the body stopped while they ran)
// are not run again. Outputs start at their safe levels, so what such an
// action did cannot be confirmed: each is recorded as unknown, for a
// person to look at. Invocations that were waiting for approval, or
// approved but not yet running, did nothing: each is recorded cancelled
// with approval_expired. It returns their ids, in the order of the ids.
// It reads the actions_open projection (see Projections), not the
// history. An action whose record cannot be read is left as it is and
// named in the error; the others are still recorded.
func (r *Runner) Recover(ctx context.Context, store *ledger.Store) ([]string, error) {
	type left struct {
		id string
		st openAction
	}
	var open []left
	err := store.ReadProjection(projOpen, func(kv ledger.ReadKV) error {
		return kv.ForEach(func(k, v []byte) error {
			var st openAction
			if err := ledger.UnmarshalPayload(v, &st); err != nil {
				return fmt.Errorf("action %s: %w", k, err)
			}
			open = append(open, left{string(k), st})
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("act: recover: %w", err)
	}
	var ids []string
	var errs []error
	for _, o := range open {
		var p map[string]cbor.RawMessage
		var inv Invocation
		if err := ledger.UnmarshalPayload(o.st.Payload, &p); err != nil {
			errs = append(errs, fmt.Errorf("act: recover %s: %w", o.id, err))
			continue
		}
		if err := ledger.UnmarshalPayload(p["invocation"], &inv); err != nil {
			errs = append(errs, fmt.Errorf("act: recover %s: %w", o.id, err))
			continue
		}
		if inv.ActionID != o.id {
			errs = append(errs, fmt.Errorf("act: recover %s: its record is of action %q", o.id, inv.ActionID))
			continue
		}
		res := Result{ActionID: inv.ActionID, Status: Unknown,
			Detail: "the body stopped while this action was " + string(o.st.Status) + "; it was not run again, and its outputs started at their safe levels"}
		switch o.st.Status {
		case WaitingApproval, Approved:
			// Nothing was done: running is recorded before any side
			// effect. An approval belongs to the moment and the session
			// it was asked in, and neither survives a restart, so what
			// waited is cancelled rather than kept for an approval later.
			res = Result{ActionID: inv.ActionID, Status: Cancelled, Reason: ReasonApprovalExpired,
				Detail: "the body stopped while this action was " + string(o.st.Status) + "; nothing was done, and it will not run: ask again"}
		}
		if err := r.record(ctx, &inv, res.Status, map[string]any{"result": res}); err != nil {
			return ids, errors.Join(append(errs, err)...)
		}
		ids = append(ids, inv.ActionID)
	}
	return ids, errors.Join(errs...)
}
