package ledger

// Group commit: the queue of appends, the one writer that commits them in
// batches, the wait of grouped appends for company (GroupCommit, Hurry),
// and Alive.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"time"
)

// request is one command, or one outbox acknowledgement, waiting in the
// commit queue for the transaction that makes it durable.
type request struct {
	ctx context.Context
	// One of: a command; an OutboxAck (these rows go); a function run
	// with the writer (update); a fold wanted now (foldNow).
	cmd  Command
	ack  []uint64
	fn   func(w *writer) error
	fold bool
	lazy bool      // it may wait for company, until by
	by   time.Time // with lazy: when it must be on disk
	// soon: it is answered once applied, its records on disk with the
	// next sync (an acknowledgement, retention: a crash only has them
	// done again).
	soon    bool
	results []Result
	err     error
	done    chan struct{}
}

// commitBy is when a lazy request whose events began to wait at since
// must be committed.
// A since after now (a time without a monotonic reading, taken before
// the wall clock stepped back) counts as now: nothing waits longer than
// GroupCommit from its call.
func (s *Store) commitBy(since time.Time) time.Time {
	now := time.Now()
	if since.IsZero() || since.After(now) {
		since = now
	}
	return since.Add(s.opts.GroupCommit)
}

// Alive asks the commit loop, the ledger's one writer, to answer between
// its commits: the channel returned is closed when it did. A loop that
// does not answer within seconds is stuck (a write that never returns, a
// command that never decides), and the daemon's watchdog stops its pings
// for it. A stopped store answers at once. When 8 questions wait already
// the loop is not taking them: the channel returned is never closed.
func (s *Store) Alive() <-chan struct{} {
	p := make(chan struct{})
	select {
	case <-s.stop:
		close(p)
		return p
	default:
	}
	select {
	case s.probes <- p:
	default:
	}
	return p
}

// submit queues r for the commit loop and waits for its answer.
func (s *Store) submit(r *request) ([]Result, error) {
	if err := s.enqueue(r); err != nil {
		return nil, err
	}
	return s.await(r)
}

// enqueue hands r to the commit loop, which will answer it, or fails
// with ErrClosed or r's context's error.
func (s *Store) enqueue(r *request) error {
	s.sendMu.RLock()
	defer s.sendMu.RUnlock()
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if enqueueHook != nil {
		enqueueHook(s)
	}
	select {
	case s.reqs <- r:
		return nil
	case <-r.ctx.Done():
		return r.ctx.Err()
	}
}

// enqueueHook, when a test sets it, runs between enqueue's look at
// closed and its send: where a Close must not slip in.
var enqueueHook func(*Store)

// await waits for the answer to a queued request, or for its context;
// an answer that came first is the answer, whatever the context says.
func (s *Store) await(r *request) ([]Result, error) {
	select {
	case <-r.done:
		return r.results, r.err
	default:
	}
	select {
	case <-r.done:
		return r.results, r.err
	case <-r.ctx.Done():
		return nil, r.ctx.Err()
	}
}

// commitLoop is the one writer: it takes what is queued, applies it to
// the open transaction, journals it (one fdatasync for many appends, and
// none for appends that may wait), answers each once it is on disk, and
// folds the transaction into bbolt when the fold is due.
func (s *Store) commitLoop() {
	defer s.wg.Done()
	batch := make([]*request, 0, s.opts.MaxBatch)
	lastSize := 0
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		batch = batch[:0]
		due := s.nextDue()
		if due.IsZero() {
			timer.Reset(time.Hour)
		} else {
			timer.Reset(max(time.Until(due), 0))
		}
		var hurry <-chan struct{}
		if len(s.waiting) > 0 {
			hurry = s.hurry
		}
		select {
		case r := <-s.reqs:
			batch = append(batch, r)
		case p := <-s.probes:
			close(p)
			continue
		case <-timer.C:
			s.settle(s.foldDue())
			continue
		case <-hurry:
			s.settle(false)
			continue
		case <-s.stop:
			return
		}
		batch = s.gather(batch, lastSize > 1)
		lastSize = len(batch)
		s.commit(batch)
	}
}

// nextDue is when the loop must next act without a request: the earliest
// deadline of the appends waiting to be on disk, or the fold.
func (s *Store) nextDue() time.Time {
	due := s.syncBy
	for _, r := range s.waiting {
		if due.IsZero() || r.by.Before(due) {
			due = r.by
		}
	}
	if !s.genSince.IsZero() {
		fold := s.genSince.Add(s.opts.FoldEvery)
		if s.foldAfter.After(fold) {
			fold = s.foldAfter
		}
		if due.IsZero() || fold.Before(due) {
			due = fold
		}
	}
	return due
}

// foldDue tells whether the open transaction should be folded now: its
// first record is FoldEvery old, or the journal is half full; not again
// within a second of a fold that failed.
func (s *Store) foldDue() bool {
	now := time.Now()
	if s.genSince.IsZero() || now.Before(s.foldAfter) {
		return false
	}
	return !now.Before(s.genSince.Add(s.opts.FoldEvery)) || s.jr.off > s.jr.size/2
}

