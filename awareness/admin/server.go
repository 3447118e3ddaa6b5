// Package admin is the admin socket: one transport of the operation table
// (package awareness) for the body's local administrators and its CLI.
// It speaks JSON-RPC 2.0, one object a line, on a Unix socket in the data
// directory (mode 0660). Who is calling is the kernel's word: the peer's
// credentials (SO_PEERCRED) are mapped to a principal by the daemon's
// rules once per connection, and every call passes that principal to the
// table, which checks it.
//
// The protocol, exactly: a request without an id is a notification and
// gets no reply; -32700 answers a line that is not JSON, -32600 one that
// is not a request (or a batch, which this server does not take, or a
// line over MaxLine), -32601 an unknown method, -32602 params that do not
// fit the method's input; a refusal or failure of the operation is
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
// Admission. Every connection is accepted at once; none waits in the
// kernel's backlog. Then:
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
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/ledger"
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

// JSON-RPC 2.0 error codes.
const (
	CodeParse          = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeRefused        = -32000 // the operation refused or failed, or the connection was turned away; data says why
)

// Resolver maps a peer's credentials (uid and primary gid, -1 when they
// could not be read) to its principal, or says why it has none.
type Resolver func(uid, gid int) (act.Principal, error)

// Server serves a table on a listener.
type Server struct {
	ln      net.Listener
	table   *awareness.Table
	resolve Resolver
	log     *slog.Logger

	// Seams for tests: the peer's credentials, and the durations of the
	// limits above.
	cred      func(net.Conn) (uid, gid int)
	idle      time.Duration // IdleTimeout
	firstLine time.Duration // FirstLineTimeout

	ctx    context.Context
	cancel context.CancelFunc // ends ctx: calls in progress stop
	wg     sync.WaitGroup

	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	closed  bool
	open    int         // connections open, however answered
	openOf  map[int]int // by uid
	slots   int         // connections served
	slotOf  map[int]int
	brief   int // connections being answered once
	briefOf map[int]int
	warned  map[int]warned // refusals logged, by uid
}

// warned is when a uid's refusals were last logged, and how many were
// not since.
type warned struct {
	at     time.Time
	hushed int
}

// Listen listens on the Unix socket at path with mode 0660. A socket left
// by a daemon that died (connecting to it is refused: ECONNREFUSED) is
// removed. One that answers belongs to a running daemon and is an error;
// so is one that cannot be told apart from a live one (connecting fails
// otherwise: its backlog is full, permission is denied), and anything
// there that is not a socket.
func Listen(path string) (net.Listener, error) { return ListenAs("admin socket", path) }

// ListenAs is Listen for a socket that errors call what ("agent socket").
func ListenAs(what, path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("%s %s: something that is not a socket is there (%s); not removing it", what, path, fi.Mode().Type())
		}
		c, err := net.DialTimeout("unix", path, time.Second)
		switch {
		case err == nil:
			c.Close()
			return nil, fmt.Errorf("%s %s: another tobe-body is answering on it", what, path)
		case !errors.Is(err, syscall.ECONNREFUSED):
			return nil, fmt.Errorf("%s %s: cannot tell whether a tobe-body is answering on it, so not removing it: %w", what, path, err)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("%s: remove stale %s: %w", what, path, err)
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		ln.Close()
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return ln, nil
}

// NewServer serves t on ln once Serve is called; resolve decides each
// connection's principal. Close stops it.
func NewServer(ln net.Listener, t *awareness.Table, resolve Resolver, log *slog.Logger) *Server {
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{ln: ln, table: t, resolve: resolve, log: log, conns: map[net.Conn]struct{}{},
		cred: PeerCred, idle: IdleTimeout, firstLine: FirstLineTimeout,
		openOf: map[int]int{}, slotOf: map[int]int{}, briefOf: map[int]int{}, warned: map[int]warned{},
		ctx: ctx, cancel: cancel}
}

