// Package admin is the admin socket: one transport of the operation table
// (package awareness) for the body's local administrators and its CLI.
// It speaks JSON-RPC 2.0, one object a line, on a Unix socket in the data
// directory (mode 0660). Who is calling is the kernel's word: the peer's
// credentials (SO_PEERCRED) are mapped to a principal by the daemon's
// rules once per connection, and every call passes that principal to the
// table, which checks it.
//
// The protocol, exactly (the line codec of package edge): a request
// without an id is a notification and gets no reply; an id is a string or
// an integer of magnitude at most 2^53-1 (null is not taken); -32700
// answers a line that is not JSON, -32600 one that is not a request (or
// a batch, which this server does not take, or a line over MaxLine),
// -32601 an unknown method, -32602 params that do not fit the method's
// input; a refusal or failure of the operation is
// -32000 with {op, reason, detail, need} in data. Calls on one connection
// run concurrently (at most MaxInFlight at once) and their responses are
// written whole, one at a time, in the order they finish.
//
// A streaming operation (awareness.Entry.Streams: ledger.backup) answers
// with bytes after its response. While it prepares them the server may
// send progress notifications, each one line,
//
//	{"jsonrpc":"2.0","method":"progress","params":{"id":ID,"done":N,"total":N}}
//
// where id is the call's, and done and total count bytes (the last one
// sent has done equal to total); then the response line, whose result
// has "bytes" (ledger.backup's: {"bytes", "sha256", "last_seq",
// "taken_at"}); then exactly that many raw bytes, and after them the
// next line. A refusal is an error response with nothing after it.
// Nothing else is written on the connection from the response's first
// byte to the stream's last: other responses wait. Each chunk of
// StreamChunk bytes must be taken within StreamStall, or the connection
// is closed, and so it is when the bytes cannot be read to their count;
// a client that got fewer bytes than "bytes" has nothing it may use. A
// streaming operation asked as a notification (no id) is not run.
//
// Admission (package edge's, with this socket's limits below). Every
// connection is accepted at once; none waits in the kernel's backlog.
// Then:
//
//   - A peer without a principal (no rule names it, its trust is off, its
//     credentials could not be read) is answered once: its first line,
//     whatever it is, gets -32000 with reason not_authorized saying why
//     (id null when the line has none, or when nothing came within
//     FirstLineTimeout), and the connection is closed. It never holds a
//     place.
//   - A principal gets a place to call on while fewer than MaxConns are
//     taken and its uid holds fewer than MaxConnsPerUID
//     (MaxConnsPerUIDHigh at high or max trust); the last KeptForHigh
//     places are for high or max trust only. Without one it is answered
//     once as above, with reason busy saying which limit ("4 connections
//     of uid 1001 already open ..."), except that a first request for
//     estop.trip (the table's one Stop operation) is served.
//   - Answering once is bounded too (MaxBrief, BriefKeptForHigh,
//     MaxBriefPerUID, MaxOpen, MaxOpenPerUID): past those a connection
//     gets its one line as soon as it is accepted, nothing is read, and it
//     is closed.
//
// On a place, a line is read as soon as it comes: nothing waits, so an
// estop.trip runs at once, whatever else the connection is doing (past
// MaxInFlight calls running, another call is refused busy). A connection
// with no call served (answered with a result or the operation's own
// refusal) for IdleTimeout, and none running, is closed: lines that only
// earn errors do not keep it. A request read after its peer has hung up
// (closed, not only shut down writing) is not run, and the calls in
// progress of a peer that hung up or reached EOF are cancelled.
package admin

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/edge"
)

// Limits of the admin socket. Every connection is accepted at once (the
// kernel's backlog is never the queue) and then admitted by these rules.
const (
	MaxLine = 64 << 10 // one request line
	// MaxConns connections are served at once, every caller's together;
	// the last KeptForHigh of them only for principals at high or max
	// trust.
	MaxConns    = 16
	KeptForHigh = 4
	// A uid holds at most MaxConnsPerUID of them below high trust,
	// MaxConnsPerUIDHigh at high or max.
	MaxConnsPerUID     = 4
	MaxConnsPerUIDHigh = 8
	// MaxInFlight calls run at once on one connection; one more is
	// refused busy at once. The line after it is read at once all the
	// same, and estop.trip has MaxInFlight places of its own.
	MaxInFlight = 8
	// A connection that gets no place (its peer has no principal, or the
	// caps above are reached) is answered once: its first line within
	// FirstLineTimeout, then it is closed. At most MaxBrief are open at
	// once, the last BriefKeptForHigh of them for high or max trust, and
	// MaxBriefPerUID for one uid; beyond those a connection is closed as
	// soon as it is accepted, with one line saying why and without reading
	// what it sent.
	MaxBrief         = 32
	BriefKeptForHigh = 8
	MaxBriefPerUID   = 4
	FirstLineTimeout = 2 * time.Second
	// No more than MaxOpen connections are open at once however they are
	// being answered, and no more than MaxOpenPerUID of one uid (its
	// places, its answered-once ones and those whose principal is still
	// being looked up); more are closed as soon as they are accepted, with
	// one line saying why.
	MaxOpen       = 128
	MaxOpenPerUID = MaxConnsPerUIDHigh + MaxBriefPerUID + 4
	// IdleTimeout closes a connection that has had no call served for this
	// long and is waiting on none: lines that only earn an error (not
	// JSON, not a request, an unknown method, bad params, a refusal for
	// want of trust) do not keep it open.
	IdleTimeout = 30 * time.Second
)

