package act

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/tobe-body/tobe-body/ledger"
)

// What must survive a restart is kept as ledger projections, updated in
// the transaction that appends the events they follow: startup reads
// them, never the history (which only grows).
//
//   - estop_latch: whether the e-stop was latched, by its own observed
//     records (LatchedAtStop);
//   - human_holds: per resource, the last of the people's takeovers and
//     releases, with its control (HeldAtStop);
//   - actions_open: per action, its last record while it is not final
//     (Runner.Recover);
//   - action_results: per action, the status of its last record and the
//     last result recorded (the answer to a repeated idempotency key);
//   - action_keys: per principal and idempotency key, the action it
//     named (Runner.LookupKey);
//   - grants: every grant as it stands, its recorded expiry included
//     (LoadGrants);
//   - estop_keys: per asker's subject and idempotency key, the sequence
//     of the e-stop's record of that stop (TripOfKey).
//
// Each is a pure function of its events in order: `ledger verify`
// rebuilds them and compares, and a ledger written before them builds them
// from its events once, when it is opened with them.
const (
	projEStop   = "estop_latch"
	projHolds   = "human_holds"
	projOpen    = "actions_open"
	projResults = "action_results"
	projGrants  = "grants"
	projKeys    = "action_keys"
	projTrips   = "estop_keys"
)

// Projections are the projections the act package restores its state
// from. Every opener of the body's ledger registers them (in
// ledger.Options.Projections), so they are kept by whoever appends and
// rebuilt by verify.
func Projections() []ledger.Projection {
	return []ledger.Projection{estopLatch{}, humanHolds{}, openActions{}, actionResults{}, actionKeys{}, grantsState{}, tripKeys{}}
}

// tripKeys keeps, per asker's subject and idempotency key, the sequence
// of the e-stop's own record of the stop it asked for: subject, NUL, key
// → 8 bytes. The first record of a key stays (a repeat is answered from
// it and stops nothing, so there is never a second, but a ledger might
// hold one).
type tripKeys struct{}

func (tripKeys) Name() string    { return projTrips }
func (tripKeys) Types() []string { return []string{"estop.tripped", "estop.stop_again"} }

func (tripKeys) Apply(kv ledger.KV, e *ledger.Event) error {
	if e.ChannelID != EStopChannel || e.Provenance != ledger.Observed {
		return nil
	}
	var t Trip
	if ledger.UnmarshalPayload(e.Payload, &t) != nil || t.By == "" || t.Key == "" {
		return nil
	}
	k := keyOf(t.By, t.Key)
	if kv.Get(k) != nil {
		return nil
	}
	seq, ok := ledger.SeqOf(kv)
	if !ok {
		return fmt.Errorf("estop_keys: the sequence of the record of %s's key %q is not known", t.By, t.Key)
	}
	v := make([]byte, 8)
	binary.BigEndian.PutUint64(v, seq)
	return kv.Put(k, v)
}

// TripOfKey finds the stop subject asked for with idempotency key: the
// e-stop's record of it, as the Trip it recorded (its Edge and Safe are
// not kept), and true; false when there is none.
func TripOfKey(store *ledger.Store, subject, key string) (Trip, bool, error) {
	if store == nil {
		return Trip{}, false, ErrNoLedger
	}
	var seq uint64
	err := store.ReadProjection(projTrips, func(kv ledger.ReadKV) error {
		if v := kv.Get(keyOf(subject, key)); v != nil {
			if len(v) != 8 {
				return fmt.Errorf("the record of key %q is %x", key, v)
			}
			seq = binary.BigEndian.Uint64(v)
		}
		return nil
	})
	if err != nil || seq == 0 {
		return Trip{}, false, err
	}
	// The stop may be older than the ledger's audit_keep.
	evs, err := store.Events(ledger.Filter{After: seq - 1, Limit: 1, Archive: true})
	if err != nil {
		return Trip{}, false, err
	}
	var t Trip
	if len(evs) != 1 || evs[0].Seq != seq {
		return Trip{}, false, fmt.Errorf("the record of key %q, event %d, is not in the ledger", key, seq)
	}
	if err := ledger.UnmarshalPayload(evs[0].Payload, &t); err != nil {
		return Trip{}, false, fmt.Errorf("the record of key %q, event %d: %w", key, seq, err)
	}
	t.Recorded = true
	return t, true, nil
}

// EStopChannel is the channel id the e-stop's records carry. Only the
// records on it, observed by the body, latch or release the latch at
// start.
const EStopChannel = "estop.main"

