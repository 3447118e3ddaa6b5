package ledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// retainBatch bounds one retention transaction, so appends are never held
// up for long.
const retainBatch = 512

// RetainResult says what a retention pass deleted.
type RetainResult struct {
	Events        int `json:"events"`         // expired events deleted
	OutboxExpired int `json:"outbox_expired"` // of them, still waiting for the uplink
	InboxKeys     int `json:"inbox_keys"`     // dedupe keys past their window
}

// Retain deletes events past their class's TTL, oldest first, and dedupe
// keys past their window, in small transactions. Events of classes without
// a TTL, and events of aggregates, are kept. Sequences only grow with
// ingest time, so the pass stops at the first event whose class has a TTL
// that has not run out; what it looked at is remembered, and the next pass
// starts there. When it deleted anything it records ledger.retained.
func (s *Store) Retain(ctx context.Context) (RetainResult, error) {
	var res RetainResult
	for {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		more, err := s.retainStep(&res)
		if err != nil {
			return res, err
		}
		if !more {
			break
		}
	}
	if res.Events > 0 || res.InboxKeys > 0 {
		p, err := MarshalPayload(res)
		if err != nil {
			return res, err
		}
		if _, err := s.Append(ctx, Event{Type: "ledger.retained", Provenance: Observed, Payload: p}); err != nil {
			return res, err
		}
	}
	return res, nil
}

// retainStep runs one small transaction; more says there may be more.
func (s *Store) retainStep(res *RetainResult) (more bool, err error) {
	err = s.update(func(w *writer) error {
		now := w.now.UnixNano()
		n := 0
		// Dedupe keys past their window.
		c := w.inboxExp.Cursor()
		var gone [][]byte
		for k, _ := c.First(); k != nil && n < retainBatch && int64(getU64(k)) <= now; k, _ = c.Next() {
			gone = append(gone, w.keep(k))
			n++
		}
		for _, k := range gone {
			if err := w.inboxExp.Delete(k); err != nil {
				return err
			}
			// The key may have been used again since: only delete the
			// inbox entry this expiry belongs to.
			if v := w.inbox.Get(k[8:]); v != nil && getU64(v) == getU64(k) {
				if err := w.inbox.Delete(k[8:]); err != nil {
					return err
				}
				w.n.inboxKeys--
				w.nDirty = true
			}
			res.InboxKeys++
		}
		// Events past their TTL.
		from := getU64(w.meta.Get(kRetainFrom))
		// Only events whose id is in the ids bucket: write the waiting
		// ones first, so retention deletes index and event together.
		if err := w.flushIDs(true); err != nil {
			return err
		}
		indexed := getU64(w.meta.Get(kIDsThrough))
		ec := w.events.Cursor()
		var e Event
		var doomed [][]byte
		next := from
		stopped := false
		for k, v := ec.Seek(u64(from)); k != nil && n < retainBatch; k, v = ec.Next() {
			if isRowKey(k) {
				continue // deleted with its event
			}
			if getU64(k) > indexed {
				stopped = true
				break
			}
			n++
			if err := Decode(v, &e); err != nil {
				return fmt.Errorf("ledger: retention: event %d: %w", getU64(k), err)
			}
			class := s.opts.Classes.Of(e.Type)
			if class.TTL > 0 && e.AggregateID == "" {
				if e.IngestedAt+int64(class.TTL) > now {
					stopped = true
					break
				}
				doomed = append(doomed, w.keep(k))
				if err := w.ids.Delete(e.ID[:]); err != nil {
					return err
				}
			}
			next = getU64(k) + 1
		}
		for _, k := range doomed {
			if row := w.events.Get(rowKey(getU64(k))); row != nil {
				r := decodeOutboxRow(row)
				if err := w.events.Delete(rowKey(getU64(k))); err != nil {
					return err
				}
				w.n.outboxRows--
				w.n.outboxBytes -= uint64(r.Size)
				w.outboxDirty, w.nDirty = true, true
				res.OutboxExpired++
			}
			if err := w.events.Delete(k); err != nil {
				return err
			}
			w.n.events--
			w.nDirty = true
			res.Events++
		}
		if next != from {
			if err := w.meta.Put(kRetainFrom, w.keep(u64(next))); err != nil {
				return err
			}
		}
		more = n >= retainBatch && !stopped
		return nil
	})
	return more, err
}