// limits are the admission limits above, as package edge takes them.
var limits = edge.Limits{MaxConns: MaxConns, KeptForHigh: KeptForHigh, MaxConnsPerUID: MaxConnsPerUID, MaxConnsPerUIDHigh: MaxConnsPerUIDHigh,
	MaxBrief: MaxBrief, BriefKeptForHigh: BriefKeptForHigh, MaxBriefPerUID: MaxBriefPerUID, MaxOpen: MaxOpen, MaxOpenPerUID: MaxOpenPerUID}

// JSON-RPC 2.0 error codes.
const (
	CodeParse          = edge.CodeParse
	CodeInvalidRequest = edge.CodeInvalidRequest
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeRefused        = edge.CodeRefused // the operation refused or failed, or the connection was turned away; data says why
)

// socketName names the socket in logs, and is the op of a refusal that
// answers no request.
const socketName = "admin socket"

// Resolver maps a peer's credentials (uid and primary gid, -1 when they
// could not be read) to its principal, or says why it has none.
type Resolver func(uid, gid int) (act.Principal, error)

// Server serves a table on the admin socket: set its fields, then call
// Serve.
type Server struct {
	Table *awareness.Table
	// Resolve decides each connection's principal.
	Resolve Resolver
	Log     *slog.Logger

	// Seams for tests: the peer's credentials (nil: edge.PeerCred), and
	// the durations of the limits above (0: as above).
	cred      func(net.Conn) (uid, gid int)
	idle      time.Duration // IdleTimeout
	firstLine time.Duration // FirstLineTimeout

	once sync.Once
	e    *edge.Edge
}

// Listen listens on the admin socket at path, mode 0660 (see
// edge.Listen).
func Listen(path string) (net.Listener, error) { return edge.Listen(socketName, path, -1) }

// edge is the server's admission, made on first use.
func (s *Server) edge() *edge.Edge {
	s.once.Do(func() {
		s.e = &edge.Edge{What: socketName, Limits: limits, Log: s.Log, Cred: s.cred,
			Refusal: func(r *awareness.Error) *edge.Error { return refusalOf("", r) }}
	})
	return s.e
}

// Serve accepts connections on ln until ctx ends, each at once, and
// admits each by the limits above in a goroutine of its own. Then it
// closes ln, ends the calls in progress and the open connections, waits
// for their goroutines, and returns.
func (s *Server) Serve(ctx context.Context, ln net.Listener) {
	s.edge().Serve(ctx, ln, s.serveConn)
}

// serveConn decides who is at the other end of c and answers it as its
// admission says. It leaves c open.
func (s *Server) serveConn(ctx context.Context, c net.Conn, uid, gid int) {
	p, why := s.Resolve(uid, gid)
	if why != nil {
		p = act.Principal{}
	}
	t := s.edge().Admit(uid, p, why)
	defer t.Release()
	if t.Refusal != nil {
		s.edge().Warn(uid, "a connection without a place: answered once and closed", "gid", gid, "reason", t.Refusal.Reason, "why", t.Refusal.Detail)
	}
	switch t.As {
	case edge.Served:
		s.handle(ctx, c, p)
	case edge.Brief:
		s.answerOnce(ctx, c, p, t.Refusal)
	default:
		s.edge().TurnAway(c, t.Refusal)
	}
}

// refusalOf is the JSON-RPC error of a connection's refusal, for op.
func refusalOf(op string, r *awareness.Error) *edge.Error {
	e := *r
	e.Op = cmp.Or(op, socketName)
	return &edge.Error{Code: CodeRefused, Message: e.Error(), Data: &e}
}

