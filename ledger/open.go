package ledger

// Open: the checks of a file before the store uses it (inspect does the
// plain reads), and starting a store on it: layout, identity, counts, the
// outbox's state.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Open opens or creates the ledger at opts.Path, migrating it forward. A
// file that cannot be read as a ledger is moved aside as
// PATH.corrupt.TIME and a fresh one is created; Damage says so. A file
// locked by another process, of another body or of a newer schema is an
// error and is left alone.
//
// Every page is read and checked first when the last process to write
// the file did not Close it, or with CheckAtOpen; a file as Close left it
// gets a quick check, and the damage it leaves unseen surfaces later as
// an error wrapping ErrDamaged (see CheckAll). A file that needs no
// migration, identity or projection bucket is not written by Open.
func Open(opts Options) (*Store, error) {
	opts.defaults()
	names := map[string]bool{}
	for _, p := range opts.Projections {
		if names[p.Name()] {
			return nil, fmt.Errorf("ledger: two projections are named %s", p.Name())
		}
		names[p.Name()] = true
		for _, t := range p.Types() {
			if opts.Classes.Of(t).TTL != 0 {
				return nil, fmt.Errorf("ledger: projection %s follows %s, whose class %s expires: it could not be rebuilt", p.Name(), t, opts.Classes.Of(t).Name)
			}
		}
	}
	var damage *Damage
	var s *Store
	for attempt := 0; ; attempt++ {
		db, st, err := openChecked(opts)
		if err == nil {
			s = &Store{db: db, opts: opts, damage: damage, projs: map[string]Projection{}, openedWhole: st.full,
				reqs: make(chan *request, 4096), stop: make(chan struct{}), probes: make(chan chan struct{}, 8), changed: make(chan struct{}), pendingIDs: map[UUID]uint64{},
				hurry:     make(chan struct{}),
				snapshots: make(chan struct{}, 1)}
			for _, p := range opts.Projections {
				s.projs[p.Name()] = p
			}
			// Each open counts lost derivations from a base of its own,
			// so a deriver moved to another store forgets what it kept.
			s.derivedLost.Store(opens.Add(1) << 32)
			if err = s.init(st); err != nil {
				db.Close()
			}
		}
		if err == nil {
			break
		}
		if !errors.Is(err, ErrDamaged) || attempt > 0 {
			return nil, err
		}
		if damage, err = moveAside(opts, err); err != nil {
			return nil, err
		}
	}
	if damage != nil {
		opts.Log.Error("ledger damaged; moved aside and started anew", "reason", damage.Reason, "moved_to", damage.MovedTo)
		if _, err := s.Append(context.Background(), Event{Type: "ledger.recovered", Provenance: Observed,
			Payload: mustPayload(map[string]string{"reason": damage.Reason, "moved_to": damage.MovedTo})}); err != nil {
			s.Close()
			return nil, err
		}
	}
	if err := s.startOutbox(); err != nil {
		s.Close()
		return nil, err
	}
	s.running.Store(true)
	return s, nil
}

// startOutbox puts the file's outbox in the state the options say: off
// (its rows cleared) or on (from the next event, or with a backlog).
func (s *Store) startOutbox() error {
	if s.opts.OutboxAsIs {
		return nil
	}
	return s.update(func(w *writer) error {
		off := w.meta.Get(kOutboxOff) != nil
		switch {
		case s.opts.NoOutbox && !off:
			if err := w.meta.Put(kOutboxOff, []byte{1}); err != nil {
				return err
			}
			if w.n.outboxRows == 0 {
				return nil
			}
			rows, bytes, err := w.clearOutbox()
			if err != nil {
				return err
			}
			s.opts.Log.Warn("no uplink: the outbox is cleared; nothing is queued for one", "rows", rows, "bytes", bytes)
			return w.record("ledger.outbox_cleared", map[string]any{"rows": rows, "bytes": bytes, "why": "no uplink is configured"})
		case !s.opts.NoOutbox && off:
			if err := w.meta.Delete(kOutboxOff); err != nil {
				return err
			}
			from := w.events.Sequence() + 1
			queued, err := w.queueBacklog(s.opts.OutboxBacklog)
			if err != nil {
				return err
			}
			s.opts.Log.Info("the outbox starts", "from_seq", from, "backlog_events", queued)
			return w.record("ledger.outbox_started", map[string]any{"from_seq": from, "backlog_events": queued,
				"backlog_s": int64(s.opts.OutboxBacklog / time.Second)})
		}
		return errUnchanged
	})
}

