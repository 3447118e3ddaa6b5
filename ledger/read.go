package ledger

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

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
}

func (f Filter) match(e *Event) bool {
	if !f.Since.IsZero() && e.OccurredAt < f.Since.UnixNano() {
		return false
	}
	if len(f.Types) == 0 {
		return true
	}
	for _, t := range f.Types {
		if t == e.Type || len(t) > 0 && t[len(t)-1] == '.' && len(e.Type) > len(t) && e.Type[:len(t)] == t {
			return true
		}
	}
	return false
}

// Events returns stored events in sequence order. A record that cannot be
// read is an error naming its sequence.
func (s *Store) Events(f Filter) ([]Stored, error) {
	if f.Limit <= 0 {
		f.Limit = 1000
	}
	var out []Stored
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bEvents).Cursor()
		for k, v := c.Seek(u64(f.After + 1)); k != nil && len(out) < f.Limit; k, v = c.Next() {
			var st Stored
			st.Seq = getU64(k)
			if err := Decode(v, &st.Event); err != nil {
				return fmt.Errorf("event %d: %w", st.Seq, err)
			}
			if f.match(&st.Event) {
				out = append(out, st)
			}
		}
		return nil
	})
	return out, err
}

// Follow calls fn for every event matching f, then for each new one as it
// is committed, until ctx ends or fn returns an error.
func (s *Store) Follow(ctx context.Context, f Filter, fn func(Stored) error) error {
	if f.Limit <= 0 {
		f.Limit = 1000
	}
	for {
		changed := s.Changed()
		evs, err := s.Events(f)
		if err != nil {
			return err
		}
		for _, e := range evs {
			if err := fn(e); err != nil {
				return err
			}
			f.After = e.Seq
		}
		if len(evs) == f.Limit {
			continue // there may be more right away
		}
		// Also move past events that did not match.
		s.db.View(func(tx *bolt.Tx) error {
			if k, _ := tx.Bucket(bEvents).Cursor().Last(); k != nil && getU64(k) > f.After {
				f.After = getU64(k)
			}
			return nil
		})
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
// the global order.
func (s *Store) OutboxNext(after uint64, n int) ([]OutboxItem, error) {
	var out []OutboxItem
	err := s.db.View(func(tx *bolt.Tx) error {
		ob, ev := tx.Bucket(bOutbox), tx.Bucket(bEvents)
		c := ob.Cursor()
		for k, v := c.Seek(u64(after + 1)); k != nil && len(out) < n; k, v = c.Next() {
			rec := ev.Get(k)
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

// OutboxAck removes delivered rows. Unknown sequences are ignored: a row
// acknowledged twice, or dropped meanwhile, is gone either way.
func (s *Store) OutboxAck(seqs ...uint64) error {
	var w *writer
	err := s.db.Update(func(tx *bolt.Tx) error {
		w = s.newWriter(tx)
		for _, seq := range seqs {
			k := u64(seq)
			v := w.outbox.Get(k)
			if v == nil {
				continue
			}
			row := decodeOutboxRow(v)
			if err := w.outbox.Delete(k); err != nil {
				return err
			}
			w.outboxRows--
			w.outboxBytes -= uint64(row.Size)
			w.outboxDirty = true
		}
		return nil
	})
	if err == nil {
		w.done()
	}
	return err
}

// OutboxNack counts a failed delivery attempt of a row.
func (s *Store) OutboxNack(seq uint64) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		ob := tx.Bucket(bOutbox)
		v := ob.Get(u64(seq))
		if v == nil {
			return nil
		}
		row := decodeOutboxRow(v)
		row.Attempts++
		row.LastTry = s.opts.Now().UnixNano()
		return ob.Put(u64(seq), row.encode())
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
}

// Stats counts what the ledger holds.
func (s *Store) Stats() (Stats, error) {
	st := Stats{Path: s.db.Path(), Damage: s.damage}
	if fi, err := os.Stat(s.db.Path()); err == nil {
		st.FileBytes = fi.Size()
	}
	st.FreeBytes = int64(s.db.Stats().FreeAlloc)
	s.outboxMu.Lock()
	st.OutboxRows, st.OutboxBytes = s.outboxRows, s.outboxBytes
	s.outboxMu.Unlock()
	err := s.db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bMeta)
		st.Schema = getU64(meta.Get(kSchema))
		st.OutboxDropped = getU64(meta.Get(kDropped))
		ev := tx.Bucket(bEvents)
		st.Events = ev.Stats().KeyN
		if k, _ := ev.Cursor().Last(); k != nil {
			st.LastSeq = getU64(k)
		}
		st.InboxKeys = tx.Bucket(bInbox).Stats().KeyN
		st.Aggregates = tx.Bucket(bAggregates).Stats().KeyN
		if b := tx.Bucket(bProj).Bucket([]byte(TypeCounts{}.Name())); b != nil {
			st.ByType = map[string]uint64{}
			b.ForEach(func(k, v []byte) error {
				st.ByType[string(k)] = getU64(v)
				return nil
			})
		}
		return nil
	})
	return st, err
}

// Backup writes a consistent copy of the ledger to path while it is in
// use: a temporary file, synced, renamed into place.
func (s *Store) Backup(path string) (int64, error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return 0, fmt.Errorf("ledger: backup: %w", err)
	}
	defer os.Remove(f.Name())
	var n int64
	err = s.db.View(func(tx *bolt.Tx) error {
		var err error
		n, err = tx.WriteTo(f)
		return err
	})
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		return 0, fmt.Errorf("ledger: backup to %s: %w", path, err)
	}
	return n, nil
}

// Aggregates returns every aggregate and its version, for tools.
func (s *Store) Aggregates() (map[string]uint64, error) {
	out := map[string]uint64{}
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bAggregates).ForEach(func(k, v []byte) error {
			out[string(k)] = getU64(v)
			return nil
		})
	})
	return out, err
}

// sortedKeys is for stable output.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
