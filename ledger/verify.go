package ledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// VerifyReport is what Verify found.
type VerifyReport struct {
	Events      int      `json:"events"`
	Projections []string `json:"projections"`
	Problems    []string `json:"problems"`
	// Archived: events read from the archive's Segments, before the
	// file's.
	Archived int `json:"archived,omitempty"`
	Segments int `json:"segments,omitempty"`
	// NotRebuilt says why the projections and aggregates were not
	// rebuilt and compared (segments of the archive were deleted).
	NotRebuilt string `json:"not_rebuilt,omitempty"`
}

// OK tells whether nothing was found.
func (r VerifyReport) OK() bool { return len(r.Problems) == 0 }

const maxProblems = 100

// Verify checks every page as CheckAll does (damage is a problem, and ends
// the report), runs bbolt's consistency check, reads every event, rebuilds the
// aggregates and every projection from the events in memory and compares
// them with what is stored, checks the indexes and the outbox against the
// events (every dedupe key names the stored event that carries it), and
// checks the running clock's checkpoints. The archive is read first, as
// VerifyArchive does, and its events rebuild the projections and
// aggregates with the file's; when segments were deleted they cannot be,
// and the report says so. It reads one consistent snapshot; appends go on
// meanwhile.
func (s *Store) Verify(ctx context.Context) (VerifyReport, error) {
	var r VerifyReport
	s.archMu.RLock()
	defer s.archMu.RUnlock()
	problem := func(format string, args ...any) {
		if len(r.Problems) < maxProblems {
			r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
		}
	}
	// The pages first, with plain reads, then through bbolt: its own
	// check runs in a goroutine of its own, where a fault on a damaged
	// page cannot be recovered.
	if err := s.checkAll(ctx); err != nil {
		if !errors.Is(err, ErrDamaged) {
			return r, err
		}
		problem("%v", strings.TrimPrefix(err.Error(), ErrDamaged.Error()+": "))
		return r, nil // reading further would only panic
	}
	if err := walk(s.db); err != nil {
		problem("bbolt: %v", err)
		s.noteFault(fmt.Errorf("%w: %v", ErrDamaged, err))
		return r, nil // reading further would only panic again
	}
	err := s.readFolded(func(tx *bolt.Tx) error {
		// The counts in memory as the fold this reads left them.
		s.countsMu.Lock()
		f := s.folded
		s.countsMu.Unlock()
		if err := checkLayout(tx); err != nil {
			problem("%v", err)
			return nil
		}
		for e := range tx.Check() {
			problem("bbolt: %v", e)
		}
		rebuilt := map[string]MemKV{}
		for _, p := range s.opts.Projections {
			rebuilt[p.Name()] = MemKV{}
			r.Projections = append(r.Projections, p.Name())
		}
		aggs := map[string]uint64{}
		// The archive's events first: applied, then forgotten (see
		// Forgetter).
		h, err := parseArchiveHead(tx.Bucket(bMeta).Get(kArchive))
		if err != nil {
			problem("%v", err)
			return nil
		}
		rebuild := h.FirstKept <= 1
		if !rebuild {
			r.NotRebuilt = fmt.Sprintf("segments 1 to %d of the archive, events to %d, were deleted (see ledger.archive_deleted)", h.FirstKept-1, h.DeletedThrough)
		}
		// rebuildWith applies an event (of the archive, or of the file)
		// to the aggregates and projections rebuilt.
		rebuildWith := func(what string, seq uint64, e *Event) {
			if e.AggregateID != "" {
				if want := aggs[e.AggregateID] + 1; e.AggregateVersion != want {
					problem("%s %d: aggregate %s version %d follows %d", what, seq, e.AggregateID, e.AggregateVersion, want-1)
				}
				aggs[e.AggregateID] = e.AggregateVersion
			}
			for _, p := range s.opts.Projections {
				if follows(p, e.Type) {
					if err := p.Apply(seqKV{rebuilt[p.Name()], seq}, e); err != nil {
						problem("%s %d: projection %s: %v", what, seq, p.Name(), err)
					}
				}
			}
		}
		past := tx.Bucket(bPast)
		apply := func(seq uint64, e *Event) {
			if e.DedupeKey != "" && s.opts.Classes.Of(e.Type).PastKeys && !pastHas(past, pastDedupe, []byte(e.DedupeKey)) {
				problem("archived event %d: its dedupe key %q is not among the past keys", seq, e.DedupeKey)
			}
			if rebuild {
				rebuildWith("archived event", seq, e)
			}
		}
		var segs int
		if r.Archived, segs, err = s.checkArchive(ctx, h, problem, apply); err != nil {
			return err
		}
		r.Segments = segs
		if rebuild && r.Archived > 0 {
			err := s.readArchive(h, func(seq uint64, e *Event) error {
				if e.AggregateID != "" && s.closes(e) && aggs[e.AggregateID] == e.AggregateVersion {
					delete(aggs, e.AggregateID)
				}
				for _, p := range s.opts.Projections {
					if f, ok := p.(Forgetter); ok && follows(p, e.Type) {
						if err := f.Forget(seqKV{rebuilt[p.Name()], seq}, e); err != nil {
							problem("archived event %d: projection %s forgetting it: %v", seq, p.Name(), err)
						}
					}
				}
				return nil
			})
			if err != nil {
				problem("%v", err)
			}
		}
		ids, inbox := tx.Bucket(bIDs), tx.Bucket(bInbox)
		keyed := 0 // inbox keys that name the event that carries them
		through := getU64(tx.Bucket(bMeta).Get(kIDsThrough))
		indexed := 0
		var outboxRows, outboxBytes uint64
		c := tx.Bucket(bEvents).Cursor()
		var e Event
		var lastSeq uint64
		var lastLen int
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if isRowKey(k) {
				outboxRows++
				outboxBytes += uint64(decodeOutboxRow(v).Size)
				if getU64(k) != lastSeq || lastLen == 0 {
					problem("outbox row %d has no event", getU64(k))
				} else if int(decodeOutboxRow(v).Size) != lastLen {
					problem("outbox row %d: size %d, the event has %d bytes", getU64(k), decodeOutboxRow(v).Size, lastLen)
				}
				continue
			}
			if len(k) != 8 {
				problem("events: a key of %d bytes", len(k))
				continue
			}
			lastSeq, lastLen = getU64(k), len(v)
			if lastSeq < h.Through {
				problem("event %d is in the file and below the archive's %d", lastSeq, h.Through)
			}
			if r.Events%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			r.Events++
			seq := getU64(k)
			if err := Decode(v, &e); err != nil {
				problem("event %d: %v", seq, err)
				continue
			}
			if seq <= through {
				indexed++
				if got := getU64(ids.Get(e.ID[:])); got != seq {
					problem("event %d (%s): the id index says %d", seq, e.ID, got)
				}
			}
			if e.DedupeKey != "" {
				if v := inbox.Get([]byte(e.DedupeKey)); len(v) == 16 && getU64(v[8:]) == seq {
					keyed++
				}
			}
			if rebuild {
				rebuildWith("event", seq, &e)
			}
		}
		if n := ids.Stats().KeyN; n != indexed {
			problem("the id index has %d entries for %d events up to sequence %d", n, indexed, through)
		}
		if inbox.Stats().KeyN != keyed {
			verifyInbox(tx, problem)
		}
		verifyClock(tx, problem)
		// The counts kept in memory, as of the fold this reads (a later
		// fold's are of another state).
		have := counts{outboxRows: outboxRows, outboxBytes: outboxBytes, events: uint64(r.Events),
			inboxKeys: uint64(tx.Bucket(bInbox).Stats().KeyN), aggregates: uint64(tx.Bucket(bAggregates).Stats().KeyN)}
		if f.txid == uint64(tx.ID()) && f.n != have {
			problem("the counts kept in memory are %+v; the file has %+v", f.n, have)
		}
		if !rebuild {
			r.Projections = nil
			return nil
		}
		stored := tx.Bucket(bAggregates)
		stored.ForEach(func(k, v []byte) error {
			if want := aggs[string(k)]; getU64(v) != want {
				problem("aggregate %s: stored version %d, the events say %d", k, getU64(v), want)
			}
			delete(aggs, string(k))
			return nil
		})
		for id := range aggs {
			problem("aggregate %s: in the events, not stored", id)
		}
		projs := tx.Bucket(bProj)
		for name, mem := range rebuilt {
			b := projs.Bucket([]byte(name))
			if b == nil {
				problem("projection %s: no bucket", name)
				continue
			}
			compareKV(name, b, mem, problem)
		}
		return nil
	})
	return r, err
}

