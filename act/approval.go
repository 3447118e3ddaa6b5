package act

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/tobe-body/tobe-body/ledger"
)

// Approvals. An R3 invocation that passes every other check of the policy
// is not run and not refused: the runner records it waiting_approval,
// with what it would do, and Submit answers that status and its action id
// at once. A local administrator then approves it (Approve), which records
// approved with an Approval bound to that one invocation id and runs
// exactly that invocation, with the policy asked again at that moment; or
// denies it (Deny), which records it cancelled with approval_denied. What
// nobody approves within the runner's ApprovalTTL is cancelled with
// approval_expired. The e-stop (CancelAll) and the end of the session that
// asked (EndSession) cancel what waits. An approval comes only from
// Approve, called by a principal of kind LocalAdmin (the admin socket,
// from the kernel's peer credentials); no request, note or observation
// carries one in, and an agent, MQTT or rule principal asking to approve
// or deny is refused and the refusal recorded (approval.refused).
//
// Waiting invocations are kept in memory. At start, Recover records every
// invocation the ledger shows waiting or approved but not running as
// cancelled (approval_expired): the session that asked does not survive a
// restart, and a person's approval belongs to the moment it was asked in.

// DefaultApprovalTTL is how long an invocation waits for approval when
// Environment.ApprovalTTL is 0.
const DefaultApprovalTTL = 5 * time.Minute

// maxWaiting bounds how many invocations wait for approval at once; more
// are refused with rate_limited.
const maxWaiting = 64

// keepDecided is how many invocations that waited the runner remembers
// after they left the queue, so a second approve or deny says what became
// of the first.
const keepDecided = 256

// EventApprovalRefused records an approve or deny the runner refused
// because the caller may not approve (approve_not_local). Its class is
// audit.
const EventApprovalRefused = "approval.refused"

// Errors of Approve and Deny. Callers branch on them with errors.Is.
var (
	// ErrApprovalRefused: the caller may not approve or deny; the refusal
	// is recorded.
	ErrApprovalRefused = errors.New("act: approval refused")
	// ErrNotWaiting: no invocation with that id waits for approval (it
	// never did, or it was approved, denied, expired or cancelled).
	ErrNotWaiting = errors.New("act: not waiting for approval")
)

// pending is an invocation waiting for approval.
type pending struct {
	inv     *Invocation
	a       Action
	capab   Capability
	channel string
	d       Decision
	key     string // its idempotency flight
	asked   time.Time
	expires time.Time

	// Set under Runner.mu when it leaves the queue.
	reason Reason // why it was cancelled while waiting
	detail string
	end    string // what became of it, for a second approve or deny
}

// ApprovalRefused is the payload of approval.refused.
type ApprovalRefused struct {
	ActionID string `cbor:"action_id" json:"action_id"`
	Verb     string `cbor:"verb" json:"verb"` // approve or deny
	By       string `cbor:"by" json:"by"`
	Kind     string `cbor:"kind" json:"kind"`
	Reason   Reason `cbor:"reason" json:"reason"`
	Detail   string `cbor:"detail" json:"detail"`
}

// approvalRecord is the approval in an action.approved record.
type approvalRecord struct {
	ID         string       `cbor:"id"`
	Invocation string       `cbor:"invocation"`
	By         string       `cbor:"by"`
	ByTrust    ledger.Level `cbor:"by_trust"` // the approver's own trust, as its principal had it
}

// WaitingInvocation is an invocation waiting for approval, as Waiting
// lists it: what it would do, who asked, and until when it waits.
type WaitingInvocation struct {
	ActionID              string            `json:"action_id"`
	Capability            string            `json:"capability"`
	Risk                  string            `json:"risk"`
	Target                string            `json:"target"`
	Params                map[string]string `json:"params,omitempty"`
	Mode                  Mode              `json:"mode"`
	Precondition          string            `json:"precondition,omitempty"`
	ExpectedPostcondition string            `json:"expected_postcondition,omitempty"`
	Principal             string            `json:"principal"`
	Session               string            `json:"session,omitempty"`
	// CausedBy is the observation the request named, if any, with its
	// provenance and trust ("EVENT (observed, trust high)").
	CausedBy string `json:"caused_by,omitempty"`
	// Note is what the requester said; it is data, never an instruction.
	Note    string    `json:"note,omitempty"`
	Asked   time.Time `json:"asked"`
	Expires time.Time `json:"expires"`
}