// CompactFile rewrites the ledger at path into a new file without the free
// pages bbolt never gives back, then renames it into place. The ledger must
// not be open. progress, if not nil, is called with keys copied so far and
// the total.
func CompactFile(path string, progress func(done, total int)) (before, after int64, err error) {
	if _, err := precheck(path, 100*time.Millisecond); errors.Is(err, errLocked) {
		return 0, 0, fmt.Errorf("ledger: compact: %s is in use (stop tobe-body first)", path)
	} else if err != nil {
		return 0, 0, err
	}
	// Opened for writing (and only read): its exclusive lock keeps the
	// daemon off the file while it is rewritten.
	src, err := bolt.Open(path, 0o640, &bolt.Options{Timeout: 100 * time.Millisecond})
	if errors.Is(err, berrors.ErrTimeout) {
		return 0, 0, fmt.Errorf("ledger: compact: %s is in use (stop tobe-body first)", path)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("ledger: compact: %w", err)
	}
	defer src.Close()
	fi, err := os.Stat(path)
	if err != nil {
		return 0, 0, err
	}
	before = fi.Size()
	tmp := path + ".compact.tmp"
	os.Remove(tmp)
	dst, err := bolt.Open(tmp, 0o640, &bolt.Options{NoSync: true})
	if err != nil {
		return 0, 0, fmt.Errorf("ledger: compact: %w", err)
	}
	total := 0
	src.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(_ []byte, b *bolt.Bucket) error {
			total += b.Stats().KeyN
			return nil
		})
	})
	done := 0
	err = copyBuckets(src, dst, func() {
		done++
		if progress != nil && (done%10000 == 0 || done == total) {
			progress(done, total)
		}
	})
	if err == nil {
		err = dst.Sync()
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return before, 0, fmt.Errorf("ledger: compact: %w", err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	if fi, err := os.Stat(path); err == nil {
		after = fi.Size()
	}
	if progress != nil && done != total {
		progress(done, done)
	}
	return before, after, nil
}

// copyBuckets copies every bucket, key and sequence of src into dst, in
// transactions of a bounded size.
func copyBuckets(src, dst *bolt.DB, each func()) error {
	const perTx = 20000
	type item struct {
		path [][]byte
		k, v []byte
		seq  uint64
		isB  bool
	}
	var batch []item
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := dst.Update(func(tx *bolt.Tx) error {
			for _, it := range batch {
				var b *bolt.Bucket
				var err error
				if len(it.path) == 0 {
					if it.isB {
						b, err = tx.CreateBucketIfNotExists(it.k)
						if err == nil {
							err = b.SetSequence(it.seq)
						}
						if err != nil {
							return err
						}
					}
					continue
				}
				b = tx.Bucket(it.path[0])
				for _, p := range it.path[1:] {
					b = b.Bucket(p)
				}
				b.FillPercent = 1
				if it.isB {
					nb, err := b.CreateBucketIfNotExists(it.k)
					if err == nil {
						err = nb.SetSequence(it.seq)
					}
					if err != nil {
						return err
					}
					continue
				}
				if err := b.Put(it.k, it.v); err != nil {
					return err
				}
			}
			return nil
		})
		batch = batch[:0]
		return err
	}
	var walkB func(path [][]byte, b *bolt.Bucket) error
	walkB = func(path [][]byte, b *bolt.Bucket) error {
		return b.ForEach(func(k, v []byte) error {
			if v == nil {
				nb := b.Bucket(k)
				batch = append(batch, item{path: path, k: append([]byte(nil), k...), seq: nb.Sequence(), isB: true})
				if err := walkB(append(append([][]byte(nil), path...), append([]byte(nil), k...)), nb); err != nil {
					return err
				}
			} else {
				batch = append(batch, item{path: path, k: append([]byte(nil), k...), v: append([]byte(nil), v...)})
				each()
			}
			if len(batch) >= perTx {
				return flush()
			}
			return nil
		})
	}
	err := src.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			batch = append(batch, item{k: append([]byte(nil), name...), seq: b.Sequence(), isB: true})
			return walkB([][]byte{append([]byte(nil), name...)}, b)
		})
	})
	if err != nil {
		return err
	}
	return flush()
}
