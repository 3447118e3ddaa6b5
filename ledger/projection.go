package ledger

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Projection is state derived from events, kept in its own bucket and
// updated in the transaction that appends the events. It must be a pure
// function of the events it follows, in order: verify rebuilds it from
// them and compares.
type Projection interface {
	// Name names its bucket.
	Name() string
	// Types lists the event types it follows; "camera." follows every
	// camera event. Types of classes that expire cannot be followed. The
	// list does not change.
	Types() []string
	// Apply changes the state for one event. Its payload is one item
	// the ledger checked (when it encoded or decoded the event): it can
	// be read with CheckedFields.
	Apply(kv KV, e *Event) error
}

// Retirer is a projection that takes the place of others an earlier
// body kept (its own earlier forms, under other names): when its bucket
// is made (and built from the events), theirs are deleted in the same
// transaction, so a file does not keep a projection nothing reads.
type Retirer interface {
	Retires() []string
}

// SeqOf returns the sequence the event being applied takes in the
// ledger, when kv is the bucket Apply was given (the writer's, a rebuild's
// or verify's): a projection that must order what it keeps by the ledger
// and not by a wall clock that can step reads it here.
func SeqOf(kv KV) (uint64, bool) {
	s, ok := kv.(sequenced)
	if !ok {
		return 0, false
	}
	return s.seq(), true
}

// AtSeq is m as the bucket of an event applied at seq (SeqOf reads it):
// for a projection's tests and fuzzing, outside the ledger.
func AtSeq(m MemKV, seq uint64) KV { return seqKV{m, seq} }

// sequenced is a bucket that knows the sequence of the event applied.
type sequenced interface{ seq() uint64 }

// seqKV is a bucket of a rebuild, with the sequence of the event applied.
type seqKV struct {
	MemKV
	at uint64
}

func (kv seqKV) seq() uint64 { return kv.at }

// KV is a projection's bucket: a sorted key-value map.
type KV interface {
	Get(key []byte) []byte
	Put(key, value []byte) error
	Delete(key []byte) error
	// ForEach visits the keys in order.
	ForEach(fn func(k, v []byte) error) error
}

// ReadKV is a projection's bucket as a reader sees it.
type ReadKV interface {
	Get(key []byte) []byte
	// ForEach visits the keys in order.
	ForEach(fn func(k, v []byte) error) error
}

// ErrUnknownProjection: the store does not keep a projection of that
// name (it is not among Options.Projections).
var ErrUnknownProjection = errors.New("ledger: no such projection")

// ReadProjection calls fn with a projection's bucket as of one committed
// state: a read transaction, which appends do not wait for. The slices fn
// is given are valid only until it returns; fn must not append to the
// store (a commit that grows the file waits for the reads to end). A
// projection the store does not keep is ErrUnknownProjection: a bucket
// nobody updates would be a stale answer. fn's error is returned as it
// is.
func (s *Store) ReadProjection(name string, fn func(ReadKV) error) error {
	if _, ok := s.projs[name]; !ok {
		return fmt.Errorf("%w: %q", ErrUnknownProjection, name)
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	return s.read(func(tx *bolt.Tx) error {
		b := tx.Bucket(bProj).Bucket([]byte(name))
		if b == nil {
			return fmt.Errorf("ledger: projection %s has no bucket", name)
		}
		return fn(b)
	})
}

// Range calls fn with the keys of kv that begin with prefix, in key order
// from the first at or after from (nil: the first with the prefix), or
// in reverse order from the last at or before from (nil: the last with
// the prefix), until fn returns false. A bucket of the ledger is read
// with a cursor, so only the keys visited are read; another ReadKV is
// read whole.
func Range(kv ReadKV, prefix, from []byte, reverse bool, fn func(k, v []byte) bool) {
	type cursorer interface{ Cursor() *bolt.Cursor }
	cb, ok := kv.(cursorer)
	if bk, isKV := kv.(boltKV); isKV {
		cb, ok = bk.b, true
	}
	if !ok {
		var keys [][]byte
		var vals [][]byte
		_ = kv.ForEach(func(k, v []byte) error {
			if bytes.HasPrefix(k, prefix) && (from == nil || !reverse && bytes.Compare(k, from) >= 0 || reverse && bytes.Compare(k, from) <= 0) {
				keys, vals = append(keys, k), append(vals, v)
			}
			return nil
		})
		for i := range keys {
			j := i
			if reverse {
				j = len(keys) - 1 - i
			}
			if !fn(keys[j], vals[j]) {
				return
			}
		}
		return
	}
	c := cb.Cursor()
	if !reverse {
		if from == nil {
			from = prefix
		}
		for k, v := c.Seek(from); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			if !fn(k, v) {
				return
			}
		}
		return
	}
	var k, v []byte
	at := from
	if at == nil {
		at = prefixEnd(prefix) // after every key with the prefix; nil: none is
	}
	if at != nil {
		k, v = c.Seek(at)
	}
	switch {
	case k == nil:
		k, v = c.Last()
	case from == nil || !bytes.Equal(k, from):
		k, v = c.Prev()
	}
	for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Prev() {
		if !fn(k, v) {
			return
		}
	}
}

