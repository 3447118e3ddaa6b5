package awareness

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness/control/gate"
	"github.com/tobe-body/tobe-body/awareness/control/world"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/body/evidence"
	"github.com/tobe-body/tobe-body/body/uplink"
	"github.com/tobe-body/tobe-body/ledger"
	"github.com/tobe-body/tobe-body/sense"
)

// Parts are the parts of the body the operations reach. Any of EStop,
// Grants and Store may be nil (no e-stop on this board; the ledger not
// open or its grants unreadable): the operations that need one then
// answer unavailable.
type Parts struct {
	// Info is what Status says that does not change while the body runs.
	Info     Status
	Started  time.Time
	Registry *body.Registry
	// Self returns the latest self-state sample.
	Self func() (body.SelfState, bool)
	// Senses counts what each sense channel queued, shed and wrote.
	Senses func() map[string]sense.OutletStats
	EStop  *act.EStop
	Runner *act.Runner
	Grants *act.Grants
	Store  *ledger.Store
	// Relay is the MQTT uplink; nil when it does not run.
	Relay *uplink.Relay
	// Evidence is what the body kept to be looked at; nil: none (the
	// evidence operations answer unavailable).
	Evidence *evidence.Store
	// Privacy is whether the cameras and microphones are let go; nil:
	// the privacy operations answer unavailable.
	Privacy *sense.Privacy
	// World is the world model the ledger keeps; nil: none (the world
	// operations answer unavailable).
	World *world.Model
	// Pool is the gate's noise pool, which explains what it ignored;
	// nil without a gate.
	Pool *gate.Pool
	// StaleAfter is how long an active work item may go without
	// progress before it is stale (gate.stale_after_s); 0: a day.
	StaleAfter time.Duration
	// Now is the clock of what is not a grant (a backup's time); nil
	// means time.Now. Grants are judged by their own clock.
	Now func() time.Time

	// reads are the turns to read the ledger for events (MaxReads).
	reads chan struct{}

	// tripMu serialises the stops that carry an idempotency key, and
	// tripKeys remembers the last of them (subject, NUL, key → the stop)
	// until the e-stop's record of each is in the ledger's projection, or
	// for good when it was folded (MaxTripKeys of them).
	tripMu   sync.Mutex
	tripKeys map[string]act.Trip
	tripFIFO []string
}

// MaxTripKeys bounds the stops' idempotency keys remembered in memory.
const MaxTripKeys = 1024

// trip stops the body for p. A stop with an idempotency key that p used
// before returns that stop and stops nothing: its record in the ledger
// answers after a restart, memory before the record is written. Nothing
// refuses a stop: a key that cannot be looked up (the ledger unreadable)
// stops, and says so in the trip's note.
func (b *Parts) trip(_ context.Context, p act.Principal, in TripIn) (TripOut, error) {
	if b.EStop == nil {
		return TripOut{}, errNoEStop
	}
	in = CleanTripIn(in)
	ask := act.Ask{By: p.Subject, Reason: in.Reason, Key: in.IdempotencyKey, Note: in.Note}
	if ask.Key == "" {
		t := b.EStop.TripAsked(ask)
		return TripOut{Trip: t, LatchedNow: b.EStop.Latched()}, nil
	}
	k := p.Subject + "\x00" + ask.Key
	b.tripMu.Lock()
	defer b.tripMu.Unlock()
	if t, ok := b.tripKeys[k]; ok {
		return TripOut{Trip: t, Repeated: true, LatchedNow: b.EStop.Latched()}, nil
	}
	t, ok, err := act.TripOfKey(b.Store, p.Subject, ask.Key)
	if ok {
		return TripOut{Trip: t, Repeated: true, LatchedNow: b.EStop.Latched()}, nil
	}
	if err != nil {
		ask.Note = strings.TrimSpace(ask.Note + "\n(the key could not be looked up, so this may repeat a stop: " + err.Error() + ")")
	}
	t = b.EStop.TripAsked(ask)
	if b.tripKeys == nil {
		b.tripKeys = map[string]act.Trip{}
	}
	if len(b.tripFIFO) >= MaxTripKeys {
		delete(b.tripKeys, b.tripFIFO[0])
		b.tripFIFO = b.tripFIFO[1:]
	}
	b.tripKeys[k] = t
	b.tripFIFO = append(b.tripFIFO, k)
	return TripOut{Trip: t, LatchedNow: b.EStop.Latched()}, nil
}

