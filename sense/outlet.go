package sense

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/ledger"
)

// Ledger is where a channel's events are kept: the ledger's Store.
type Ledger interface {
	Append(ctx context.Context, events ...ledger.Event) ([]ledger.Result, error)
}

// GroupedLedger is a Ledger that may hold an append for others to share
// its commit (ledger.Store.QueueGrouped), and takes the next append while
// one waits. since is when the oldest of the events was handed to the
// outlet: the ledger bounds their wait from then. An Outlet whose Ledger
// is one queues its events as they come, without waiting for the
// commit of those before, so that what comes while a group waits joins
// that group, and every event is committed within the ledger's bound of
// its hand-over.
type GroupedLedger interface {
	Ledger
	QueueGrouped(ctx context.Context, since time.Time, events ...ledger.Event) (*ledger.Queued, error)
}

// Source says who a channel's events are from and how they are to be
// treated: every event an Outlet writes carries it.
type Source struct {
	// Channel is the channel id (camera.front, gpio.button, ...).
	Channel string
	Clock   *body.Clock
	// Privacy is the channel's privacy class (camera and microphone are
	// sensitive unless the config says otherwise).
	Privacy ledger.Privacy
	// Trust is how far the body trusts what this sensor reports.
	Trust ledger.Level
}

// Outlet is a channel's bounded queue to the ledger. Emit never blocks: a
// hal reader hands an event over and goes back to its device, whatever the
// ledger is doing; when the queue is full the event is shed and counted.
// Run writes the queue to the ledger in batches (the ledger's group commit
// makes them durable together; a GroupedLedger takes them as they come,
// ahead of their commit) and, when the ledger fails, keeps the batch and
// retries with backoff while new events queue or are shed.
type Outlet struct {
	src Source
	// q holds pointers: a queue of 256 events as values was 80 KB an
	// outlet, taken at start whether a channel ever sent an event or not.
	q chan *queued

	closeOnce sync.Once
	closed    chan struct{}

	queued, shed, written, failures atomic.Uint64
	ahead                           atomic.Int64 // events handed to a GroupedLedger, not yet answered
	lastErr                         atomic.Pointer[error]
}

// queued is an event in an outlet's queue, with when it came.
type queued struct {
	ev ledger.Event
	at time.Time
}

// OutletStats counts what happened to a channel's events.
type OutletStats struct {
	// Queued is how many events Emit accepted; Shed how many it dropped
	// because the queue was full; Written how many reached the ledger.
	Queued, Shed, Written uint64
	// Waiting is how many are in the queue now, or handed to the ledger
	// and not yet committed.
	Waiting int
	// Failures counts failed writes (each retried); LastError is the last.
	Failures  uint64
	LastError string
}

// DefaultQueue is an outlet's queue length unless a channel asks for more.
const DefaultQueue = 256

// NewOutlet makes an outlet with room for n events.
func NewOutlet(src Source, n int) *Outlet {
	if n <= 0 {
		n = DefaultQueue
	}
	return &Outlet{src: src, q: make(chan *queued, n), closed: make(chan struct{})}
}

// Source returns what the outlet stamps its events with.
func (o *Outlet) Source() Source { return o.src }

// Emit queues an event of type typ that happened at the monotonic time at
// (from the source: a V4L2, evdev, GPIO or audio timestamp), with the
// source's sequence number and a payload. It stamps occurred_at from at and
// observed_at from now, with the clock's domain and uncertainty. It
// returns false when the event was shed (the queue is full or closed).
// Evidence is never referred to from here: it is kept in the evidence
// store, whose record names the source and the frame's sequence.
func (o *Outlet) Emit(typ string, at hal.Mono, seq uint64, payload any) bool {
	ev := ledger.Event{Type: typ, ChannelID: o.src.Channel, SourceSequence: seq,
		Provenance: ledger.Observed, Trust: o.src.Trust, Privacy: o.src.Privacy}
	if payload != nil {
		p, err := ledger.MarshalPayload(payload)
		if err != nil {
			o.fail(fmt.Errorf("sense: %s: %s: %w", o.src.Channel, typ, err))
			o.shed.Add(1)
			return false
		}
		ev.Payload = p
	}
	if c := o.src.Clock; c != nil {
		c.Stamp(at).Apply(&ev)
		ev.ObservedAt = c.StampNow().UTC.UnixNano()
	}
	return o.Put(ev)
}

// Put queues a whole event as it is. It returns false when it was shed.
func (o *Outlet) Put(ev ledger.Event) bool {
	select {
	case <-o.closed:
		o.shed.Add(1)
		return false
	default:
	}
	select {
	case o.q <- &queued{ev, time.Now()}:
		o.queued.Add(1)
		return true
	default:
		o.shed.Add(1)
		return false
	}
}

// Close stops accepting events; Run writes what is queued, then returns.
// Call it after the channel's readers have stopped.
func (o *Outlet) Close() { o.closeOnce.Do(func() { close(o.closed) }) }

// Stats returns the outlet's counts.
func (o *Outlet) Stats() OutletStats {
	s := OutletStats{Queued: o.queued.Load(), Shed: o.shed.Load(), Written: o.written.Load(),
		Waiting: len(o.q) + int(o.ahead.Load()), Failures: o.failures.Load()}
	if e := o.lastErr.Load(); e != nil {
		s.LastError = (*e).Error()
	}
	return s
}