// prefixEnd is the least key greater than every key that begins with
// prefix, or nil when there is none (the prefix is all 0xff).
func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// ProjectionReader reads projections: a Store does.
type ProjectionReader interface {
	ReadProjection(name string, fn func(ReadKV) error) error
}

// ReadRecord reads the record a projection keeps under key, decoded
// (UnmarshalPayload) into a T; found is false when there is none.
func ReadRecord[T any](r ProjectionReader, projection string, key []byte) (v T, found bool, err error) {
	err = r.ReadProjection(projection, func(kv ReadKV) error {
		b := kv.Get(key)
		if b == nil {
			return nil
		}
		found = true
		return UnmarshalPayload(b, &v)
	})
	return v, found, err
}

// openProjections makes the bucket of every projection the store keeps. A
// projection new to a file that already holds events (the file was
// written by a body without it) is built from those events here, once,
// in the transaction that makes its bucket: a body upgraded to a
// projection starts from what its history says, not from nothing. It is
// built in memory, as verify rebuilds it, and written in key order: bbolt
// splits nodes only when it commits, and keys put in any other order into
// one node would move the node's keys along with each.
func (s *Store) openProjections(tx *bolt.Tx) (created bool, err error) {
	projs := tx.Bucket(bProj)
	var fresh []Projection
	kvs := map[string]MemKV{}
	for _, p := range s.opts.Projections {
		if projs.Bucket([]byte(p.Name())) != nil {
			continue
		}
		if _, err := projs.CreateBucket([]byte(p.Name())); err != nil {
			return false, fmt.Errorf("ledger: projection %s: %w", p.Name(), err)
		}
		if r, ok := p.(Retirer); ok {
			for _, old := range r.Retires() {
				if projs.Bucket([]byte(old)) == nil || slices.ContainsFunc(s.opts.Projections, func(q Projection) bool { return q.Name() == old }) {
					continue
				}
				if err := projs.DeleteBucket([]byte(old)); err != nil {
					return false, fmt.Errorf("ledger: projection %s retiring %s: %w", p.Name(), old, err)
				}
				s.opts.Log.Info("ledger: a projection retired", "projection", old, "by", p.Name())
			}
		}
		fresh = append(fresh, p)
		kvs[p.Name()] = MemKV{}
	}
	c := tx.Bucket(bEvents).Cursor()
	if len(fresh) == 0 {
		return false, nil
	}
	if k, _ := c.First(); k == nil && tx.Bucket(bMeta).Get(kArchive) == nil {
		return true, nil
	}
	start := time.Now()
	names := make([]string, len(fresh))
	for i, p := range fresh {
		names[i] = p.Name()
	}
	s.opts.Log.Info("ledger: building projections from the events (once, for a file written without them)", "projections", names)
	var e Event
	n, applied := 0, 0
	// The archive's events first, then forgotten (see Forgetter).
	h, err := parseArchiveHead(tx.Bucket(bMeta).Get(kArchive))
	if err != nil {
		return true, err
	}
	if h.FirstKept > 1 {
		s.opts.Log.Warn("ledger: building projections without the archive's deleted segments", "deleted_through", h.DeletedThrough)
	}
	if h.kept() > 0 {
		each := func(forget bool) func(seq uint64, e *Event) error {
			return func(seq uint64, e *Event) error {
				for _, p := range fresh {
					if !follows(p, e.Type) {
						continue
					}
					var err error
					if f, ok := p.(Forgetter); ok && forget {
						err = f.Forget(seqKV{kvs[p.Name()], seq}, e)
					} else if !forget {
						err = p.Apply(seqKV{kvs[p.Name()], seq}, e)
					}
					if err != nil {
						return fmt.Errorf("ledger: building projection %s: archived event %d (%s): %w", p.Name(), seq, e.Type, err)
					}
				}
				return nil
			}
		}
		if err := s.readArchive(h, each(false)); err != nil {
			return true, err
		}
		if err := s.readArchive(h, each(true)); err != nil {
			return true, err
		}
	}
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if isRowKey(k) {
			continue
		}
		n++
		if err := Decode(v, &e); err != nil {
			return true, fmt.Errorf("%w: event %d: %v", ErrDamaged, getU64(k), err)
		}
		for _, p := range fresh {
			if !follows(p, e.Type) {
				continue
			}
			applied++
			if err := p.Apply(seqKV{kvs[p.Name()], getU64(k)}, &e); err != nil {
				return true, fmt.Errorf("ledger: building projection %s: event %d (%s): %w", p.Name(), getU64(k), e.Type, err)
			}
		}
	}
	for _, p := range fresh {
		b := projs.Bucket([]byte(p.Name()))
		b.FillPercent = 0.95 // in order: a page split is not written to again
		// The MemKV's slices outlive the commit, as bbolt needs.
		err := kvs[p.Name()].ForEach(func(k, v []byte) error { return b.Put(k, v) })
		if err != nil {
			return true, fmt.Errorf("ledger: writing projection %s: %w", p.Name(), err)
		}
	}
	s.opts.Log.Info("ledger: projections built", "projections", names, "events", n, "applied", applied, "took", time.Since(start).Round(time.Millisecond))
	return true, nil
}

