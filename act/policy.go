package act

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/ledger"
)

// The e-stop's own capabilities. They are decided before anything else:
// a stop is never refused, and a reset is only ever local.
const (
	// CapabilityEStopTrip latches the e-stop. Any principal may ask for it
	// at any time: stopping is always the safe direction.
	CapabilityEStopTrip = "estop.trip"
	// CapabilityEStopReset clears the latch. Only a local administrator
	// may ask for it; the agent, MQTT and local rules are refused with
	// reset_not_local.
	CapabilityEStopReset = "estop.reset"
)

// Request is one thing a principal asks the body to do, as the policy
// sees it.
type Request struct {
	// Principal is who asks, as the transport found it (never as the
	// client claims).
	Principal Principal
	// Capability is the capability as the channel that offers it
	// declares it (name and risk class), looked up by the runner: a
	// client names a capability but never chooses its risk.
	Capability Capability
	// Target is the resource the request acts on ("gpio.relay1").
	Target string
	Mode   Mode
	// CausedBy is the observation the request says caused it, or nil.
	// Its trust lowers the request's effective trust; it never raises it.
	// An inferred one with nothing observed under it refuses R2 and
	// above.
	CausedBy *Observation
	// Approval names the approval the request comes with (R3 only).
	Approval string
	// Invocation is the invocation's id; an approval is bound to it.
	Invocation string
	// Note is what the requester or the environment said about the
	// request, kept for the record. It is data: Decide never reads it.
	Note string
}

// Approval lets one invocation of an R3 capability run. It is bound to
// that invocation's id and to nothing else: not to a principal, a
// capability or a target, so it cannot be used for a second invocation.
type Approval struct {
	ID         string
	Invocation string
	By         string // who approved
}

// SafetyRules are the body's global rules, from the config. They apply to
// every principal, local administrators included.
type SafetyRules struct {
	// ForbidR3 refuses every R3 capability.
	ForbidR3 bool `json:"forbid_r3,omitempty"`
	// Forbidden refuses every request whose capability and target match
	// one of these.
	Forbidden []ForbiddenRule `json:"forbidden,omitempty"`
	// UnsyncedClockRefuseFrom is the lowest risk class refused while the
	// wall clock is not synchronised ("" reads as the default, R3).
	UnsyncedClockRefuseFrom ClockRule `json:"unsynced_clock_refuse_from,omitempty"`
}

// ClockRule is the lowest risk class a safety rule refuses while the
// wall clock is not synchronised: R1, R2 or R3, or never. "" is the
// default, R3. A value Check refuses refuses from R1: a safety rule
// fails closed.
type ClockRule string

// Clock rules.
const (
	ClockRefuseFromR1 ClockRule = "R1"
	ClockRefuseFromR2 ClockRule = "R2"
	ClockRefuseFromR3 ClockRule = "R3"
	ClockRefuseNever  ClockRule = "never"
	// DefaultClockRule is what "" reads as.
	DefaultClockRule = ClockRefuseFromR3
)

// ParseClockRule reads a clock rule: R1, R2, R3 or never.
func ParseClockRule(s string) (ClockRule, error) {
	switch r := ClockRule(s); r {
	case ClockRefuseFromR1, ClockRefuseFromR2, ClockRefuseFromR3, ClockRefuseNever:
		return r, nil
	}
	return "", fmt.Errorf("%q: want R1, R2, R3 or never", s)
}

// from is the lowest risk class r refuses, and false when it refuses
// none.
func (r ClockRule) from() (Risk, bool) {
	switch r {
	case "", DefaultClockRule:
		return R3, true
	case ClockRefuseNever:
		return 0, false
	case ClockRefuseFromR2:
		return R2, true
	}
	return R1, true // R1, or malformed: fail closed
}

// ForbiddenRule forbids the capabilities matching Capability on the
// targets matching Scope; both are patterns as in a Grant ("gpio.*",
// "*"). A rule whose pattern is malformed forbids everything: a safety
// rule fails closed. Check finds them.
type ForbiddenRule struct {
	Capability string `json:"capability"`
	Scope      string `json:"scope"`
}

