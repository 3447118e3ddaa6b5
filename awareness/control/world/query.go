package world

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/tobe-body/tobe-body/ledger"
)

// Store is what the queries read: the projection, the running clock, and
// events by sequence (a *ledger.Store).
type Store interface {
	ledger.ProjectionReader
	Running() time.Duration
	EventsAt(seqs ...uint64) ([]ledger.Stored, error)
}

// Reader answers what the model knows, from the projection alone: no
// query replays history. It is safe for concurrent use.
type Reader struct {
	Store Store
	Model *Model
}

// ErrNoEntity: the model has no entity of that id, and the ledger no
// record of one.
var ErrNoEntity = errors.New("world: no such entity")

// State is an entity's state in an answer.
type State struct {
	Entity   string             `json:"entity"`
	Kind     Kind               `json:"kind"`
	Value    string             `json:"value"`
	Readings map[string]Reading `json:"readings,omitempty"`
	// Confidence is 0..1; Provenance observed, verified, told or
	// inferred (the sources disagree: Conflict).
	Confidence float64 `json:"confidence"`
	Provenance string  `json:"provenance,omitempty"`
	Conflict   bool    `json:"conflict,omitempty"`
	// Since is when the value became this (valid time), when known.
	Since time.Time `json:"since,omitzero"`
	// Sources say what each source holds; their records are the
	// evidence.
	Sources []SourceState `json:"sources"`
}

// SourceState is what one source holds of an entity.
type SourceState struct {
	Source   string             `json:"source"`
	Value    string             `json:"value"`
	Readings map[string]Reading `json:"readings,omitempty"`
	// Why is why a source holds nothing: no record yet, or why its
	// record ended (not_seen, source_lost, restarted, unverified,
	// withdrawn).
	Why        string  `json:"why,omitempty"`
	Confidence float64 `json:"confidence,omitempty"`
	Provenance string  `json:"provenance,omitempty"`
	// By is who told a told assertion.
	By string `json:"by,omitempty"`
	// ValidFrom is when the record's value became true, give or take
	// UncertaintyMS (ClockUnsynced: the clock was not synchronised, and
	// the time may be off by any amount).
	ValidFrom     time.Time `json:"valid_from,omitzero"`
	UncertaintyMS uint32    `json:"uncertainty_ms,omitempty"`
	ClockUnsynced bool      `json:"clock_unsynced,omitempty"`
	// LastSeen is when it was last seen (its record or its channel's
	// last mark); ExpiresInMS how long, on the running clock, before it
	// is unknown unless seen again (now only; absent: never).
	LastSeen    time.Time `json:"last_seen,omitzero"`
	ExpiresInMS *int64    `json:"expires_in_ms,omitempty"`
	// Recorded is the ledger sequence of its record (transaction time),
	// Supersedes the one it replaced.
	Recorded   uint64     `json:"recorded,omitempty"`
	Supersedes uint64     `json:"supersedes,omitempty"`
	Evidence   []Evidence `json:"evidence,omitempty"`
	// entry is the record's entry (with Recorded).
	entry entry
}

func timeAt(ns int64) time.Time { return time.Unix(0, ns).UTC() }

// snapshot reads the projection once for a query.
func (r *Reader) snapshot(fn func(kv ledger.ReadKV) error) error {
	return r.Store.ReadProjection(ProjectionName, fn)
}

// entity is the model's entity of id, or one the ledger has records of
// that the model no longer keeps.
func (r *Reader) entity(kv ledger.ReadKV, id string) (Entity, error) {
	if e, ok := r.Model.Entity(id); ok {
		return e, nil
	}
	found := false
	ledger.Range(kv, lastPrefix(id), nil, false, func(_, _ []byte) bool { found = true; return false })
	if !found {
		return Entity{}, fmt.Errorf("%w: %q", ErrNoEntity, id)
	}
	return Entity{ID: id, Kind: kindOfID(id), Name: id, Privacy: ledger.Sensitive}, nil
}

// sources lists the sources of an entity: the model's, and every source
// that has had a record of it.
func sources(kv ledger.ReadKV, e Entity) []string {
	var out []string
	for _, s := range e.Sources {
		out = append(out, s.ID())
	}
	p := lastPrefix(e.ID)
	ledger.Range(kv, p, nil, false, func(k, _ []byte) bool {
		if s := string(k[len(p):]); !slices.Contains(out, s) {
			out = append(out, s)
		}
		return true
	})
	sort.Strings(out)
	return out
}

