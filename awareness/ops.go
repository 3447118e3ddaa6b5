package awareness

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/body/uplink"
	"github.com/tobe-body/tobe-body/ledger"
	"github.com/tobe-body/tobe-body/sense"
)

// The operations: every one the body offers to anyone outside it. A
// transport names them by these values; the daemon binds them to the
// body's parts (Parts.Table). Each one an agent is admitted to names its
// tool.
var (
	OpStatus = Op[None, Status]{Name: "status", Kind: Observe, Least: Anyone, Tool: Tool{Name: "body_status", ReadOnly: true, Idempotent: true},
		Resource:    Resource{URI: "tobe://status", Changes: []string{"estop.", "body."}, Channels: true},
		Description: "How the body is: board, uptime, safety, ledger, e-stop, self-state and every channel."}
	OpChannels = Op[None, Channels]{Name: "channels", Kind: Observe, Least: Anyone, Tool: Tool{Name: "list_channels", ReadOnly: true, Idempotent: true},
		Resource:    Resource{URI: "tobe://channels", Channels: true},
		Description: "The body's channels with their state and health."}
	OpSelf = Op[None, Self]{Name: "self", Kind: Observe, Least: Anyone, Tool: Tool{Name: "self_state", ReadOnly: true, Idempotent: true},
		Resource:    Resource{URI: "tobe://self", Changes: []string{"body."}},
		Description: "The latest self-state sample: CPU, memory, disk, temperatures, throttling, clock, degradation."}
	// OpEvents reads the ledger; events may be sensitive (camera, sound),
	// so only local administrators read them until the agent boundary
	// filters them by privacy class.
	OpEvents = Op[EventsIn, Events]{Name: "events", Kind: Observe, Least: AdminOrAgent, Tool: Tool{Name: "events", ReadOnly: true, Idempotent: true},
		Description: "Events from the ledger after a sequence, by type and time; wait_ms waits for the first new one (at most 60 s). A reply holds at most limit events and about 256 KiB of them, from at most 4 MiB of the ledger: more says there are events after last_seq still to read (perhaps none in this reply), by calling again with after set to it. archive: the events the ledger archived (older than its audit_keep) too, before the others. An agent sees no restricted event, and sensitive ones (camera, microphone) only at medium trust or above."}
	OpEStopStatus = Op[None, act.EStopStatus]{Name: "estop.status", Kind: Observe, Least: Anyone, Tool: Tool{Name: "estop_status", ReadOnly: true, Idempotent: true},
		Resource:    Resource{URI: "tobe://estop", Changes: []string{"estop."}},
		Description: "The e-stop: latched or not and why, the lines, a wiring fault."}
	OpEStopTrip = Op[TripIn, TripOut]{Name: "estop.trip", Kind: Interact, Least: Anyone, Stop: true, Tool: Tool{Name: "estop_trip", Idempotent: true},
		Description: "Stop now: every output to its safe level, every action cancelled, latched until a local reset. Optional: reason (why, in the record and the cause; at most 200 bytes are kept), note (for the record; 1024) and idempotency_key: a repeat of the same key by the same caller, even after the body restarted, returns the first stop (repeated: true) and stops nothing. A stop is never refused for what these say: text that is too long is cut, control characters become spaces, and params that cannot be read are left out."}
	OpEStopReset = Op[None, act.EStopStatus]{Name: "estop.reset", Kind: Admin, Least: HighAdmin,
		Description: "Clear the e-stop's latch: a local administrator, with the line healthy. Restarts nothing."}
	OpCapabilities = Op[None, Capabilities]{Name: "action.capabilities", Kind: Observe, Least: Anyone, Tool: Tool{Name: "capabilities", ReadOnly: true, Idempotent: true},
		Description: "What the body can do, with each capability's risk class and how it is verified."}
	OpDo = Op[DoIn, act.Result]{Name: "action.do", Kind: Interact, Least: Anyone, Tool: Tool{PerCapability: true},
		Description: "Act through the runner: policy, lease, the action, its verification. Mode live, shadow (record only) or simulation; caused_by is the id of the event that caused the request, whose trust and evidence the policy weighs. Bounds: capability, target and idempotency_key at most 128 bytes, at most 16 params of 1024 bytes each and 1536 in all, note at most 1024 bytes, no control characters but tab and newline in text; a request outside them, or over the caller's admission limit, is refused (invalid_request, rate_limited) without an action id and only counted in the caller's action.refusals summary."}
	OpResult = Op[ResultIn, act.Result]{Name: "action.result", Kind: Observe, Least: Anyone, Tool: Tool{Name: "action_result", ReadOnly: true, Idempotent: true},
		Description: "What became of an action, by its id or by the caller's idempotency key."}
	OpGrantAdd = Op[GrantAddIn, GrantView]{Name: "grant.add", Kind: Admin, Least: HighAdmin,
		Description: "Let a principal use capabilities on targets, until an expiry or a revocation. A grant that covers an R3 capability needs max trust."}
	OpGrantList = Op[GrantListIn, Grants]{Name: "grant.list", Kind: Observe, Least: AnyAdmin,
		Description: "The grants in force; all: expired and revoked ones too, each until the archive takes the record that ended it (ledger.audit_keep_days) and the body restarts."}
	OpGrantRevoke = Op[GrantRevokeIn, GrantView]{Name: "grant.revoke", Kind: Admin, Least: HighAdmin,
		Description: "Take a grant back."}
	OpApprovals = Op[None, Approvals]{Name: "approval.list", Kind: Observe, Least: HighAdmin,
		Description: "The R3 actions waiting for a local administrator's approval."}
	OpApprove = Op[ApproveIn, act.Result]{Name: "approval.approve", Kind: Admin, Least: MaxAdmin,
		Description: "Approve a waiting R3 action (a local administrator at max trust): it runs now, with the policy checked again."}
	OpDeny = Op[DenyIn, act.Result]{Name: "approval.deny", Kind: Admin, Least: HighAdmin,
		Description: "Deny a waiting action: it is cancelled."}
	OpLedgerStats = Op[None, ledger.Stats]{Name: "ledger.stats", Kind: Observe, Least: AnyAdmin,
		Description: "Counts, sizes and the outbox backlog of the ledger."}
	OpLedgerVerify = Op[None, ledger.VerifyReport]{Name: "ledger.verify", Kind: Observe, Least: AnyAdmin,
		Description: "bbolt's check, and every projection rebuilt from the events (the archive's and the file's) and compared."}
	OpLedgerVerifyArchive = Op[None, ledger.VerifyReport]{Name: "ledger.verify_archive", Kind: Observe, Least: AnyAdmin,
		Description: "The archive alone: every segment's hash, the chain of hashes to the one the ledger recorded last, every event in it."}
	// OpLedgerBackup takes no path: the body never writes a file its
	// caller names. The copy comes to the caller after the result.
	OpLedgerBackup = Op[None, Backup]{Name: "ledger.backup", Kind: Admin, Least: HighAdmin,
		Description: "A consistent copy of the ledger, taken while the body runs and sent to the caller after this result: bytes of it, with their SHA-256. The body writes no file the caller names."}
)