// Serve accepts connections in a goroutine of its own until Close, each
// at once, and admits each by the limits above in a goroutine of its own.
// A failing Accept (out of file descriptors) is retried with backoff.
func (s *Server) Serve() {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		var backoff time.Duration
		for {
			c, err := s.ln.Accept()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Error("admin socket accept; retrying", "err", err, "in", backoff)
				t := time.NewTimer(backoff)
				select {
				case <-t.C:
				case <-s.ctx.Done():
					t.Stop()
					return
				}
				continue
			}
			backoff = 0
			uid, gid := s.cred(c)
			s.mu.Lock()
			if s.closed {
				s.mu.Unlock()
				c.Close()
				return
			}
			full := ""
			switch {
			case s.openOf[uid] >= MaxOpenPerUID:
				full = fmt.Sprintf("%d connections of uid %d already open", s.openOf[uid], uid)
			case s.open >= MaxOpen:
				full = fmt.Sprintf("%d connections already open", s.open)
			default:
				s.open++
				s.openOf[uid]++
				s.conns[c] = struct{}{}
				s.wg.Add(1)
			}
			s.mu.Unlock()
			if full != "" {
				s.warn(uid, "admin socket: a connection turned away as it came", "why", full)
				s.turnAway(c, &awareness.Error{Reason: awareness.ReasonBusy, Detail: full})
				c.Close()
				continue
			}
			go func() {
				defer s.wg.Done()
				s.serveConn(c, uid, gid)
				c.Close()
				s.mu.Lock()
				delete(s.conns, c)
				s.open--
				dec(s.openOf, uid)
				s.mu.Unlock()
			}()
		}
	}()
}

// Close stops accepting, ends the calls in progress and the open
// connections, and waits for their goroutines.
func (s *Server) Close() {
	s.ln.Close()
	s.cancel()
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// How a connection is answered.
type admission int

const (
	served   admission = iota // a place: calls until EOF, idle or Close
	once                      // its first line answered, then closed
	turnAway                  // one line saying why, nothing read
)

// serveConn decides who is at the other end of c and answers it as its
// admission says. It leaves c open.
func (s *Server) serveConn(c net.Conn, uid, gid int) {
	p, why := s.resolve(uid, gid)
	if why == nil && (p.Kind == "" || p.Subject == "" || p.Trust <= ledger.Off) {
		why = fmt.Errorf("uid %d has no trust", uid)
	}
	if why != nil {
		p = act.Principal{}
	}
	a, refusal := s.admit(uid, p, why)
	defer s.release(uid, a)
	if refusal != nil {
		s.warn(uid, "admin socket: a connection without a place: answered once and closed", "gid", gid, "reason", refusal.Reason, "why", refusal.Detail)
	}
	switch a {
	case served:
		s.handle(c, p)
	case once:
		s.answerOnce(c, p, refusal)
	default:
		s.turnAway(c, refusal)
	}
}

// admit takes a place for a connection of uid with principal p (why says
// why it has none), or a turn at being answered once, or neither; the
// refusal says why it has no place.
func (s *Server) admit(uid int, p act.Principal, why error) (admission, *awareness.Error) {
	high := why == nil && p.Trust >= ledger.High
	s.mu.Lock()
	defer s.mu.Unlock()
	var refusal *awareness.Error
	if why != nil {
		refusal = &awareness.Error{Reason: awareness.ReasonNotAuthorized, Detail: why.Error()}
	} else {
		perUID, total := MaxConnsPerUID, MaxConns-KeptForHigh
		if high {
			perUID, total = MaxConnsPerUIDHigh, MaxConns
		}
		switch {
		case s.slotOf[uid] >= perUID:
			refusal = &awareness.Error{Reason: awareness.ReasonBusy,
				Detail: fmt.Sprintf("%d connections of uid %d already open (at most %d at %s trust)", s.slotOf[uid], uid, perUID, p.Trust)}
		case s.slots >= total && !high:
			refusal = &awareness.Error{Reason: awareness.ReasonBusy,
				Detail: fmt.Sprintf("%d connections already open (the last %d of %d are kept for high trust)", s.slots, KeptForHigh, MaxConns)}
		case s.slots >= total:
			refusal = &awareness.Error{Reason: awareness.ReasonBusy, Detail: fmt.Sprintf("all %d connections are open", s.slots)}
		default:
			s.slots++
			s.slotOf[uid]++
			return served, nil
		}
	}
	total := MaxBrief - BriefKeptForHigh
	if high {
		total = MaxBrief
	}
	if s.briefOf[uid] >= MaxBriefPerUID || s.brief >= total {
		return turnAway, refusal
	}
	s.brief++
	s.briefOf[uid]++
	return once, refusal
}

// release gives back what admit took.
func (s *Server) release(uid int, a admission) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch a {
	case served:
		s.slots--
		dec(s.slotOf, uid)
	case once:
		s.brief--
		dec(s.briefOf, uid)
	}
}