// readEntry reads a source's entry: its record, or why its record ended
// (end).
func readEntry(kv ledger.ReadKV, entity, source string, x entry) (rec Record, end string, err error) {
	b := kv.Get(entryKey(entity, source, x))
	switch {
	case len(b) > 0 && b[0] == 'x':
		return rec, string(b[1:]), nil
	case len(b) > 0 && b[0] == 'o':
		return rec, "", ledger.UnmarshalPayload(b[1:], &rec)
	}
	return rec, "", fmt.Errorf("world: the entry of %s from %s at %d is missing", entity, source, x.seq)
}

// markAt is a channel's last seen mark after the sequence after and at
// or before the sequence upto: its last (d) when that is by upto, else
// the first of its own walking back from upto (a channel seen is marked
// before its records' expiry, and a record not seen in its expiry is
// ended: a walk crosses a few commits' marks).
func markAt(kv ledger.ReadKV, channel string, after, upto uint64) (Seen, uint64, bool) {
	var s Seen
	last := getU64(kv.Get(lastMarkKey(channel)))
	switch {
	case last == 0 || last <= after:
		return s, 0, false
	case last <= upto:
		b := kv.Get(markKey(last, channel))
		return s, last, b != nil && ledger.UnmarshalPayload(b, &s) == nil
	}
	var seq uint64
	found := false
	from := append(markKey(upto, ""), 0xff) // after every channel's at upto
	ledger.Range(kv, []byte{kMark}, from, true, func(k, v []byte) bool {
		sq, ch, ok := markOf(k)
		if !ok || sq <= after {
			return false
		}
		if ch != channel {
			return true
		}
		seq, found = sq, ledger.UnmarshalPayload(v, &s) == nil
		return false
	})
	return s, seq, found
}

// lastSeen is when the record of entry x was last seen as known at the
// sequence upto: its channel's last mark after it (and before the
// source's next entry, which ended or superseded it), or itself.
func lastSeen(kv ledger.ReadKV, rec Record, x entry, upto uint64) (runMS, at int64) {
	runMS, at = rec.RunMS, rec.ValidFrom
	if rec.Channel == "" || rec.ExpireMS <= 0 {
		return runMS, at // never marked: only what expires is (observe)
	}
	p := entryPrefix(rec.Entity, rec.Source)
	from := append(entryKey(rec.Entity, rec.Source, x), 0)
	ledger.Range(kv, p, from, false, func(k, _ []byte) bool {
		if next, ok := entryOf(k); ok && next.seq <= upto {
			upto = next.seq - 1 // marks after its end are another record's
		}
		return false
	})
	if m, _, ok := markAt(kv, rec.Channel, x.seq, upto); ok {
		runMS, at = max(runMS, m.RunMS), m.At // the latest sighting, whatever the wall clock said of it
	}
	return runMS, at
}

func (s *SourceState) fill(rec Record, x entry, seenAt int64) {
	s.Value, s.Readings, s.Confidence, s.Provenance, s.By = rec.Value, rec.Readings, rec.Confidence, rec.Provenance, rec.By
	s.ValidFrom, s.UncertaintyMS, s.ClockUnsynced = timeAt(rec.ValidFrom), rec.UncertaintyMS, rec.Unsynced
	s.LastSeen, s.Recorded, s.Supersedes, s.Evidence = timeAt(seenAt), x.seq, rec.Supersedes, rec.Evidence
	s.entry = x
}

// Now returns the state of the entities named (none: every entity of the
// model) as the body knows it now: each source's current record unless
// it is past its expiry on the running clock (then unknown, not_seen,
// whether or not the end is recorded yet), fused as the model fuses.
func (r *Reader) Now(ids ...string) ([]State, error) {
	if len(ids) == 0 {
		for _, e := range r.Model.entities {
			ids = append(ids, e.ID)
		}
	}
	run := r.Store.Running().Milliseconds()
	out := make([]State, 0, len(ids))
	err := r.snapshot(func(kv ledger.ReadKV) error {
		for _, id := range ids {
			ent, err := r.entity(kv, id)
			if err != nil {
				return err
			}
			var held []*current
			st := State{Entity: ent.ID, Kind: ent.Kind}
			expiredAt := int64(0)
			for _, src := range sources(kv, ent) {
				ss := SourceState{Source: src, Value: Unknown, Why: "no record"}
				x, ok := entryOf(kv.Get(lastKey(ent.ID, src)))
				rec, why, err := Record{}, "", error(nil)
				if ok {
					if rec, why, err = readEntry(kv, ent.ID, src, x); err != nil {
						return err
					}
				}
				switch {
				case ok && why != "":
					ss.Why = why
				case ok:
					seenRun, seenAt := lastSeen(kv, rec, x, math.MaxUint64)
					ss.fill(rec, x, seenAt)
					ss.Why = ""
					if rec.ExpireMS > 0 {
						left := rec.ExpireMS - (run - seenRun)
						ss.ExpiresInMS = &left
						if left < 0 {
							ss.Value, ss.Readings, ss.Why = Unknown, nil, EndNotSeen
							expiredAt = max(expiredAt, seenAt+rec.ExpireMS*1e6)
						}
					}
					if ss.Why == "" {
						held = append(held, &current{seq: x.seq, rec: rec})
					}
				}
				st.Sources = append(st.Sources, ss)
			}
			f := fuse(ent, held)
			st.Value, st.Readings, st.Confidence, st.Provenance, st.Conflict = f.Value, f.Readings, f.Confidence, f.Provenance, f.Conflict
			if last, ok, err := lastChangeOf(kv, ent.ID); err == nil && ok {
				switch {
				case last.Value == f.Value:
					st.Since = timeAt(last.Since)
				case expiredAt > 0:
					st.Since = timeAt(expiredAt) // an expiry not yet recorded changed it
				}
			}
			out = append(out, st)
		}
		return nil
	})
	return out, err
}