// estopLatch keeps whether the e-stop's last trip is later than its last
// reset: key "latched", one byte.
type estopLatch struct{}

var keyLatched = []byte("latched")

func (estopLatch) Name() string    { return projEStop }
func (estopLatch) Types() []string { return []string{"estop.tripped", "estop.reset"} }

func (estopLatch) Apply(kv ledger.KV, e *ledger.Event) error {
	if e.ChannelID != EStopChannel || e.Provenance != ledger.Observed {
		return nil // told by someone, or not the e-stop's own
	}
	v := byte(0)
	if e.Type == "estop.tripped" {
		v = 1
	}
	return kv.Put(keyLatched, []byte{v})
}

// LatchedAtStop tells whether the e-stop was latched when the body last
// stopped: its last trip, of its own observed records, is later than its
// last reset. Without a ledger, or when it cannot be read, it returns true
// and the error: not knowing means latched.
func LatchedAtStop(store *ledger.Store) (bool, error) {
	if store == nil {
		return true, errors.New("act: the ledger is not open")
	}
	latched := false
	err := store.ReadProjection(projEStop, func(kv ledger.ReadKV) error {
		v := kv.Get(keyLatched)
		latched = len(v) == 1 && v[0] == 1
		if len(v) > 1 {
			return fmt.Errorf("the latch is %x", v)
		}
		return nil
	})
	if err != nil {
		return true, fmt.Errorf("act: the e-stop's latch: %w", err)
	}
	return latched, nil
}

// WhyLatchedAtStart is why the e-stop starts latched, or "" when it
// starts armed. In this order: a ledger that is not open or cannot be
// read; a damaged ledger, moved aside and a new one started (whether the
// latch was set is in the file that could not be read, so it counts as
// set); a last run the watchdog found stuck (stuck is its note, "" when
// there is none); a latch that was set when the body stopped.
func WhyLatchedAtStart(store *ledger.Store, stuck string) string {
	switch latched, err := LatchedAtStop(store); {
	case err != nil:
		return "the ledger cannot be read: " + err.Error()
	case store.Damage() != nil:
		return store.Damage().Error()
	case stuck != "":
		return "the watchdog stopped the last run: " + stuck
	case latched:
		return "it was latched when the body stopped"
	}
	return ""
}

// humanHolds keeps, per resource, whether a person holds it and by which
// control: the last of its lease.human_takeover and lease.human_released.
// A record whose payload cannot be read is passed over.
type humanHolds struct{}

// holdState is a resource's value in human_holds.
type holdState struct {
	Held    bool   `cbor:"held"`
	Control string `cbor:"control"`
}

func (humanHolds) Name() string { return projHolds }
func (humanHolds) Types() []string {
	return []string{EventHumanTakeover, EventHumanReleased}
}

func (humanHolds) Apply(kv ledger.KV, e *ledger.Event) error {
	var st holdState
	var res string
	switch e.Type {
	case EventHumanTakeover:
		var p humanTakeover
		if ledger.UnmarshalPayload(e.Payload, &p) != nil {
			return nil
		}
		res, st = p.Resource, holdState{Held: true, Control: p.Control}
	case EventHumanReleased:
		var p humanReleased
		if ledger.UnmarshalPayload(e.Payload, &p) != nil {
			return nil
		}
		res, st = p.Resource, holdState{Control: p.Control}
	default:
		return nil
	}
	if res == "" {
		return nil
	}
	v, err := ledger.MarshalPayload(st)
	if err != nil {
		return err
	}
	return kv.Put([]byte(res), v)
}