// answerOnce reads c's first request (waiting at most firstLine) and
// answers it, then returns for c to be closed. The one request served is
// a Stop operation's (estop.trip), with p checked as always; anything
// else gets the refusal, naming the request's id when it has one (a
// notification too: the peer must learn why it is closed), or null.
func (s *Server) answerOnce(ctx context.Context, c net.Conn, p act.Principal, refusal *awareness.Error) {
	cn := newConn(s, c, p)
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		cn.calls.Wait()
	}()
	c.SetReadDeadline(time.Now().Add(cmp.Or(s.firstLine, FirstLineTimeout)))
	lr := edge.NewLineReader(bufio.NewReaderSize(c, 4096), MaxLine)
	var line []byte
	var err error
	for {
		if line, err = lr.Next(); err != nil || !edge.Blank(line) {
			break
		}
	}
	if err != nil {
		cn.write(edge.Response{Error: refusalOf("", refusal)})
		return
	}
	m, e, bad := decode(s.Table, line)
	if e != nil && e.Stop && refusal.Reason == awareness.ReasonBusy && !edge.HungUp(c) {
		cn.start(ctx, m, e, nil)
		return
	}
	id, op := m.ID, ""
	if bad != nil {
		id = bad.ID
	}
	if e != nil {
		op = e.Name
	}
	cn.write(edge.Response{ID: id, Error: refusalOf(op, refusal)})
}

// conn is one connection being answered.
type conn struct {
	s *Server
	c net.Conn
	p act.Principal

	wmu      sync.Mutex // one response written at a time
	calls    sync.WaitGroup
	inFlight chan struct{} // a token per call running
	stops    chan struct{} // a token per Stop call running: they never wait for inFlight
	// served is when a call was last served (UnixNano), or the connection
	// made: the idle timeout counts from it.
	served atomic.Int64
}

func newConn(s *Server, c net.Conn, p act.Principal) *conn {
	cn := &conn{s: s, c: c, p: p, inFlight: make(chan struct{}, MaxInFlight), stops: make(chan struct{}, MaxInFlight)}
	cn.served.Store(time.Now().UnixNano())
	return cn
}

// handle serves calls on one connection, a line each, until EOF, a read
// error, an idle connection, its peer's hang-up or ctx's end; then the
// calls in progress are cancelled and waited for.
func (s *Server) handle(ctx context.Context, c net.Conn, p act.Principal) {
	cn := newConn(s, c, p)
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel() // calls in progress end: nobody waits for them
		cn.calls.Wait()
	}()
	lr := edge.NewLineReader(bufio.NewReaderSize(c, 4096), MaxLine)
	for {
		c.SetReadDeadline(cn.idleAt())
		line, err := lr.Next()
		switch {
		case errors.Is(err, edge.ErrLineTooLong):
			cn.write(edge.Response{Error: edge.LongLine(MaxLine).Error()})
			continue
		case errors.Is(err, os.ErrDeadlineExceeded) && time.Now().Before(cn.idleAt()):
			continue // a call was served, or is running, since the deadline was set
		case err != nil:
			return
		}
		if edge.Blank(line) {
			continue
		}
		if !cn.serve(ctx, line) {
			return
		}
	}
}

// idle is the server's IdleTimeout.
func (s *Server) idleTimeout() time.Duration { return cmp.Or(s.idle, IdleTimeout) }

// idleAt is when the connection will be idle: IdleTimeout after the last
// call served, or from now while a call of its own runs (a long poll is
// not idle).
func (cn *conn) idleAt() time.Time {
	if len(cn.inFlight)+len(cn.stops) > 0 {
		return time.Now().Add(cn.s.idleTimeout())
	}
	return time.Unix(0, cn.served.Load()).Add(cn.s.idleTimeout())
}

// decode reads one line (not blank) as a request of t. bad is the error
// response of a line that is not a request of t's; e is nil when bad is
// set, and also, with bad nil, for a notification's unknown method or
// params, whose error is not answered.
func decode(t *awareness.Table, line []byte) (m edge.Message, e *awareness.Entry, bad *edge.Response) {
	m, b := edge.Parse(line)
	switch {
	case b != nil && !b.Drop:
		return m, nil, &edge.Response{ID: b.ID, Error: b.Error()}
	case b != nil || m.Response: // this server takes no responses
		id := m.ID
		if b != nil {
			id = b.ID
		}
		return m, nil, &edge.Response{ID: id, Error: (&edge.Bad{Code: CodeInvalidRequest, Why: "no method"}).Error()}
	}
	fail := func(code int, msg string) (edge.Message, *awareness.Entry, *edge.Response) {
		if m.ID == nil {
			return m, nil, nil // a notification's error is not answered
		}
		return m, nil, &edge.Response{ID: m.ID, Error: &edge.Error{Code: code, Message: msg}}
	}
	if p := bytes.TrimSpace(m.Params); len(p) > 0 && p[0] != '{' && string(p) != "null" {
		return fail(CodeInvalidParams, "invalid params: want an object")
	}
	var ok bool
	if e, ok = t.Lookup(m.Method); !ok {
		return fail(CodeMethodNotFound, fmt.Sprintf("method %q not found", m.Method))
	}
	return m, e, nil
}

