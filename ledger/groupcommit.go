package ledger

// Group commit: the queue of appends, the one writer that commits them in
// batches, the wait of grouped appends for company (GroupCommit, Hurry),
// and Alive.

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"time"
)

// request is one command, or one outbox acknowledgement, waiting in the
// commit queue for the transaction that makes it durable.
type request struct {
	ctx     context.Context
	cmd     Command
	ack     []uint64  // an OutboxAck: these rows go (cmd is nil)
	lazy    bool      // it may wait for company, until by
	by      time.Time // with lazy: when it must be committed
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

// commitLoop is the one writer: it takes what is queued, commits it in one
// transaction (one fsync for many appends) and answers each.
func (s *Store) commitLoop() {
	defer s.wg.Done()
	batch := make([]*request, 0, s.opts.MaxBatch)
	lastSize := 0
	for {
		batch = batch[:0]
		select {
		case r := <-s.reqs:
			batch = append(batch, r)
		case p := <-s.probes:
			close(p)
			continue
		case <-s.stop:
			return
		}
		batch = s.gather(batch, lastSize > 1)
		if s.lazy() && !slices.ContainsFunc(batch, func(r *request) bool { return !r.lazy }) {
			batch = s.hold(batch)
		}
		lastSize = len(batch)
		s.commit(batch)
	}
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

// hold keeps a batch of lazy requests for more, until the earliest of
// their deadlines (request.by): it returns then, when the batch is full,
// when a request that may not wait comes (with what else is queued), or
// when the store stops.
func (s *Store) hold(batch []*request) []*request {
	by := batch[0].by
	for _, r := range batch[1:] {
		if r.by.Before(by) {
			by = r.by
		}
	}
	t := time.NewTimer(time.Until(by))
	defer t.Stop()
	s.held.Store(int32(len(batch)))
	defer s.held.Store(0)
	for len(batch) < s.opts.MaxBatch {
		select {
		case r := <-s.reqs:
			batch = append(batch, r)
			s.held.Store(int32(len(batch)))
			if !r.lazy {
				return s.gather(batch, false)
			}
			if r.by.Before(by) {
				by = r.by
				t.Reset(time.Until(by))
			}
		case p := <-s.probes:
			close(p)
		case <-t.C:
			return batch
		case <-s.hurry:
			return s.gather(batch, false)
		case <-s.stop:
			return batch
		}
	}
	return batch
}

func (s *Store) commit(batch []*request) {
	live := batch[:0:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.err = err
			close(r.done)
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	s.commits.Add(1)
	err := s.update(func(w *writer) error {
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
	})
	if err != nil && len(live) > 1 {
		// Something failed the transaction; find out which by committing
		// each alone, so one bad command cannot fail the others.
		for _, r := range live {
			s.commit([]*request{r})
		}
		return
	}
	for _, r := range live {
		if err != nil {
			r.results, r.err = nil, fmt.Errorf("ledger: commit: %w", err)
		}
		close(r.done)
	}
	if err == nil {
		s.notify()
	}
}