// Projections are the projections of the body's ledger: the action
// runner's and the control plane's, which the table's operations read.
// The daemon opens its ledger with them, and so does whatever fills a
// ledger for it (a projection missing from a ledger is built from its
// whole history at the next open).
func Projections() []ledger.Projection {
	return slices.Concat(act.Projections(), gate.Projections(), world.Projections(), evidence.Projections(), []ledger.Projection{sense.PrivacyProjection()})
}

// Table binds every operation to the parts.
func (b *Parts) Table() (*Table, error) {
	if b.Now == nil {
		b.Now = time.Now
	}
	b.reads = make(chan struct{}, MaxReads)
	return NewTable(
		Bind(OpStatus, b.status),
		Bind(OpChannels, func(context.Context, act.Principal, None) (Channels, error) {
			return Channels{Channels: b.Registry.Snapshot()}, nil
		}),
		Bind(OpSelf, func(context.Context, act.Principal, None) (Self, error) {
			if st, ok := b.Self(); ok {
				return Self{Self: &st}, nil
			}
			return Self{}, nil
		}),
		Bind(OpEvents, b.events),
		Bind(OpEStopStatus, func(context.Context, act.Principal, None) (act.EStopStatus, error) {
			if b.EStop == nil {
				return act.EStopStatus{}, errNoEStop
			}
			return b.EStop.Status(), nil
		}),
		Bind(OpEStopTrip, b.trip),
		Bind(OpEStopReset, func(_ context.Context, p act.Principal, _ None) (act.EStopStatus, error) {
			if b.EStop == nil {
				return act.EStopStatus{}, errNoEStop
			}
			if err := b.EStop.Reset(p); err != nil {
				return act.EStopStatus{}, err
			}
			return b.EStop.Status(), nil
		}),
		Bind(OpCapabilities, func(context.Context, act.Principal, None) (Capabilities, error) {
			return Capabilities{Capabilities: b.Runner.Capabilities()}, nil
		}),
		Bind(OpDo, b.do),
		Bind(OpResult, func(_ context.Context, p act.Principal, in ResultIn) (act.Result, error) {
			var res act.Result
			var err error
			switch {
			case (in.ActionID == "") == (in.IdempotencyKey == ""):
				return res, refuse(ReasonInvalidParams, "want one of action_id and idempotency_key")
			case in.ActionID != "":
				res, err = b.Runner.Lookup(in.ActionID)
			default:
				res, err = b.Runner.LookupKey(p.Subject, in.IdempotencyKey)
			}
			return res, err
		}),
		Bind(OpGrantAdd, b.grantAdd),
		Bind(OpGrantList, b.grantList),
		Bind(OpGrantRevoke, b.grantRevoke),
		Bind(OpApprovals, func(ctx context.Context, _ act.Principal, _ None) (Approvals, error) {
			// Expired ones are left out whether or not their records
			// could be written now.
			b.Runner.SweepApprovals(ctx)
			w := b.Runner.Waiting()
			if w == nil {
				w = []act.WaitingInvocation{}
			}
			for i := range w {
				w[i].Asked, w[i].Expires = utc(w[i].Asked), utc(w[i].Expires)
			}
			return Approvals{Waiting: w}, nil
		}),
		Bind(OpApprove, func(ctx context.Context, p act.Principal, in ApproveIn) (act.Result, error) {
			return refused(b.Runner.Approve(ctx, in.ActionID, p))
		}),
		Bind(OpDeny, func(ctx context.Context, p act.Principal, in DenyIn) (act.Result, error) {
			return refused(b.Runner.Deny(ctx, in.ActionID, p, in.Why))
		}),
		Bind(OpLedgerStats, func(context.Context, act.Principal, None) (ledger.Stats, error) {
			if b.Store == nil {
				return ledger.Stats{}, errNoLedger
			}
			return b.Store.Stats()
		}),
		Bind(OpLedgerVerify, func(ctx context.Context, _ act.Principal, _ None) (ledger.VerifyReport, error) {
			if b.Store == nil {
				return ledger.VerifyReport{}, errNoLedger
			}
			return b.Store.Verify(ctx)
		}),
		Bind(OpLedgerVerifyArchive, func(ctx context.Context, _ act.Principal, _ None) (ledger.VerifyReport, error) {
			if b.Store == nil {
				return ledger.VerifyReport{}, errNoLedger
			}
			return b.Store.VerifyArchive(ctx)
		}),
		Bind(OpLedgerBackup, b.backup),
		Bind(OpWorkCreate, b.workCreate),
		Bind(OpWorkUpdate, b.workUpdate),
		Bind(OpWorkClose, b.workClose),
		Bind(OpWorkList, b.workList),
		Bind(OpWorkShow, b.workShow),
		Bind(OpWaitAdd, b.waitAdd),
		Bind(OpWaitRemove, b.waitRemove),
		Bind(OpWaitList, b.waitList),
		Bind(OpExplain, b.explain),
		Bind(OpPrivacyStatus, b.privacyStatus),
		Bind(OpPrivacyPause, b.privacyPause),
		Bind(OpPrivacyResume, b.privacyResume),
		Bind(OpEvidenceList, b.evidenceList),
		Bind(OpEvidenceGet, b.evidenceGet),
		Bind(OpEvidenceDelete, b.evidenceDelete),
		Bind(OpWorldNow, b.worldNow),
		Bind(OpWorldAt, b.worldAt),
		Bind(OpWorldHistory, b.worldHistory),
		Bind(OpWorldExplain, b.worldExplain),
		Bind(OpWorldTell, b.worldTell),
	)
}

