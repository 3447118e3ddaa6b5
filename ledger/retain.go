package ledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// retainBatch bounds one retention transaction (the events it reads), so
// appends are never held up for long.
const retainBatch = 512

// RetainResult says what a retention pass deleted.
type RetainResult struct {
	Events        int `json:"events"`         // expired events deleted
	OutboxExpired int `json:"outbox_expired"` // of them, still waiting for the uplink
	InboxKeys     int `json:"inbox_keys"`     // of their dedupe keys, deleted with them
}

// retainPass is what the steps of one pass carry from one to the next.
type retainPass struct {
	ttls []time.Duration
	pos  uint64 // the steps have looked at every event before this
	held bool   // an event kept for now: retain_from stays at it
	step int
}

// Retain deletes the events older than their class's TTL, with their
// outbox rows and their dedupe keys (a key is deleted only while the inbox
// names that event), in small transactions, and records ledger.retained
// when it deleted anything. Events of classes without a TTL, and events of
// aggregates, are kept, and so are their dedupe keys.
//
// Age is told by the running clock alone (see Running), never by the wall
// clock or an event's own times: for a TTL T the cutoff is the largest
// sequence S of a checkpoint whose running time is at least T before now,
// and every event of that TTL below S is older than T. A step of the wall
// clock, of any size either way, deletes nothing early, and an event
// stamped in the future delays nothing. A pass looks at the events from
// where the last one left (meta retain_from) up to the cutoff of the
// shortest TTL; an event of a class with a longer TTL that is not yet due
// does not stop the pass, but the next pass starts again at it.
//
// It also deletes the checkpoints no cutoff needs any more. It returns
// ctx's error if ctx ends first (what was deleted by then stays deleted),
// or ErrClosed. Safe for concurrent use with appends.
func (s *Store) Retain(ctx context.Context) (RetainResult, error) {
	var res RetainResult
	pass := retainPass{ttls: s.opts.Classes.ttls()}
	for {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		more, err := s.retainStep(&res, &pass)
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

// retainLoop runs retention every interval until Close.
func (s *Store) retainLoop(every time.Duration) {
	defer s.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.stop
		cancel()
	}()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if res, err := s.Retain(ctx); err != nil && ctx.Err() == nil {
				s.opts.Log.Error("ledger retention", "err", err)
			} else if res.Events > 0 {
				s.opts.Log.Info("ledger retention", "events", res.Events, "outbox_expired", res.OutboxExpired, "inbox_keys", res.InboxKeys)
			}
			if res, err := s.Archive(ctx); err != nil && ctx.Err() == nil {
				s.opts.Log.Error("ledger archive", "err", err)
			} else if res.Events > 0 {
				s.opts.Log.Info("ledger archive", "segments", res.Segments, "events", res.Events, "past_keys", res.Keys)
			}
		case <-s.stop:
			return
		}
	}
}

// doomed is an event retention deletes.
type doomed struct {
	key   []byte // its sequence
	dedup []byte // its dedupe key, or nil
}

// retainStep runs one small transaction; more says there may be more.
func (s *Store) retainStep(res *RetainResult, pass *retainPass) (more bool, err error) {
	err = s.updateSoon(func(w *writer) error {
		// A checkpoint first, when one is due: it may be the one that
		// shows the events of the last commit old enough.
		if err := w.checkpoint(); err != nil {
			return err
		}
		changed := w.ckpt
		if pass.step == 0 {
			// The outbox's own waits need their checkpoints too.
			keep := slices.Clone(pass.ttls)
			for _, d := range []time.Duration{s.opts.OutboxBacklog, s.opts.OutboxAuditWait, s.opts.AuditKeep} {
				if d > 0 {
					keep = append(keep, d)
				}
			}
			n, err := pruneCheckpoints(w.tx, w.clock, w.run, keep)
			if err != nil {
				return err
			}
			changed = changed || n > 0
		}
		pass.step++
		cut := cutoffs(w.tx, w.run, pass.ttls)
		var limit uint64
		for _, c := range cut {
			limit = max(limit, c)
		}
		from := getU64(w.meta.Get(kRetainFrom))
		start := max(from, pass.pos)
		if start >= limit {
			if !changed {
				return errUnchanged
			}
			return nil
		}
		// Only events whose id is in the ids bucket: write the waiting
		// ones first, so retention deletes index and event together.
		if err := w.flushIDs(true); err != nil {
			return err
		}
		changed = changed || w.idsFlushed
		indexed := getU64(w.meta.Get(kIDsThrough))
		ec := w.events.Cursor()
		var e Event
		var gone []doomed
		next := from
		stopped := false
		n := 0
		for k, v := ec.Seek(u64(start)); k != nil && n < retainBatch; k, v = ec.Next() {
			if isRowKey(k) {
				continue // deleted with its event
			}
			seq := getU64(k)
			if seq >= limit || seq > indexed {
				stopped = true
				break
			}
			n++
			if err := Decode(v, &e); err != nil {
				return fmt.Errorf("ledger: retention: event %d: %w", seq, err)
			}
			class := s.opts.Classes.Of(e.Type)
			switch {
			case class.TTL <= 0 || e.AggregateID != "":
				// Kept for ever.
			case seq < cut[class.TTL]:
				d := doomed{key: w.keep(k)}
				if e.DedupeKey != "" {
					d.dedup = w.keep([]byte(e.DedupeKey))
				}
				gone = append(gone, d)
				if err := w.ids.Delete(e.ID[:]); err != nil {
					return err
				}
			default:
				// Not yet due: a later pass looks at it again.
				pass.held = true
			}
			if !pass.held {
				next = seq + 1
			}
			pass.pos = seq + 1
		}
		for _, d := range gone {
			seq := getU64(d.key)
			if row := w.events.Get(rowKey(seq)); row != nil {
				r := decodeOutboxRow(row)
				if err := w.events.Delete(rowKey(seq)); err != nil {
					return err
				}
				w.n.outboxRows--
				w.n.outboxBytes -= uint64(r.Size)
				w.outboxDirty = true
				res.OutboxExpired++
			}
			// The key may name another event (one stored before schema
			// 2 used an expired key again): only delete it with its own.
			if d.dedup != nil {
				if v := w.inbox.Get(d.dedup); len(v) == 16 && getU64(v[8:]) == seq {
					if err := w.inbox.Delete(d.dedup); err != nil {
						return err
					}
					w.n.inboxKeys--
					res.InboxKeys++
				}
			}
			if err := w.events.Delete(d.key); err != nil {
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
			changed = true
		}
		more = n >= retainBatch && !stopped
		if !changed && len(gone) == 0 {
			return errUnchanged
		}
		return nil
	})
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		err = ErrClosed
	}
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
	syncDir(filepath.Dir(path))
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