func (o *Outlet) fail(err error) {
	o.failures.Add(1)
	o.lastErr.Store(&err)
}

// maxBatch bounds one write.
const maxBatch = 64

// Retry bounds of a failed write.
var (
	retryMin = 100 * time.Millisecond
	retryMax = 5 * time.Second
)

// Run writes queued events to l until the outlet is closed and drained,
// or ctx is done (then what is still queued is not written: a stopping
// daemon closes outlets first and cancels ctx only to give up).
func (o *Outlet) Run(ctx context.Context, l Ledger) error {
	if g, ok := l.(GroupedLedger); ok {
		return o.runQueued(ctx, g)
	}
	for {
		var first *queued
		select {
		case first = <-o.q:
		case <-o.closed:
			// Closed: take what is left, then end.
			select {
			case first = <-o.q:
			default:
				return nil
			}
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := o.write(ctx, l, first.at, o.fill(first)); err != nil {
			return err
		}
	}
}

// fill makes a batch of first and what else is queued, up to maxBatch
// events. Each batch is new: a GroupedLedger keeps it until its commit.
func (o *Outlet) fill(first *queued) []ledger.Event {
	batch := make([]ledger.Event, 1, min(1+len(o.q), maxBatch))
	batch[0] = first.ev
	for len(batch) < maxBatch {
		select {
		case q := <-o.q:
			batch = append(batch, q.ev)
		default:
			return batch
		}
	}
	return batch
}

// maxQueued bounds the appends an outlet has queued in a GroupedLedger
// and not yet seen answered.
const maxQueued = 64

// runQueued is Run for a GroupedLedger: events are queued as they come,
// up to maxQueued appends ahead of their answers, which are read in
// order. A batch the ledger refuses before queueing it (an invalid
// event) is written at once, in its turn (write). One it fails at its
// commit (the transaction failed) is written again once its answer is
// read: the events queued after it may then be in the ledger before it.
func (o *Outlet) runQueued(ctx context.Context, g GroupedLedger) error {
	type pending struct {
		q     *ledger.Queued
		batch []ledger.Event
		since time.Time
	}
	var queue []pending
	defer func() { o.ahead.Store(0) }()
	closed := o.closed
	for {
		if closed == nil && len(o.q) == 0 && len(queue) == 0 {
			return nil
		}
		take := o.q
		if len(queue) >= maxQueued {
			take = nil // an answer first
		}
		var head <-chan struct{}
		if len(queue) > 0 {
			head = queue[0].q.Done()
		}
		select {
		case first := <-take:
			batch := o.fill(first)
			q, err := g.QueueGrouped(ctx, first.at, batch...)
			if err == nil {
				queue = append(queue, pending{q, batch, first.at})
				o.ahead.Add(int64(len(batch)))
			} else if err := o.write(ctx, g, first.at, batch); err != nil {
				return err
			}
		case <-head:
			p := queue[0]
			queue = queue[1:]
			o.ahead.Add(-int64(len(p.batch)))
			if _, err := p.q.Wait(); err == nil {
				o.written.Add(uint64(len(p.batch)))
			} else if err := o.write(ctx, g, p.since, p.batch); err != nil {
				return err
			}
		case <-closed:
			closed = nil // what is queued is taken, then Run ends
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// write appends batch, whose first event came at since, retrying with
// backoff until it is written or ctx is done; a ledger that is closed
// takes nothing more, so the batch is shed and Run ends with ErrClosed.
// A GroupedLedger may hold the append for company up to its bound from
// since. Events that can never be written (invalid) are counted and
// dropped one by one rather than blocking the queue forever.
func (o *Outlet) write(ctx context.Context, l Ledger, since time.Time, batch []ledger.Event) error {
	appendTo := l.Append
	if g, ok := l.(GroupedLedger); ok {
		appendTo = func(ctx context.Context, evs ...ledger.Event) ([]ledger.Result, error) {
			q, err := g.QueueGrouped(ctx, since, evs...)
			if err != nil {
				return nil, err
			}
			return q.Wait()
		}
	}
	wait := retryMin
	for {
		_, err := appendTo(ctx, batch...)
		if err == nil {
			o.written.Add(uint64(len(batch)))
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, ledger.ErrClosed) {
			o.shed.Add(uint64(len(batch)))
			o.fail(fmt.Errorf("sense: %s: %d events not written: %w", o.src.Channel, len(batch), err))
			return err
		}
		o.fail(fmt.Errorf("sense: %s: write %d events: %w", o.src.Channel, len(batch), err))
		if errors.Is(err, ledger.ErrInvalid) {
			// One bad event must not hold the others back: write them
			// one at a time and drop only what the ledger refuses.
			for _, ev := range batch {
				if _, err := appendTo(ctx, ev); err == nil {
					o.written.Add(1)
				} else if !errors.Is(err, ledger.ErrInvalid) {
					return o.write(ctx, l, since, []ledger.Event{ev})
				} else {
					o.shed.Add(1)
				}
			}
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		wait = min(2*wait, retryMax)
	}
}