// HeldAtStop returns the controls, sorted, whose holds the ledger shows
// in force when the body stopped: a resource whose last hold record is a
// takeover. An error means the holds could not be read.
func HeldAtStop(store *ledger.Store) ([]string, error) {
	if store == nil {
		return nil, errors.New("act: the ledger is not open")
	}
	var out []string
	err := store.ReadProjection(projHolds, func(kv ledger.ReadKV) error {
		return kv.ForEach(func(k, v []byte) error {
			var st holdState
			if err := ledger.UnmarshalPayload(v, &st); err != nil {
				return fmt.Errorf("resource %s: %w", k, err)
			}
			if st.Held && !slices.Contains(out, st.Control) {
				out = append(out, st.Control)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("act: the people's holds: %w", err)
	}
	sort.Strings(out)
	return out, nil
}

// actionOf is the action id of an action record: its aggregate is
// "action:" and the id. A record of no action is "".
func actionOf(e *ledger.Event) string {
	id, ok := strings.CutPrefix(e.AggregateID, "action:")
	if !ok {
		return ""
	}
	return id
}

// statusOf is the status an action record says: its type after "action.".
func statusOf(e *ledger.Event) Status { return Status(strings.TrimPrefix(e.Type, "action.")) }

// openActions keeps the actions whose last record is not final: action
// id → that record's status and payload. A final record deletes the
// action.
type openActions struct{}

// openAction is an action's value in actions_open.
type openAction struct {
	Status  Status          `cbor:"status"`
	Payload cbor.RawMessage `cbor:"payload"`
}

func (openActions) Name() string    { return projOpen }
func (openActions) Types() []string { return []string{"action."} }

func (openActions) Apply(kv ledger.KV, e *ledger.Event) error {
	id := actionOf(e)
	if id == "" {
		return nil
	}
	s := statusOf(e)
	if s.Final() {
		return kv.Delete([]byte(id))
	}
	v, err := ledger.MarshalPayload(openAction{Status: s, Payload: e.Payload})
	if err != nil {
		return err
	}
	return kv.Put([]byte(id), v)
}

// actionResults keeps, per action, the status of its last record and the
// last result recorded for it (a final record's, or the one an invocation
// waiting for approval was answered with): what a repeat of its
// idempotency key is answered with after a restart.
type actionResults struct{}

// actionResult is an action's value in action_results.
type actionResult struct {
	Status Status          `cbor:"status"`
	Result cbor.RawMessage `cbor:"result,omitempty"`
}

func (actionResults) Name() string    { return projResults }
func (actionResults) Types() []string { return []string{"action."} }

// Forget lets go of a finished action once the archive took its final
// record: what became of it is in the archive (ledger events --archive).
// A record after it (a compensation) keeps it until that one goes too.
func (actionResults) Forget(kv ledger.KV, e *ledger.Event) error {
	id := actionOf(e)
	s := statusOf(e)
	if id == "" || !s.Final() {
		return nil
	}
	var cur actionResult
	if v := kv.Get([]byte(id)); v == nil || ledger.UnmarshalPayload(v, &cur) != nil || cur.Status != s {
		return nil
	}
	return kv.Delete([]byte(id))
}

func (actionResults) Apply(kv ledger.KV, e *ledger.Event) error {
	id := actionOf(e)
	if id == "" {
		return nil
	}
	var cur actionResult
	if v := kv.Get([]byte(id)); v != nil {
		if err := ledger.UnmarshalPayload(v, &cur); err != nil {
			return fmt.Errorf("action %s: %w", id, err)
		}
	}
	cur.Status = statusOf(e)
	var p map[string]cbor.RawMessage
	var res Result
	if ledger.UnmarshalPayload(e.Payload, &p) == nil && p["result"] != nil && ledger.UnmarshalPayload(p["result"], &res) == nil {
		cur.Result = p["result"]
	}
	v, err := ledger.MarshalPayload(cur)
	if err != nil {
		return err
	}
	return kv.Put([]byte(id), v)
}

// actionKeys keeps, per principal's subject and idempotency key, the
// action its latest proposal named: subject, NUL, key → action id. The
// ledger keeps a proposal's dedupe key as long as the proposal (for ever:
// action records are audit records), so a repeat is deduplicated before
// it is recorded; a file written before dedupe keys lived that long may
// hold a later proposal with the same key, and the key names that one.
type actionKeys struct{}

func (actionKeys) Name() string    { return projKeys }
func (actionKeys) Types() []string { return []string{"action.proposed"} }

func (actionKeys) Apply(kv ledger.KV, e *ledger.Event) error {
	k, id := proposalKey(e)
	if k == nil {
		return nil
	}
	return kv.Put(k, []byte(id))
}

// Forget lets go of the key of a proposal the archive took: the ledger
// refuses a repeat of it from its past keys, without this.
func (actionKeys) Forget(kv ledger.KV, e *ledger.Event) error {
	k, id := proposalKey(e)
	if k == nil || string(kv.Get(k)) != id {
		return nil
	}
	return kv.Delete(k)
}

// proposalKey is the key a proposal keeps in action_keys, and its action
// (nil: it keeps none).
func proposalKey(e *ledger.Event) ([]byte, string) {
	id := actionOf(e)
	var p struct {
		Principal  string     `cbor:"principal"`
		Invocation Invocation `cbor:"invocation"`
	}
	var m map[string]cbor.RawMessage
	if id == "" || ledger.UnmarshalPayload(e.Payload, &m) != nil {
		return nil, ""
	}
	if ledger.UnmarshalPayload(m["principal"], &p.Principal) != nil || ledger.UnmarshalPayload(m["invocation"], &p.Invocation) != nil ||
		p.Invocation.IdempotencyKey == "" {
		return nil, ""
	}
	return keyOf(p.Principal, p.Invocation.IdempotencyKey), id
}

// Closes tells the ledger which events close their aggregate (see
// ledger.Closer): an action's final record. When the archive takes it,
// the action's version leaves the file.
func (actionResults) Closes(e *ledger.Event) bool {
	return actionOf(e) != "" && statusOf(e).Final()
}

func keyOf(subject, key string) []byte { return []byte(subject + "\x00" + key) }

// grantsState keeps the grants as they stand: "g" and its id → the grant
// (added, and expired and revoked when it is), each until the archive
// takes the record that ended it (Forget); "#" → how many were added (the
// order a grant was added in is kept with it); and "!" → the first grant event
// that could not be read or did not follow from the ones before; after it
// nothing is applied, and LoadGrants fails: grants fail closed, and a
// revocation is never skipped.
type grantsState struct{}

var (
	keyGrantCount = []byte("#")
	keyGrantFault = []byte("!")
)

func grantKey(id string) []byte { return append([]byte("g"), id...) }

// grantRecord is a grant's value in grants.
type grantRecord struct {
	Ord          uint64     `cbor:"ord"`
	Added        grantAdded `cbor:"added"`
	AddedAt      int64      `cbor:"added_at"`
	Revoked      bool       `cbor:"revoked,omitempty"`
	RevokedAt    int64      `cbor:"revoked_at,omitempty"`
	RevokedBy    string     `cbor:"revoked_by,omitempty"`
	RevokeReason string     `cbor:"revoke_reason,omitempty"`
	// Expired is its grant.expired, when one was recorded, at ExpiredAt.
	Expired   *grantExpired `cbor:"expired,omitempty"`
	ExpiredAt int64         `cbor:"expired_at,omitempty"`
}

// grant is the record as a Grant.
func (r grantRecord) grant() (Grant, error) {
	g, err := grantOf(r.Added, time.Unix(0, r.AddedAt).UTC())
	if err != nil {
		return Grant{}, err
	}
	if r.Expired != nil {
		g.setExpired(*r.Expired, time.Unix(0, r.ExpiredAt).UTC())
	}
	if r.Revoked {
		g.Revoked, g.RevokedAt, g.RevokedBy, g.RevokeReason = true, time.Unix(0, r.RevokedAt).UTC(), r.RevokedBy, r.RevokeReason
	}
	return g, nil
}

func (grantsState) Name() string    { return projGrants }
func (grantsState) Types() []string { return []string{"grant."} }

// Forget lets go of a grant that ended once the archive takes the record
// that ended it: a revocation, or an expiry. What it was is in the
// archive (ledger events --archive); a body's grants in force stay, and
// those that ended do not pile up for a start to read. A revocation ends
// a grant for good. An expired grant may still be revoked after it (an
// administrator tidying up), and that revocation, applied once the
// grant is gone, changes nothing (applyGrant): either order gives the
// same.
func (grantsState) Forget(kv ledger.KV, e *ledger.Event) error {
	// Even after a fault: a deletion commutes with applies that change
	// nothing.
	if e.Type != EventGrantRevoked && e.Type != EventGrantExpired {
		return nil
	}
	var id string
	if e.Type == EventGrantRevoked {
		var p grantRevoked
		if ledger.UnmarshalPayload(e.Payload, &p) == nil {
			id = p.ID
		}
	} else {
		var p grantExpired
		if ledger.UnmarshalPayload(e.Payload, &p) == nil {
			id = p.ID
		}
	}
	if id == "" {
		return nil
	}
	return kv.Delete(grantKey(id))
}

// Closes tells the ledger that a revocation closes its grant's
// aggregate: nothing follows it. An expiry does not (a revocation may).
func (grantsState) Closes(e *ledger.Event) bool { return e.Type == EventGrantRevoked }

func (grantsState) Apply(kv ledger.KV, e *ledger.Event) error {
	if kv.Get(keyGrantFault) != nil {
		return nil
	}
	if why := applyGrant(kv, e); why != nil {
		return kv.Put(keyGrantFault, []byte(fmt.Sprintf("event %s (%s): %v", e.ID, e.Type, why)))
	}
	return nil
}

// applyGrant changes the grants by one event; the error says why the event
// does not follow (the projection records it), or that the bucket failed.
func applyGrant(kv ledger.KV, e *ledger.Event) error {
	switch e.Type {
	case EventGrantAdded:
		var p grantAdded
		if err := ledger.UnmarshalPayload(e.Payload, &p); err != nil {
			return err
		}
		if p.ID == "" || kv.Get(grantKey(p.ID)) != nil {
			return fmt.Errorf("grant id %q is empty or used already", p.ID)
		}
		if _, err := grantOf(p, e.Occurred()); err != nil {
			return err
		}
		n := uint64(0)
		if v := kv.Get(keyGrantCount); v != nil {
			if err := ledger.UnmarshalPayload(v, &n); err != nil {
				return err
			}
		}
		return putGrant(kv, p.ID, grantRecord{Ord: n, Added: p, AddedAt: e.OccurredAt}, n+1)
	case EventGrantRevoked:
		var p grantRevoked
		if err := ledger.UnmarshalPayload(e.Payload, &p); err != nil {
			return err
		}
		v := kv.Get(grantKey(p.ID))
		if v == nil && e.AggregateVersion > 2 {
			// It follows an expiry (version 2): the grant ended, and
			// its record went when the archive took the expiry.
			return nil
		}
		if v == nil {
			return fmt.Errorf("revokes grant %q, which was never added", p.ID)
		}
		var r grantRecord
		if err := ledger.UnmarshalPayload(v, &r); err != nil {
			return err
		}
		if r.Revoked {
			return fmt.Errorf("revokes grant %q a second time", p.ID)
		}
		r.Revoked, r.RevokedAt, r.RevokedBy, r.RevokeReason = true, e.OccurredAt, p.By, p.Reason
		return putGrant(kv, p.ID, r, 0)
	case EventGrantExpired:
		var p grantExpired
		if err := ledger.UnmarshalPayload(e.Payload, &p); err != nil {
			return err
		}
		v := kv.Get(grantKey(p.ID))
		if v == nil {
			return fmt.Errorf("expires grant %q, which was never added", p.ID)
		}
		var r grantRecord
		if err := ledger.UnmarshalPayload(v, &r); err != nil {
			return err
		}
		g, err := r.grant()
		if err != nil {
			return err
		}
		if err := checkExpired(g, p); err != nil {
			return err
		}
		r.Expired, r.ExpiredAt = &p, e.OccurredAt
		return putGrant(kv, p.ID, r, 0)
	}
	return errors.New("not a grant event this body knows")
}

// putGrant writes a grant's record and, unless count is 0, the count.
func putGrant(kv ledger.KV, id string, r grantRecord, count uint64) error {
	v, err := ledger.MarshalPayload(r)
	if err != nil {
		return err
	}
	if err := kv.Put(grantKey(id), v); err != nil {
		return err
	}
	if count == 0 {
		return nil
	}
	c, err := ledger.MarshalPayload(count)
	if err != nil {
		return err
	}
	return kv.Put(keyGrantCount, c)
}

// readGrants reads the grants projection: every grant in the order it
// was added, or the fault that stops them. A start reads every grant
// there is, so the read is one decode a grant and no copy of them more:
// their count (the next order: of all ever added) sizes the slice up to a
// bound, and they are sorted (through their indexes) only when key order
// is not the order they were added in.
func readGrants(kv ledger.ReadKV) ([]Grant, error) {
	if f := kv.Get(keyGrantFault); f != nil {
		return nil, errors.New(string(f))
	}
	var n uint64
	if v := kv.Get(keyGrantCount); v != nil {
		if err := ledger.UnmarshalPayload(v, &n); err != nil {
			return nil, fmt.Errorf("grants' count: %w", err)
		}
	}
	out := make([]Grant, 0, min(n, grantsHint))
	ords := make([]uint64, 0, cap(out))
	err := kv.ForEach(func(k, v []byte) error {
		if len(k) == 0 || k[0] != 'g' {
			return nil
		}
		var r grantRecord
		if err := ledger.UnmarshalPayload(v, &r); err != nil {
			return fmt.Errorf("grant %s: %w", k[1:], err)
		}
		g, err := r.grant()
		if err != nil {
			return fmt.Errorf("grant %s: %w", k[1:], err)
		}
		out, ords = append(out, g), append(ords, r.Ord)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if slices.IsSorted(ords) {
		return out, nil
	}
	idx := make([]int, len(out))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(ords[a], ords[b]) })
	sorted := make([]Grant, len(out))
	for i, j := range idx {
		sorted[i] = out[j]
	}
	return sorted, nil
}

// grantsHint bounds the slice the count sizes: the count is of every
// grant ever added, most of them forgotten on an old body.
const grantsHint = 4096