func mustPayload(v any) []byte {
	b, err := MarshalPayload(v)
	if err != nil {
		panic(err)
	}
	return b
}

// openChecked opens the bbolt file and checks it can serve as a ledger.
//
// The file is inspected first, with plain reads under a shared lock (see
// inspect): quickly when it is as a Close left it, whole otherwise. A file
// read whole is then opened read-only and every key of every bucket read,
// here, where a panic or a fault of bbolt on a damaged page can be
// recovered. Only then is it opened for writing: with NoFreelistSync (the
// free list is not written with every commit, a page a commit saved, only
// by Close; a file without it has it rebuilt at open by a scan in a
// goroutine of bbolt's own, which must not meet a damaged page, and only
// a file read whole lacks it).
func openChecked(opts Options) (db *bolt.DB, st fileState, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if db != nil {
				db.Close()
			}
			db, err = nil, fmt.Errorf("%w: reading it panicked: %v", ErrDamaged, r)
		}
	}()
	classify := func(err error) error {
		switch {
		case errors.Is(err, berrors.ErrTimeout), errors.Is(err, errLocked):
			return fmt.Errorf("ledger: %s is locked by another process (is tobe-body running?)", opts.Path)
		case errors.Is(err, ErrDamaged):
			return err
		case errors.Is(err, os.ErrNotExist), errors.Is(err, os.ErrPermission),
			errors.Is(err, syscall.EROFS), errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
			// The file system's trouble, not the file's.
			return fmt.Errorf("ledger: %w", err)
		}
		return fmt.Errorf("%w: %v", ErrDamaged, err)
	}
	if fi, err := os.Stat(opts.Path); err == nil && fi.Size() > 0 {
		if st, err = inspect(opts.Path, opts.CheckAtOpen, opts.LockTimeout); err != nil {
			return nil, st, classify(err)
		}
		// bbolt never shrinks its file; when most of it is free, rewrite it.
		if opts.CompactFree > 0 && st.free > opts.CompactFree && st.free > fi.Size()/2 {
			before, after, err := CompactFile(opts.Path, nil)
			if err != nil {
				return nil, st, err
			}
			opts.Log.Info("ledger compacted at open", "before", before, "after", after)
			// The new file carries the old one's close record, which does
			// not name its transaction: it is read whole, like any file
			// another program wrote.
			if st, err = inspect(opts.Path, true, opts.LockTimeout); err != nil {
				return nil, st, classify(err)
			}
		}
		if st.full {
			ro, err := bolt.Open(opts.Path, 0o640, &bolt.Options{Timeout: opts.LockTimeout, ReadOnly: true})
			if err != nil {
				return nil, st, classify(err)
			}
			err = walk(ro)
			ro.Close()
			if err != nil {
				return nil, st, fmt.Errorf("%w: %v", ErrDamaged, err)
			}
		}
	}
	// The array free list: loading it at open is a copy of the ids, where
	// the map's builds hash maps of every span (on a year-old ledger with
	// 18,000 free pages, 8.5 ms of a 10 ms open against 1.2 ms), and an
	// append on that ledger is no slower with it (the commit's fsync
	// dominates).
	db, err = bolt.Open(opts.Path, 0o640, &bolt.Options{Timeout: opts.LockTimeout, FreelistType: bolt.FreelistArrayType, NoFreelistSync: true})
	if err != nil {
		return nil, st, classify(err)
	}
	if opts.CheckAtOpen {
		if err := check(db); err != nil {
			db.Close()
			return nil, st, fmt.Errorf("%w: %v", ErrDamaged, err)
		}
	}
	return db, st, nil
}