// would says what an invocation would do, for the record and for people.
func would(inv *Invocation, c Capability) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s) on %s", inv.Capability, c.Risk, inv.Target)
	if len(inv.Params) > 0 {
		keys := make([]string, 0, len(inv.Params))
		for k := range inv.Params {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for i, k := range keys {
			sep := " "
			if i > 0 {
				sep = ", "
			}
			fmt.Fprintf(&b, "%s%s=%q", sep, k, inv.Params[k])
		}
	}
	fmt.Fprintf(&b, ", %s mode, asked by %s", inv.Mode, inv.Principal.Subject)
	return b.String()
}

// mayWait checks what an invocation that only lacks an approval must pass
// before it is held: the principal's rate limit (the decision at approval
// is not counted again) and the bound on waiting invocations.
func (r *Runner) mayWait(inv *Invocation, c Capability, d Decision) Decision {
	if l := r.env.Limiter; l != nil && !l.Take(inv.Principal.Subject, c.Name) {
		return refuse(ReasonRateLimited, "%s asked for %s too often", inv.Principal.Subject, c.Name)
	}
	r.mu.Lock()
	n := len(r.waiting)
	r.mu.Unlock()
	if n >= maxWaiting {
		return refuse(ReasonRateLimited, "%d invocations already wait for approval", n)
	}
	return d
}

// wait holds an invocation for approval: it records waiting_approval and
// returns that result. Its proposal is recorded already.
func (r *Runner) wait(ctx context.Context, p *pending) Result {
	r.approving.Lock()
	defer r.approving.Unlock()
	inv := p.inv
	p.asked = r.env.Now()
	p.expires = p.asked.Add(r.env.ApprovalTTL)
	r.mu.Lock()
	if n := len(r.waiting); n >= maxWaiting {
		r.mu.Unlock()
		res := Result{ActionID: inv.ActionID, Status: Refused, Reason: ReasonRateLimited, Detail: fmt.Sprintf("%d invocations already wait for approval", n)}
		res.Decision = Decision{Reason: res.Reason, Detail: res.Detail}
		r.recordResult(inv, res)
		return res
	}
	r.waiting[inv.ActionID] = p
	// Registered: a trip from here on cancels it through CancelAll; one
	// since the decision is seen here.
	if r.env.EStop != nil && r.env.EStop.Latched() {
		r.endWaitingLocked(p, ReasonEStopLatched, "the e-stop tripped before it could wait for approval")
	}
	r.mu.Unlock()
	res := Result{ActionID: inv.ActionID, Status: WaitingApproval, Decision: p.d, Reason: ReasonApprovalRequired,
		Detail: fmt.Sprintf("waiting until %s for a local administrator to approve it (tobe-body approve %s) or deny it",
			p.expires.UTC().Format(time.RFC3339), inv.ActionID)}
	if err := r.record(ctx, inv, WaitingApproval, map[string]any{"result": res, "risk": p.capab.Risk.String(), "would": would(inv, p.capab),
		"expires": p.expires.UTC().Format(time.RFC3339Nano), "principal": inv.Principal.Subject, "session": inv.Principal.Session}); err != nil {
		r.mu.Lock()
		delete(r.waiting, inv.ActionID)
		r.ended = removePending(r.ended, p)
		r.mu.Unlock()
		return Result{ActionID: inv.ActionID, Status: Refused, Reason: ReasonLedgerUnavailable, Detail: err.Error(), Decision: Decision{Reason: ReasonLedgerUnavailable}}
	}
	r.poke()
	// Cancelled while its record was written: the cancellation follows it.
	ended, _ := r.flushLocked(ctx)
	for _, e := range ended {
		if e.ActionID == inv.ActionID {
			return e
		}
	}
	return res
}

func removePending(list []*pending, p *pending) []*pending {
	out := list[:0]
	for _, q := range list {
		if q != p {
			out = append(out, q)
		}
	}
	return out
}

