// Package edge is what the body's sockets share: a Unix socket in the
// data directory (mode 0660, stale sockets replaced, live ones left),
// who is calling as the kernel says (SO_PEERCRED), one accept loop, one
// admission policy, and one line codec for JSON-RPC 2.0 (codec.go). The
// admin socket (package admin) and the agent socket (package agent) are
// its transports; each chooses its Limits and how it answers.
//
// Admission. Every connection is accepted at once; none waits in the
// kernel's backlog. Past MaxOpen connections open, or MaxOpenPerUID of
// its uid, it is turned away as it comes: one line saying why, nothing
// read. Otherwise the transport finds its principal and asks Admit,
// which gives it one of:
//
//   - Served: a place to call on, while fewer than MaxConns are taken and
//     its uid holds fewer than MaxConnsPerUID (MaxConnsPerUIDHigh at high
//     or max trust); the last KeptForHigh places are for high or max
//     trust only. A peer without a principal never gets one.
//   - Brief: no place, but it is answered once, briefly, with the
//     refusal saying why (reason not_authorized, or busy naming the
//     limit); the e-stop trip is served to it all the same. At most
//     MaxBrief are open at once, the last BriefKeptForHigh for high or
//     max trust, MaxBriefPerUID of one uid.
//   - TurnedAway: past those, one line saying why, nothing read.
//
// Refusals are logged at most once every 10 s for a uid, saying how many
// were not.
package edge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/ledger"
)

// Limits are one socket's admission limits (see the package doc).
type Limits struct {
	MaxConns, KeptForHigh              int
	MaxConnsPerUID, MaxConnsPerUIDHigh int
	MaxBrief, BriefKeptForHigh         int
	MaxBriefPerUID                     int
	MaxOpen, MaxOpenPerUID             int
}

// Admission is how a connection is answered.
type Admission int

const (
	Served     Admission = iota // a place: calls until its end
	Brief                       // answered once, briefly, then closed
	TurnedAway                  // one line saying why, nothing read
)

// Handler serves one accepted connection of a peer with uid and gid (-1
// when they could not be read) until it ends or ctx does; the connection
// is closed when it returns.
type Handler func(ctx context.Context, c net.Conn, uid, gid int)

// Edge accepts one socket's connections and admits them. Set its fields,
// then call Serve once; Admit, Warn, TurnAway, Holds and Open are safe
// for concurrent use.
type Edge struct {
	What   string // names the socket in logs: "admin socket"
	Limits Limits
	Log    *slog.Logger
	// Refusal is the JSON-RPC error of a connection's refusal, as the
	// transport words it: the line a connection turned away gets.
	Refusal func(*awareness.Error) *Error
	// Cred reads a connection's peer; nil is PeerCred. Tests replace it.
	Cred func(net.Conn) (uid, gid int)

	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	closed  bool
	open    int         // connections open, however answered
	openOf  map[int]int // by uid
	slots   int         // connections served
	slotOf  map[int]int
	brief   int // connections answered briefly
	briefOf map[int]int
	warned  map[int]warned // refusals logged, by uid
}

// warned is when a uid's refusals were last logged, and how many were
// not since.
type warned struct {
	at     time.Time
	hushed int
}

// Serve accepts connections on ln until ctx ends, each at once, and runs
// handle for each in a goroutine of its own (past the open caps, the
// connection is turned away instead). A failing Accept (out of file
// descriptors) is retried with backoff. When ctx ends, or ln is closed,
// Serve closes ln and every connection open, waits for their handlers to
// return, and returns.
func (e *Edge) Serve(ctx context.Context, ln net.Listener, handle Handler) {
	cred := e.Cred
	if cred == nil {
		cred = PeerCred
	}
	closeAll := sync.OnceFunc(func() {
		ln.Close()
		e.mu.Lock()
		e.closed = true
		for c := range e.conns {
			c.Close()
		}
		e.mu.Unlock()
	})
	stop := context.AfterFunc(ctx, closeAll)
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer closeAll()
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || ctx.Err() != nil {
				return
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			e.Log.Error(e.What+" accept; retrying", "err", err, "in", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
			continue
		}
		backoff = 0
		uid, gid := cred(c)
		full, closed := e.opened(c, uid)
		switch {
		case closed:
			c.Close()
			return
		case full != "":
			e.Warn(uid, "a connection turned away as it came", "why", full)
			e.TurnAway(c, &awareness.Error{Reason: awareness.ReasonBusy, Detail: full})
			c.Close()
			continue
		}
		wg.Go(func() {
			defer e.closed1(c, uid)
			handle(ctx, c, uid, gid)
		})
	}
}

// opened counts c open, or says which cap is full, or that Serve is
// ending.
func (e *Edge) opened(c net.Conn, uid int) (full string, closed bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.made()
	switch {
	case e.closed:
		return "", true
	case e.openOf[uid] >= e.Limits.MaxOpenPerUID:
		return fmt.Sprintf("%d connections of uid %d already open", e.openOf[uid], uid), false
	case e.open >= e.Limits.MaxOpen:
		return fmt.Sprintf("%d connections already open", e.open), false
	}
	e.open++
	e.openOf[uid]++
	e.conns[c] = struct{}{}
	return "", false
}

