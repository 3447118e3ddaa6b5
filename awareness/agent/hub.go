package agent

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/ledger"
)

// Defaults of a Hub.
const (
	// DefaultBatch is how long observations at low and medium attention
	// wait to be pushed together.
	DefaultBatch = 5 * time.Second
	// DefaultQueue is how many observations each session's drain queue
	// keeps; past it the oldest go, counted.
	DefaultQueue = 1000
	// pushBuffer is how many observations wait for a session's pusher; a
	// client that does not read its notifications fills it, and what does
	// not fit is not pushed (drain still has it).
	pushBuffer = 256
)

// Hub hands every observation to every connected session: pushed at once
// (notifications/tobe/observation) at high and max attention, batched
// every Batch at low and medium, and kept in the session's drain queue
// either way, so a client that ignores notifications misses nothing. It
// is safe for concurrent use.
type Hub struct {
	Batch time.Duration // 0: DefaultBatch
	Queue int           // 0: DefaultQueue
	// Replay, when not nil, reads again what was told after a ledger
	// sequence (ObservationsAfter): the gate's records of its wakes.
	Replay Replay

	mu   sync.Mutex
	subs map[string]*subscriber
}

// subscriber is one session's share of the hub.
type subscriber struct {
	who  act.Principal // what it may see
	push chan awareness.Observation

	// queued, when set, is told of each observation queued (its seq):
	// the session's resource watcher.
	queued func(seq uint64)

	mu      sync.Mutex
	queue   []awareness.Observation
	dropped uint64 // from the drain queue, since the last drain
	unsent  uint64 // not pushed: the pusher was behind
	max     int
}

// Publish hands o to every session.
func (h *Hub) Publish(o awareness.Observation) {
	h.mu.Lock()
	subs := slices.Collect(maps.Values(h.subs))
	h.mu.Unlock()
	for _, s := range subs {
		if !awareness.MaySee(s.who, o.Privacy) {
			continue
		}
		s.mu.Lock()
		if len(s.queue) >= s.max {
			n := len(s.queue) - s.max + 1
			s.queue = append(s.queue[:0], s.queue[n:]...)
			s.dropped += uint64(n)
		}
		s.queue = append(s.queue, o)
		queued := s.queued
		s.mu.Unlock()
		if queued != nil {
			queued(o.Seq)
		}
		select {
		case s.push <- o:
		default:
			s.mu.Lock()
			s.unsent++
			s.mu.Unlock()
		}
	}
}

// join makes session a subscriber.
func (h *Hub) join(session string, who act.Principal) *subscriber {
	s := &subscriber{who: who, push: make(chan awareness.Observation, pushBuffer), max: h.Queue}
	if s.max <= 0 {
		s.max = DefaultQueue
	}
	h.mu.Lock()
	if h.subs == nil {
		h.subs = map[string]*subscriber{}
	}
	h.subs[session] = s
	h.mu.Unlock()
	return s
}

func (h *Hub) leave(session string) {
	h.mu.Lock()
	delete(h.subs, session)
	h.mu.Unlock()
}

func (h *Hub) batch() time.Duration {
	if h.Batch > 0 {
		return h.Batch
	}
	return DefaultBatch
}

// Drained is what drain answers: the observations queued since the last
// drain (at most its limit, oldest first), how many the queue dropped
// since, and how many were not pushed because the client fell behind.
type Drained struct {
	Observations []awareness.Observation `json:"observations"`
	Dropped      uint64                  `json:"dropped"`
	Unpushed     uint64                  `json:"unpushed,omitempty"`
	More         bool                    `json:"more,omitempty"`
}

// drain takes up to limit observations (0: all) off the queue.
func (s *subscriber) drain(limit int) Drained {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.queue)
	if limit > 0 && limit < n {
		n = limit
	}
	d := Drained{Observations: append([]awareness.Observation{}, s.queue[:n]...), Dropped: s.dropped, Unpushed: s.unsent, More: n < len(s.queue)}
	s.queue = append(s.queue[:0], s.queue[n:]...)
	s.dropped, s.unsent = 0, 0
	return d
}

// peek is what drain would take, without taking it.
func (s *subscriber) peek() Drained {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Drained{Observations: append([]awareness.Observation{}, s.queue...), Dropped: s.dropped, Unpushed: s.unsent}
}

// pushes sends what the hub hands s on t until ctx is done: high and max
// at once, the rest together every batch.
func (s *subscriber) pushes(ctx context.Context, t *Transport, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	var batch []awareness.Observation
	for {
		select {
		case <-ctx.Done():
			return
		case o := <-s.push:
			if o.Attention >= ledger.High {
				if t.Notify(ctx, ObservationMethod, o) != nil {
					return
				}
				continue
			}
			batch = append(batch, o)
		case <-tick.C:
			for _, o := range batch {
				if t.Notify(ctx, ObservationMethod, o) != nil {
					return
				}
			}
			batch = batch[:0]
		}
	}
}

// DrainIn asks for the observations queued for this session.
type DrainIn struct {
	// Limit bounds how many (0: all, at most the queue's size).
	Limit int `json:"limit,omitempty" jsonschema:"at most this many, oldest first (0: all)"`
}