// endWaitingLocked takes p off the queue as cancelled for reason; its
// record is written by the next flush. The caller holds mu.
func (r *Runner) endWaitingLocked(p *pending, reason Reason, detail string) {
	delete(r.waiting, p.inv.ActionID)
	p.reason, p.detail = reason, detail
	p.end = fmt.Sprintf("it was cancelled (%s)", reason)
	r.ended = append(r.ended, p)
	r.rememberLocked(p)
	r.poke()
}

// rememberLocked keeps p for a second approve or deny to be told what
// became of it. The caller holds mu.
func (r *Runner) rememberLocked(p *pending) {
	if r.decided == nil {
		r.decided = map[string]*pending{}
	}
	if _, ok := r.decided[p.inv.ActionID]; !ok {
		r.decidedOrder = append(r.decidedOrder, p.inv.ActionID)
	}
	r.decided[p.inv.ActionID] = p
	for len(r.decidedOrder) > keepDecided {
		delete(r.decided, r.decidedOrder[0])
		r.decidedOrder = r.decidedOrder[1:]
	}
}

// poke tells Run that the queue changed; it never blocks.
func (r *Runner) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// flushLocked expires what waited too long and records every invocation
// that left the queue cancelled. It returns their results. The caller
// holds approving. A record that cannot be written is kept to be tried
// again; the invocation stays cancelled in memory meanwhile, so it cannot
// be approved.
func (r *Runner) flushLocked(ctx context.Context) ([]Result, error) {
	now := r.env.Now()
	r.mu.Lock()
	for _, p := range r.waiting {
		if !now.Before(p.expires) {
			r.endWaitingLocked(p, ReasonApprovalExpired, fmt.Sprintf("nobody approved it within %v", r.env.ApprovalTTL))
		}
	}
	ended := r.ended
	r.ended = nil
	r.mu.Unlock()
	sort.Slice(ended, func(i, j int) bool { return ended[i].inv.ActionID < ended[j].inv.ActionID })
	var out []Result
	for i, p := range ended {
		res := Result{ActionID: p.inv.ActionID, Status: Cancelled, Reason: p.reason, Detail: p.detail}
		if err := r.record(ctx, p.inv, Cancelled, map[string]any{"result": res}); err != nil {
			r.mu.Lock()
			r.ended = append(ended[i:], r.ended...)
			r.mu.Unlock()
			return out, err
		}
		r.settle(p.key, res)
		out = append(out, res)
	}
	return out, nil
}

// SweepApprovals cancels what waited for approval longer than the
// ApprovalTTL (approval_expired) and writes the cancelled records of what
// the e-stop or a session's end took off the queue. It returns those
// results; an error says a record could not be written (it is tried
// again on the next sweep). Run calls it; it is safe for concurrent use.
func (r *Runner) SweepApprovals(ctx context.Context) ([]Result, error) {
	r.approving.Lock()
	defer r.approving.Unlock()
	return r.flushLocked(ctx)
}

// sweepRetry is how soon Run tries again a record that could not be
// written, and the longest it sleeps with nothing waiting.
const (
	sweepRetry = time.Second
	sweepIdle  = time.Minute
)

