package ledger

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"reflect"
	"slices"
	"time"

	"github.com/fxamacker/cbor/v2"
	bolt "go.etcd.io/bbolt"
)

// Stored is an event with its sequence.
type Stored struct {
	Seq uint64
	Event
}

// Filter selects events for Events.
type Filter struct {
	After uint64 // only events after this sequence
	Types []string
	Since time.Time // only events that occurred at or after
	Limit int       // at most this many; 0: 1000
	// MaxBytes bounds what one read holds: it stops after the event whose
	// record (its CBOR, as stored) brings the events taken to MaxBytes or
	// more, so at least one is taken however large. 0: no bound but
	// Limit.
	MaxBytes int
	// MaxScan bounds what one read looks at: it stops after the event
	// whose record brings the records it looked at, matching or not, to
	// MaxScan bytes or more (a filter that matches little then reads a
	// bounded part of the ledger, and says more). 0: no bound.
	MaxScan int
	// Archive: the events in the archive too, before the file's (each
	// segment the read starts in is read whole).
	Archive bool
}

// MatchType tells whether an event of type typ is selected by pattern: a
// type, or a prefix ending in a dot ("estop." selects "estop.tripped").
func MatchType(pattern, typ string) bool {
	return pattern == typ || len(pattern) > 0 && pattern[len(pattern)-1] == '.' && len(typ) > len(pattern) && typ[:len(pattern)] == pattern
}

func (f Filter) match(e *Event) bool {
	if !f.Since.IsZero() && e.OccurredAt < f.Since.UnixNano() {
		return false
	}
	if len(f.Types) == 0 {
		return true
	}
	for _, t := range f.Types {
		if MatchType(t, e.Type) {
			return true
		}
	}
	return false
}

// Events returns stored events in sequence order. A record that cannot be
// read is an error naming its sequence.
func (s *Store) Events(f Filter) ([]Stored, error) {
	evs, _, _, err := s.Scan(f)
	return evs, err
}

// Scan is Events that also says where it stopped: next is the sequence of
// the last event it looked at, matching or not, to pass as After to go
// on, and more tells that it stopped at f.Limit, f.MaxBytes or f.MaxScan
// with events after next still to look at (false: it read to the end). Memory is
// bounded while it reads, not after: it holds the events it takes and
// nothing else.
func (s *Store) Scan(f Filter) (evs []Stored, next uint64, more bool, err error) {
	if f.Limit <= 0 {
		f.Limit = 1000
	}
	next = f.After
	taken, looked := 0, 0
	if f.Archive {
		// Not half of an archive pass: its segment and the file without
		// its events, or neither.
		s.archMu.RLock()
		defer s.archMu.RUnlock()
		var full bool
		evs, next, full, err = s.scanArchive(f, &taken, &looked)
		if err != nil || full {
			return evs, next, full, err
		}
	}
	err = s.read(func(tx *bolt.Tx) error {
		c := tx.Bucket(bEvents).Cursor()
		k, v := c.Seek(u64(next + 1))
		for ; k != nil && len(evs) < f.Limit && (f.MaxBytes <= 0 || taken < f.MaxBytes) && (f.MaxScan <= 0 || looked < f.MaxScan); k, v = c.Next() {
			if isRowKey(k) {
				continue
			}
			var st Stored
			st.Seq = getU64(k)
			if err := Decode(v, &st.Event); err != nil {
				return fmt.Errorf("event %d: %w", st.Seq, err)
			}
			next = st.Seq
			looked += len(v)
			if f.match(&st.Event) {
				evs = append(evs, st)
				taken += len(v)
			}
		}
		for k != nil && isRowKey(k) {
			k, _ = c.Next()
		}
		more = k != nil
		return nil
	})
	return evs, next, more, err
}

// EventByID returns the event with an id, and false when the ledger does
// not hold it (never held, or deleted by retention).
func (s *Store) EventByID(id UUID) (Stored, bool, error) {
	seq, ok := s.pendingID(id)
	if !ok {
		err := s.read(func(tx *bolt.Tx) error {
			if v := tx.Bucket(bIDs).Get(id[:]); v != nil {
				seq, ok = getU64(v), true
			}
			return nil
		})
		if err != nil {
			return Stored{}, false, err
		}
	}
	if !ok {
		return Stored{}, false, nil
	}
	evs, err := s.EventsAt(seq)
	if err != nil || len(evs) == 0 || evs[0].ID != id {
		return Stored{}, false, err
	}
	return evs[0], true, nil
}

