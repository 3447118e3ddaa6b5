package ledger

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// archiveHead is the ledger's record of its archive (meta "archive"):
// which segments there are and where the chain starts.
type archiveHead struct {
	// Segments is the last segment's index (0: none yet), Last its hash.
	Segments uint64
	Last     [32]byte
	// Through: every archived event has a lower sequence (0: none).
	Through uint64
	// Events archived in all, the deleted included.
	Events uint64
	// FirstKept is the first segment not deleted (1 when none was);
	// KeptPrev the hash the chain starts from (the last deleted
	// segment's, zero when none was).
	FirstKept uint64
	KeptPrev  [32]byte
	// Deleted: the events of the deleted segments, DeletedThrough the
	// last of them.
	Deleted, DeletedThrough uint64
	// Bytes: the kept segments' sizes, summed; an open reads it instead
	// of a stat of every segment. A record written before it was kept has
	// none (HasBytes false): the open sums the files once.
	Bytes    uint64
	HasBytes bool
}

// The archive's record: six numbers, the two hashes, then Bytes.
const (
	archiveHeadOld = 6*8 + 64
	archiveHeadLen = archiveHeadOld + 8
)

func (h archiveHead) encode() []byte {
	b := make([]byte, 0, archiveHeadLen)
	for _, v := range []uint64{h.Segments, h.Through, h.Events, h.FirstKept, h.Deleted, h.DeletedThrough} {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	b = append(b, h.Last[:]...)
	b = append(b, h.KeptPrev[:]...)
	return binary.BigEndian.AppendUint64(b, h.Bytes)
}

func parseArchiveHead(b []byte) (archiveHead, error) {
	h := archiveHead{FirstKept: 1, HasBytes: true}
	if b == nil {
		return h, nil
	}
	if len(b) != archiveHeadLen && len(b) != archiveHeadOld {
		return h, fmt.Errorf("%w: the archive's record is %d bytes", ErrDamaged, len(b))
	}
	vals := make([]uint64, 6)
	for i := range vals {
		vals[i] = binary.BigEndian.Uint64(b[8*i:])
	}
	h.Segments, h.Through, h.Events, h.FirstKept, h.Deleted, h.DeletedThrough = vals[0], vals[1], vals[2], vals[3], vals[4], vals[5]
	copy(h.Last[:], b[48:])
	copy(h.KeptPrev[:], b[80:])
	h.HasBytes = len(b) == archiveHeadLen
	if h.HasBytes {
		h.Bytes = binary.BigEndian.Uint64(b[archiveHeadOld:])
	}
	return h, nil
}

// setBytes keeps n as the kept segments' bytes (none below zero).
func (h *archiveHead) setBytes(n int64) {
	h.Bytes, h.HasBytes = uint64(max(n, 0)), true
}

// addBytes adds d to the kept segments' bytes the head records, or, in a
// head that records none yet, to known (the sum of the files).
func (h *archiveHead) addBytes(known, d int64) {
	if h.HasBytes {
		known = int64(h.Bytes)
	}
	h.setBytes(known + d)
}

// Kept is how many segments are kept.
func (h archiveHead) kept() uint64 {
	if h.Segments < h.FirstKept {
		return 0
	}
	return h.Segments - h.FirstKept + 1
}

var errNoPastKeys = errors.New("ledger: the file has no past keys (it was opened only to look)")

// ArchiveResult says what an archive pass did.
type ArchiveResult struct {
	Segments int `json:"segments"` // written
	Events   int `json:"events"`   // moved into them
	Keys     int `json:"keys"`     // dedupe keys and aggregates moved to the past keys
	// Deleted: segments the disk budget deleted.
	Deleted []ArchiveDeleted `json:"deleted,omitempty"`
}

// ArchiveDeleted is what a deletion of segments recorded
// (ledger.archive_deleted).
type ArchiveDeleted struct {
	From      uint64 `cbor:"from" json:"from"` // the first and last segment deleted
	To        uint64 `cbor:"to" json:"to"`
	FirstSeq  uint64 `cbor:"first_seq" json:"first_seq"`
	LastSeq   uint64 `cbor:"last_seq" json:"last_seq"`
	Events    uint64 `cbor:"events" json:"events"`
	Bytes     int64  `cbor:"bytes" json:"bytes"`
	LastHash  string `cbor:"last_hash" json:"last_hash"` // the hex of the last one's hash: where the chain now starts
	By        string `cbor:"by" json:"by"`
	Reason    string `cbor:"reason" json:"reason"`
	DiskBytes int64  `cbor:"disk_bytes,omitempty" json:"disk_bytes,omitempty"` // the disk use that called for it
}

// archiveHead reads the archive's record.
func (s *Store) archiveHead() (archiveHead, error) {
	var h archiveHead
	err := s.read(func(tx *bolt.Tx) error {
		var err error
		h, err = parseArchiveHead(tx.Bucket(bMeta).Get(kArchive))
		return err
	})
	return h, err
}

// tag is the ledger's tag: its creation time, which every segment names.
func (s *Store) tag() uint64 { return s.created }

// Archive moves the events of the classes without a TTL that are older
// than Options.AuditKeep by the running clock into the archive, oldest
// first, a segment at a time once Options.ArchiveSegment bytes are due:
// each segment is
// written and synced, then one transaction deletes its events from the
// file with their ids, moves their dedupe keys (and the aggregates they
// close) to the past keys, and lets the projections forget them
// (Forgetter). It stops at the first event it may not take yet: one
// younger than AuditKeep, one still waiting in the outbox, one of a
// class with a TTL that retention has not deleted yet. Then, with
// Options.DiskBudget, it deletes the oldest segments while the ledger's
// files are over it, recording each deletion. Safe for concurrent use
// with appends; passes take turns.
func (s *Store) Archive(ctx context.Context) (ArchiveResult, error) {
	var res ArchiveResult
	if s.opts.AuditKeep <= 0 && s.opts.DiskBudget <= 0 {
		return res, nil
	}
	s.archMu.Lock()
	defer s.archMu.Unlock()
	if err := s.tidyArchive(true); err != nil {
		return res, err
	}
	if err := s.recordArchiveBytes(); err != nil {
		return res, err
	}
	for s.opts.AuditKeep > 0 {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		n, keys, more, err := s.archiveSegment()
		if err != nil {
			return res, err
		}
		if n > 0 {
			res.Segments++
			res.Events += n
			res.Keys += keys
		}
		if !more {
			break
		}
	}
	if s.opts.DiskBudget > 0 {
		d, err := s.keepBudget()
		res.Deleted = d
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// tidyArchive removes what a crash left in the archive's directory: a
// segment written whose transaction never reached the disk (past the
// head's last), a segment whose deletion was recorded but not carried
// out (before its first kept), a file half written; and takes the bytes
// of the segments kept (archBytes) from the head, or, from a head that
// does not keep them, sums their files. Without look, and with a head
// that keeps the bytes, it only takes them: a clean start has nothing to
// tidy, and a directory of thousands of segments is not read.
func (s *Store) tidyArchive(look bool) error {
	h, err := s.archiveHead()
	if err != nil {
		return err
	}
	if !look && h.HasBytes {
		s.archBytes.Store(int64(h.Bytes))
		return nil
	}
	dir := ArchiveDir(s.opts.Path)
	idx, other, err := segmentIndexes(dir)
	if err != nil {
		return err
	}
	// A segment to remove that is not this ledger's (another's archive
	// left beside a new file, a file that cannot be read) is never
	// deleted: the directory is moved aside, whole.
	for _, i := range idx {
		if i <= h.Segments && i >= h.FirstKept {
			continue
		}
		if seg, err := readSegmentHeader(dir, i); err != nil || seg.Tag != s.created {
			to := fmt.Sprintf("%s.foreign.%s", dir, s.opts.Now().UTC().Format("20060102T150405.000000000Z"))
			if err := os.Rename(dir, to); err != nil {
				return fmt.Errorf("ledger: archive: segment %d is not this ledger's, and moving its directory aside failed: %w", i, err)
			}
			s.opts.Log.Warn("ledger: the archive's directory holds segments of another ledger: moved aside, not deleted", "segment", i, "moved_to", to)
			s.archBytes.Store(int64(h.Bytes))
			return syncDir(filepath.Dir(dir))
		}
	}
	removed := false
	var kept int64
	for _, i := range idx {
		if i > h.Segments || i < h.FirstKept {
			if err := os.Remove(filepath.Join(dir, segName(i))); err != nil {
				return err
			}
			removed = true
		} else if !h.HasBytes {
			if fi, err := os.Stat(filepath.Join(dir, segName(i))); err == nil {
				kept += fi.Size()
			}
		}
	}
	if h.HasBytes {
		kept = int64(h.Bytes)
	}
	s.archBytes.Store(kept)
	for _, name := range other {
		if filepath.Ext(name) == ".tmp" {
			os.Remove(filepath.Join(dir, name))
			removed = true
		}
	}
	if removed {
		return syncDir(dir)
	}
	return nil
}

// recordArchiveBytes writes the kept segments' bytes into a head that
// does not keep them yet (one written before it did), so the next open
// need not stat every segment (archMu held).
func (s *Store) recordArchiveBytes() error {
	h, err := s.archiveHead()
	if err != nil || h.HasBytes {
		return err
	}
	return s.update(func(w *writer) error {
		cur, err := parseArchiveHead(w.meta.Get(kArchive))
		if err != nil || cur.HasBytes {
			return err
		}
		cur.setBytes(s.archBytes.Load())
		return w.meta.Put(kArchive, w.keep(cur.encode()))
	})
}

// archiveSegment writes one segment of what is due and takes its events
// out of the file. It returns how many events and keys it moved, and
// whether more may be due.
func (s *Store) archiveSegment() (n, keys int, more bool, err error) {
	var (
		h     archiveHead
		batch []archived
		raw   int
		kept  uint64 // the kept segments' bytes, with this one
	)
	err = s.read(func(tx *bolt.Tx) error {
		if h, err = parseArchiveHead(tx.Bucket(bMeta).Get(kArchive)); err != nil {
			return err
		}
		run := s.clock.read(s.opts.Now())
		cut, ok := cutoffs(tx, run, []time.Duration{s.opts.AuditKeep})[s.opts.AuditKeep]
		if !ok {
			return nil
		}
		var e Event
		c := tx.Bucket(bEvents).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if isRowKey(k) {
				// The event before it waits for the uplink.
				if len(batch) > 0 && batch[len(batch)-1].seq == getU64(k) {
					raw -= len(batch[len(batch)-1].rec)
					batch = batch[:len(batch)-1]
				}
				return nil
			}
			seq := getU64(k)
			if full := raw >= max(segMaxRaw, s.opts.ArchiveSegment); seq >= cut || full {
				more = full
				return nil
			}
			if err := Decode(v, &e); err != nil {
				return fmt.Errorf("ledger: archive: event %d: %w", seq, err)
			}
			if s.opts.Classes.Of(e.Type).TTL > 0 && e.AggregateID == "" {
				return nil // retention's
			}
			batch = append(batch, archived{seq: seq, rec: bytes.Clone(v)})
			raw += len(v)
		}
		return nil
	})
	if err != nil || len(batch) == 0 || raw < s.opts.ArchiveSegment {
		return 0, 0, false, err // too little for a segment yet
	}
	dir := ArchiveDir(s.opts.Path)
	prev := h.Last
	if h.Segments == 0 {
		prev = h.KeptPrev
	}
	seg, err := writeSegment(dir, s.tag(), h.Segments+1, prev, batch)
	if err != nil {
		return 0, 0, false, err
	}
	err = s.updateSoon(func(w *writer) error {
		keys = 0
		if err := w.flushIDs(true); err != nil {
			return err
		}
		cur, err := parseArchiveHead(w.meta.Get(kArchive))
		if err != nil {
			return err
		}
		if cur.Segments != h.Segments {
			return fmt.Errorf("ledger: archive: the head moved from segment %d to %d", h.Segments, cur.Segments)
		}
		var e Event
		for _, a := range batch {
			k := u64(a.seq)
			if !bytes.Equal(w.events.Get(k), a.rec) || w.events.Get(rowKey(a.seq)) != nil {
				return fmt.Errorf("ledger: archive: event %d changed while segment %d was written", a.seq, seg.Index)
			}
			if err := Decode(a.rec, &e); err != nil {
				return err
			}
			if err := w.events.Delete(k); err != nil {
				return err
			}
			w.n.events--
			w.nDirty = true
			if err := w.ids.Delete(e.ID[:]); err != nil {
				return err
			}
			if e.DedupeKey != "" {
				dk := []byte(e.DedupeKey)
				if v := w.inbox.Get(dk); len(v) == 16 && getU64(v[8:]) == a.seq {
					if err := w.inbox.Delete(dk); err != nil {
						return err
					}
					w.n.inboxKeys--
				}
				if s.opts.Classes.Of(e.Type).PastKeys {
					if err := w.pastAdd(pastDedupe, dk); err != nil {
						return err
					}
					keys++
				}
			}
			if e.AggregateID != "" && s.closes(&e) {
				id := []byte(e.AggregateID)
				if getU64(w.aggs.Get(id)) == e.AggregateVersion {
					if err := w.aggs.Delete(id); err != nil {
						return err
					}
					w.n.aggregates--
				}
			}
			if err := w.forget(a.seq, &e); err != nil {
				return err
			}
		}
		cur.Segments, cur.Last, cur.Through = seg.Index, seg.Hash, seg.Last+1
		cur.Events += seg.Count
		cur.addBytes(s.archBytes.Load(), seg.Size)
		kept = cur.Bytes
		return w.meta.Put(kArchive, w.keep(cur.encode()))
	})
	if err != nil {
		os.Remove(seg.Path)
		syncDir(dir)
		return 0, 0, false, err
	}
	s.archBytes.Store(int64(kept))
	s.opts.Log.Info("ledger: archived", "segment", seg.Index, "events", seg.Count, "first_seq", seg.First, "last_seq", seg.Last,
		"bytes", seg.Size, "raw_bytes", raw)
	return len(batch), keys, more, nil
}

// forget lets the projections that follow e forget it: the archive took it.
func (w *writer) forget(seq uint64, e *Event) error {
	for _, p := range w.s.opts.Projections {
		f, ok := p.(Forgetter)
		if !ok || !follows(p, e.Type) {
			continue
		}
		if err := f.Forget(boltKV{w.projs.child([]byte(p.Name())), w, seq}, e); err != nil {
			return fmt.Errorf("projection %s forgetting event %d: %w", p.Name(), seq, err)
		}
	}
	return nil
}

// Closer is a projection that knows which events close their aggregate:
// no event of it follows (an action's final record, of an id never used
// again). When the archive takes such an event, the aggregate's version
// goes from the file. Without one, every aggregate's version stays.
type Closer interface {
	Closes(e *Event) bool
}

// closes tells whether a projection says e closes its aggregate.
func (s *Store) closes(e *Event) bool {
	for _, p := range s.opts.Projections {
		if c, ok := p.(Closer); ok && c.Closes(e) {
			return true
		}
	}
	return false
}

// Forgetter is a projection that lets go of what it keeps of events the
// archive took out of the file (an action finished long ago), so it does
// not grow with the body's age. Forget must give the same state whether
// it runs right after Apply of e or after the Apply of events that follow
// e: verify rebuilds it by applying the archived events, then forgetting
// them, then applying the file's. Like Apply's, e's payload is one
// item the ledger checked.
type Forgetter interface {
	Forget(kv KV, e *Event) error
}

// keepBudget deletes the oldest segments while the ledger's files are
// over Options.DiskBudget: as many as it takes at once, one record.
func (s *Store) keepBudget() ([]ArchiveDeleted, error) {
	var out []ArchiveDeleted
	for {
		use := s.diskUse()
		if use <= s.opts.DiskBudget {
			return out, nil
		}
		h, err := s.archiveHead()
		if err != nil {
			return out, err
		}
		if h.kept() == 0 {
			s.opts.Log.Error("ledger: over its disk budget with no archive left to delete", "bytes", use, "budget", s.opts.DiskBudget)
			return out, nil
		}
		// As many of the oldest as it takes, in one deletion.
		through, freed := h.FirstKept, int64(0)
		for ; through <= h.Segments; through++ {
			seg, err := readSegmentHeader(ArchiveDir(s.opts.Path), through)
			if err != nil {
				return out, fmt.Errorf("ledger: archive: segment %d: %w", through, err)
			}
			if freed += seg.Size; use-freed <= s.opts.DiskBudget {
				break
			}
		}
		d, err := s.deleteSegments(min(through, h.Segments), "ledger", "over the disk budget", use)
		if err != nil {
			return out, err
		}
		out = append(out, d)
	}
}

// DeleteArchive deletes the archive's segments up to and including
// through (the oldest first), for a local administrator (by names who):
// the deletion is recorded (ledger.archive_deleted) before the files go.
func (s *Store) DeleteArchive(through uint64, by string) (ArchiveDeleted, error) {
	s.archMu.Lock()
	defer s.archMu.Unlock()
	h, err := s.archiveHead()
	if err != nil {
		return ArchiveDeleted{}, err
	}
	if h.kept() == 0 || through < h.FirstKept || through > h.Segments {
		return ArchiveDeleted{}, fmt.Errorf("ledger: archive: no segment %d to delete (segments %d to %d are kept)", through, h.FirstKept, h.Segments)
	}
	return s.deleteSegments(through, by, "deleted by an administrator", 0)
}

// deleteSegments records the deletion of the segments from the first kept
// to through, then removes their files.
func (s *Store) deleteSegments(through uint64, by, reason string, use int64) (ArchiveDeleted, error) {
	h, err := s.archiveHead()
	if err != nil {
		return ArchiveDeleted{}, err
	}
	dir := ArchiveDir(s.opts.Path)
	d := ArchiveDeleted{From: h.FirstKept, To: through, By: by, Reason: reason, DiskBytes: use}
	var last segment
	for i := h.FirstKept; i <= through; i++ {
		seg, err := readSegmentHeader(dir, i)
		if err != nil {
			return d, fmt.Errorf("ledger: archive: deleting segment %d: %w", i, err)
		}
		if i == h.FirstKept {
			d.FirstSeq = seg.First
		}
		d.LastSeq, d.Events, d.Bytes = seg.Last, d.Events+seg.Count, d.Bytes+seg.Size
		last = seg
	}
	// The hash of the last one deleted: the next one names it.
	if through == h.Segments {
		last.Hash = h.Last
	} else {
		next, err := readSegmentHeader(dir, through+1)
		if err != nil {
			return d, err
		}
		last.Hash = next.Prev
	}
	d.LastHash = fmt.Sprintf("%x", last.Hash)
	p, err := MarshalPayload(d)
	if err != nil {
		return d, err
	}
	var kept uint64 // the kept segments' bytes, without these
	err = s.update(func(w *writer) error {
		cur, err := parseArchiveHead(w.meta.Get(kArchive))
		if err != nil {
			return err
		}
		if cur.FirstKept != h.FirstKept || cur.Segments != h.Segments {
			return errors.New("ledger: archive: it changed while segments were deleted")
		}
		cur.FirstKept, cur.KeptPrev = through+1, last.Hash
		cur.Deleted += d.Events
		cur.DeletedThrough = d.LastSeq
		cur.addBytes(s.archBytes.Load(), -d.Bytes)
		kept = cur.Bytes
		if err := w.meta.Put(kArchive, w.keep(cur.encode())); err != nil {
			return err
		}
		return w.recordPayload("ledger.archive_deleted", p)
	})
	if err != nil {
		return d, err
	}
	// What the record says, whether or not every file goes now (a
	// deletion recorded but not carried out is carried out by the next
	// tidy).
	s.archBytes.Store(int64(kept))
	for i := h.FirstKept; i <= through; i++ {
		if err := os.Remove(filepath.Join(dir, segName(i))); err != nil && !errors.Is(err, os.ErrNotExist) {
			return d, err
		}
	}
	syncDir(dir)
	s.opts.Log.Warn("ledger: archive segments deleted", "from", d.From, "to", d.To, "events", d.Events, "bytes", d.Bytes, "by", by, "reason", reason)
	return d, nil
}

// scanArchive is the archive's part of Scan: the events after f.After in
// the kept segments. full says it stopped at a bound of f.
func (s *Store) scanArchive(f Filter, taken, looked *int) (evs []Stored, next uint64, full bool, err error) {
	next = f.After
	h, err := s.archiveHead()
	if err != nil || h.kept() == 0 || f.After+1 >= h.Through {
		return nil, next, false, err
	}
	dir := ArchiveDir(s.opts.Path)
	for i := h.FirstKept; i <= h.Segments; i++ {
		hdr, err := readSegmentHeader(dir, i)
		if err != nil {
			return evs, next, false, err
		}
		if hdr.Last <= next {
			continue
		}
		_, err = readSegment(dir, i, next, func(seq uint64, rec []byte) error {
			if len(evs) >= f.Limit || f.MaxBytes > 0 && *taken >= f.MaxBytes || f.MaxScan > 0 && *looked >= f.MaxScan {
				return errStopRead
			}
			st := Stored{Seq: seq}
			if err := Decode(rec, &st.Event); err != nil {
				return fmt.Errorf("archived event %d: %w", seq, err)
			}
			next = seq
			*looked += len(rec)
			if f.match(&st.Event) {
				evs = append(evs, st)
				*taken += len(rec)
			}
			return nil
		})
		if errors.Is(err, errStopRead) {
			return evs, next, true, nil
		}
		if err != nil {
			return evs, next, false, err
		}
	}
	return evs, next, false, nil
}

// ArchiveStats says what the archive holds.
type ArchiveStats struct {
	Dir       string `json:"dir"`
	Segments  uint64 `json:"segments"`   // kept
	FirstKept uint64 `json:"first_kept"` // the index of the first kept
	Events    uint64 `json:"events"`     // archived in all, the deleted included
	Deleted   uint64 `json:"deleted"`    // events of deleted segments
	// Through: every archived event has a lower sequence;
	// DeletedThrough: the last event of the deleted segments.
	Through        uint64 `json:"through"`
	DeletedThrough uint64 `json:"deleted_through"`
	Bytes          int64  `json:"bytes"` // of the kept segments
	// PastKeys: keys added to the past keys, the number they are sized
	// for, and the chance of taking a new key for a past one now.
	PastKeys      uint64  `json:"past_keys"`
	PastCapacity  uint64  `json:"past_capacity"`
	PastFalseRate float64 `json:"past_false_rate"`
	// DiskBytes: the file, its journal and the archive; DiskBudget the
	// bound (0: none).
	DiskBytes  int64 `json:"disk_bytes"`
	DiskBudget int64 `json:"disk_budget"`
}

// ArchiveStats reads the archive's record; the sizes are kept in memory
// (counted at open, then followed), so it costs a read and two stats.
func (s *Store) ArchiveStats() (ArchiveStats, error) {
	st := ArchiveStats{Dir: ArchiveDir(s.opts.Path), DiskBudget: s.opts.DiskBudget}
	var h archiveHead
	err := s.read(func(tx *bolt.Tx) error {
		var err error
		if h, err = parseArchiveHead(tx.Bucket(bMeta).Get(kArchive)); err != nil {
			return err
		}
		if b := tx.Bucket(bPast); b != nil {
			blocks := getU64(b.Get(kPastN))
			if blocks == 0 {
				blocks = pastBlocks(s.opts.PastKeys)
			}
			st.PastKeys, st.PastCapacity = getU64(b.Get(kPastCount)), blocks*pastBlockBytes*8/pastBitsPerKey
			st.PastFalseRate = pastFalseRate(st.PastKeys, blocks)
		}
		return nil
	})
	if err != nil {
		return st, err
	}
	st.Segments, st.FirstKept, st.Events, st.Deleted, st.Through, st.DeletedThrough = h.kept(), h.FirstKept, h.Events, h.Deleted, h.Through, h.DeletedThrough
	st.Bytes, st.DiskBytes = s.archBytes.Load(), s.diskUse()
	return st, nil
}

// diskUse is the bytes of the ledger's files: the file, its journal and
// the archive's kept segments (their bytes kept in memory): two stats,
// however many segments.
func (s *Store) diskUse() int64 {
	total := s.archBytes.Load()
	for _, p := range []string{s.opts.Path, JournalPath(s.opts.Path)} {
		if fi, err := os.Stat(p); err == nil {
			total += fi.Size()
		}
	}
	return total
}

// readArchive calls fn with every event of the kept segments, in order.
func (s *Store) readArchive(h archiveHead, fn func(seq uint64, e *Event) error) error {
	dir := ArchiveDir(s.opts.Path)
	var e Event
	for i := h.FirstKept; i <= h.Segments; i++ {
		_, err := readSegment(dir, i, 0, func(seq uint64, rec []byte) error {
			if err := Decode(rec, &e); err != nil {
				return fmt.Errorf("archived event %d: %w", seq, err)
			}
			return fn(seq, &e)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// checkArchive reads the kept segments of h in order and names what is
// wrong: a segment missing, changed (its hash), of another ledger, out of
// the chain (the hash it names of the one before), out of order, or an
// event that cannot be read; the last one's hash must be the head's. fn
// is called with each event that can be read. It returns how many events
// and segments it read.
func (s *Store) checkArchive(ctx context.Context, h archiveHead, problem func(string, ...any), fn func(seq uint64, e *Event)) (events, segments int, err error) {
	dir := ArchiveDir(s.opts.Path)
	prev := h.KeptPrev
	var last uint64
	var size int64
	var e Event
	for i := h.FirstKept; i <= h.Segments; i++ {
		if err := ctx.Err(); err != nil {
			return events, segments, err
		}
		seg, err := readSegment(dir, i, 0, func(seq uint64, rec []byte) error {
			if seq <= last {
				return fmt.Errorf("%w: segment %d: event %d after %d", errArchive, i, seq, last)
			}
			last = seq
			events++
			if err := Decode(rec, &e); err != nil {
				problem("archived event %d (segment %d): %v", seq, i, err)
				return nil
			}
			if fn != nil {
				fn(seq, &e)
			}
			return nil
		})
		switch {
		case errors.Is(err, os.ErrNotExist):
			problem("archive segment %d is missing (%s)", i, filepath.Join(dir, segName(i)))
			return events, segments, nil
		case err != nil:
			problem("%v", err)
			return events, segments, nil
		}
		segments++
		size += seg.Size
		if seg.Tag != s.created {
			problem("archive segment %d belongs to another ledger (tag %d, this one's is %d)", i, seg.Tag, s.created)
		}
		if seg.Prev != prev {
			problem("archive segment %d does not follow the one before it (it names %x, that one is %x)", i, seg.Prev[:6], prev[:6])
		}
		prev = seg.Hash
	}
	if h.kept() > 0 {
		if prev != h.Last {
			problem("the archive's last segment %d is not the one the ledger recorded (%x, recorded %x)", h.Segments, prev[:6], h.Last[:6])
		}
		if last+1 != h.Through {
			problem("the archive ends at event %d; the ledger recorded %d", last, h.Through-1)
		}
	}
	if h.HasBytes && uint64(size) != h.Bytes {
		problem("the archive's segments hold %d bytes; the ledger recorded %d", size, h.Bytes)
	}
	if idx, _, err := segmentIndexes(dir); err == nil {
		for _, i := range idx {
			if i < h.FirstKept && h.FirstKept > 1 {
				problem("archive segment %d is there, but its deletion was recorded", i)
			}
		}
	}
	return events, segments, nil
}

// VerifyArchive checks the archive alone, as Verify reads it: every kept
// segment whole, its hash, the chain of hashes from the last deleted
// segment's to the one the ledger recorded last, and every event in it;
// the projections are not rebuilt.
func (s *Store) VerifyArchive(ctx context.Context) (VerifyReport, error) {
	var r VerifyReport
	s.archMu.RLock()
	defer s.archMu.RUnlock()
	h, err := s.archiveHead()
	if err != nil {
		return r, err
	}
	problem := func(format string, args ...any) {
		if len(r.Problems) < maxProblems {
			r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
		}
	}
	r.Archived, r.Segments, err = s.checkArchive(ctx, h, problem, func(seq uint64, e *Event) {
		if e.DedupeKey == "" {
			return
		}
		// A read each: the commit loop is not held up for the archive's
		// whole read.
		s.read(func(tx *bolt.Tx) error {
			if !pastHas(tx.Bucket(bPast), pastDedupe, []byte(e.DedupeKey)) {
				problem("archived event %d: its dedupe key %q is not among the past keys", seq, e.DedupeKey)
			}
			return nil
		})
	})
	return r, err
}