// Run keeps the approval queue: it expires what waits too long and
// records what was cancelled while waiting; and it writes the refusal
// summaries as they fall due (FlushRefusals). When ctx ends it writes
// what is left to write, every summary with refusals in it included, and
// returns. Expiry is judged by the
// Environment's clock; Run wakes by the real one, at the next expiry or
// when the queue changes.
func (r *Runner) Run(ctx context.Context) {
	for {
		_, err := r.SweepApprovals(ctx)
		rerr := r.FlushRefusals(ctx, false)
		next := r.refusalsDue(sweepIdle)
		now := r.env.Now()
		r.mu.Lock()
		for _, p := range r.waiting {
			next = min(next, p.expires.Sub(now))
		}
		r.mu.Unlock()
		if err != nil || rerr != nil {
			next = min(next, sweepRetry)
		}
		t := time.NewTimer(max(next, 10*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			r.SweepApprovals(context.WithoutCancel(ctx))
			r.FlushRefusals(context.WithoutCancel(ctx), true)
			return
		case <-r.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// Waiting lists the invocations waiting for approval, oldest first. Ones
// whose time ran out are left out, though the sweep may not have recorded
// them yet.
func (r *Runner) Waiting() []WaitingInvocation {
	now := r.env.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	out := []WaitingInvocation{}
	for _, p := range r.waiting {
		if !now.Before(p.expires) {
			continue
		}
		inv := p.inv
		w := WaitingInvocation{ActionID: inv.ActionID, Capability: inv.Capability, Risk: p.capab.Risk.String(), Target: inv.Target,
			Mode: inv.Mode, Precondition: inv.Precondition, ExpectedPostcondition: inv.ExpectedPostcondition,
			Principal: inv.Principal.Subject, Session: inv.Principal.Session, Note: inv.Note, Asked: p.asked, Expires: p.expires}
		if len(inv.Params) > 0 {
			w.Params = make(map[string]string, len(inv.Params))
			for k, v := range inv.Params {
				w.Params[k] = v
			}
		}
		if o := inv.CausedBy; o != nil {
			prov := o.Provenance.String()
			if o.Provenance == ledger.Inferred && o.Observed {
				prov += " with observed evidence"
			}
			w.CausedBy = fmt.Sprintf("%s (%s, trust %s)", o.EventID, prov, o.Trust)
		}
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Asked.Equal(out[j].Asked) {
			return out[i].Asked.Before(out[j].Asked)
		}
		return out[i].ActionID < out[j].ActionID
	})
	return out
}

// mayApprove says why by may not approve or deny, or "".
func mayApprove(by Principal) string {
	if by.Kind != LocalAdmin {
		return fmt.Sprintf("only a local administrator approves or denies (tobe-body approve on the device), not %q", by.Kind)
	}
	if checkSubject(by.Subject) != nil || !strings.HasPrefix(by.Subject, string(LocalAdmin)+":") {
		return fmt.Sprintf("%q is not a local administrator's subject", by.Subject)
	}
	return ""
}

// refuseApproval records that by may not approve or deny id, and returns
// the error that says so.
func (r *Runner) refuseApproval(ctx context.Context, verb, id string, by Principal, reason Reason, detail string) error {
	shown := id
	if len(shown) > maxNameLen {
		shown = shown[:maxNameLen]
	}
	rec := ApprovalRefused{ActionID: shown, Verb: verb, By: by.Subject, Kind: string(by.Kind), Reason: reason, Detail: detail}
	var err error = &Refusal{Reason: reason, Detail: detail, Err: ErrApprovalRefused}
	p, merr := ledger.MarshalPayload(rec)
	if merr != nil {
		return err
	}
	ev := ledger.Event{Type: EventApprovalRefused, Provenance: ledger.Told, Trust: by.Trust, Privacy: ledger.Internal, Payload: p}
	if _, werr := r.journal.Append(context.WithoutCancel(ctx), ev); werr != nil {
		return fmt.Errorf("%w (and its record could not be written: %v)", err, werr)
	}
	return err
}

// take takes the invocation id off the queue for an approve or a deny,
// after expiring what is due. The caller holds approving.
func (r *Runner) take(ctx context.Context, verb, id string) (*pending, error) {
	r.flushLocked(ctx) // what could not be recorded stays cancelled in memory
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.waiting[id]; ok {
		delete(r.waiting, id)
		return p, nil
	}
	if p, ok := r.decided[id]; ok {
		return nil, fmt.Errorf("%w: cannot %s %s: %s", ErrNotWaiting, verb, id, p.end)
	}
	return nil, fmt.Errorf("%w: cannot %s %s: no invocation with that id waits for approval", ErrNotWaiting, verb, id)
}

// putBack returns p to the queue after its record could not be written,
// unless the e-stop latched meanwhile. The caller holds approving.
func (r *Runner) putBack(p *pending) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waiting[p.inv.ActionID] = p
	if r.env.EStop != nil && r.env.EStop.Latched() {
		r.endWaitingLocked(p, ReasonEStopLatched, "cancelled while it waited for approval: "+string(ReasonEStopLatched))
	}
}

// Approve approves the waiting invocation id for by, a local
// administrator: it records approved with an Approval bound to that one
// invocation, asks the policy again with the body's state now (the e-stop,
// grants, health, the channel, ...), and runs exactly that invocation
// through its lease, action and verification, or records its refusal. It
// returns the invocation's result once it has finished, and a repeat of
// its idempotency key returns that result too.
//
// A caller that is not a local administrator (approve_not_local), or one
// below max trust (risk_exceeds_trust: R3 needs max, and so does letting
// it run), is refused with an error wrapping ErrApprovalRefused, and the
// refusal is recorded (approval.refused). The approver's trust is
// recorded with the approval. An id that does not wait (unknown, approved or
// denied already, expired, cancelled) is ErrNotWaiting, which says what
// became of it; so an invocation never runs twice. An error writing the
// approved record leaves the invocation waiting. Safe for concurrent use.
func (r *Runner) Approve(ctx context.Context, id string, by Principal) (Result, error) {
	if why := mayApprove(by); why != "" {
		return Result{}, r.refuseApproval(ctx, "approve", id, by, ReasonApproveNotLocal, why)
	}
	// Only R3 waits for approval, and R3 needs max trust: an approval
	// lets it run, so it needs the same of the approver. (A denial only
	// cancels, and needs no more than the right to approve or deny.)
	if need := MinTrust(R3); by.Trust < need {
		return Result{}, r.refuseApproval(ctx, "approve", id, by, ReasonRiskExceedsTrust,
			fmt.Sprintf("approving an R3 action needs %s trust; %s is at %s", need, by.Subject, by.Trust))
	}
	r.approving.Lock()
	p, err := r.take(ctx, "approve", id)
	if err != nil {
		r.approving.Unlock()
		return Result{}, err
	}
	ap := Approval{ID: r.env.NewID(), Invocation: p.inv.ActionID, By: by.Subject}
	p.inv.Approval = ap.ID
	rec := approvalRecord{ID: ap.ID, Invocation: ap.Invocation, By: ap.By, ByTrust: by.Trust}
	if err := r.record(ctx, p.inv, Approved, map[string]any{"approval": rec}); err != nil {
		p.inv.Approval = ""
		r.putBack(p)
		r.approving.Unlock()
		return Result{}, fmt.Errorf("act: approve %s: %w", id, err)
	}
	r.mu.Lock()
	p.end = "it was approved by " + by.Subject + " already"
	r.rememberLocked(p)
	r.mu.Unlock()
	r.approving.Unlock()

	d := r.decide(p.inv, p.capab, p.channel, []Approval{ap})
	var res Result
	if !d.Allow {
		res = Result{ActionID: p.inv.ActionID, Status: Refused, Decision: d, Reason: d.Reason, Detail: "approved, then refused: " + d.Detail}
		r.recordResult(p.inv, res)
	} else {
		res = r.execute(ctx, p.inv, p.a, p.capab, d)
	}
	r.settle(p.key, res)
	r.mu.Lock()
	p.end = fmt.Sprintf("it was approved by %s already and is %s", by.Subject, res.Status)
	r.mu.Unlock()
	return res, nil
}

// Deny cancels the waiting invocation id for by, a local administrator,
// with approval_denied and why (free text for the record, at most 1024
// bytes). Refusals are as Approve's. It returns the cancelled result.
func (r *Runner) Deny(ctx context.Context, id string, by Principal, why string) (Result, error) {
	if w := mayApprove(by); w != "" {
		return Result{}, r.refuseApproval(ctx, "deny", id, by, ReasonApproveNotLocal, w)
	}
	if err := checkText(why); err != nil {
		return Result{}, fmt.Errorf("act: deny %s: why: %w", id, err)
	}
	r.approving.Lock()
	defer r.approving.Unlock()
	p, err := r.take(ctx, "deny", id)
	if err != nil {
		return Result{}, err
	}
	detail := "denied by " + by.Subject
	if why != "" {
		detail += ": " + why
	}
	res := Result{ActionID: p.inv.ActionID, Status: Cancelled, Reason: ReasonApprovalDenied, Detail: detail}
	if err := r.record(ctx, p.inv, Cancelled, map[string]any{"result": res, "denied_by": by.Subject, "why": why}); err != nil {
		r.putBack(p)
		return Result{}, fmt.Errorf("act: deny %s: %w", id, err)
	}
	r.mu.Lock()
	p.end = "it was denied by " + by.Subject + " already"
	r.rememberLocked(p)
	r.mu.Unlock()
	r.settle(p.key, res)
	return res, nil
}