var (
	errNoEStop  = refuse(ReasonUnavailable, "this board has no e-stop line: nothing above read-only may act")
	errNoLedger = refuse(ReasonUnavailable, "the ledger is not open (see the body's log)")
	errNoGrants = refuse(ReasonUnavailable, "grants are not available: the ledger is not open or its grants could not be read (see the body's log)")
)

func (b *Parts) status(context.Context, act.Principal, None) (Status, error) {
	st := b.Info
	st.PID = os.Getpid()
	st.StartedAt = b.Started.UTC()
	st.UptimeS = time.Since(b.Started).Seconds()
	st.Channels = b.Registry.Snapshot()
	if b.Senses != nil {
		st.Events = b.Senses()
	}
	if b.Privacy != nil {
		ps := b.Privacy.State()
		st.Privacy = &ps
	}
	if b.EStop != nil {
		es := b.EStop.Status()
		st.EStop = &es
	}
	if b.Self != nil {
		if self, ok := b.Self(); ok {
			st.Self = &self
		}
	}
	if b.Relay != nil {
		us := b.Relay.Status()
		st.Uplink = &us
	}
	if b.Store == nil {
		st.Ledger.Error = "not open"
	} else if ls, err := b.Store.Stats(); err != nil {
		st.Ledger.Error = err.Error()
	} else {
		st.Ledger.Path = ls.Path
		st.Ledger.Events, st.Ledger.LastSeq, st.Ledger.OutboxRows, st.Ledger.OutboxBytes = ls.Events, ls.LastSeq, ls.OutboxRows, ls.OutboxBytes
	}
	return st, nil
}

// ReadEvents answers an events call from store: with WaitMS it waits for
// the first new matching event, at most MaxWait, or until ctx ends. A
// reply is bounded by in.Limit, MaxReplyBytes and MaxScanBytes (see
// Events.More).
func ReadEvents(ctx context.Context, store *ledger.Store, in EventsIn) (Events, error) {
	return readEvents(ctx, store, in, nil)
}