// settle puts what is applied on disk, by a fold when fold says so or a
// sync of the journal, and answers what waited for it. A fold that fails
// (bbolt could not grow its file on a full disk) leaves it all in the
// journal: a sync puts it on disk there, and the fold is tried again
// after a second.
func (s *Store) settle(fold bool) (foldErr error) {
	var err error
	if fold {
		s.txMu.Lock()
		err = s.fold()
		s.txMu.Unlock()
		if err != nil {
			foldErr = err
			s.foldAfter = time.Now().Add(time.Second)
			s.opts.Log.Warn("ledger: the fold failed; the journal keeps what it would have folded", "err", err)
			fold = false
		}
	}
	if fold {
		s.commits.Add(1)
	} else {
		if s.jr.unsynced {
			s.commits.Add(1)
		}
		if err = s.jr.sync(); err == nil {
			s.durable.Store(s.applied)
		}
	}
	if err == nil {
		s.syncBy = time.Time{}
	}
	if err != nil {
		s.opts.Log.Error("ledger: putting appends on disk", "err", err)
		err = fmt.Errorf("ledger: commit: %w", err)
	}
	for _, r := range s.waiting {
		if err != nil {
			r.results, r.err = nil, err
		}
		close(r.done)
	}
	s.waiting = s.waiting[:0]
	s.held.Store(0)
	s.notify()
	return foldErr
}

// gather takes what else is queued. After a busy batch it lingers, by
// yielding the processor a few times rather than with a timer (a timer of
// 100 µs can sleep a whole millisecond in the poller): the appenders its
// last commit woke are then back with their next request.
func (s *Store) gather(batch []*request, linger bool) []*request {
	drain := func() int {
		n := 0
		for len(batch) < s.opts.MaxBatch {
			select {
			case r := <-s.reqs:
				batch = append(batch, r)
				n++
				continue
			default:
			}
			break
		}
		return n
	}
	drain()
	if !linger {
		return batch
	}
	deadline := time.Now().Add(s.opts.Linger)
	for len(batch) < s.opts.MaxBatch && time.Now().Before(deadline) {
		runtime.Gosched()
		if drain() == 0 {
			// Nobody came in a round: give those still running one more.
			runtime.Gosched()
			if drain() == 0 {
				break
			}
		}
	}
	return batch
}

// groupedBusy is the size of an AppendGrouped that commits at once.
const groupedBusy = 32

// lazy tells whether a request that may wait for company should.
func (s *Store) lazy() bool { return s.opts.GroupCommit > 0 && !s.hurried.Load() }

// Hurry ends waiting for company: what waits commits now, and from now
// on every append commits at once. A body that stops calls it first, so
// its last appends and acknowledgements do not wait out GroupCommit.
func (s *Store) Hurry() {
	s.hurryOnce.Do(func() {
		s.hurried.Store(true)
		close(s.hurry)
	})
}

// commit applies a batch to the open transaction and journals it; the
// requests that may not wait are answered once it is on disk, with
// whatever waited before them; a fold that is due or wanted follows.
func (s *Store) commit(batch []*request) {
	live := batch[:0:0]
	fold := false
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.err = err
			close(r.done)
			continue
		}
		if r.fold {
			fold = true
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	s.txMu.Lock()
	err := s.apply(live)
	if err != nil && len(live) > 1 {
		// Something failed the batch, and apply undid it; find out which
		// by applying each alone, so one bad command cannot fail the others.
		s.txMu.Unlock()
		for _, r := range live {
			s.commit([]*request{r})
		}
		return
	}
	if err != nil {
		s.txMu.Unlock()
		for _, r := range live {
			r.results, r.err = nil, fmt.Errorf("ledger: commit: %w", err)
			close(r.done)
		}
		return
	}
	dueFold := s.foldDue()
	s.txMu.Unlock()
	s.notify()
	now := false
	for _, r := range live {
		switch {
		case r.soon && !s.lazy():
			now = true // everything on disk at once
		case r.soon:
			if s.syncBy.IsZero() || r.by.Before(s.syncBy) {
				s.syncBy = r.by
			}
		case r.fold:
		case !r.lazy || !s.lazy():
			now = true
			s.waiting = append(s.waiting, r)
		default:
			s.waiting = append(s.waiting, r)
		}
	}
	var foldErr error
	if now || fold || dueFold {
		foldErr = s.settle(fold || dueFold)
	} else {
		s.held.Store(int32(len(s.waiting)))
	}
	for _, r := range live {
		if r.fold && foldErr != nil {
			r.err = fmt.Errorf("ledger: fold: %w", foldErr)
		}
		if r.soon || r.fold {
			close(r.done)
		}
	}
}

