package act

import (
	"context"
	"slices"
	"sort"
	"sync"
	"time"
)

// ReasonSessionEnded cancels the actions of an agent session that ended:
// its connection closed, it did not answer a ping, or it fell silent for
// longer than its heartbeat window while it had something running.
const ReasonSessionEnded Reason = "session_ended"

// DefaultHeartbeat is how long an agent session that runs something may
// stay silent (no message, no answer to a ping) before it is taken as gone
// and the actions it owns are stopped.
const DefaultHeartbeat = 2 * time.Second

// SessionEnder stops the actions a session owns, and says whether it owns
// any: the runner.
type SessionEnder interface {
	EndSession(session string) []string
	// Runs tells whether the session has an action running or waiting.
	Runs(session string) bool
}

// EventSessionEnded records an agent session's end (payload SessionEnd).
const EventSessionEnded = "action.session_ended"

// SessionEnd is what a session's end stopped, for the record.
type SessionEnd struct {
	Session   string   `cbor:"session" json:"session"`
	Why       string   `cbor:"why" json:"why"` // "closed", "silent" or "unanswered_ping"
	Cancelled []string `cbor:"cancelled,omitempty" json:"cancelled,omitempty"`
}

// Sessions watches agent sessions' heartbeats. The agent transport calls
// Beat whenever a session shows it is alive (a message, an answer to a
// ping), End when its connection closes and Lost when it is taken as gone
// (a ping unanswered). Run ends a session silent for longer than the
// window only while it runs something (an action running or waiting): the
// deadman. A silent session that runs nothing stays: an agent thinks
// between calls, and whether its link lives is the transport's to find
// out (it pings). Ending a session stops every action it owns, within the
// window, while every other session's actions go on.
type Sessions struct {
	r      SessionEnder
	window time.Duration
	now    func() time.Time
	onEnd  func(SessionEnd)

	// ending serialises the ends of sessions (Run's, End's, Lost's), so
	// a session is told of once, whichever comes first.
	ending sync.Mutex

	mu   sync.Mutex
	last map[string]time.Time
	// idle are the sessions found silent with nothing running: no
	// deadline is theirs until their next beat.
	idle map[string]bool
	// stopped are the actions Run stopped of each session it ended, until
	// the session's connection is ended too (End, Lost): what is left to
	// stop then is what is not among them.
	stopped map[string][]string
	wake    chan struct{}
}

// NewSessions watches sessions for r with the heartbeat window (0:
// DefaultHeartbeat). onEnd, if not nil, is told of every end (for the
// ledger); it must not block.
func NewSessions(r SessionEnder, window time.Duration, onEnd func(SessionEnd)) *Sessions {
	if window <= 0 {
		window = DefaultHeartbeat
	}
	return &Sessions{r: r, window: window, now: time.Now, onEnd: onEnd, last: map[string]time.Time{}, idle: map[string]bool{},
		stopped: map[string][]string{}, wake: make(chan struct{}, 1)}
}

// Window is the heartbeat window.
func (s *Sessions) Window() time.Duration { return s.window }

// Beat says the session is alive now; a new session starts being watched.
func (s *Sessions) Beat(session string) {
	s.mu.Lock()
	_, known := s.last[session]
	s.last[session] = s.now()
	wasIdle := s.idle[session]
	delete(s.idle, session)
	s.mu.Unlock()
	if !known || wasIdle { // a deadline again: Run sets its timer
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// Runs tells whether the session has an action running or waiting.
func (s *Sessions) Runs(session string) bool { return s.r.Runs(session) }

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
func (s *Sessions) End(session string) []string { return s.finish(session, "closed", false) }

// Lost ends a session taken as gone for why ("unanswered_ping"), as End
// does a closed one's; its End, when its connection closes, tells only of
// what started since.
func (s *Sessions) Lost(session, why string) []string { return s.finish(session, why, true) }

func (s *Sessions) finish(session, why string, more bool) []string {
	s.ending.Lock()
	defer s.ending.Unlock()
	s.mu.Lock()
	_, live := s.last[session]
	stopped := s.stopped[session]
	delete(s.last, session)
	delete(s.idle, session)
	delete(s.stopped, session)
	s.mu.Unlock()
	if !live {
		// Run or Lost ended it: what they stopped then may still be
		// stopping, and is not told of again; only what started since is.
		ids := slices.DeleteFunc(s.r.EndSession(session), func(id string) bool { return slices.Contains(stopped, id) })
		if len(ids) > 0 && s.onEnd != nil {
			s.onEnd(SessionEnd{Session: session, Why: why, Cancelled: ids})
		}
		if more {
			s.mu.Lock()
			s.stopped[session] = append(stopped, ids...)
			s.mu.Unlock()
		}
		return ids
	}
	ids := s.end(session, why)
	if more {
		s.mu.Lock()
		s.stopped[session] = ids
		s.mu.Unlock()
	}
	return ids
}

func (s *Sessions) end(session, why string) []string {
	ids := s.r.EndSession(session)
	if s.onEnd != nil {
		s.onEnd(SessionEnd{Session: session, Why: why, Cancelled: ids})
	}
	return ids
}

// Run ends the sessions that fall silent while they run something, until
// ctx is done: each at its own deadline, one window after its last beat.
// One silent with nothing running stays, and has no deadline until its
// next beat.
func (s *Sessions) Run(ctx context.Context) error {
	t := time.NewTimer(s.window)
	defer t.Stop()
	for {
		// Due sessions end, or wait idle; the timer is set for the next
		// deadline.
		now := s.now()
		var silent []string
		next := s.window
		s.mu.Lock()
		for id, last := range s.last {
			if s.idle[id] {
				continue
			}
			if d := last.Add(s.window).Sub(now); d <= 0 {
				silent = append(silent, id)
			} else if d < next {
				next = d
			}
		}
		s.mu.Unlock()
		sort.Strings(silent)
		for _, id := range silent {
			runs := s.r.Runs(id) // asked outside s.mu: the runner has a lock of its own
			s.ending.Lock()
			s.mu.Lock()
			last, ok := s.last[id]
			due := ok && !last.Add(s.window).After(s.now()) // no beat, End or Lost since
			switch {
			case due && runs:
				delete(s.last, id)
			case due:
				s.idle[id] = true
			}
			s.mu.Unlock()
			if due && runs {
				ids := s.end(id, "silent")
				s.mu.Lock()
				s.stopped[id] = ids
				s.mu.Unlock()
			}
			s.ending.Unlock()
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