// check reads every page of every bucket, then runs bbolt's consistency
// check, and joins what they find. bbolt asserts (panics) on a page that
// does not identify as itself, and its check runs in a goroutine of its
// own where a panic cannot be recovered; the walk reads the same pages
// first, here, where it can.
func check(db *bolt.DB) error {
	if err := walk(db); err != nil {
		return err
	}
	var errs []error
	err := db.View(func(tx *bolt.Tx) error {
		for e := range tx.Check() {
			errs = append(errs, e)
			if len(errs) >= 10 {
				break
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return errors.Join(errs...)
}

// walk reads every key and value of every bucket, turning a panic of bbolt
// on a damaged page into an error.
func walk(db *bolt.DB) (err error) {
	// A damaged branch can point past the end of the map: without this
	// the read faults and the runtime kills the process.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("reading the file panicked: %v", r)
		}
	}()
	// A damaged branch page can point back at itself; no file holds more
	// keys than it has 16-byte slots.
	var budget int64
	if fi, err := os.Stat(db.Path()); err == nil {
		budget = fi.Size() / 16
	}
	var visit func(b *bolt.Bucket, depth int) error
	visit = func(b *bolt.Bucket, depth int) error {
		if depth > 8 {
			return errors.New("buckets nested deeper than 8")
		}
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if budget--; budget < 0 {
				return errors.New("more keys than the file can hold: its pages loop")
			}
			if v == nil {
				if nb := b.Bucket(k); nb != nil {
					if err := visit(nb, depth+1); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	return db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error { return visit(b, 0) })
	})
}

// init creates or migrates the layout, checks the identity and starts the
// committer. A file that needs none of it is not written: a look at a
// ledger leaves a cleanly closed file as it was.
func (s *Store) init(st fileState) error {
	if note, err := os.ReadFile(DamagePath(s.opts.Path)); err == nil {
		return fmt.Errorf("%w: the last run met damage: %s", ErrDamaged, note)
	}
	jr, err := s.recoverJournal()
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			jr.close()
		}
	}()
	err = s.write(func(tx *bolt.Tx) error {
		if meta := tx.Bucket(bMeta); meta != nil {
			if note := meta.Get(kDamaged); note != nil {
				return fmt.Errorf("%w: the last run met damage: %s", ErrDamaged, note)
			}
		}
		changed, migrated, err := migrate(tx, s.opts.Now())
		if err != nil {
			return err
		}
		from, err := resumeFrom(tx)
		if err != nil {
			return err
		}
		s.clock.start(from, s.opts.Now())
		meta := tx.Bucket(bMeta)
		for _, id := range []struct {
			key  []byte
			want UUID
			have *UUID
		}{{kAgentID, s.opts.AgentID, &s.agentID}, {kBodyID, s.opts.BodyID, &s.bodyID}} {
			stored := meta.Get(id.key)
			switch {
			case stored == nil:
				if err := meta.Put(id.key, id.want[:]); err != nil {
					return err
				}
				*id.have = id.want
				changed = true
			case id.want.IsZero() || bytes.Equal(stored, id.want[:]):
				copy(id.have[:], stored)
			default:
				var u UUID
				copy(u[:], stored)
				return fmt.Errorf("ledger: %s belongs to %s %s, not %s", s.opts.Path, id.key, u, id.want)
			}
		}
		reindexed, err := reindex(tx)
		if err != nil {
			return err
		}
		forgot, dropped, err := s.catchUpForgetting(tx)
		if err != nil {
			return err
		}
		created, err := s.openProjections(tx)
		if err != nil {
			return err
		}
		changed = changed || reindexed || forgot || created
		// A write transaction is one past the file's: the record names
		// the file's only if nothing moved it since inspect read it.
		// A migration may have changed what the record counted.
		if rec, ok := parseCloseRecord(meta.Get(kClosed)); st.clean && ok && !migrated && rec.txid == uint64(tx.ID())-1 {
			s.openedClean, s.openTxid, s.openFree = true, rec.txid, st.freeIDs
			s.counts = rec.n
		} else {
			// Every page was read, or the file is new: count.
			err := tx.Bucket(bEvents).ForEach(func(k, v []byte) error {
				if isRowKey(k) {
					s.counts.outboxRows++
					s.counts.outboxBytes += uint64(decodeOutboxRow(v).Size)
				} else {
					s.counts.events++
				}
				return nil
			})
			if err != nil {
				return err
			}
			if migrated {
				// Stats reads the pages as committed; the migration
				// deleted keys in this transaction.
				c := tx.Bucket(bInbox).Cursor()
				for k, _ := c.First(); k != nil; k, _ = c.Next() {
					s.counts.inboxKeys++
				}
			} else {
				s.counts.inboxKeys = uint64(tx.Bucket(bInbox).Stats().KeyN)
			}
			s.counts.aggregates = uint64(tx.Bucket(bAggregates).Stats().KeyN)
		}
		// Counted before the versions the catch-up dropped (Stats reads
		// the pages as committed).
		s.counts.aggregates -= min(dropped, s.counts.aggregates)
		if !changed {
			return errUnchanged
		}
		return nil
	})
	if err != nil {
		return err
	}
	// The loop's open transaction, and the journal that keeps it.
	tx, err := s.db.Begin(true)
	if err != nil {
		return err
	}
	jr.tag = getU64(tx.Bucket(bMeta).Get(kCreated))
	s.created = jr.tag
	jr.restart(getU64(tx.Bucket(bMeta).Get(kFolded)) + 1)
	s.jr, s.tx, ok = jr, tx, true
	s.folded = folded{txid: uint64(tx.ID()) - 1, n: s.counts}
	s.applied = tx.Bucket(bEvents).Sequence()
	s.durable.Store(s.applied)
	s.wg.Add(1)
	go s.commitLoop()
	// What a crash left of the archive (a segment its transaction never
	// took, one whose deletion was recorded) is looked for now after a
	// start that was not clean, or by the first pass.
	if err := s.tidyArchive(!s.openedClean); err != nil {
		s.opts.Log.Error("ledger: tidying the archive", "err", err)
	}
	if every := s.opts.RetainEvery; every > 0 {
		s.wg.Add(1)
		go s.retainLoop(every)
	}
	return nil
}