func dec(m map[int]int, k int) {
	if m[k]--; m[k] <= 0 {
		delete(m, k)
	}
}

// warn logs a refusal of uid's, at most one every 10 s for a uid, saying
// how many were not logged since: a peer turned away in a loop does not
// fill the log.
func (s *Server) warn(uid int, msg string, args ...any) {
	now := time.Now()
	s.mu.Lock()
	w := s.warned[uid]
	if now.Sub(w.at) < 10*time.Second {
		w.hushed++
		s.warned[uid] = w
		s.mu.Unlock()
		return
	}
	if len(s.warned) >= 256 { // uids that can connect are few; forget them all rather than grow
		clear(s.warned)
	}
	s.warned[uid] = warned{at: now}
	s.mu.Unlock()
	s.log.Warn(msg, append(args, "uid", uid, "not_logged_since", w.hushed)...)
}

// refusalOf is the JSON-RPC error of a connection's refusal, for op.
func refusalOf(op string, r *awareness.Error) *rpcError {
	e := *r
	e.Op = cmp.Or(op, "admin socket")
	return &rpcError{Code: CodeRefused, Message: e.Error(), Data: &e}
}

// turnAway writes one line saying why c is not served, without reading
// anything: a fresh connection's buffer holds it, and the deadline keeps
// a full one from holding the caller up.
func (s *Server) turnAway(c net.Conn, r *awareness.Error) {
	b, _ := json.Marshal(response{JSONRPC: "2.0", ID: null, Error: refusalOf("", r)})
	c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	c.Write(append(b, '\n'))
}

// answerOnce reads c's first request (waiting at most firstLine) and
// answers it, then returns for c to be closed. The one request served is
// a Stop operation's (estop.trip), with p checked as always; anything
// else gets the refusal, naming the request's id when it has one (a
// notification too: the peer must learn why it is closed), or null.
func (s *Server) answerOnce(c net.Conn, p act.Principal, refusal *awareness.Error) {
	cn := newConn(s, c, p)
	ctx, cancel := context.WithCancel(s.ctx)
	defer func() {
		cancel()
		cn.calls.Wait()
	}()
	c.SetReadDeadline(time.Now().Add(s.firstLine))
	lr := &lineReader{r: bufio.NewReaderSize(c, 4096), max: MaxLine}
	var line []byte
	var err error
	for {
		if line, err = lr.next(); err != nil || len(bytes.TrimSpace(line)) > 0 {
			break
		}
	}
	if err != nil {
		cn.write(response{ID: null, Error: refusalOf("", refusal)})
		return
	}
	req, e, bad := decode(s.table, line)
	if bad == nil && e.Stop && refusal.Reason == awareness.ReasonBusy && !hungUp(c) {
		cn.start(ctx, req, e, nil)
		return
	}
	op := ""
	if e != nil {
		op = e.Name
	}
	cn.write(response{ID: orNull(req.ID), Error: refusalOf(op, refusal)})
}

// request is a JSON-RPC 2.0 request; ID is nil when absent (a
// notification) and "null" when null.
type request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