// None is the input of an operation that takes none: {}.
type None struct{}

// TripIn is what a stop may say about itself. Every field is optional and
// none can refuse the stop: its JSON is read leniently (UnmarshalJSON),
// and the handler cleans and bounds what it reads (CleanTripIn).
type TripIn struct {
	// Reason is why, in a few words (a failure's kind): it ends the
	// cause ("requested by agent:pi: provider_error").
	Reason string `json:"reason,omitempty"`
	// IdempotencyKey makes a repeat of this request by the same caller
	// return the first stop and stop nothing, even after a restart.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Note is for the record (who asked on whose behalf, the episode).
	Note string `json:"note,omitempty"`
}

// Bounds of TripIn's text, in bytes, after cleaning.
const (
	MaxTripReason = 200
	MaxTripNote   = 1024
	MaxTripKey    = 128
)

// UnmarshalJSON reads what it can: a string field as it is, any other
// JSON value in its place as its text; unknown keys and a value that is
// not an object are passed over. It fails only on JSON that does not
// parse at all, so a stop's params never refuse it.
func (in *TripIn) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		if json.Valid(b) {
			return nil // not an object: nothing to read
		}
		return err
	}
	text := func(k string) string {
		raw, ok := m[k]
		if !ok {
			return ""
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
		if string(raw) == "null" {
			return ""
		}
		return string(raw)
	}
	*in = TripIn{Reason: text("reason"), IdempotencyKey: text("idempotency_key"), Note: text("note")}
	return nil
}

// CleanTripIn bounds and cleans a stop's text without refusing any of
// it: invalid UTF-8 and control characters become spaces (a note keeps
// its newlines and tabs), runs of space in a reason become one, and text
// over its bound is cut at a character with "…". A key that is too long
// or holds a control character is replaced by "sha256:" and the hex of
// its hash, which a repeat of the same key gives again.
func CleanTripIn(in TripIn) TripIn {
	out := TripIn{Reason: act.CleanText(in.Reason, MaxTripReason, false), Note: act.CleanText(in.Note, MaxTripNote, true), IdempotencyKey: in.IdempotencyKey}
	k := in.IdempotencyKey
	if len(k) > MaxTripKey || !utf8.ValidString(k) || strings.ContainsFunc(k, unicode.IsControl) {
		sum := sha256.Sum256([]byte(k))
		out.IdempotencyKey = "sha256:" + hex.EncodeToString(sum[:])
	}
	return out
}

