package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/ledger"
)

// adminSocket is the admin socket's name in the data directory.
const adminSocket = "admin.sock"

// Limits of the admin socket.
const (
	maxRequest  = 64 << 10         // one request line
	maxConns    = 16               // connections served at once; more wait in the kernel's backlog
	idleTimeout = 30 * time.Second // a connection that sends nothing for this long is closed
)

// rpcRequest and rpcResponse are JSON-RPC 2.0, one object a line.
type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// JSON-RPC 2.0 error codes.
const (
	rpcParseError     = -32700
	rpcInvalidRequest = -32600
	rpcMethodNotFound = -32601
)

// adminServer answers on the admin socket. Who may connect is decided by
// the socket's mode (0660: the daemon's user and the body's admin group).
type adminServer struct {
	ln      net.Listener
	log     *slog.Logger
	methods map[string]method
	// who maps a connection's peer credentials to its principal, or says
	// why the peer is not a local administrator; nil: every peer is one,
	// at high trust (the socket's mode decides who connects).
	who func(uid, gid int) (act.Principal, error)

	slots  chan struct{} // one token per connection being served
	done   chan struct{} // closed by close
	ctx    context.Context
	cancel context.CancelFunc // ends ctx: calls in progress stop
	wg     sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// listenAdmin listens on path. A socket left by a daemon that died is
// removed; one that answers belongs to a running daemon and is an error.
func listenAdmin(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("admin socket %s: something that is not a socket is there (%s); not removing it", path, fi.Mode().Type())
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("admin socket %s: another tobe-body is answering on it", path)
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

// method answers one request. Its error goes back as a JSON-RPC error
// (code -32000) with the error's text.
type method func(ctx context.Context, params json.RawMessage) (any, error)

// rpcServerError is JSON-RPC's code for an application error.
const rpcServerError = -32000

func newAdminServer(ln net.Listener, log *slog.Logger, methods map[string]method) *adminServer {
	ctx, cancel := context.WithCancel(context.Background())
	return &adminServer{ln: ln, log: log, methods: methods, conns: map[net.Conn]struct{}{},
		slots: make(chan struct{}, maxConns), done: make(chan struct{}), ctx: ctx, cancel: cancel}
}

// serve accepts connections until close. At most maxConns are served at
// once; a failing Accept (out of file descriptors) is retried with backoff.
func (s *adminServer) serve() {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		var backoff time.Duration
		for {
			s.slots <- struct{}{}
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
				case <-s.done:
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

// handle answers requests on one connection, a line each, until EOF.
func (s *adminServer) handle(c net.Conn) {
	// Who is calling is the kernel's word, once per connection.
	uid, gid := peerCred(c)
	p := act.Principal{Kind: act.LocalAdmin, Subject: subjectOf(uid), Session: "admin", Trust: ledger.High}
	var refused error
	if s.who != nil {
		p, refused = s.who(uid, gid)
		if refused != nil {
			s.log.Warn("admin socket: a caller that is not a local administrator", "uid", uid, "gid", gid, "why", refused)
		}
	}
	ctx := context.WithValue(s.ctx, principalKey{}, p)
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 4096), maxRequest)
	enc := json.NewEncoder(c)
	for {
		c.SetReadDeadline(time.Now().Add(idleTimeout))
		if !sc.Scan() {
			break
		}
		var req rpcRequest
		resp := rpcResponse{JSONRPC: "2.0", ID: json.RawMessage("null")}
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			resp.Error = &rpcError{Code: rpcParseError, Message: "parse error: " + err.Error()}
		} else if req.JSONRPC != "2.0" || req.Method == "" {
			resp.Error = &rpcError{Code: rpcInvalidRequest, Message: `invalid request: want {"jsonrpc":"2.0","method":...}`}
		} else if refused != nil {
			resp.ID = req.ID
			resp.Error = &rpcError{Code: rpcServerError, Message: refused.Error()}
		} else if m, ok := s.methods[req.Method]; !ok {
			resp.ID = req.ID
			resp.Error = &rpcError{Code: rpcMethodNotFound, Message: fmt.Sprintf("method %q not found", req.Method)}
		} else {
			resp.ID = req.ID
			res, err := m(ctx, req.Params) // a long call ends when the server closes
			if err != nil {
				resp.Error = &rpcError{Code: rpcServerError, Message: err.Error()}
			} else {
				resp.Result = res
			}
		}
		if resp.ID == nil {
			resp.ID = json.RawMessage("null")
		}
		if err := enc.Encode(resp); err != nil {
			return
		}
	}
	if err := sc.Err(); err != nil {
		enc.Encode(rpcResponse{JSONRPC: "2.0", ID: json.RawMessage("null"), Error: &rpcError{Code: rpcInvalidRequest, Message: err.Error()}})
	}
}

// close stops accepting, ends open connections and waits for their
// goroutines.
func (s *adminServer) close() {
	s.ln.Close()
	s.cancel()
	s.mu.Lock()
	if !s.closed {
		close(s.done)
	}
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// callAdmin sends one request to the daemon at path and decodes the result
// into out.
func callAdmin(ctx context.Context, path, method string, out any) error {
	return callAdminParams(ctx, path, method, nil, out, 5*time.Second)
}

// callAdminParams sends params with the request and waits up to timeout.
func callAdminParams(ctx context.Context, path, method string, params any, out any, timeout time.Duration) error {
	var d net.Dialer
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, errConnRefused) {
			return fmt.Errorf("no tobe-body is running with admin socket %s (start it with 'tobe-body run', or pass --data or --socket)", path)
		}
		return fmt.Errorf("admin socket %s: %w", path, err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	req := rpcRequest{JSONRPC: "2.0", ID: json.RawMessage("1"), Method: method}
	if params != nil {
		b, err := json.Marshal(params)
		if err != nil {
			return err
		}
		req.Params = b
	}
	if err := json.NewEncoder(c).Encode(req); err != nil {
		return fmt.Errorf("admin socket %s: %w", path, err)
	}
	var resp struct {
		Result json.RawMessage `json:"result"`
		Error  *rpcError       `json:"error"`
	}
	if err := json.NewDecoder(bufio.NewReader(c)).Decode(&resp); err != nil {
		return fmt.Errorf("admin socket %s: reading the answer: %w", path, err)
	}
	if resp.Error != nil {
		return fmt.Errorf("the daemon refused %s: %s (code %d)", method, resp.Error.Message, resp.Error.Code)
	}
	return json.Unmarshal(resp.Result, out)
}

// principalKey holds the caller's principal in a method's context.
type principalKey struct{}

// adminPrincipal is the local administrator calling, as the admin socket
// found it from the kernel's peer credentials and the config.
func adminPrincipal(ctx context.Context) act.Principal {
	if p, ok := ctx.Value(principalKey{}).(act.Principal); ok {
		return p
	}
	return act.Principal{Kind: act.LocalAdmin, Subject: subjectOf(-1), Session: "admin", Trust: ledger.High}
}

// adminSubject names the local administrator calling: "admin:uid=N" from
// the socket's peer credentials, or "admin:unknown" when they could not be
// read.
func adminSubject(ctx context.Context) string { return adminPrincipal(ctx).Subject }

func subjectOf(uid int) string {
	if uid >= 0 {
		return fmt.Sprintf("admin:uid=%d", uid)
	}
	return "admin:unknown"
}

// needTrust lets a method run only for a local administrator at trust
// min or more.
func needTrust(min ledger.Level, name string, m method) method {
	return func(ctx context.Context, params json.RawMessage) (any, error) {
		if p := adminPrincipal(ctx); p.Trust < min {
			return nil, fmt.Errorf("%s needs a local administrator at %s trust; %s is at %s", name, min, p.Subject, p.Trust)
		}
		return m(ctx, params)
	}
}

// lowTrustMethods are the admin calls any local administrator may make:
// they read, stop, or act through the runner, whose policy weighs the
// caller's trust. Every other call changes what the body may do (grants,
// e-stop reset, approvals, backups) and needs high trust.
var lowTrustMethods = map[string]bool{"status": true, "estop.status": true, "estop.trip": true, "grant.list": true,
	"action.submit": true, "action.capabilities": true, "ledger.stats": true, "ledger.events": true, "ledger.verify": true}

// gateMethods wraps every method but lowTrustMethods in needTrust(High).
func gateMethods(methods map[string]method) {
	for name, m := range methods {
		if !lowTrustMethods[name] {
			methods[name] = needTrust(ledger.High, name, m)
		}
	}
}