var null = json.RawMessage("null")

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
// error, an idle connection, its peer's hang-up or Close; then the calls
// in progress are cancelled and waited for.
func (s *Server) handle(c net.Conn, p act.Principal) {
	cn := newConn(s, c, p)
	ctx, cancel := context.WithCancel(s.ctx)
	defer func() {
		cancel() // calls in progress end: nobody waits for them
		cn.calls.Wait()
	}()
	lr := &lineReader{r: bufio.NewReaderSize(c, 4096), max: MaxLine}
	for {
		c.SetReadDeadline(cn.idleAt())
		line, err := lr.next()
		switch {
		case errors.Is(err, errLineTooLong):
			cn.write(response{ID: null, Error: &rpcError{Code: CodeInvalidRequest, Message: fmt.Sprintf("invalid request: a line over %d bytes", MaxLine)}})
			continue
		case errors.Is(err, os.ErrDeadlineExceeded) && time.Now().Before(cn.idleAt()):
			continue // a call was served, or is running, since the deadline was set
		case err != nil:
			return
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if !cn.serve(ctx, line) {
			return
		}
	}
}

// idleAt is when the connection will be idle: IdleTimeout after the last
// call served, or from now while a call of its own runs (a long poll is
// not idle).
func (cn *conn) idleAt() time.Time {
	if len(cn.inFlight)+len(cn.stops) > 0 {
		return time.Now().Add(cn.s.idle)
	}
	return time.Unix(0, cn.served.Load()).Add(cn.s.idle)
}

// decode reads one line as a request of t. bad is the error response of
// a line that is not a request of t's, with a nil ID when it must not be
// sent (a notification's unknown method or params); e is nil only when
// bad is set, and then req holds what could be read of the request.
func decode(t *awareness.Table, line []byte) (req request, e *awareness.Entry, bad *response) {
	fail := func(id json.RawMessage, code int, msg string) (request, *awareness.Entry, *response) {
		return req, nil, &response{ID: id, Error: &rpcError{Code: code, Message: msg}}
	}
	if trimmed := bytes.TrimSpace(line); len(trimmed) > 0 && trimmed[0] == '[' {
		if !json.Valid(trimmed) {
			return fail(null, CodeParse, "parse error: the line is not JSON")
		}
		return fail(null, CodeInvalidRequest, "invalid request: batches are not taken; send one request a line")
	}
	if err := json.Unmarshal(line, &req); err != nil {
		req = request{}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && json.Valid(line) {
			return fail(idOf(line), CodeInvalidRequest, "invalid request: "+err.Error())
		}
		return fail(null, CodeParse, "parse error: "+err.Error())
	}
	if req.ID != nil && !validID(req.ID) {
		req.ID = nil
		return fail(null, CodeInvalidRequest, "invalid request: id must be a string, a number or null")
	}
	if req.JSONRPC != "2.0" || req.Method == "" {
		return fail(orNull(req.ID), CodeInvalidRequest, `invalid request: want {"jsonrpc":"2.0","method":...}`)
	}
	// From here on a notification's error is not answered: its id is nil.
	if p := bytes.TrimSpace(req.Params); len(p) > 0 && p[0] != '{' && string(p) != "null" {
		return fail(req.ID, CodeInvalidParams, "invalid params: want an object")
	}
	var ok bool
	if e, ok = t.Lookup(req.Method); !ok {
		return fail(req.ID, CodeMethodNotFound, fmt.Sprintf("method %q not found", req.Method))
	}
	return req, e, nil
}

// serve parses one line and starts its call in a goroutine of its own.
// It never waits for a place, so the next line (an estop.trip) is read at
// once: past MaxInFlight calls running, a call is refused busy; a Stop
// operation's call has MaxInFlight places of its own and waits only for
// the connection's other Stop calls. It returns false when the peer has
// hung up (and then the call is not run) or the connection ends.
func (cn *conn) serve(ctx context.Context, line []byte) bool {
	req, e, bad := decode(cn.s.table, line)
	if bad != nil {
		if bad.ID != nil { // nil: a notification's error, not answered
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
			cn.reply(req, nil, refusalOf(e.Name, &awareness.Error{Reason: awareness.ReasonBusy,
				Detail: fmt.Sprintf("%d calls already running on this connection", MaxInFlight)}))
			return true
		}
	}
	if hungUp(cn.c) { // read after the peer closed: nobody waits for it
		<-token
		return false
	}
	cn.start(ctx, req, e, token)
	return true
}

// start runs req's call in a goroutine of its own, and gives back its
// token (nil: none) when it ends.
func (cn *conn) start(ctx context.Context, req request, e *awareness.Entry, token chan struct{}) {
	cn.calls.Add(1)
	go func() {
		defer cn.calls.Done()
		if token != nil {
			defer func() { <-token }()
		}
		var res any
		var err error
		switch {
		case e.Streams && req.ID == nil:
			return // its bytes would have nowhere to go: not run
		case e.Streams:
			res, err = cn.callStreaming(ctx, e, req)
		default:
			res, err = e.Call(ctx, cn.p, req.Params) // a long call ends when the connection does
		}
		if err == nil || !onlyAnError(err) {
			cn.served.Store(time.Now().UnixNano())
		}
		if err != nil {
			cn.reply(req, nil, rpcErrorOf(err))
			return
		}
		if st, ok := res.(awareness.Streaming); ok {
			cn.stream(req, st)
			return
		}
		cn.reply(req, res, nil)
	}()
}

// onlyAnError tells whether a call's error came before its operation
// ran: the principal below its least, or params it cannot take. Such a
// call does not keep a connection from being idle.
func onlyAnError(err error) bool {
	r := awareness.ReasonOf(err)
	return r == awareness.ReasonNotAuthorized || r == awareness.ReasonInvalidParams
}

var errLineTooLong = errors.New("line too long")

// lineReader reads lines of at most max bytes. A line over max is read to
// its end and dropped: errLineTooLong, and the next line reads as usual.
// What a read error (a deadline) leaves of a line is kept for the next
// call; a last line without a newline counts as a line.
type lineReader struct {
	r    *bufio.Reader
	max  int
	line []byte
	long bool
}

// next returns the next line without its newline.
func (lr *lineReader) next() ([]byte, error) {
	for {
		chunk, err := lr.r.ReadSlice('\n')
		if !lr.long {
			if len(lr.line)+len(chunk) > lr.max+1 {
				lr.long, lr.line = true, lr.line[:0]
			} else {
				lr.line = append(lr.line, chunk...)
			}
		}
		switch {
		case err == nil && lr.long:
			lr.line, lr.long = nil, false
			return nil, errLineTooLong
		case err == nil:
			line := lr.line[:len(lr.line)-1]
			lr.line = nil
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(lr.line) > 0 && !lr.long:
			line := lr.line
			lr.line = nil
			return line, nil
		}
		return nil, err
	}
}

// rpcErrorOf is the JSON-RPC error of an operation's error.
func rpcErrorOf(err error) *rpcError {
	oe := awareness.ErrorOf(err)
	code := CodeRefused
	if oe.Reason == awareness.ReasonInvalidParams {
		code = CodeInvalidParams
	}
	return &rpcError{Code: code, Message: oe.Error(), Data: oe}
}

// reply answers req, unless it is a notification.
func (cn *conn) reply(req request, result any, e *rpcError) {
	if req.ID == nil {
		return
	}
	cn.write(response{ID: req.ID, Result: result, Error: e})
}

func (cn *conn) write(r response) {
	r.JSONRPC = "2.0"
	b, err := json.Marshal(r)
	if err != nil {
		b, _ = json.Marshal(response{JSONRPC: "2.0", ID: r.ID, Error: &rpcError{Code: CodeRefused, Message: "the answer could not be encoded: " + err.Error(),
			Data: &awareness.Error{Reason: awareness.ReasonFailed, Detail: err.Error()}}})
	}
	cn.writeBytes(b)
}

// writeLine writes v, a notification, as one line.
func (cn *conn) writeLine(v any) {
	if b, err := json.Marshal(v); err == nil {
		cn.writeBytes(b)
	}
}

// writeBytes writes b and a newline, whole, when no other line or stream
// is being written.
func (cn *conn) writeBytes(b []byte) {
	cn.wmu.Lock()
	defer cn.wmu.Unlock()
	cn.c.SetWriteDeadline(time.Now().Add(cn.s.idle))
	cn.c.Write(append(b, '\n'))
}

func validID(id json.RawMessage) bool {
	t := bytes.TrimSpace(id)
	if len(t) == 0 {
		return false
	}
	switch t[0] {
	case '"', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return false
}

func orNull(id json.RawMessage) json.RawMessage {
	if id == nil || !validID(id) {
		return null
	}
	return id
}

// idOf digs the id out of a request whose other fields have the wrong
// types, so its error can name it.
func idOf(line []byte) json.RawMessage {
	var v struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(line, &v) != nil {
		return null
	}
	return orNull(v.ID)
}