// readEvents is ReadEvents taking a turn of reads (nil: none) for each
// read of the ledger, never while it waits for new events.
func readEvents(ctx context.Context, store *ledger.Store, in EventsIn, reads chan struct{}) (Events, error) {
	if in.Limit < 0 || in.Limit > MaxEvents {
		return Events{}, refuse(ReasonInvalidParams, "limit %d: want 0 to %d", in.Limit, MaxEvents)
	}
	if in.WaitMS < 0 || in.WaitMS > int(MaxWait/time.Millisecond) {
		return Events{}, refuse(ReasonInvalidParams, "wait_ms %d: want 0 to %d", in.WaitMS, MaxWait/time.Millisecond)
	}
	if len(in.Types) > MaxTypes {
		return Events{}, refuse(ReasonInvalidParams, "types: %d of them, more than %d", len(in.Types), MaxTypes)
	}
	for i, t := range in.Types {
		if t == "" || len(t) > MaxTypeBytes {
			return Events{}, refuse(ReasonInvalidParams, "types[%d]: %d bytes, want 1 to %d", i, len(t), MaxTypeBytes)
		}
	}
	f := ledger.Filter{After: in.After, Types: in.Types, Since: in.Since, Limit: in.Limit, MaxBytes: MaxReplyBytes, MaxScan: MaxScanBytes, Archive: in.Archive}
	if f.Limit == 0 {
		f.Limit = MaxEvents
	}
	var timeout <-chan time.Time
	if in.WaitMS > 0 {
		t := time.NewTimer(time.Duration(in.WaitMS) * time.Millisecond)
		defer t.Stop()
		timeout = t.C
	}
	for {
		changed := store.Changed()
		out, err := readPage(ctx, store, f, reads)
		if err != nil {
			return Events{}, err
		}
		if len(out.Events) > 0 || timeout == nil {
			return out, nil
		}
		if out.LastSeq != f.After {
			f.After = out.LastSeq
			continue // only events that did not match so far; look further
		}
		select {
		case <-changed:
		case <-timeout:
			return out, nil
		case <-ctx.Done():
			return out, ctx.Err()
		}
	}
}

// backup takes a snapshot of the ledger into an unnamed file beside it
// (ledger.Store.Snapshot: free space checked first, the read transaction
// closed once the copy is made), calling ctx's progress function as it
// copies.
func (b *Parts) backup(ctx context.Context, _ act.Principal, _ None) (Backup, error) {
	if b.Store == nil {
		return Backup{}, errNoLedger
	}
	sn, err := b.Store.Snapshot(ctx, filepath.Dir(b.Store.Path()), Progress(ctx))
	if err != nil {
		return Backup{}, err
	}
	return Backup{Bytes: sn.Size, SHA256: hex.EncodeToString(sn.SHA256[:]), LastSeq: sn.LastSeq, TakenAt: b.Now().UTC(), snap: sn}, nil
}

// readPage reads one reply's events under f, with a turn of reads, and
// cuts it where its JSON would pass MaxReplyBytes (keeping at least one
// event).
func readPage(ctx context.Context, store *ledger.Store, f ledger.Filter, reads chan struct{}) (Events, error) {
	if reads != nil {
		select {
		case reads <- struct{}{}:
			defer func() { <-reads }()
		case <-ctx.Done():
			return Events{}, ctx.Err()
		}
	}
	evs, next, more, err := store.Scan(f)
	if err != nil {
		return Events{}, err
	}
	out := Events{Events: make([]ledger.EventView, 0, len(evs)), LastSeq: next, More: more}
	size := 0
	for i := range evs {
		v := evs[i].View()
		// What it adds to the reply: its JSON and a comma. A view that
		// cannot be encoded counts nothing here; the reply then fails to
		// encode as a whole, which the transport reports.
		j, _ := json.Marshal(v)
		if i > 0 && size+len(j)+1 > MaxReplyBytes {
			out.LastSeq, out.More = out.Events[len(out.Events)-1].Seq, true
			break
		}
		size += len(j) + 1
		out.Events = append(out.Events, v)
		evs[i] = ledger.Stored{} // its view is what the reply holds
	}
	return out, nil
}

func (b *Parts) events(ctx context.Context, p act.Principal, in EventsIn) (Events, error) {
	if b.Store == nil {
		return Events{}, errNoLedger
	}
	evs, err := readEvents(ctx, b.Store, in, b.reads)
	if err != nil || p.Kind == act.LocalAdmin {
		return evs, err
	}
	kept := evs.Events[:0]
	for _, e := range evs.Events {
		if MaySee(p, privacyOf(e.Privacy)) {
			kept = append(kept, e)
		} else {
			evs.Withheld++
		}
	}
	evs.Events = kept
	return evs, nil
}