// TripOut is what a stop did: the trip, or with Repeated the first stop
// of its idempotency key (nothing was stopped this time), and whether
// the e-stop is latched now.
type TripOut struct {
	act.Trip
	Repeated bool `json:"repeated,omitempty"`
	// LatchedNow is the latch when the answer was made: a repeat's stop
	// may have been reset since.
	LatchedNow bool `json:"latched_now"`
}

// Status is how the body is. It holds nothing secret: no config values
// beyond names and paths.
type Status struct {
	Body      string    `json:"body"`
	BodyID    string    `json:"body_id"`
	AgentID   string    `json:"agent_id"`
	Board     string    `json:"board"`
	BoardDesc string    `json:"board_description"`
	BoardFrom string    `json:"board_source"`
	BoardWhy  string    `json:"board_chosen_by"`
	Drivers   string    `json:"drivers"`
	Version   string    `json:"version"`
	PID       int       `json:"pid"`
	DataDir   string    `json:"data_dir"`
	Config    []string  `json:"config_layers"`
	StartedAt time.Time `json:"started_at"`
	UptimeS   float64   `json:"uptime_s"`
	// Safety is "normal", or "latched: why" when the body must not act
	// (its ledger was damaged or cannot be written).
	Safety   string         `json:"safety"`
	Ledger   LedgerStatus   `json:"ledger"`
	Channels []body.Channel `json:"channels"`
	// Self is the latest self-state sample.
	Self *body.SelfState `json:"self,omitempty"`
	// Events counts, per sense channel, what it queued, shed and wrote.
	Events map[string]sense.OutletStats `json:"events,omitempty"`
	// EStop is the e-stop's state; nil on a board without one.
	EStop *act.EStopStatus `json:"estop,omitempty"`
	// Uplink is the MQTT relay's state; nil when mqtt is not enabled.
	Uplink *uplink.Status `json:"uplink,omitempty"`
	// Privacy is whether the cameras and microphones are let go, and
	// why; nil when the body has no privacy state.
	Privacy *sense.PrivacyState `json:"privacy,omitempty"`
}

// LedgerStatus is the ledger's part of Status.
type LedgerStatus struct {
	Path        string `json:"path"`
	Events      int    `json:"events"`
	LastSeq     uint64 `json:"last_seq"`
	OutboxRows  uint64 `json:"outbox_rows"`
	OutboxBytes uint64 `json:"outbox_bytes"`
	Error       string `json:"error,omitempty"`
}

// Channels lists the channels.
type Channels struct {
	Channels []body.Channel `json:"channels"`
}

// Self is the latest self-state sample; nil before the first.
type Self struct {
	Self *body.SelfState `json:"self"`
}

// EventsIn asks for events after a sequence; with WaitMS it waits that
// long for the first new one (a long poll).
type EventsIn struct {
	After uint64 `json:"after,omitempty"`
	// Types are event types, or prefixes ending in a dot ("camera."): at
	// most MaxTypes of them, each of at most MaxTypeBytes.
	Types []string  `json:"types,omitempty"`
	Since time.Time `json:"since,omitzero"`
	// Limit is at most MaxEvents; 0 means MaxEvents.
	Limit  int `json:"limit,omitempty"`
	WaitMS int `json:"wait_ms,omitempty"`
	// Archive: the events the archive holds too, before the ledger's.
	Archive bool `json:"archive,omitempty"`
}

// Bounds of an events call. A reply holds at most MaxEvents events and
// MaxReplyBytes of them as JSON (but always one, however large): 256 KiB
// is hundreds of ordinary events, at least a few of the largest (a record
// is at most 64 KiB), and little beside the daemon's own memory even when
// every connection holds one. The ledger is read under the same budget,
// so memory is bounded while it reads, not after; and one read looks at
// no more than MaxScanBytes of records, matching or not, so a filter that
// matches little does not read the whole ledger in one go (its reply may
// then hold no event and say more). At most MaxReads calls read the
// ledger at once; the others wait their turn (a long poll waits for new
// events without one).
const (
	MaxEvents     = 10000
	MaxWait       = time.Minute
	MaxReplyBytes = 256 << 10
	MaxScanBytes  = 4 << 20
	MaxReads      = 2
	MaxTypes      = 32
	MaxTypeBytes  = 96
)

// Events are the events read, and the sequence to continue after. More
// says the reply stopped at its limit or a byte budget with events after
// LastSeq still to read: call again with After set to LastSeq.
type Events struct {
	Events  []ledger.EventView `json:"events"`
	LastSeq uint64             `json:"last_seq"`
	More    bool               `json:"more"`
	// Withheld counts the events read that the caller may not see (an
	// agent: restricted ones, and sensitive ones below medium trust).
	Withheld int `json:"withheld,omitempty"`
}