// apply runs a batch in the open transaction and writes its record to
// the journal (txMu held). When it fails, what the batch wrote is undone:
// the transaction is rolled back and the journal's records replayed.
func (s *Store) apply(live []*request) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	w := s.newWriter(s.tx)
	w.arena, w.rec.ops = s.arena, s.jops[:0]
	defer func() {
		if cap(w.rec.ops) <= maxKeptBuffer {
			s.jops = w.rec.ops[:0] // written or dropped: the next batch's
		}
	}()
	err = func() (err error) {
		defer s.contain(&err)
		if err := w.checkpoint(); err != nil {
			return err
		}
		for _, r := range live {
			r.results, r.err = nil, nil
			if err := w.apply(r); err != nil {
				return err
			}
		}
		if err := w.enforceOutboxBudget(); err != nil {
			return err
		}
		return w.flushIDs(false)
	}()
	if err == nil && !w.rec.empty() {
		if s.jr.fits(w.rec.size()) {
			err = s.jr.appendOps(&w.rec)
		} else {
			// The journal is full: the fold takes the batch to bbolt.
			return s.foldWith(w)
		}
	}
	if err != nil {
		if w.derived {
			s.derivedLost.Add(1) // what the derivers kept of it is not in the ledger
		}
		if rerr := s.restart(); rerr != nil {
			return errors.Join(err, rerr)
		}
		return err
	}
	s.arenas, s.arena = append(s.arenas, w.retired...), w.arena
	s.publish(w)
	return nil
}

// foldWith folds the open transaction with what w applied to it, which
// the journal has no room for (txMu held). When the fold fails the
// transaction begins again from the journal, without w's batch.
func (s *Store) foldWith(w *writer) error {
	s.countsMu.Lock()
	was := s.counts
	if w.nDirty {
		s.counts = w.n
	}
	s.countsMu.Unlock()
	applied := s.applied
	s.applied = w.events.Sequence()
	s.arenas, s.arena = append(append(s.arenas, w.retired...), w.arena), nil
	if s.genSince.IsZero() {
		s.genSince = time.Now()
	}
	if err := s.fold(); err != nil {
		s.countsMu.Lock()
		s.counts = was
		s.countsMu.Unlock()
		s.applied = applied
		if w.derived {
			s.derivedLost.Add(1)
		}
		return err
	}
	w.done()
	s.dirty.Store(true)
	return nil
}

// publish makes what a writer applied the store's: its counts, its ids,
// the running clock's note of it.
func (s *Store) publish(w *writer) {
	if w.nDirty {
		s.countsMu.Lock()
		s.counts = w.n
		s.countsMu.Unlock()
	}
	w.done()
	if w.wrote || !w.rec.empty() {
		s.dirty.Store(true)
		if s.genSince.IsZero() {
			s.genSince = time.Now()
		}
	}
	s.applied = w.events.Sequence()
}

// restart rolls the open transaction back and begins another with what
// the journal holds of this generation replayed (txMu held): the state
// of the last batch applied whole.
func (s *Store) restart() error {
	if s.tx != nil {
		s.tx.Rollback()
		s.tx = nil
	}
	s.arenas, s.arena = nil, nil
	tx, err := s.db.Begin(true)
	if err != nil {
		return s.failed(fmt.Errorf("ledger: beginning a transaction: %w", err))
	}
	s.tx = tx
	data := make([]byte, s.jr.off)
	if _, err := s.jr.f.ReadAt(data, 0); err != nil {
		return s.failed(fmt.Errorf("ledger: journal: reading it back: %w", err))
	}
	bodies, end := journalRecords(data, s.jr.tag, s.jr.gen)
	if end != s.jr.off {
		return s.failed(fmt.Errorf("%w: the journal reads back %d bytes of the %d written", ErrDamaged, end, s.jr.off))
	}
	if err := replayJournal(tx, bodies); err != nil {
		return s.failed(err)
	}
	s.arenas = append(s.arenas, data)
	return nil
}

// failed notes a failure that leaves the store unable to write, and
// returns it.
func (s *Store) failed(err error) error {
	s.noteFault(err)
	return err
}

// fold commits the open transaction, with the generation it folds, to
// bbolt, restarts the journal, and begins the next transaction (txMu
// held). When the commit fails the journal still holds it all: the
// transaction begins again from it.
func (s *Store) fold() error {
	if s.tx == nil {
		return ErrClosed
	}
	if s.genSince.IsZero() && !s.jr.unsynced && s.jr.n == 0 {
		return nil // nothing to fold
	}
	if err := s.tx.Bucket(bMeta).Put(kFolded, u64(s.jr.gen)); err != nil {
		return err
	}
	txid := uint64(s.tx.ID())
	err := s.tx.Commit()
	s.tx = nil
	if err != nil {
		if rerr := s.restart(); rerr != nil {
			return errors.Join(err, rerr)
		}
		return err
	}
	s.countsMu.Lock()
	s.folded = folded{txid: txid, n: s.counts}
	s.countsMu.Unlock()
	s.arenas, s.arena = nil, nil
	s.jr.restart(s.jr.gen + 1)
	s.genSince = time.Time{}
	s.durable.Store(s.applied)
	tx, err := s.db.Begin(true)
	if err != nil {
		return s.failed(fmt.Errorf("ledger: beginning a transaction: %w", err))
	}
	s.tx = tx
	return nil
}

// foldNow folds what is applied into bbolt and returns once it is
// there.
func (s *Store) foldNow() error {
	_, err := s.submit(&request{ctx: context.Background(), fold: true, done: make(chan struct{})})
	return err
}