// catchUpForgetting has a projection that forgets what the archive takes
// (Forgetter) or closes aggregates (Closer), but that a file kept before it
// did (a file an earlier body wrote), forget what the archive holds, and
// drop the versions of the aggregates its events closed, once: what the
// archive's passes and verify's rebuild do. meta "forgetting" names the
// projections that did. Forgetting is idempotent, so one that forgot
// already loses nothing. A projection built at open (openProjections)
// forgets as it is built. It says whether it changed the file, and how
// many aggregates' versions it dropped.
func (s *Store) catchUpForgetting(tx *bolt.Tx) (changed bool, dropped uint64, err error) {
	meta, projs := tx.Bucket(bMeta), tx.Bucket(bProj)
	done := map[string]bool{}
	for _, n := range strings.Split(string(meta.Get(kForgetting)), "\n") {
		done[n] = true
	}
	var want []string
	var todo []Projection
	for _, p := range s.opts.Projections {
		_, f := p.(Forgetter)
		_, c := p.(Closer)
		if !f && !c {
			continue
		}
		want = append(want, p.Name())
		if !done[p.Name()] && projs.Bucket([]byte(p.Name())) != nil {
			todo = append(todo, p)
		}
	}
	slices.Sort(want)
	h, err := parseArchiveHead(meta.Get(kArchive))
	if err != nil {
		return false, 0, err
	}
	if len(todo) > 0 && h.kept() > 0 {
		start := time.Now()
		names := make([]string, len(todo))
		for i, p := range todo {
			names[i] = p.Name()
		}
		s.opts.Log.Info("ledger: projections forget what the archive holds (once, for a file kept before they did)", "projections", names)
		aggs := tx.Bucket(bAggregates)
		err := s.readArchive(h, func(seq uint64, e *Event) error {
			for _, p := range todo {
				if c, ok := p.(Closer); ok && e.AggregateID != "" && c.Closes(e) && getU64(aggs.Get([]byte(e.AggregateID))) == e.AggregateVersion {
					if err := aggs.Delete([]byte(e.AggregateID)); err != nil {
						return err
					}
					dropped++
				}
				if f, ok := p.(Forgetter); ok && follows(p, e.Type) {
					if err := f.Forget(bucketKV{projs.Bucket([]byte(p.Name())), seq}, e); err != nil {
						return fmt.Errorf("ledger: projection %s forgetting archived event %d (%s): %w", p.Name(), seq, e.Type, err)
					}
				}
			}
			return nil
		})
		if err != nil {
			return false, 0, err
		}
		s.opts.Log.Info("ledger: projections forgot what the archive holds", "projections", names, "took", time.Since(start).Round(time.Millisecond))
		changed = true
	}
	if v := strings.Join(want, "\n"); v != string(meta.Get(kForgetting)) {
		if err := meta.Put(kForgetting, []byte(v)); err != nil {
			return false, 0, err
		}
		changed = true
	}
	return changed, dropped, nil
}