// Check says which rule is malformed, or nil.
func (r SafetyRules) Check() error {
	for i, f := range r.Forbidden {
		if err := CheckPattern(f.Capability); err != nil {
			return fmt.Errorf("forbidden[%d].capability: %w", i, err)
		}
		if err := CheckPattern(f.Scope); err != nil {
			return fmt.Errorf("forbidden[%d].scope: %w", i, err)
		}
	}
	if r.UnsyncedClockRefuseFrom != "" {
		if _, err := ParseClockRule(string(r.UnsyncedClockRefuseFrom)); err != nil {
			return fmt.Errorf("unsynced_clock_refuse_from: %w", err)
		}
	}
	return nil
}

// State is everything Decide decides on besides the request. The runner
// takes it fresh for each request.
type State struct {
	// Clock is the reading of the body's clock grants are judged at; its
	// Synced says whether the wall clock is synchronised (without it,
	// what SafetyRules.UnsyncedClockRefuseFrom names is refused).
	Clock Reading
	// EStopLatched: the e-stop is latched.
	EStopLatched bool
	// EStopVerified: the e-stop line was read and its wiring checked.
	// Without it nothing above R0 runs.
	EStopVerified bool
	Rules         SafetyRules
	// Channel is the lifecycle state of the channel that offers the
	// capability on the target; "" when no channel offers it.
	Channel body.State
	// ChannelHealth is what the registry says of the channel (why it is
	// paused).
	ChannelHealth string
	// CapabilityMode is the mode the config gives the capability itself:
	// "" or enabled, shadow (only shadow requests run) or disabled. The
	// stricter of it and Channel decides.
	CapabilityMode body.State
	// Health is the self-state's degradation level.
	Health body.Degradation
	// LedgerWritable: the ledger takes new records. Without it nothing
	// above R0 runs: no action whose record could not be written.
	LedgerWritable bool
	// Grants are every grant, expired and revoked ones too (Grants.All),
	// so a refusal can say why a grant that once covered the request
	// does not now.
	Grants []Grant
	// Approvals are the approvals given and not yet used.
	Approvals []Approval
}

// MinTrust returns the lowest effective trust a request of risk r needs:
// R0 low, R1 medium, R2 high, R3 max. It is fixed, not configured: a
// config can forbid more (SafetyRules) but cannot lower the bar.
func MinTrust(r Risk) ledger.Level {
	switch r {
	case R0:
		return ledger.Low
	case R1:
		return ledger.Medium
	case R2:
		return ledger.High
	}
	return ledger.Max
}

// EffectiveTrust is the lowest of the session's trust and the trust of
// the observation the request says caused it.
func (r Request) EffectiveTrust() ledger.Level {
	t := r.Principal.Trust
	if r.CausedBy != nil && r.CausedBy.Trust < t {
		t = r.CausedBy.Trust
	}
	return t
}