// Capabilities lists what the body can do.
type Capabilities struct {
	Capabilities []act.Capability `json:"capabilities"`
}

// DoIn is a request to act. Mode is live (the default), shadow or
// simulation; TimeoutMS bounds the action (0: the runner's 30 s).
// CausedBy is the id (UUID text) of the event that caused the request,
// an event the body recorded: the policy weighs its trust and how the
// body knows what it says.
type DoIn struct {
	Capability     string            `json:"capability"`
	Target         string            `json:"target"`
	Params         map[string]string `json:"params,omitempty"`
	IdempotencyKey string            `json:"idempotency_key,omitempty"`
	Mode           act.Mode          `json:"mode,omitempty"`
	TimeoutMS      int               `json:"timeout_ms,omitempty"`
	Note           string            `json:"note,omitempty"`
	CausedBy       string            `json:"caused_by,omitempty"`
}

// ResultIn names an action by its id, or by the idempotency key the
// caller gave it (keys are the caller's own: another principal's key
// names another action).
type ResultIn struct {
	ActionID       string `json:"action_id,omitempty"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// GrantAddIn asks for a grant. Expires is read on the body's clock: ""
// or never, a duration (24h, 30d) or an RFC 3339 time. While the body's
// wall clock is not synchronised a duration is refused
// (clock_unsynchronized), and a time is taken only from a local
// administrator.
type GrantAddIn struct {
	Subject    string `json:"subject"`
	Capability string `json:"capability"`
	Scope      string `json:"scope"`
	Expires    string `json:"expires,omitempty"`
	Reason     string `json:"reason,omitempty"`
}

// GrantListIn: All lists expired and revoked grants too (each until the
// archive takes the record that ended it and the body restarts).
type GrantListIn struct {
	All bool `json:"all,omitempty"`
}

// GrantRevokeIn takes a grant back.
type GrantRevokeIn struct {
	ID     string `json:"id"`
	Reason string `json:"reason,omitempty"`
}

// GrantView is a grant as callers see it. State is active, expired,
// revoked or suspended (its expiry is by a clock of another boot and
// cannot be judged until the wall clock is synchronised), as of the
// answer. ExpiredAt, ExpiredBy and EndedEarlyS are set once it was
// recorded expired: when, by which clock (wall or monotonic), and how
// many seconds before its monotonic deadline the wall ended it.
type GrantView struct {
	ID         string    `json:"id"`
	Subject    string    `json:"subject"`
	Capability string    `json:"capability"`
	Scope      string    `json:"scope"`
	Expires    time.Time `json:"expires,omitzero"`
	State      string    `json:"state"`
	Added      time.Time `json:"added"`
	By         string    `json:"by"`
	// ByTrust is the trust the granter had: a grant covers nothing whose
	// risk needs more.
	ByTrust      ledger.Level `json:"by_trust"`
	Reason       string       `json:"reason,omitempty"`
	RevokedAt    time.Time    `json:"revoked_at,omitzero"`
	RevokedBy    string       `json:"revoked_by,omitempty"`
	RevokeReason string       `json:"revoke_reason,omitempty"`
	ExpiredAt    time.Time    `json:"expired_at,omitzero"`
	ExpiredBy    string       `json:"expired_by,omitempty"`
	EndedEarlyS  int64        `json:"ended_early_s,omitempty"`
}

// Grants lists grants.
type Grants struct {
	Grants []GrantView `json:"grants"`
}

// Approvals lists what waits for approval.
type Approvals struct {
	Waiting []act.WaitingInvocation `json:"waiting"`
}

// ApproveIn names a waiting action.
type ApproveIn struct {
	ActionID string `json:"action_id"`
}

// DenyIn names a waiting action and says why, for the record.
type DenyIn struct {
	ActionID string `json:"action_id"`
	Why      string `json:"why,omitempty"`
}

// Backup is a snapshot of the ledger: the result says what it is, and
// the snapshot's bytes come after it (Backup is Streaming). A Backup a
// client decoded has no bytes of its own: Content gives none.
type Backup struct {
	// Bytes is the snapshot's length: exactly so many bytes follow.
	Bytes int64 `json:"bytes"`
	// SHA256 is the hex digest of those bytes.
	SHA256 string `json:"sha256"`
	// LastSeq is the sequence of the last event in the snapshot.
	LastSeq uint64    `json:"last_seq"`
	TakenAt time.Time `json:"taken_at"`

	snap *ledger.Snapshot
}

// Content is the snapshot's bytes.
func (b Backup) Content() (io.Reader, int64) {
	if b.snap == nil {
		return strings.NewReader(""), 0
	}
	return b.snap, b.snap.Size
}

// Close releases the snapshot's file.
func (b Backup) Close() error {
	if b.snap == nil {
		return nil
	}
	return b.snap.Close()
}
