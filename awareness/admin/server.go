// Package admin is the admin socket: one transport of the operation table
// (package awareness) for the body's local administrators and its CLI.
// It speaks JSON-RPC 2.0, one object a line, on a Unix socket in the data
// directory (mode 0660). Who is calling is the kernel's word: the peer's
// credentials (SO_PEERCRED) are mapped to a principal by the daemon's
// rules once per connection, and every call passes that principal to the
// table, which checks it. A peer the rules do not name gets no principal
// and every call it makes is refused.
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
package admin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness"
)

// Limits of the admin socket.
const (
	MaxLine     = 64 << 10         // one request line
	MaxConns    = 16               // connections served at once; more wait in the kernel's backlog
	MaxInFlight = 8                // calls running at once on one connection; the next line waits
	IdleTimeout = 30 * time.Second // a connection that sends nothing and waits on nothing for this long is closed
)

// JSON-RPC 2.0 error codes.
const (
	CodeParse          = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeRefused        = -32000 // the operation refused or failed; data says why
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

	slots  chan struct{} // one token per connection being served
	ctx    context.Context
	cancel context.CancelFunc // ends ctx: calls in progress stop
	wg     sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// Listen listens on the Unix socket at path with mode 0660. A socket left
// by a daemon that died (connecting to it is refused: ECONNREFUSED) is
// removed. One that answers belongs to a running daemon and is an error;
// so is one that cannot be told apart from a live one (connecting fails
// otherwise: its backlog is full, permission is denied), and anything
// there that is not a socket.
func Listen(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("admin socket %s: something that is not a socket is there (%s); not removing it", path, fi.Mode().Type())
		}
		c, err := net.DialTimeout("unix", path, time.Second)
		switch {
		case err == nil:
			c.Close()
			return nil, fmt.Errorf("admin socket %s: another tobe-body is answering on it", path)
		case !errors.Is(err, syscall.ECONNREFUSED):
			return nil, fmt.Errorf("admin socket %s: cannot tell whether a tobe-body is answering on it, so not removing it: %w", path, err)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("admin socket: remove stale %s: %w", path, err)
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		ln.Close()
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	return ln, nil
}

// NewServer serves t on ln once Serve is called; resolve decides each
// connection's principal. Close stops it.
func NewServer(ln net.Listener, t *awareness.Table, resolve Resolver, log *slog.Logger) *Server {
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{ln: ln, table: t, resolve: resolve, log: log, conns: map[net.Conn]struct{}{},
		slots: make(chan struct{}, MaxConns), ctx: ctx, cancel: cancel}
}

// Serve accepts connections in a goroutine of its own until Close. At most
// MaxConns are served at once; a failing Accept (out of file descriptors)
// is retried with backoff.
func (s *Server) Serve() {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		var backoff time.Duration
		for {
			select {
			case s.slots <- struct{}{}:
			case <-s.ctx.Done():
				return
			}
			c, err := s.ln.Accept()
			if err != nil {
				<-s.slots
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
			s.mu.Lock()
			if s.closed {
				s.mu.Unlock()
				c.Close()
				<-s.slots
				return
			}
			s.conns[c] = struct{}{}
			s.wg.Add(1)
			s.mu.Unlock()
			go func() {
				defer s.wg.Done()
				s.handle(c)
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				c.Close()
				<-s.slots
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

// conn is one connection being served.
type conn struct {
	s       *Server
	c       net.Conn
	p       act.Principal
	refused error // why the peer has no principal

	wmu      sync.Mutex // one response written at a time
	calls    sync.WaitGroup
	inFlight chan struct{}
}

// handle answers requests on one connection, a line each, until EOF, a
// read error, an idle connection or Close.
func (s *Server) handle(c net.Conn) {
	uid, gid := peerCred(c)
	cn := &conn{s: s, c: c, inFlight: make(chan struct{}, MaxInFlight)}
	cn.p, cn.refused = s.resolve(uid, gid)
	if cn.refused != nil {
		cn.p = act.Principal{}
		s.log.Warn("admin socket: a caller without a principal", "uid", uid, "gid", gid, "why", cn.refused)
	}
	ctx, cancel := context.WithCancel(s.ctx)
	defer func() {
		cancel()
		cn.calls.Wait()
	}()
	lr := &lineReader{r: bufio.NewReaderSize(c, 4096), max: MaxLine}
	for {
		c.SetReadDeadline(time.Now().Add(IdleTimeout))
		line, err := lr.next()
		switch {
		case errors.Is(err, errLineTooLong):
			cn.write(response{ID: null, Error: &rpcError{Code: CodeInvalidRequest, Message: fmt.Sprintf("invalid request: a line over %d bytes", MaxLine)}})
			continue
		case errors.Is(err, os.ErrDeadlineExceeded) && len(cn.inFlight) > 0:
			continue // waiting on a call of its own is not idle
		case err != nil:
			return
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		cn.serve(ctx, line)
	}
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

// serve parses one line and runs its call in a goroutine of its own.
func (cn *conn) serve(ctx context.Context, line []byte) {
	if t := bytes.TrimSpace(line); len(t) > 0 && t[0] == '[' {
		if !json.Valid(t) {
			cn.write(response{ID: null, Error: &rpcError{Code: CodeParse, Message: "parse error: the line is not JSON"}})
			return
		}
		cn.write(response{ID: null, Error: &rpcError{Code: CodeInvalidRequest, Message: "invalid request: batches are not taken; send one request a line"}})
		return
	}
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && json.Valid(line) {
			cn.write(response{ID: idOf(line), Error: &rpcError{Code: CodeInvalidRequest, Message: "invalid request: " + err.Error()}})
			return
		}
		cn.write(response{ID: null, Error: &rpcError{Code: CodeParse, Message: "parse error: " + err.Error()}})
		return
	}
	if req.ID != nil && !validID(req.ID) {
		cn.write(response{ID: null, Error: &rpcError{Code: CodeInvalidRequest, Message: "invalid request: id must be a string, a number or null"}})
		return
	}
	if req.JSONRPC != "2.0" || req.Method == "" {
		cn.write(response{ID: orNull(req.ID), Error: &rpcError{Code: CodeInvalidRequest, Message: `invalid request: want {"jsonrpc":"2.0","method":...}`}})
		return
	}
	if p := bytes.TrimSpace(req.Params); len(p) > 0 && p[0] != '{' && string(p) != "null" {
		cn.reply(req, nil, &rpcError{Code: CodeInvalidParams, Message: "invalid params: want an object"})
		return
	}
	e, ok := cn.s.table.Lookup(req.Method)
	if !ok {
		cn.reply(req, nil, &rpcError{Code: CodeMethodNotFound, Message: fmt.Sprintf("method %q not found", req.Method)})
		return
	}
	select {
	case cn.inFlight <- struct{}{}:
	case <-ctx.Done():
		return
	}
	cn.calls.Add(1)
	go func() {
		defer cn.calls.Done()
		defer func() { <-cn.inFlight }()
		if cn.refused != nil {
			cn.reply(req, nil, &rpcError{Code: CodeRefused, Message: cn.refused.Error(),
				Data: &awareness.Error{Op: e.Name, Reason: awareness.ReasonNotAuthorized, Detail: cn.refused.Error()}})
			return
		}
		var res any
		var err error
		switch {
		case e.Streams && req.ID == nil:
			return // its bytes would have nowhere to go: not run
		case e.Streams:
			res, err = cn.callStreaming(ctx, e, req)
		default:
			res, err = e.Call(ctx, cn.p, req.Params) // a long call ends when the server closes
		}
		if err != nil {
			cn.reply(req, nil, errorOf(err))
			return
		}
		if st, ok := res.(awareness.Streaming); ok {
			cn.stream(req, st)
			return
		}
		cn.reply(req, res, nil)
	}()
}

// errorOf is the JSON-RPC error of an operation's error.
func errorOf(err error) *rpcError {
	var oe *awareness.Error
	if !errors.As(err, &oe) {
		oe = &awareness.Error{Reason: awareness.ReasonFailed, Detail: err.Error()}
	}
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
	cn.c.SetWriteDeadline(time.Now().Add(IdleTimeout))
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