// serve parses one line and starts its call in a goroutine of its own.
// It never waits for a place, so the next line (an estop.trip) is read at
// once: past MaxInFlight calls running, a call is refused busy; a Stop
// operation's call has MaxInFlight places of its own and waits only for
// the connection's other Stop calls. It returns false when the peer has
// hung up (and then the call is not run) or the connection ends.
func (cn *conn) serve(ctx context.Context, line []byte) bool {
	m, e, bad := decode(cn.s.Table, line)
	if e == nil {
		if bad != nil {
			cn.write(*bad)
		}
		return true
	}
	token := cn.inFlight
	if e.Stop {
		select {
		case cn.stops <- struct{}{}:
		case <-ctx.Done():
			return false
		}
		token = cn.stops
	} else {
		select {
		case cn.inFlight <- struct{}{}:
		default:
			cn.reply(m, nil, refusalOf(e.Name, &awareness.Error{Reason: awareness.ReasonBusy,
				Detail: fmt.Sprintf("%d calls already running on this connection", MaxInFlight)}))
			return true
		}
	}
	if edge.HungUp(cn.c) { // read after the peer closed: nobody waits for it
		<-token
		return false
	}
	cn.start(ctx, m, e, token)
	return true
}

// start runs m's call in a goroutine of its own, and gives back its
// token (nil: none) when it ends.
func (cn *conn) start(ctx context.Context, m edge.Message, e *awareness.Entry, token chan struct{}) {
	cn.calls.Add(1)
	go func() {
		defer cn.calls.Done()
		if token != nil {
			defer func() { <-token }()
		}
		var res any
		var err error
		switch {
		case e.Streams && m.ID == nil:
			return // its bytes would have nowhere to go: not run
		case e.Streams:
			res, err = cn.callStreaming(ctx, e, m)
		default:
			res, err = e.Call(ctx, cn.p, m.Params) // a long call ends when the connection does
		}
		if err == nil || !onlyAnError(err) {
			cn.served.Store(time.Now().UnixNano())
		}
		if err != nil {
			cn.reply(m, nil, rpcErrorOf(err))
			return
		}
		if st, ok := res.(awareness.Streaming); ok {
			cn.stream(m, st)
			return
		}
		cn.reply(m, res, nil)
	}()
}

// onlyAnError tells whether a call's error came before its operation
// ran: the principal below its least, or params it cannot take. Such a
// call does not keep a connection from being idle.
func onlyAnError(err error) bool {
	r := awareness.ReasonOf(err)
	return r == awareness.ReasonNotAuthorized || r == awareness.ReasonInvalidParams
}

// rpcErrorOf is the JSON-RPC error of an operation's error.
func rpcErrorOf(err error) *edge.Error {
	oe := awareness.ErrorOf(err)
	code := CodeRefused
	if oe.Reason == awareness.ReasonInvalidParams {
		code = CodeInvalidParams
	}
	return &edge.Error{Code: code, Message: oe.Error(), Data: oe}
}

// reply answers m, unless it is a notification.
func (cn *conn) reply(m edge.Message, result any, e *edge.Error) {
	if m.ID == nil {
		return
	}
	cn.write(edge.Response{ID: m.ID, Result: result, Error: e})
}

// write writes r (ID nil: null) as one line.
func (cn *conn) write(r edge.Response) { cn.writeBytes(r.Encode()) }

// writeLine writes v, a notification, as one line.
func (cn *conn) writeLine(v any) {
	if b, err := json.Marshal(v); err == nil {
		cn.writeBytes(append(b, '\n'))
	}
}

// writeBytes writes line, which ends in its newline, whole, when no
// other line or stream is being written.
func (cn *conn) writeBytes(line []byte) {
	cn.wmu.Lock()
	defer cn.wmu.Unlock()
	cn.c.SetWriteDeadline(time.Now().Add(cn.s.idleTimeout()))
	cn.c.Write(line)
}