// MaySee tells whether principal p may be shown an event of privacy
// class c: a local administrator anything; anyone else nothing
// restricted, and sensitive events (camera, microphone) only at medium
// trust or above. An event without a class counts as internal.
func MaySee(p act.Principal, c ledger.Privacy) bool {
	switch {
	case p.Kind == act.LocalAdmin:
		return true
	case c == ledger.Restricted:
		return false
	case c == ledger.Sensitive:
		return p.Trust >= ledger.Medium
	}
	return true
}

func privacyOf(name string) ledger.Privacy {
	for _, c := range []ledger.Privacy{ledger.Public, ledger.Internal, ledger.Sensitive, ledger.Restricted} {
		if c.String() == name {
			return c
		}
	}
	return ledger.Internal
}

func (b *Parts) do(ctx context.Context, p act.Principal, in DoIn) (act.Result, error) {
	switch in.Mode {
	case "", act.Live, act.Shadow, act.Simulation:
	default:
		return act.Result{}, refuse(ReasonInvalidParams, "mode %q: want live, shadow or simulation", in.Mode)
	}
	if in.TimeoutMS < 0 {
		return act.Result{}, refuse(ReasonInvalidParams, "timeout_ms %d: want 0 (the default) or more", in.TimeoutMS)
	}
	cause, err := b.cause(p, in.CausedBy)
	if err != nil {
		return act.Result{}, err
	}
	inv := act.Invocation{Principal: p, Capability: in.Capability, Target: in.Target, Params: in.Params,
		IdempotencyKey: in.IdempotencyKey, Mode: in.Mode, Timeout: time.Duration(in.TimeoutMS) * time.Millisecond, Note: in.Note,
		CausedBy: cause}
	return refused(b.Runner.Submit(ctx, inv), nil)
}

// cause is the event a request names as its cause (DoIn.CausedBy), as
// the policy weighs it: its trust (an event without one: low), its
// provenance (without one: inferred), and whether the body observed or
// verified what it says: for a world.changed its payload's Observed, for
// any other event its provenance. It returns nil for no id. It fails
// closed, so a cause that cannot be read refuses the request and is
// never dropped: an id that is not a UUID is invalid_params; an event the
// ledger does not hold, or that p may not see (MaySee: its existence is
// not told), is not_found; without a ledger the request is unavailable;
// a record that cannot be read is failed.
func (b *Parts) cause(p act.Principal, id string) (*act.Observation, error) {
	if id == "" {
		return nil, nil
	}
	u, err := ledger.ParseUUID(id)
	if err != nil {
		if len(id) > 64 {
			return nil, refuse(ReasonInvalidParams, "caused_by: %d bytes, not an event id (a UUID)", len(id))
		}
		return nil, refuse(ReasonInvalidParams, "caused_by %q: not an event id (a UUID)", id)
	}
	if b.Store == nil {
		return nil, errNoLedger
	}
	notFound := refuse(ReasonNotFound, "caused_by %s: the ledger holds no such event; the cause must be an event the body recorded (retention may have deleted it)", u)
	e, ok, err := b.Store.EventByID(u)
	switch {
	case err != nil:
		return nil, refuse(ReasonFailed, "caused_by %s: the ledger could not be read: %v", u, err)
	case !ok || !MaySee(p, e.Privacy):
		return nil, notFound
	}
	o := &act.Observation{EventID: u.String(), Trust: e.Trust, Provenance: e.Provenance,
		Observed: e.Provenance == ledger.Observed || e.Provenance == ledger.Verified}
	if o.Trust == 0 {
		o.Trust = ledger.Low
	}
	if o.Provenance == 0 {
		o.Provenance = ledger.Inferred
	}
	if e.Type == world.EventChanged {
		var c world.Changed
		if err := ledger.UnmarshalPayload(e.Payload, &c); err != nil {
			return nil, refuse(ReasonFailed, "caused_by %s: its %s payload could not be read: %v", u, e.Type, err)
		}
		o.Observed = c.Observed
	}
	return o, nil
}