// At returns an entity's state at the valid time t, as the body knew it
// when the ledger was at the sequence knownAt (0: as it knows it now):
// for each source, the record with the latest valid time at or before t
// among those recorded by knownAt, unless an end recorded by then comes
// after it and before t, or t is past its expiry after the last time it
// was seen as known by then; fused as the model fuses. It reads only the
// indexes of the entity's sources, never the history between.
func (r *Reader) At(id string, t time.Time, knownAt uint64) (State, error) {
	if knownAt == 0 {
		knownAt = math.MaxUint64
	}
	tn := t.UnixNano()
	var st State
	err := r.snapshot(func(kv ledger.ReadKV) error {
		ent, err := r.entity(kv, id)
		if err != nil {
			return err
		}
		st = State{Entity: ent.ID, Kind: ent.Kind}
		var held []*current
		for _, src := range sources(kv, ent) {
			ss := SourceState{Source: src, Value: Unknown, Why: "no record"}
			x, found := entryAt(kv, ent.ID, src, tn, knownAt)
			if !found {
				st.Sources = append(st.Sources, ss)
				continue
			}
			rec, why, err := readEntry(kv, ent.ID, src, x)
			switch {
			case err != nil:
				return err
			case why != "":
				ss.Why = why
			default:
				_, seenAt := lastSeen(kv, rec, x, knownAt)
				ss.fill(rec, x, seenAt)
				ss.Why = ""
				if rec.ExpireMS > 0 && tn > seenAt+rec.ExpireMS*1e6 {
					ss.Value, ss.Readings, ss.Why = Unknown, nil, EndNotSeen
				} else {
					held = append(held, &current{seq: x.seq, rec: rec})
				}
			}
			st.Sources = append(st.Sources, ss)
		}
		f := fuse(ent, held)
		st.Value, st.Readings, st.Confidence, st.Provenance, st.Conflict = f.Value, f.Readings, f.Confidence, f.Provenance, f.Conflict
		hk := func(t int64, seq uint64) []byte { return historyKey(ent.ID, t, seq) }
		hTail := func(k []byte) (int64, uint64, bool) { t, seq := tail(k); return t, seq, len(k) >= 16 }
		if _, v, ok := recordedBy(kv, historyPrefix(ent.ID), hk, hTail, tn, knownAt); ok {
			var c Changed
			if ledger.UnmarshalPayload(v, &c) == nil && c.Value == f.Value {
				st.Since = timeAt(c.Since)
			}
		}
		return nil
	})
	return st, err
}

// entryAt is a source's last entry that began by t (Unix ns) among those
// recorded by the sequence knownAt.
func entryAt(kv ledger.ReadKV, entity, source string, t int64, knownAt uint64) (entry, bool) {
	key := func(t int64, seq uint64) []byte { return entryKey(entity, source, entry{from: t, seq: seq}) }
	tailOf := func(k []byte) (int64, uint64, bool) { x, ok := entryOf(k); return x.from, x.seq, ok }
	k, _, ok := recordedBy(kv, entryPrefix(entity, source), key, tailOf, t, knownAt)
	if !ok {
		return entry{}, false
	}
	return entryOf(k)
}

