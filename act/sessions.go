package act

import (
	"context"
	"sort"
	"sync"
	"time"
)

// ReasonSessionEnded cancels the actions of an agent session that ended:
// its connection closed, or it fell silent for longer than its heartbeat
// window.
const ReasonSessionEnded Reason = "session_ended"

// DefaultHeartbeat is how long an agent session may stay silent before it
// is taken as gone and the actions it owns are stopped.
const DefaultHeartbeat = 2 * time.Second

// SessionEnder stops the actions a session owns: the runner.
type SessionEnder interface {
	EndSession(session string) []string
}

// EventSessionEnded records an agent session's end (payload SessionEnd).
const EventSessionEnded = "action.session_ended"

// SessionEnd is what a session's end stopped, for the record.
type SessionEnd struct {
	Session   string   `cbor:"session" json:"session"`
	Why       string   `cbor:"why" json:"why"` // "closed" or "silent"
	Cancelled []string `cbor:"cancelled,omitempty" json:"cancelled,omitempty"`
}

// Sessions watches agent sessions' heartbeats. The agent transport calls
// Beat whenever a session shows it is alive (a message, a ping) and End
// when its connection closes; a session silent for longer than the
// window is ended by Run. Ending a session stops every action it owns,
// within the window, while every other session's actions go on.
type Sessions struct {
	r      SessionEnder
	window time.Duration
	now    func() time.Time
	onEnd  func(SessionEnd)

	mu   sync.Mutex
	last map[string]time.Time
	wake chan struct{}
}

// NewSessions watches sessions for r with the heartbeat window (0:
// DefaultHeartbeat). onEnd, if not nil, is told of every end (for the
// ledger); it must not block.
func NewSessions(r SessionEnder, window time.Duration, onEnd func(SessionEnd)) *Sessions {
	if window <= 0 {
		window = DefaultHeartbeat
	}
	return &Sessions{r: r, window: window, now: time.Now, onEnd: onEnd, last: map[string]time.Time{}, wake: make(chan struct{}, 1)}
}

// Window is the heartbeat window.
func (s *Sessions) Window() time.Duration { return s.window }

// Beat says the session is alive now; a new session starts being watched.
func (s *Sessions) Beat(session string) {
	s.mu.Lock()
	_, known := s.last[session]
	s.last[session] = s.now()
	s.mu.Unlock()
	if !known {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// Live lists the sessions being watched.
func (s *Sessions) Live() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.last))
	for id := range s.last {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// End ends a session whose connection closed: its actions stop now. A
// session Run ended already (it fell silent, and its connection was
// closed for it) is not told of again unless it left something to stop.
func (s *Sessions) End(session string) []string {
	s.mu.Lock()
	_, live := s.last[session]
	delete(s.last, session)
	s.mu.Unlock()
	if !live {
		ids := s.r.EndSession(session)
		if len(ids) > 0 && s.onEnd != nil {
			s.onEnd(SessionEnd{Session: session, Why: "closed", Cancelled: ids})
		}
		return ids
	}
	return s.end(session, "closed")
}

func (s *Sessions) end(session, why string) []string {
	ids := s.r.EndSession(session)
	if s.onEnd != nil {
		s.onEnd(SessionEnd{Session: session, Why: why, Cancelled: ids})
	}
	return ids
}

// Run ends the sessions that fall silent, until ctx is done: each is
// ended at its own deadline, one window after its last beat.
func (s *Sessions) Run(ctx context.Context) error {
	t := time.NewTimer(s.window)
	defer t.Stop()
	for {
		// Due sessions end; the timer is set for the next deadline.
		now := s.now()
		var due []string
		next := s.window
		s.mu.Lock()
		for id, last := range s.last {
			if d := last.Add(s.window).Sub(now); d <= 0 {
				due = append(due, id)
				delete(s.last, id)
			} else if d < next {
				next = d
			}
		}
		s.mu.Unlock()
		sort.Strings(due)
		for _, id := range due {
			s.end(id, "silent")
		}
		t.Reset(next)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-s.wake:
		}
	}
}