// made makes e's maps on first use; e.mu is held.
func (e *Edge) made() {
	if e.conns == nil {
		e.conns, e.openOf, e.slotOf, e.briefOf, e.warned = map[net.Conn]struct{}{}, map[int]int{}, map[int]int{}, map[int]int{}, map[int]warned{}
	}
}

// closed1 closes c and counts it closed.
func (e *Edge) closed1(c net.Conn, uid int) {
	c.Close()
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.conns, c)
	e.open--
	dec(e.openOf, uid)
}

// Ticket is what Admit gave a connection; Release gives it back.
type Ticket struct {
	As Admission
	// Refusal says why the connection has no place (nil when Served):
	// reason not_authorized, or busy naming the limit.
	Refusal *awareness.Error
	e       *Edge
	uid     int
}

// Admit gives a connection of uid with principal p (why says why it has
// none: then p is not looked at) a place, or a turn at being answered
// briefly, or neither, by the Limits. A principal without a kind, a
// subject or trust above off has none. The caller releases the ticket
// when the connection ends.
func (e *Edge) Admit(uid int, p act.Principal, why error) Ticket {
	if why == nil && (p.Kind == "" || p.Subject == "" || p.Trust <= ledger.Off) {
		why = fmt.Errorf("uid %d has no trust", uid)
	}
	high := why == nil && p.Trust >= ledger.High
	l := e.Limits
	e.mu.Lock()
	defer e.mu.Unlock()
	e.made()
	t := Ticket{e: e, uid: uid}
	if why != nil {
		t.Refusal = &awareness.Error{Reason: awareness.ReasonNotAuthorized, Detail: why.Error()}
	} else {
		perUID, total := l.MaxConnsPerUID, l.MaxConns-l.KeptForHigh
		if high {
			perUID, total = l.MaxConnsPerUIDHigh, l.MaxConns
		}
		switch {
		case e.slotOf[uid] >= perUID:
			t.Refusal = &awareness.Error{Reason: awareness.ReasonBusy,
				Detail: fmt.Sprintf("%d connections of uid %d already open (at most %d at %s trust)", e.slotOf[uid], uid, perUID, p.Trust)}
		case e.slots >= total && !high:
			t.Refusal = &awareness.Error{Reason: awareness.ReasonBusy,
				Detail: fmt.Sprintf("%d connections already open (the last %d of %d are kept for high trust)", e.slots, l.KeptForHigh, l.MaxConns)}
		case e.slots >= total:
			t.Refusal = &awareness.Error{Reason: awareness.ReasonBusy, Detail: fmt.Sprintf("all %d connections are open", e.slots)}
		default:
			e.slots++
			e.slotOf[uid]++
			t.As = Served
			return t
		}
	}
	total := l.MaxBrief - l.BriefKeptForHigh
	if high {
		total = l.MaxBrief
	}
	if e.briefOf[uid] >= l.MaxBriefPerUID || e.brief >= total {
		t.As = TurnedAway
		return t
	}
	e.brief++
	e.briefOf[uid]++
	t.As = Brief
	return t
}

// Release gives back what Admit took; it may be called once.
func (t Ticket) Release() {
	e := t.e
	e.mu.Lock()
	defer e.mu.Unlock()
	switch t.As {
	case Served:
		e.slots--
		dec(e.slotOf, t.uid)
	case Brief:
		e.brief--
		dec(e.briefOf, t.uid)
	}
}

func dec(m map[int]int, k int) {
	if m[k]--; m[k] <= 0 {
		delete(m, k)
	}
}

// Holds is what uid holds now: places served, and connections being
// answered briefly.
func (e *Edge) Holds(uid int) (places, brief int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.slotOf[uid], e.briefOf[uid]
}

// Open is how many connections are open, however answered.
func (e *Edge) Open() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.open
}

// Warn logs a refusal of uid's as "What: msg", at most one every 10 s
// for a uid, saying how many were not logged since: a peer turned away
// in a loop does not fill the log.
func (e *Edge) Warn(uid int, msg string, args ...any) {
	now := time.Now()
	e.mu.Lock()
	e.made()
	w := e.warned[uid]
	if now.Sub(w.at) < 10*time.Second {
		w.hushed++
		e.warned[uid] = w
		e.mu.Unlock()
		return
	}
	if len(e.warned) >= 256 { // uids that can connect are few; forget them all rather than grow
		clear(e.warned)
	}
	e.warned[uid] = warned{at: now}
	e.mu.Unlock()
	e.Log.Warn(e.What+": "+msg, append(args, "uid", uid, "not_logged_since", w.hushed)...)
}

// TurnAway writes one line saying why c is not served (an error
// response, id null, e.Refusal(r)) without reading anything: a
// fresh connection's buffer holds it, and the deadline keeps a full one
// from holding the caller up.
func (e *Edge) TurnAway(c net.Conn, r *awareness.Error) {
	c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	c.Write(ErrorLine(nil, e.Refusal(r)))
}