// Decide says whether the request may run. It is pure: it reads nothing
// but its arguments (the time only from st.Clock) and changes nothing, so
// it is safe for concurrent use. Anything it does not allow is refused
// (default deny) and every refusal names a Reason.
//
// The checks run in this order and the first refusal is the answer, so
// the strictest rule always wins and a refusal names the most basic
// thing that is wrong:
//
//  1. the e-stop's own capabilities: estop.trip is allowed to anyone
//     always; estop.reset is refused with reset_not_local unless a local
//     administrator asks, and with estop_unverified while the line cannot
//     be read (the e-stop itself still checks the line's level and the
//     press before it clears anything);
//  2. estop_latched: the e-stop is latched; everything is refused, R0
//     included;
//  3. invalid_request: a field of the request is missing or malformed
//     (Detail names it);
//  4. estop_unverified: the e-stop line cannot be read; nothing above R0;
//  5. safety_rule: a global safety rule forbids it; then
//     unknown_capability: no channel offers it (what does not exist is
//     refused as such before the body's state is weighed: waiting for the
//     clock, the ledger or health would not help); then
//     clock_unsynchronized: the wall clock is not synchronised and the
//     risk is at least SafetyRules.UnsyncedClockRefuseFrom (R3 by
//     default);
//  6. ledger_unavailable: the ledger cannot be written; nothing above R0;
//  7. health_critical (only R0) and health_degraded (nothing above R1);
//  8. the channel: channel_disabled (disabled, revoked, offline, error, discovered, or
//     a state Decide does not know), channel_shadow (a shadow channel
//     runs only shadow requests), privacy_paused (a camera or a
//     microphone let go for privacy: no request of it runs, shadow
//     included, whoever asks); then the same for the capability's own
//     mode from the config;
//  9. risk_exceeds_trust: the effective trust, the lowest of the
//     session's and the causing observation's, is below MinTrust; then
//     inferred_cause: at R2 and above, the causing observation is an
//     inferred state with no observed evidence (provenance inferred, and
//     nothing the body observed or verified itself says it). Below R2
//     such a cause only lowers the trust;
//  10. no_grant, grant_expired, grant_revoked or clock_unsynchronized:
//     no valid grant of the principal's subject covers the capability and
//     the target (clock_unsynchronized: the only ones that would are of
//     another boot and their expiry cannot be judged until the wall
//     clock is synchronised). A local
//     administrator needs no grant for R0–R2 (the admin socket can grant
//     anything anyway); for R3 it does;
//  11. approval_required: R3 without an approval bound to this
//     invocation. Without any approval named, the refusal says
//     AwaitsApproval: it is the last check, so nothing else is wrong and
//     the runner may hold the invocation for a local administrator.
//
// Rate limits are not part of Decide: Authorize consults a Limiter after
// Decide allows.
func Decide(req Request, st State) Decision {
	switch req.Capability.Name {
	case CapabilityEStopTrip:
		return Decision{Allow: true, Detail: "a stop is always allowed"}
	case CapabilityEStopReset:
		if req.Principal.Kind != LocalAdmin {
			return refuse(ReasonResetNotLocal, "only a local administrator or the reset input resets the e-stop, not %q", req.Principal.Kind)
		}
		if !st.EStopVerified {
			return refuse(ReasonEStopUnverified, "the e-stop line cannot be read")
		}
		return Decision{Allow: true, Detail: "local reset"}
	}
	if st.EStopLatched {
		return refuse(ReasonEStopLatched, "")
	}
	if field, why := req.invalid(); field != "" {
		return refuse(ReasonInvalidRequest, "%s: %s", field, why)
	}
	risk := req.Capability.Risk
	if !st.EStopVerified && risk > R0 {
		return refuse(ReasonEStopUnverified, "the e-stop line cannot be read: only R0 runs")
	}
	if d, ok := st.Rules.refuses(req); ok {
		return d
	}
	// What no channel offers is refused as such before any state of the
	// body's (clock, ledger, health) is weighed: waiting would not help.
	if st.Channel == "" {
		return refuse(ReasonUnknownCapability, "no channel offers %s on %s", req.Capability.Name, req.Target)
	}
	if from, ok := st.Rules.UnsyncedClockRefuseFrom.from(); ok && !st.Clock.Synced && risk >= from {
		what := from.String() + " actions wait"
		if from < R3 {
			what = from.String() + " and above wait"
		}
		return refuse(ReasonClockUnsynchronized, "the wall clock is not synchronised: %s for time synchronisation (act.safety.unsynced_clock_refuse_from is %s)", what, from)
	}
	if !st.LedgerWritable && risk > R0 {
		return refuse(ReasonLedgerUnavailable, "its record could not be written: only R0 runs")
	}
	switch {
	case (st.Health >= body.LevelCritical || st.Health < body.LevelNormal) && risk > R0:
		return refuse(ReasonHealthCritical, "the body is %s: only R0 runs", st.Health)
	case st.Health >= body.LevelDegraded && risk > R1:
		return refuse(ReasonHealthDegraded, "the body is %s: nothing above R1 runs", st.Health)
	}
	switch st.Channel {
	case body.Enabled, body.Degraded:
	case body.Shadow:
		if req.Mode != Shadow {
			return refuse(ReasonChannelShadow, "the channel only records; ask in shadow mode")
		}
	case body.Paused:
		return refuse(ReasonPrivacyPaused, "the channel is paused for privacy: %s", cmp.Or(st.ChannelHealth, "paused"))
	default:
		return refuse(ReasonChannelDisabled, "the channel is %s", st.Channel)
	}
	switch st.CapabilityMode {
	case "", body.Enabled:
	case body.Shadow:
		if req.Mode != Shadow {
			return refuse(ReasonChannelShadow, "the config has %s only record; ask in shadow mode", req.Capability.Name)
		}
	default:
		return refuse(ReasonChannelDisabled, "the config has %s %s", req.Capability.Name, st.CapabilityMode)
	}
	if eff, need := req.EffectiveTrust(), MinTrust(risk); eff < need {
		from := "the session"
		if req.CausedBy != nil && req.CausedBy.Trust < req.Principal.Trust {
			from = "observation " + req.CausedBy.EventID
		}
		return refuse(ReasonRiskExceedsTrust, "%s needs %s trust; the effective trust is %s (from %s)", risk, need, eff, from)
	}
	if o := req.CausedBy; o != nil && risk >= R2 && o.Provenance == ledger.Inferred && !o.Observed {
		return refuse(ReasonInferredCause, "%s needs a cause the body observed or verified; observation %s is inferred, with no observed evidence", risk, o.EventID)
	}
	allow := Decision{Allow: true, Detail: "a local administrator needs no grant below R3"}
	if req.Principal.Kind != LocalAdmin || risk > R2 {
		d := coveringGrant(req, st.Grants, st.Clock)
		if !d.Allow {
			return d
		}
		allow = d
	}
	if risk == R3 {
		if d := approved(req, st.Approvals); !d.Allow {
			return d
		}
		allow.Detail += "; approval " + req.Approval
	}
	return allow
}

