package act

import (
	"fmt"
	"time"

	"github.com/tobe-body/tobe-body/ledger"
)

// Risk is a capability's risk class.
type Risk uint8

// Risk classes, from harmless to dangerous.
const (
	R0 Risk = iota // read-only
	R1             // reversible, low impact (an LED, a short tone)
	R2             // an external side effect (a relay, a notification to a person)
	R3             // irreversible or dangerous; runs only with an approval bound to the one invocation
)

func (r Risk) String() string {
	if r <= R3 {
		return fmt.Sprintf("R%d", r)
	}
	return fmt.Sprintf("Risk(%d)", r)
}

// MarshalText writes the class's name ("R2"), for JSON.
func (r Risk) MarshalText() ([]byte, error) {
	if r > R3 {
		return nil, fmt.Errorf("act: risk %d has no name", uint8(r))
	}
	return []byte(r.String()), nil
}

// UnmarshalText reads a class's name: R0 to R3.
func (r *Risk) UnmarshalText(b []byte) error {
	v, err := ParseRisk(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// ParseRisk reads a risk class's name: R0, R1, R2 or R3.
func ParseRisk(s string) (Risk, error) {
	if len(s) == 2 && s[0] == 'R' && s[1] >= '0' && s[1] <= '3' {
		return Risk(s[1] - '0'), nil
	}
	return 0, fmt.Errorf("act: %q is not a risk class (R0, R1, R2, R3)", s)
}

// PrincipalKind says how a request reached the body.
type PrincipalKind string

// Principal kinds.
const (
	// AgentSession is an agent connected over `tobe-body stdio`.
	AgentSession PrincipalKind = "agent"
	// MQTTCommand came from the home server's broker.
	MQTTCommand PrincipalKind = "mqtt"
	// LocalAdmin is whoever reaches the admin socket (root or the body's
	// admin group).
	LocalAdmin PrincipalKind = "admin"
	// LocalRule is a rule configured on the device.
	LocalRule PrincipalKind = "rule"
)

// Principal is who asks. The transport decides it from what the kernel
// says (peer credentials, the broker connection), never from what a
// client claims.
type Principal struct {
	Kind PrincipalKind `json:"kind"`
	// Subject names the principal for grants: "agent:pi", "mqtt:home",
	// "admin:uid=0", "rule:night-light".
	Subject string `json:"subject"`
	// Session is the agent session or connection that owns the request;
	// its actions stop when it ends.
	Session string `json:"session,omitempty"`
	// Trust is the session's trust level from the config.
	Trust ledger.Level `json:"trust"`
}

// Mode says how far an invocation goes.
type Mode string

// Modes.
const (
	Shadow     Mode = "shadow"     // record what would happen, touch nothing
	Simulation Mode = "simulation" // run against the simulated driver
	Live       Mode = "live"       // drive the world
)

// Capability is one thing an action channel can do.
type Capability struct {
	// Name is the capability: "gpio.set", "gpio.pulse", "audio.tone",
	// "audio.play", "body.notify".
	Name string `json:"name"`
	Risk Risk   `json:"risk"`
	// Reversible says whether a compensation can undo it.
	Reversible bool `json:"reversible"`
	// Verify says how the result is checked afterwards ("read-back",
	// "feedback input", "microphone level", "none").
	Verify string `json:"verify"`
	// Shared is true when it drives a resource others may drive too; it
	// then takes a lease on the target.
	Shared bool `json:"shared"`
}

// Observation is what a request says caused it, as the body recorded it:
// the event's id, the trust the body gave it, and how the body knows
// what it says. The lowest trust of the session and the observation
// decides; an inferred cause with nothing observed under it is refused
// at R2 and above (ReasonInferredCause).
type Observation struct {
	EventID string
	Trust   ledger.Level
	// Provenance is the event's: observed, told, inferred or verified.
	Provenance ledger.Provenance
	// Observed: the cause rests on something the body observed or
	// verified itself (for a world.changed, a record that says its value
	// was; for any other event, its provenance is observed or verified).
	Observed bool
}

// Reason is why a request was refused, or "" when it was allowed. Every
// refusal names one.
type Reason string

// Reasons of refusal.
const (
	ReasonEStopLatched      Reason = "estop_latched"      // the e-stop is latched
	ReasonEStopUnverified   Reason = "estop_unverified"   // the e-stop line cannot be read: nothing above R0
	ReasonSafetyRule        Reason = "safety_rule"        // a global safety rule forbids it
	ReasonUnknownCapability Reason = "unknown_capability" // no channel offers it
	ReasonRiskExceedsTrust  Reason = "risk_exceeds_trust" // the lowest trust in the chain is too low for the risk
	ReasonInferredCause     Reason = "inferred_cause"     // R2 and above caused by an inferred state with no observed evidence
	ReasonNoGrant           Reason = "no_grant"           // no grant covers principal, capability and target
	ReasonGrantExpired      Reason = "grant_expired"
	ReasonGrantRevoked      Reason = "grant_revoked"
	ReasonChannelDisabled   Reason = "channel_disabled" // the channel is disabled, revoked, offline or in error
	ReasonChannelShadow     Reason = "channel_shadow"   // the channel only records: a live request is refused
	ReasonPrivacyPaused     Reason = "privacy_paused"   // the channel is paused for privacy (the switch, a pause): nothing captures
	ReasonHealthCritical    Reason = "health_critical"  // self-state critical: read-only only
	ReasonHealthDegraded    Reason = "health_degraded"  // self-state degraded: nothing above R1
	ReasonLedgerUnavailable Reason = "ledger_unavailable"
	ReasonLeaseHeld         Reason = "lease_held"    // another holder has the resource
	ReasonStaleEpoch        Reason = "stale_epoch"   // the holder's fencing epoch is old
	ReasonHumanControl      Reason = "human_control" // a person took the resource over
	ReasonRateLimited       Reason = "rate_limited"
	ReasonApprovalRequired  Reason = "approval_required" // R3 without an approval bound to this invocation
	ReasonApprovalDenied    Reason = "approval_denied"   // a local administrator denied the waiting invocation
	ReasonApprovalExpired   Reason = "approval_expired"  // nobody approved the waiting invocation in time
	ReasonApproveNotLocal   Reason = "approve_not_local" // only a local administrator approves or denies
	ReasonResetNotLocal     Reason = "reset_not_local"   // only a local, deliberate act resets the e-stop
	ReasonInvalidRequest    Reason = "invalid_request"   // a field of the request is missing or malformed; Detail names it
	// ReasonClockUnsynchronized: the wall clock is not synchronised, and
	// what was asked needs it to be (a risk class the safety rules keep
	// for a synchronised clock, a grant whose expiry cannot be judged, a
	// relative expiry to measure).
	ReasonClockUnsynchronized Reason = "clock_unsynchronized"
)

// Refusal is an error that names its reason: what the e-stop's reset and
// the approvals refuse with. It wraps the operation's sentinel error
// (ErrResetRefused, ErrApprovalRefused), so callers branch on either.
type Refusal struct {
	Reason Reason
	Detail string
	Err    error
}

func (r *Refusal) Error() string { return fmt.Sprintf("%v: %s: %s", r.Err, r.Reason, r.Detail) }
func (r *Refusal) Unwrap() error { return r.Err }

// Decision is the policy's answer.
type Decision struct {
	Allow  bool   `json:"allow"`
	Reason Reason `json:"reason,omitempty"`
	// Detail says more, for people (never used to decide).
	Detail string `json:"detail,omitempty"`
	// Grant is the grant that allowed it, when one did.
	Grant string `json:"grant,omitempty"`
	// AwaitsApproval is true when the only thing missing is an approval
	// bound to this invocation: every other check passed, so the runner
	// may hold the invocation for a local administrator to approve.
	AwaitsApproval bool `json:"awaits_approval,omitempty"`
}

func (d Decision) String() string {
	if d.Allow {
		return "allowed"
	}
	if d.Detail != "" {
		return fmt.Sprintf("refused: %s: %s", d.Reason, d.Detail)
	}
	return "refused: " + string(d.Reason)
}

// Grant lets a subject use a capability on targets until it expires or
// is revoked. Grants are kept as ledger events.
type Grant struct {
	ID      string
	Subject string // a principal's Subject
	// Capability is a name, a prefix of names ending in ".*" ("gpio.*"),
	// or "*" for every capability (see CheckPattern).
	Capability string
	// Scope is a target or a pattern of targets ("gpio.relay1", "gpio.*",
	// "*").
	Scope string
	// Expires is the expiry as a wall time; zero: never.
	Expires time.Time
	// BootID is the boot the grant was given in (with an expiry), and
	// MonoDeadline its expiry on that boot's monotonic clock
	// (Clock.Mono); zero when it was given while the wall clock was not
	// synchronised. In that boot the earlier of Expires and MonoDeadline
	// ends it; in another only Expires is left (see Grants).
	BootID       string
	MonoDeadline time.Duration
	// Expired is set once the grant was recorded expired (grant.expired)
	// at EndedAt, the wall time then, by the clock ExpiredBy (wall or
	// monotonic); EndedEarly is how long before its monotonic deadline
	// the wall ended it (a forward step). An expired grant stays expired
	// whatever the clock does.
	Expired    bool
	EndedAt    time.Time
	ExpiredBy  string
	EndedEarly time.Duration

	Revoked   bool
	RevokedAt time.Time
	By        string // who granted it
	// ByTrust is the trust the granter had. A grant covers a request only
	// when it is at least the request's MinTrust: R3 needs a grant given
	// at max. Grants recorded before it was recorded read as high, the
	// least that could give one then.
	ByTrust ledger.Level

	Added        time.Time // when it was granted
	Reason       string    // why it was granted
	RevokedBy    string
	RevokeReason string
}