// recoverJournal opens the journal and folds into the file what it holds
// of it: the records of the generation after the file's last fold, which
// a crash or a power cut left unfolded (this file's only: a journal
// beside another file names another).
func (s *Store) recoverJournal() (*journal, error) {
	var tag, gen uint64
	layout := false
	err := s.db.View(func(tx *bolt.Tx) error {
		if meta := tx.Bucket(bMeta); meta != nil {
			layout = true
			tag, gen = getU64(meta.Get(kCreated)), getU64(meta.Get(kFolded))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	jr, data, short, err := openJournal(JournalPath(s.opts.Path), s.opts.JournalSize, tag, gen+1)
	if err != nil {
		return nil, err
	}
	if short != nil {
		s.opts.Log.Warn("ledger: the disk is too full for the journal: each write is a commit of the file, as before it had one, until a start finds room", "err", short, "journal_bytes", jr.size)
	}
	if layout {
		bodies, end := journalRecords(data, tag, gen+1)
		if len(bodies) > 0 {
			err = s.write(func(tx *bolt.Tx) error {
				if err := replayJournal(tx, bodies); err != nil {
					return fmt.Errorf("%w: %v", ErrDamaged, err)
				}
				return tx.Bucket(bMeta).Put(kFolded, u64(gen+1))
			})
			if err == nil {
				s.opts.Log.Info("ledger: what the journal held is folded in", "records", len(bodies), "bytes", end)
			}
		}
	}
	if err != nil {
		jr.close()
		return nil, err
	}
	return jr, nil
}

// reindex puts the ids of the events after ids_through into the ids
// bucket: the ones a crash kept in memory only. It says whether there were
// any.
func reindex(tx *bolt.Tx) (bool, error) {
	meta, ev, ids := tx.Bucket(bMeta), tx.Bucket(bEvents), tx.Bucket(bIDs)
	through := getU64(meta.Get(kIDsThrough))
	c := ev.Cursor()
	last := through
	var e Event
	for k, v := c.Seek(u64(through + 1)); k != nil; k, v = c.Next() {
		if isRowKey(k) {
			continue
		}
		if err := Decode(v, &e); err != nil {
			return false, fmt.Errorf("%w: event %d: %v", ErrDamaged, getU64(k), err)
		}
		if err := ids.Put(append([]byte(nil), e.ID[:]...), u64(getU64(k))); err != nil {
			return false, err
		}
		last = getU64(k)
	}
	if last == through {
		return false, nil
	}
	return true, meta.Put(kIDsThrough, u64(last))
}