// verifyInbox names the dedupe keys that do not name a stored event that
// carries them: a key lives as long as its event.
func verifyInbox(tx *bolt.Tx, problem func(string, ...any)) {
	events := tx.Bucket(bEvents)
	var e Event
	tx.Bucket(bInbox).ForEach(func(k, v []byte) error {
		if len(v) != 16 {
			problem("inbox key %q: a value of %d bytes", k, len(v))
			return nil
		}
		seq := getU64(v[8:])
		rec := events.Get(v[8:])
		switch {
		case rec == nil:
			problem("inbox key %q names event %d, which is not stored", k, seq)
		case Decode(rec, &e) != nil:
			// The event's own problem is reported with it.
		case e.DedupeKey != string(k):
			problem("inbox key %q names event %d, whose dedupe key is %q", k, seq, e.DedupeKey)
		}
		return nil
	})
}

// verifyClock checks the running clock's checkpoints: at least one, in
// order of sequence with running times that never go back, none past the
// next sequence.
func verifyClock(tx *bolt.Tx, problem func(string, ...any)) {
	next := tx.Bucket(bEvents).Sequence() + 1
	var n int
	var lastRun uint64
	tx.Bucket(bClock).ForEach(func(k, v []byte) error {
		n++
		if len(k) != 8 || len(v) != 8 {
			problem("clock: a checkpoint of %d and %d bytes", len(k), len(v))
			return nil
		}
		if getU64(k) > next {
			problem("clock: a checkpoint at sequence %d, past the next, %d", getU64(k), next)
		}
		if getU64(v) < lastRun {
			problem("clock: the checkpoint at sequence %d goes back to %d from %d", getU64(k), getU64(v), lastRun)
		}
		lastRun = max(lastRun, getU64(v))
		return nil
	})
	if n == 0 {
		problem("clock: no checkpoint")
	}
}

func compareKV(name string, b *bolt.Bucket, mem MemKV, problem func(string, ...any)) {
	seen := 0
	b.ForEach(func(k, v []byte) error {
		want, ok := mem[string(k)]
		switch {
		case !ok:
			problem("projection %s: key %q is stored but the events do not make it", name, k)
		case !bytes.Equal(v, want):
			problem("projection %s: key %q is %x, the events make %x", name, k, v, want)
		default:
			seen++
		}
		return nil
	})
	if seen < len(mem) {
		for k := range mem {
			if b.Get([]byte(k)) == nil {
				problem("projection %s: key %q is missing", name, k)
			}
		}
	}
}