func refuse(r Reason, format string, args ...any) Decision {
	d := Decision{Reason: r}
	if format != "" {
		d.Detail = fmt.Sprintf(format, args...)
	}
	return d
}

// invalid names the first field of the request that is missing or
// malformed and why, or returns "".
func (r Request) invalid() (field, why string) {
	p := r.Principal
	switch p.Kind {
	case AgentSession, MQTTCommand, LocalAdmin, LocalRule:
	default:
		return "principal.kind", fmt.Sprintf("unknown kind %q", p.Kind)
	}
	if err := checkSubject(p.Subject); err != nil {
		return "principal.subject", err.Error()
	}
	if !strings.HasPrefix(p.Subject, string(p.Kind)+":") {
		return "principal.subject", fmt.Sprintf("%q is not a subject of kind %s", p.Subject, p.Kind)
	}
	if p.Trust < ledger.Off || p.Trust > ledger.Max {
		return "principal.trust", fmt.Sprintf("%s is not a trust level", p.Trust)
	}
	if err := checkName(r.Capability.Name); err != nil {
		return "capability.name", err.Error()
	}
	if r.Capability.Risk > R3 {
		return "capability.risk", fmt.Sprintf("%s is not a risk class", r.Capability.Risk)
	}
	if err := checkName(r.Target); err != nil {
		return "target", err.Error()
	}
	switch r.Mode {
	case Shadow, Simulation, Live:
	default:
		return "mode", fmt.Sprintf("unknown mode %q", r.Mode)
	}
	if r.Invocation == "" {
		return "invocation", "empty"
	}
	if o := r.CausedBy; o != nil {
		if o.EventID == "" {
			return "caused_by.event_id", "empty"
		}
		if o.Trust < ledger.Off || o.Trust > ledger.Max {
			return "caused_by.trust", fmt.Sprintf("%s is not a trust level", o.Trust)
		}
		if o.Provenance < ledger.Observed || o.Provenance > ledger.Verified {
			return "caused_by.provenance", fmt.Sprintf("%d: want observed, told, inferred or verified", uint8(o.Provenance))
		}
	}
	return "", ""
}

// refuses tells whether a safety rule forbids the request.
func (r SafetyRules) refuses(req Request) (Decision, bool) {
	if r.ForbidR3 && req.Capability.Risk == R3 {
		return refuse(ReasonSafetyRule, "R3 is forbidden on this body"), true
	}
	for i, f := range r.Forbidden {
		capOK, scopeOK := CheckPattern(f.Capability) == nil, CheckPattern(f.Scope) == nil
		if !capOK || !scopeOK {
			return refuse(ReasonSafetyRule, "forbidden rule %d is malformed, so it forbids everything", i), true
		}
		if MatchPattern(f.Capability, req.Capability.Name) && MatchPattern(f.Scope, req.Target) {
			return refuse(ReasonSafetyRule, "forbidden by rule %d (%s on %s)", i, f.Capability, f.Scope), true
		}
	}
	return Decision{}, false
}