// EventsAt returns the events stored at the sequences given, in the
// order given, and leaves out those the ledger no longer holds (deleted
// by retention) or never held. A record that cannot be read is an error
// naming its sequence.
func (s *Store) EventsAt(seqs ...uint64) ([]Stored, error) {
	var evs []Stored
	err := s.read(func(tx *bolt.Tx) error {
		b := tx.Bucket(bEvents)
		for _, seq := range seqs {
			v := b.Get(u64(seq))
			if v == nil {
				continue
			}
			st := Stored{Seq: seq}
			if err := Decode(v, &st.Event); err != nil {
				return fmt.Errorf("event %d: %w", seq, err)
			}
			evs = append(evs, st)
		}
		return nil
	})
	return evs, err
}

// Follow calls fn for every event matching f, then for each new one as it
// is committed, until ctx ends or fn returns an error.
func (s *Store) Follow(ctx context.Context, f Filter, fn func(Stored) error) error {
	for {
		changed := s.Changed()
		evs, next, _, err := s.Scan(f)
		if err != nil {
			return err
		}
		for _, e := range evs {
			if err := fn(e); err != nil {
				return err
			}
		}
		if next != f.After {
			f.After = next
			continue // there may be more right away
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// OutboxItem is an event waiting for the uplink.
type OutboxItem struct {
	Seq      uint64
	Attempts uint32
	Record   []byte // the event's CBOR record, as stored
	Event    Event
}

// OutboxNext returns up to n rows after seq, in order: per-stream order is
// the global order. Only rows on disk: what the uplink sends, a power cut
// cannot take back.
func (s *Store) OutboxNext(after uint64, n int) ([]OutboxItem, error) {
	var out []OutboxItem
	err := s.read(func(tx *bolt.Tx) error {
		ev := tx.Bucket(bEvents)
		c := ev.Cursor()
		var prevKey, prevVal []byte // the key before: a row's event, when it has one
		durable := s.durable.Load()
		for k, v := c.Seek(u64(after + 1)); k != nil && len(out) < n && getU64(k) <= durable; k, v = c.Next() {
			if !isRowKey(k) {
				prevKey, prevVal = k, v
				continue
			}
			rec := eventOfRow(ev, k, prevKey, prevVal)
			if rec == nil {
				return fmt.Errorf("ledger: outbox row %d has no event", getU64(k))
			}
			it := OutboxItem{Seq: getU64(k), Attempts: decodeOutboxRow(v).Attempts, Record: append([]byte(nil), rec...)}
			if err := Decode(rec, &it.Event); err != nil {
				return fmt.Errorf("event %d: %w", it.Seq, err)
			}
			out = append(out, it)
		}
		return nil
	})
	return out, err
}

// eventOfRow is the record of the event whose outbox row is at rowKey:
// the value of the key just before it in the cursor's walk when that is
// the event (the row sits right after its event), else a lookup.
func eventOfRow(ev *bolt.Bucket, rowKey, prevKey, prevVal []byte) []byte {
	if len(prevKey) == 8 && bytes.Equal(prevKey, rowKey[:8]) {
		return prevVal
	}
	return ev.Get(rowKey[:8])
}

// OutboxUrgent returns up to n rows of urgent classes (Class.Urgent)
// after seq, in order, and the last row it looked at, urgent or not (seq
// itself when there is none): the uplink sends these ahead of the
// backlog. It reads every row's value, never a non-urgent event.
func (s *Store) OutboxUrgent(after uint64, n int) (items []OutboxItem, last uint64, err error) {
	last = after
	err = s.read(func(tx *bolt.Tx) error {
		ev := tx.Bucket(bEvents)
		c := ev.Cursor()
		var prevKey, prevVal []byte
		durable := s.durable.Load()
		for k, v := c.Seek(u64(after + 1)); k != nil && len(items) < n && getU64(k) <= durable; k, v = c.Next() {
			if !isRowKey(k) {
				prevKey, prevVal = k, v
				continue
			}
			last = getU64(k)
			row := decodeOutboxRow(v)
			if !row.Urgent {
				continue
			}
			rec := eventOfRow(ev, k, prevKey, prevVal)
			if rec == nil {
				return fmt.Errorf("ledger: outbox row %d has no event", last)
			}
			it := OutboxItem{Seq: last, Attempts: row.Attempts, Record: append([]byte(nil), rec...)}
			if err := Decode(rec, &it.Event); err != nil {
				return fmt.Errorf("event %d: %w", it.Seq, err)
			}
			items = append(items, it)
		}
		return nil
	})
	return items, last, err
}

// OutboxAck removes delivered rows. Unknown sequences are ignored: a row
// acknowledged twice, or dropped meanwhile, is gone either way. It shares
// the commit of other appends, waiting up to Options.GroupCommit for one
// (a crash in between only sends those events again).
func (s *Store) OutboxAck(seqs ...uint64) error {
	_, err := s.submit(&request{ctx: context.Background(), ack: slices.Clone(seqs), lazy: s.lazy(), by: s.commitBy(time.Time{}), done: make(chan struct{})})
	return err
}

// OutboxNack counts a failed delivery attempt of a row.
func (s *Store) OutboxNack(seq uint64) error {
	return s.updateSoon(func(w *writer) error {
		v := w.events.Get(rowKey(seq))
		if v == nil {
			return errUnchanged
		}
		row := decodeOutboxRow(v)
		row.Attempts++
		row.LastTry = s.opts.Now().UnixNano()
		return w.events.Put(w.keep(rowKey(seq)), w.keep(row.encode()))
	})
}

// Stats is what `ledger stats` shows.
type Stats struct {
	Path          string            `json:"path"`
	FileBytes     int64             `json:"file_bytes"`
	FreeBytes     int64             `json:"free_bytes"`
	Schema        uint64            `json:"schema"`
	Events        int               `json:"events"`
	LastSeq       uint64            `json:"last_seq"`
	OutboxRows    uint64            `json:"outbox_rows"`
	OutboxBytes   uint64            `json:"outbox_bytes"`
	OutboxDropped uint64            `json:"outbox_dropped"`
	InboxKeys     int               `json:"inbox_keys"`
	Aggregates    int               `json:"aggregates"`
	ByType        map[string]uint64 `json:"by_type,omitempty"`
	Damage        *Damage           `json:"damage,omitempty"`
	Archive       ArchiveStats      `json:"archive"`
}

// Stats says what the ledger holds, from counts kept in memory: it reads
// a few pages, whatever the size of the file.
func (s *Store) Stats() (Stats, error) {
	st := Stats{Path: s.db.Path(), Damage: s.damage}
	if fi, err := os.Stat(s.db.Path()); err == nil {
		st.FileBytes = fi.Size()
	}
	st.FreeBytes = int64(s.db.Stats().FreeAlloc)
	s.countsMu.Lock()
	n := s.counts
	s.countsMu.Unlock()
	st.OutboxRows, st.OutboxBytes = n.outboxRows, n.outboxBytes
	st.Events, st.InboxKeys, st.Aggregates = int(n.events), int(n.inboxKeys), int(n.aggregates)
	err := s.read(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bMeta)
		st.Schema = getU64(meta.Get(kSchema))
		st.OutboxDropped = getU64(meta.Get(kDropped))
		if k, _ := tx.Bucket(bEvents).Cursor().Last(); k != nil {
			st.LastSeq = getU64(k)
		}
		if b := tx.Bucket(bProj).Bucket([]byte(TypeCounts{}.Name())); b != nil {
			st.ByType = map[string]uint64{}
			b.ForEach(func(k, v []byte) error {
				st.ByType[string(k)] = getU64(v)
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return st, err
	}
	st.Archive, err = s.ArchiveStats()
	return st, err
}

// Aggregates returns every aggregate and its version, for tools.
func (s *Store) Aggregates() (map[string]uint64, error) {
	out := map[string]uint64{}
	err := s.read(func(tx *bolt.Tx) error {
		return tx.Bucket(bAggregates).ForEach(func(k, v []byte) error {
			out[string(k)] = getU64(v)
			return nil
		})
	})
	return out, err
}

// presentMode decodes payloads for people and JSON: maps with text keys.
var presentMode = func() cbor.DecMode {
	m, err := cbor.DecOptions{
		DupMapKey: cbor.DupMapKeyEnforcedAPF, IndefLength: cbor.IndefLengthForbidden, TagsMd: cbor.TagsForbidden,
		MaxNestedLevels: maxDepth, MaxArrayElements: maxArrayLen, MaxMapPairs: maxMapPairs,
		DefaultMapType: reflect.TypeOf(map[string]any(nil)),
	}.DecMode()
	if err != nil {
		panic(err)
	}
	return m
}()

// EventView is an event as tools show it: times in RFC 3339, enums as
// words, the payload as a JSON value.
type EventView struct {
	Seq                uint64 `json:"seq"`
	ID                 string `json:"event_id"`
	Type               string `json:"event_type"`
	SchemaVersion      uint16 `json:"schema_version"`
	SourceEventID      string `json:"source_event_id,omitempty"`
	AgentID            string `json:"agent_id,omitempty"`
	BodyID             string `json:"body_id,omitempty"`
	ChannelID          string `json:"channel_id,omitempty"`
	OccurredAt         string `json:"occurred_at,omitempty"`
	ObservedAt         string `json:"observed_at,omitempty"`
	IngestedAt         string `json:"ingested_at,omitempty"`
	SourceSequence     uint64 `json:"source_sequence,omitempty"`
	MonotonicNS        int64  `json:"monotonic_ns,omitempty"`
	ClockDomain        string `json:"clock_domain,omitempty"`
	ClockUncertaintyMS uint32 `json:"clock_uncertainty_ms,omitempty"`
	CorrelationID      string `json:"correlation_id,omitempty"`
	CausationID        string `json:"causation_id,omitempty"`
	Provenance         string `json:"provenance,omitempty"`
	Trust              string `json:"trust_level,omitempty"`
	Privacy            string `json:"privacy_class,omitempty"`
	Payload            any    `json:"payload,omitempty"`
	PayloadRef         string `json:"payload_ref,omitempty"`
	DedupeKey          string `json:"dedupe_key,omitempty"`
	AggregateID        string `json:"aggregate_id,omitempty"`
	AggregateVersion   uint64 `json:"aggregate_version,omitempty"`
	ClockUnsynced      bool   `json:"clock_unsynced,omitempty"`
}

func rfc3339(ns int64) string {
	if ns == 0 {
		return ""
	}
	return time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
}

func enumWord[T ~uint8](v T, s func() string) string {
	if v == 0 {
		return ""
	}
	return s()
}

// View presents a stored event.
func (st Stored) View() EventView {
	e := &st.Event
	v := EventView{Seq: st.Seq, ID: e.ID.String(), Type: e.Type, SchemaVersion: e.SchemaVersion, SourceEventID: e.SourceEventID,
		AgentID: e.AgentID.String(), BodyID: e.BodyID.String(), ChannelID: e.ChannelID,
		OccurredAt: rfc3339(e.OccurredAt), ObservedAt: rfc3339(e.ObservedAt), IngestedAt: rfc3339(e.IngestedAt),
		SourceSequence: e.SourceSequence, MonotonicNS: e.MonotonicNS, ClockDomain: e.ClockDomain, ClockUncertaintyMS: e.ClockUncertaintyMS,
		CorrelationID: e.CorrelationID.String(), CausationID: e.CausationID.String(),
		Provenance: enumWord(e.Provenance, e.Provenance.String), Trust: enumWord(e.Trust, e.Trust.String), Privacy: enumWord(e.Privacy, e.Privacy.String),
		PayloadRef: e.PayloadRef, DedupeKey: e.DedupeKey, AggregateID: e.AggregateID, AggregateVersion: e.AggregateVersion,
		ClockUnsynced: e.ClockUnsynced}
	if len(e.Payload) > 0 {
		var p any
		if err := presentMode.Unmarshal(e.Payload, &p); err != nil {
			v.Payload = fmt.Sprintf("(payload not shown: %v)", err)
		} else {
			v.Payload = p
		}
	}
	return v
}
