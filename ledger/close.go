package ledger

// Close, and the close record it leaves for the next Open.

import (
	"errors"
	"fmt"
	"slices"
)

// closeRecord is what Close writes in its last transaction, the one that
// also writes bbolt's free list: that transaction's id, and the counts. An
// open that finds the file at that transaction knows nothing was written
// after the Close: it takes the counts instead of counting, and checks
// only what bbolt needs to map the file (see inspect). Any later commit
// moves the file to another transaction, so a stale record never matches;
// nothing needs to clear it.
type closeRecord struct {
	txid uint64
	n    counts
}

func (r closeRecord) encode() []byte {
	return slices.Concat(u64(r.txid), u64(r.n.outboxRows), u64(r.n.outboxBytes), u64(r.n.events), u64(r.n.inboxKeys), u64(r.n.aggregates))
}

func parseCloseRecord(b []byte) (closeRecord, bool) {
	if len(b) != 48 {
		return closeRecord{}, false
	}
	return closeRecord{getU64(b), counts{getU64(b[8:]), getU64(b[16:]), getU64(b[24:]), getU64(b[32:]), getU64(b[40:])}}, true
}

// Close stops the committer, fails what is still queued with ErrClosed and
// closes the file. Its last transaction writes bbolt's free list and the
// close record, so the next Open need not read every page (see
// CheckAtOpen); it writes nothing when nothing was written since a clean
// open less than a minute of running time ago, and no record when damage was met. An error means the record was
// not written (the next Open reads every page) or the file not closed.
func (s *Store) Close() error { return s.shutdown(true) }

// shutdown is Close; without clean it leaves the file as a crash after
// the last commit would.
func (s *Store) shutdown(clean bool) error {
	s.sendMu.Lock() // no send is under way, and none starts after
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.sendMu.Unlock()
		return nil
	}
	s.closed = true
	close(s.stop)
	s.mu.Unlock()
	s.sendMu.Unlock()
	s.wg.Wait()
	for {
		select {
		case r := <-s.reqs:
			r.err = ErrClosed
			close(r.done)
			continue
		default:
		}
		break
	}
	// What the loop left: the open transaction, and appends waiting to
	// be on disk. A clean stop folds it all into bbolt, with the close
	// record when it can; one that is not leaves the file and the journal
	// as a crash after the last record would.
	var err error
	s.txMu.Lock()
	if s.tx != nil {
		ran := s.clock.read(s.opts.Now()) - s.clock.opened()
		if clean && s.faulted() == nil && (s.dirty.Load() || !s.openedClean || ran >= int64(checkpointEvery)) {
			if !s.countsOff.Load() {
				if err = s.markClosed(); err != nil {
					err = fmt.Errorf("ledger: recording the clean stop: %w", err)
				}
			}
			if err == nil {
				err = s.fold()
			}
		}
		if s.tx != nil {
			s.tx.Rollback()
			s.tx = nil
		}
	}
	s.txMu.Unlock()
	for _, r := range s.waiting {
		if err != nil || !clean {
			r.results, r.err = nil, ErrClosed
		}
		close(r.done)
	}
	s.waiting = nil
	if s.jr != nil {
		err = errors.Join(err, s.jr.close())
	}
	return errors.Join(err, s.db.Close())
}

// markClosed writes the waiting ids, a checkpoint of the running clock
// and the running time it closes at, and the close record to the open
// transaction, and has the fold that commits it write bbolt's free list
// (txMu held).
func (s *Store) markClosed() error {
	w := s.newWriter(s.tx)
	err := func() error {
		if err := w.flushIDs(true); err != nil {
			return err
		}
		if err := putCheckpoint(w.events, w.clock, s.clock.last()); err != nil {
			return err
		}
		if err := w.meta.Put(kRunning, w.keep(u64(uint64(w.run)))); err != nil {
			return err
		}
		rec := closeRecord{txid: uint64(w.tx.ID()), n: w.n}
		if err := w.meta.Put(kClosed, rec.encode()); err != nil {
			return err
		}
		// Read by this transaction's commit, under the write lock that
		// orders it with every other commit.
		s.db.NoFreelistSync = false
		return nil
	}()
	if err != nil {
		return err
	}
	s.arenas = append(append(s.arenas, w.retired...), w.arena)
	s.publish(w)
	return nil
}