// refused folds an action the runner refused into an error with the
// refusal's reason and detail, which carries the runner's record of it
// (Error.Record): every caller learns of a refusal as an error, whatever
// the operation's output. Any other result is the output; action.result
// does not fold, since what became of an action is its answer.
func refused(res act.Result, err error) (act.Result, error) {
	if err == nil && res.Status == act.Refused {
		return res, &Error{Reason: res.Reason, Detail: res.Detail, Record: res}
	}
	return res, err
}

// viewGrant is a grant as callers see it at c, its times in UTC.
func viewGrant(g act.Grant, c act.Reading) GrantView {
	v := GrantView{ID: g.ID, Subject: g.Subject, Capability: g.Capability, Scope: g.Scope, Expires: utc(g.Expires), State: "active",
		Added: utc(g.Added), By: g.By, ByTrust: g.ByTrust, Reason: g.Reason, RevokedAt: utc(g.RevokedAt), RevokedBy: g.RevokedBy, RevokeReason: g.RevokeReason,
		ExpiredAt: utc(g.EndedAt), ExpiredBy: g.ExpiredBy, EndedEarlyS: int64(g.EndedEarly / time.Second)}
	switch {
	case g.Revoked:
		v.State = "revoked"
	case g.ExpiredAt(c):
		v.State = "expired"
	case g.SuspendedAt(c):
		v.State = "suspended"
	}
	return v
}

func (b *Parts) grantAdd(ctx context.Context, p act.Principal, in GrantAddIn) (GrantView, error) {
	if b.Grants == nil {
		return GrantView{}, errNoGrants
	}
	if b.Runner != nil && p.Trust < ledger.Max {
		if risk, what := b.Runner.RiskCovered(in.Capability, in.Scope); risk == act.R3 {
			need := MaxAdmin
			return GrantView{}, &Error{Reason: ReasonNotAuthorized, Need: &need,
				Detail: fmt.Sprintf("a grant of %s on %s covers %s, which is R3: granting R3 needs %s; the caller is %s at %s trust", in.Capability, in.Scope, what, MaxAdmin, p.Subject, p.Trust)}
		}
	}
	exp, err := act.ParseExpiry(in.Expires)
	if err != nil {
		return GrantView{}, refuse(ReasonInvalidParams, "expires: %v", err)
	}
	g, err := b.Grants.Add(ctx, act.Grant{Subject: in.Subject, Capability: in.Capability, Scope: in.Scope, By: p.Subject, ByTrust: p.Trust, Reason: in.Reason}, exp)
	if err != nil {
		return GrantView{}, err
	}
	return viewGrant(g, b.Grants.Reading()), nil
}

func (b *Parts) grantList(_ context.Context, _ act.Principal, in GrantListIn) (Grants, error) {
	if b.Grants == nil {
		return Grants{}, errNoGrants
	}
	c := b.Grants.Reading()
	list := b.Grants.Active(c)
	if in.All {
		list = b.Grants.All()
	}
	out := Grants{Grants: []GrantView{}}
	for _, g := range list {
		out.Grants = append(out.Grants, viewGrant(g, c))
	}
	return out, nil
}

func (b *Parts) grantRevoke(ctx context.Context, p act.Principal, in GrantRevokeIn) (GrantView, error) {
	if b.Grants == nil {
		return GrantView{}, errNoGrants
	}
	g, err := b.Grants.Revoke(ctx, in.ID, p.Subject, in.Reason)
	if err != nil {
		return GrantView{}, err
	}
	// What runs under it stops, and what it let be captured is deleted
	// (or frozen), in that order: a capture that ends after the
	// deletion finds itself cancelled and deletes what it kept.
	if b.Runner != nil {
		b.Runner.CancelGrant(g.ID, act.ReasonGrantRevoked)
	}
	if b.Evidence != nil {
		if _, err := b.Evidence.Revoked(ctx, g.ID, p.Subject); err != nil {
			return viewGrant(g, b.Grants.Reading()), fmt.Errorf("grant %s is revoked, but what was captured under it could not all be deleted: %w", g.ID, err)
		}
	}
	return viewGrant(g, b.Grants.Reading()), nil
}

// utc is t in UTC, the zero time kept zero: on the wire, times are RFC
// 3339 in UTC.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}