// coveringGrant finds a valid grant of the request's subject that covers
// its capability and target.
//
// Only grants that would cover the request if they were still valid
// count: same subject, capability pattern matching, scope pattern
// matching. A grant of the same subject for another capability or
// another target says nothing about this request, so it never turns
// no_grant into grant_expired or grant_revoked. Among the covering
// grants, any valid one allows. Otherwise a revoked one makes the answer
// grant_revoked, even when an expired one covers too, and a grant that
// was both revoked and expired counts as revoked: a revocation is a
// person's deliberate decision, and the reason should not invite renewing
// what someone took away. Only when every covering grant merely expired
// is the answer grant_expired.
//
// A grant whose expiry cannot be judged now (SuspendedAt: of another
// boot while the wall clock is not synchronised) comes after an expired
// one: clock_unsynchronized, since waiting for time synchronisation may
// bring it back.
//
// A grant covers only what its granter's trust could allow: one given
// below MinTrust of the request's risk (an R3 request under a grant given
// at high) does not cover it, and is named when nothing else does.
func coveringGrant(req Request, grants []Grant, now Reading) Decision {
	var expired, revoked, suspended, weak *Grant
	need := MinTrust(req.Capability.Risk)
	for i := range grants {
		g := &grants[i]
		if g.Subject != req.Principal.Subject || !MatchPattern(g.Capability, req.Capability.Name) || !MatchPattern(g.Scope, req.Target) {
			continue
		}
		switch {
		case g.Revoked:
			revoked = g
		case g.ExpiredAt(now):
			expired = g
		case g.SuspendedAt(now):
			suspended = g
		case g.ByTrust < need:
			weak = g
		default:
			return Decision{Allow: true, Detail: "grant " + g.ID, Grant: g.ID}
		}
	}
	switch {
	case revoked != nil:
		return refuse(ReasonGrantRevoked, "grant %s was revoked at %s", revoked.ID, revoked.RevokedAt.UTC().Format(time.RFC3339))
	case expired != nil:
		return refuse(ReasonGrantExpired, "grant %s %s", expired.ID, expiredWhen(*expired, now))
	case suspended != nil:
		return refuse(ReasonClockUnsynchronized, "grant %s expires at %s by a clock of another boot: it is not in force until the wall clock is synchronised", suspended.ID, suspended.Expires.UTC().Format(time.RFC3339))
	case weak != nil:
		return refuse(ReasonNoGrant, "grant %s was given at %s trust; %s needs a grant given at %s", weak.ID, weak.ByTrust, req.Capability.Risk, need)
	}
	return refuse(ReasonNoGrant, "no grant lets %s use %s on %s", req.Principal.Subject, req.Capability.Name, req.Target)
}

// expiredWhen says how an expired grant ended, for a refusal.
func expiredWhen(g Grant, now Reading) string {
	at := g.Expires.UTC().Format(time.RFC3339)
	by := g.ExpiredBy
	if !g.Expired {
		_, by, _ = g.endAt(now)
	}
	if by == ExpiredByMonotonic {
		return "reached its deadline on the monotonic clock (its wall expiry is " + at + ")"
	}
	return "expired at " + at
}

// approved tells whether the request comes with an approval bound to its
// invocation.
func approved(req Request, approvals []Approval) Decision {
	if req.Approval == "" {
		d := refuse(ReasonApprovalRequired, "R3 runs only with an approval bound to invocation %s", req.Invocation)
		d.AwaitsApproval = true
		return d
	}
	for _, a := range approvals {
		if a.ID != req.Approval {
			continue
		}
		if a.Invocation == req.Invocation {
			return Decision{Allow: true}
		}
		return refuse(ReasonApprovalRequired, "approval %s is bound to another invocation", a.ID)
	}
	return refuse(ReasonApprovalRequired, "no approval %s", req.Approval)
}