// recordedBy finds, among the keys under prefix that end in a time and a
// sequence (a source's entries, an entity's changes: see the keys), the
// last whose time is by t among those recorded by the sequence knownAt;
// key makes a key of a time and a sequence, tailOf reads them back.
// Under such a prefix keys sort by time and by sequence alike, so those
// recorded by knownAt come first: when the last key by t was recorded
// after knownAt, the answer is the last before the first recorded after,
// found by halving the time between (a few dozen reads, not a walk over
// every key recorded since).
func recordedBy(kv ledger.ReadKV, prefix []byte, key func(t int64, seq uint64) []byte, tailOf func(k []byte) (int64, uint64, bool),
	t int64, knownAt uint64) (k, v []byte, ok bool) {
	upto := func(from []byte) (k, v []byte, ok bool) { // the last key at or before from
		ledger.Range(kv, prefix, from, true, func(key, val []byte) bool {
			k, v, ok = key, val, true
			return false
		})
		return k, v, ok
	}
	k, v, ok = upto(key(t, math.MaxUint64))
	if !ok {
		return nil, nil, false
	}
	last, seq, ok := tailOf(k)
	if !ok || seq <= knownAt {
		return k, v, ok
	}
	// The first key recorded after knownAt has the least time by which
	// the last key was recorded after knownAt.
	lo, hi := int64(math.MinInt64), last
	for lo < hi {
		mid := lo + int64((uint64(hi)-uint64(lo))/2)
		k, _, ok := upto(key(mid, math.MaxUint64))
		if _, s, tok := tailOf(k); ok && tok && s > knownAt {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	// The last before it: of an earlier time, or as early and recorded
	// by knownAt.
	return upto(key(lo, knownAt))
}

// Change is one change of an entity's state in a history.
type Change struct {
	Value      string             `json:"value"`
	Readings   map[string]Reading `json:"readings,omitempty"`
	Was        string             `json:"was,omitempty"`
	Confidence float64            `json:"confidence"`
	Provenance string             `json:"provenance"`
	Conflict   bool               `json:"conflict,omitempty"`
	Sources    []string           `json:"sources,omitempty"`
	// At is when it changed (valid time); Since when the value became
	// this (earlier than At when only the provenance or confidence
	// changed); Recorded its ledger sequence.
	At       time.Time `json:"at"`
	Since    time.Time `json:"since"`
	Recorded uint64    `json:"recorded"`
}

// History is an entity's changes over a range of valid time.
type History struct {
	Entity string `json:"entity"`
	Kind   Kind   `json:"kind"`
	// Before is the change in force at the range's start, if any.
	Before  *Change  `json:"before,omitempty"`
	Changes []Change `json:"changes"`
	// More: the range has more changes than the limit; ask again from
	// the last one's at.
	More bool `json:"more,omitempty"`
}

// MaxHistory bounds the changes one history returns.
const MaxHistory = 1000

// History returns an entity's changes with valid times in [from, to),
// oldest first, at most limit (0 or more than MaxHistory: MaxHistory),
// and the change in force at from.
func (r *Reader) History(id string, from, to time.Time, limit int) (History, error) {
	if limit <= 0 || limit > MaxHistory {
		limit = MaxHistory
	}
	var h History
	err := r.snapshot(func(kv ledger.ReadKV) error {
		ent, err := r.entity(kv, id)
		if err != nil {
			return err
		}
		h = History{Entity: ent.ID, Kind: ent.Kind, Changes: []Change{}}
		conv := func(k, v []byte) (Change, bool) {
			var c Changed
			if ledger.UnmarshalPayload(v, &c) != nil {
				return Change{}, false
			}
			_, seq := tail(k)
			return Change{Value: c.Value, Readings: c.Readings, Was: c.Was, Confidence: c.Confidence, Provenance: c.Provenance,
				Conflict: c.Conflict, Sources: c.Sources, At: time.Unix(0, c.At).UTC(), Since: time.Unix(0, c.Since).UTC(), Recorded: seq}, true
		}
		start := historyKey(ent.ID, from.UnixNano(), 0)
		ledger.Range(kv, historyPrefix(ent.ID), start, true, func(k, v []byte) bool {
			if c, ok := conv(k, v); ok && !bytesEqual(k, start) {
				h.Before = &c
			}
			return false
		})
		end := to.UnixNano()
		ledger.Range(kv, historyPrefix(ent.ID), start, false, func(k, v []byte) bool {
			if at, _ := tail(k); at >= end {
				return false
			}
			if len(h.Changes) == limit {
				h.More = true
				return false
			}
			if c, ok := conv(k, v); ok {
				h.Changes = append(h.Changes, c)
			}
			return true
		})
		return nil
	})
	return h, err
}

func bytesEqual(a, b []byte) bool { return string(a) == string(b) }

// Explanation is an entity's state now with the chain of evidence under
// it: for each source, its records back through what they superseded
// (at most MaxChain), each with the events it rests on, and the last
// seen mark of its channel.
type Explanation struct {
	State
	Chains []Chain `json:"chains"`
}

// Chain is one source's records, newest first.
type Chain struct {
	Source  string `json:"source"`
	Records []Link `json:"records"`
	// LastMark is the last seen mark of the source's channel, with the
	// event it rests on.
	LastMark *Cited `json:"last_mark,omitempty"`
}

// Link is one record of a chain.
type Link struct {
	Recorded   uint64             `json:"recorded"`
	Value      string             `json:"value"`
	Readings   map[string]Reading `json:"readings,omitempty"`
	Confidence float64            `json:"confidence"`
	Provenance string             `json:"provenance"`
	By         string             `json:"by,omitempty"`
	ValidFrom  time.Time          `json:"valid_from"`
	// ValidTo is when the record that superseded it began (absent: it
	// holds, or it ended without one; the state's sources say why).
	ValidTo  time.Time `json:"valid_to,omitzero"`
	Evidence []Cited   `json:"evidence"`
}

// Cited is an event a state rests on, as the ledger has it now.
type Cited struct {
	Evidence
	// Event is the event (its type, channel, time and payload), nil when
	// the ledger no longer holds it: Gone then says why.
	Event *ledger.EventView `json:"event,omitempty"`
	Gone  string            `json:"gone,omitempty"`
}

// MaxChain bounds the records of a chain.
const MaxChain = 8

// Explain returns an entity's state now with its evidence chain.
func (r *Reader) Explain(id string) (Explanation, error) {
	sts, err := r.Now(id)
	if err != nil {
		return Explanation{}, err
	}
	x := Explanation{State: sts[0]}
	var cite []*Cited
	err = r.snapshot(func(kv ledger.ReadKV) error {
		for _, ss := range x.Sources {
			ch := Chain{Source: ss.Source, Records: []Link{}}
			var channel string
			var err error
			if ss.Recorded != 0 {
				// The source's entries back from its record, to the end
				// of the record before them (what superseded what).
				ledger.Range(kv, entryPrefix(x.Entity, ss.Source), entryKey(x.Entity, ss.Source, ss.entry), true, func(k, v []byte) bool {
					e, ok := entryOf(k)
					if !ok || len(v) == 0 || v[0] != 'o' {
						return false
					}
					var rec Record
					if err = ledger.UnmarshalPayload(v[1:], &rec); err != nil {
						return false
					}
					channel = rec.Channel
					l := Link{Recorded: e.seq, Value: rec.Value, Readings: rec.Readings, Confidence: rec.Confidence, Provenance: rec.Provenance,
						By: rec.By, ValidFrom: time.Unix(0, rec.ValidFrom).UTC()}
					if n := len(ch.Records); n > 0 {
						l.ValidTo = ch.Records[n-1].ValidFrom // the record after it superseded it
					}
					for _, ev := range rec.Evidence {
						l.Evidence = append(l.Evidence, Cited{Evidence: ev})
					}
					ch.Records = append(ch.Records, l)
					return len(ch.Records) < MaxChain
				})
			}
			if err != nil {
				return fmt.Errorf("world: the records of %s from %s: %w", x.Entity, ss.Source, err)
			}
			if channel != "" && ss.Recorded != 0 {
				if m, _, ok := markAt(kv, channel, ss.Recorded, math.MaxUint64); ok {
					ch.LastMark = &Cited{Evidence: m.Evidence}
				}
			}
			x.Chains = append(x.Chains, ch)
		}
		return nil
	})
	if err != nil {
		return x, err
	}
	for i := range x.Chains {
		for j := range x.Chains[i].Records {
			for k := range x.Chains[i].Records[j].Evidence {
				cite = append(cite, &x.Chains[i].Records[j].Evidence[k])
			}
		}
		if m := x.Chains[i].LastMark; m != nil {
			cite = append(cite, m)
		}
	}
	seqs := make([]uint64, len(cite))
	for i, c := range cite {
		seqs[i] = c.Seq
	}
	evs, err := r.Store.EventsAt(seqs...)
	if err != nil {
		return x, err
	}
	have := map[uint64]*ledger.Stored{}
	for i := range evs {
		have[evs[i].Seq] = &evs[i]
	}
	for _, c := range cite {
		if e := have[c.Seq]; e != nil && e.ID.String() == c.ID {
			v := e.View()
			c.Event = &v
		} else {
			c.Gone = "deleted by retention (sensed events are kept for their class's time; the record stays)"
		}
	}
	return x, nil
}