// bucketKV is a projection's bucket in a write transaction of bbolt's
// own (at open, before the journal), at the sequence of the event seen.
type bucketKV struct {
	b  *bolt.Bucket
	at uint64
}

func (kv bucketKV) seq() uint64                              { return kv.at }
func (kv bucketKV) Get(k []byte) []byte                      { return kv.b.Get(k) }
func (kv bucketKV) Put(k, v []byte) error                    { return kv.b.Put(bytes.Clone(k), bytes.Clone(v)) }
func (kv bucketKV) Delete(k []byte) error                    { return kv.b.Delete(k) }
func (kv bucketKV) ForEach(fn func(k, v []byte) error) error { return kv.b.ForEach(fn) }

func follows(p Projection, eventType string) bool { return followsTypes(p.Types(), eventType) }

// maxFollowedTypes bounds the event types whose followers a store keeps
// (what a caller may append is any type): the types past it are matched
// each time.
const maxFollowedTypes = 4096

// followedBy are the projections and the derivers that follow an event
// type, each in their order.
type followedBy struct {
	projections []Projection
	derivers    []Deriver
}

// followers returns the projections and derivers that follow an event
// type, asking their Types once a type rather than for every event
// written (their types do not change).
func (s *Store) followers(eventType string) followedBy {
	s.followMu.Lock()
	defer s.followMu.Unlock()
	if f, ok := s.followed[eventType]; ok {
		return f
	}
	var f followedBy
	for _, p := range s.opts.Projections {
		if follows(p, eventType) {
			f.projections = append(f.projections, p)
		}
	}
	for _, d := range s.opts.Derivers {
		if followsTypes(d.Types(), eventType) {
			f.derivers = append(f.derivers, d)
		}
	}
	if s.followed == nil {
		s.followed = map[string]followedBy{}
	}
	if len(s.followed) < maxFollowedTypes {
		s.followed[eventType] = f
	}
	return f
}

// followsTypes tells whether a list of types and prefixes ending in a dot
// selects eventType.
func followsTypes(types []string, eventType string) bool {
	for _, t := range types {
		if MatchType(t, eventType) {
			return true
		}
	}
	return false
}

// boltKV is a projection bucket inside a write transaction; what it is
// given to keep is copied into the writer's arena.
type boltKV struct {
	b  *jb
	w  *writer
	at uint64 // the sequence of the event applied
}

func (kv boltKV) seq() uint64 { return kv.at }

func (kv boltKV) Get(k []byte) []byte                      { return kv.b.Get(k) }
func (kv boltKV) Put(k, v []byte) error                    { return kv.b.Put(k, kv.w.keep(v)) } // bbolt copies keys itself
func (kv boltKV) Delete(k []byte) error                    { return kv.b.Delete(k) }
func (kv boltKV) ForEach(fn func(k, v []byte) error) error { return kv.b.ForEach(fn) }

// MemKV is a projection's bucket in memory: what verify and a build at
// open rebuild a projection into, and what a projection's tests apply
// events to. Like a bucket it refuses an empty key.
type MemKV map[string][]byte

func (m MemKV) Get(k []byte) []byte { return m[string(k)] }
func (m MemKV) Put(k, v []byte) error {
	if len(k) == 0 {
		return errors.New("ledger: a projection's key is empty")
	}
	m[string(k)] = bytes.Clone(v)
	return nil
}
func (m MemKV) Delete(k []byte) error {
	delete(m, string(k))
	return nil
}
func (m MemKV) ForEach(fn func(k, v []byte) error) error {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := fn([]byte(k), m[k]); err != nil {
			return err
		}
	}
	return nil
}

// TypeCounts is a projection that counts events by type, for the types it
// is given. `ledger stats` shows it.
type TypeCounts struct {
	Follow []string
}

func (TypeCounts) Name() string      { return "type_counts" }
func (p TypeCounts) Types() []string { return p.Follow }

func (TypeCounts) Apply(kv KV, e *Event) error {
	n := getU64(kv.Get([]byte(e.Type)))
	return kv.Put([]byte(e.Type), u64(n+1))
}

func putU32(b []byte, v uint32) { binary.BigEndian.PutUint32(b, v) }
func putU64(b []byte, v uint64) { binary.BigEndian.PutUint64(b, v) }
func getU32(b []byte) uint32 {
	if len(b) < 4 {
		return 0
	}
	return binary.BigEndian.Uint32(b)
}
