package agent

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
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/edge"
	"github.com/tobe-body/tobe-body/ledger"
)

// SocketName is the agent socket's name in the data directory.
const SocketName = "agent.sock"

// Preface is the one line a connection may begin with, before any MCP
// message: {"tobe":"principal","name":NAME}. `tobe-body stdio
// --principal NAME` sends it. It narrows the connection to the rule of
// that name, which the peer must match; it never widens it.
type Preface struct {
	Tobe string `json:"tobe"` // "principal"
	Name string `json:"name"`
}

// maxPreface bounds the preface line; a longer first line is MCP.
const maxPreface = 512

// Refusal is what a refused connection is told, and recorded.
type Refusal struct {
	UID    int    `cbor:"uid" json:"uid"`
	GID    int    `cbor:"gid" json:"gid"`
	Name   string `cbor:"name,omitempty" json:"name,omitempty"`
	Why    string `cbor:"why" json:"why"`
	Folded int    `cbor:"folded,omitempty" json:"folded,omitempty"`
}

// EventRefused records refused peers of the agent socket (payload
// Refusal), at most one a minute per uid: Folded counts those since the
// last record.
const EventRefused = "agent.refused"

// refuseEvery bounds the records of one uid's refused connections.
const refuseEvery = time.Minute

// Server serves the agent socket: one MCP session per connection, with
// the connection's principal, over the table's operations.
type Server struct {
	Table *awareness.Table
	// Caps gives the action tools their capabilities.
	Caps  Capabilities
	Rules *Rules
	// Sessions watches each connection's heartbeat; its onEnd must call
	// Ended so that a silent session's connection is closed.
	Sessions *act.Sessions
	// Hub, when not nil, pushes observations to every session and keeps
	// them for its drain tool.
	Hub *Hub
	// Record, when not nil, writes an event (a refused peer).
	Record  func(ledger.Event)
	Log     *slog.Logger
	Version string

	// cred reads a connection's peer; tests replace it.
	cred func(net.Conn) (uid, gid int)

	mu      sync.Mutex
	conns   map[string]io.Closer // by session
	refused map[int]*refusedTally
	n       uint64
	wg      sync.WaitGroup
}

type refusedTally struct {
	last   time.Time
	folded int
}

// Listen opens the agent socket at path, mode 0660, in group gid (-1:
// the daemon's).
func Listen(path string, gid int) (net.Listener, error) {
	return edge.Listen("agent socket", path, gid)
}

// Serve accepts connections on ln until ctx is done, then closes every
// connection and waits for their sessions to end.
func (s *Server) Serve(ctx context.Context, ln net.Listener) {
	if s.cred == nil {
		s.cred = edge.PeerCred
	}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || ctx.Err() != nil {
				break
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.Log.Error("agent socket accept; retrying", "err", err, "in", backoff)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
			}
			continue
		}
		backoff = 0
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveConn(ctx, c)
		}()
	}
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// Ended closes the connection of a session that ended silent (the
// Sessions' onEnd calls it); one that closed is gone already.
func (s *Server) Ended(e act.SessionEnd) {
	s.mu.Lock()
	c := s.conns[e.Session]
	s.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// serveConn runs one connection's session to its end.
func (s *Server) serveConn(ctx context.Context, c net.Conn) {
	defer c.Close()
	uid, gid := s.cred(c)
	if len(s.Rules.Match(uid, gid)) == 0 {
		_, err := s.Rules.Resolve(uid, gid, "", "")
		s.refuse(c, uid, gid, "", err.Error())
		return
	}
	br := bufio.NewReaderSize(c, maxPreface)
	name, rest, err := readPreface(br)
	if err != nil {
		return // gone before it said anything
	}
	s.mu.Lock()
	s.n++
	session := fmt.Sprintf("agent-%d-%s", s.n, ledger.NewID())
	s.mu.Unlock()
	p, err := s.Rules.Resolve(uid, gid, name, session)
	if err != nil {
		s.refuse(c, uid, gid, name, err.Error())
		return
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "tobe-body", Version: s.Version}, &mcp.ServerOptions{Logger: s.Log,
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}}})
	if err := addTools(srv, s.Table, s.Caps, p); err != nil {
		s.Log.Error("agent tools", "err", err)
		return
	}
	var sub *subscriber
	if s.Hub != nil {
		sub = s.Hub.join(session, p)
		defer s.Hub.leave(session)
		addDrain(srv, sub)
	}
	rwc := struct {
		io.Reader
		io.Writer
		io.Closer
	}{io.MultiReader(bytes.NewReader(rest), br), c, c}
	s.mu.Lock()
	if s.conns == nil {
		s.conns = map[string]io.Closer{}
	}
	s.conns[session] = c
	s.mu.Unlock()
	s.Sessions.Beat(session)
	defer func() {
		s.mu.Lock()
		delete(s.conns, session)
		s.mu.Unlock()
		if ids := s.Sessions.End(session); len(ids) > 0 {
			s.Log.Warn("agent session closed: its actions stopped", "session", session, "subject", p.Subject, "cancelled", ids)
		}
	}()
	s.Log.Info("agent connected", "session", session, "subject", p.Subject, "trust", p.Trust, "uid", uid)
	t := NewTransport(rwc, TransportOptions{OnMessage: func() { s.Sessions.Beat(session) },
		OnBadLine: func(code int, why string) {
			s.Log.Debug("agent: a bad line", "session", session, "code", code, "why", why)
		}})
	defer t.Close()
	ss, err := srv.Connect(ctx, t, nil)
	if err != nil {
		s.Log.Warn("agent session", "session", session, "err", err)
		return
	}
	stop := context.AfterFunc(ctx, func() { ss.Close() })
	defer stop()
	if sub != nil {
		pctx, cancel := context.WithCancel(ctx)
		var pushing sync.WaitGroup
		pushing.Add(1)
		go func() {
			defer pushing.Done()
			sub.pushes(pctx, t, s.Hub.batch())
		}()
		defer func() {
			cancel()
			pushing.Wait()
		}()
	}
	ss.Wait()
	s.Log.Info("agent disconnected", "session", session, "subject", p.Subject)
}

// readPreface reads the first line if it is a preface and returns its
// name; anything else read is handed back, to be read as MCP.
func readPreface(br *bufio.Reader) (name string, rest []byte, err error) {
	line, err := br.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return "", bytes.Clone(line), nil // a long first line: MCP
	case err != nil && len(line) == 0:
		return "", nil, err
	}
	var p Preface
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if dec.Decode(&p) == nil && p.Tobe == "principal" {
		return p.Name, nil, nil
	}
	return "", bytes.Clone(line), nil
}

// CodeRefused is the JSON-RPC error code of a refused connection's one
// line, whose data is the refusal (reason not_authorized).
const CodeRefused = -32001

type refusalLine struct {
	JSONRPC string       `json:"jsonrpc"`
	ID      *int         `json:"id"` // null: the refusal answers no request
	Error   refusalError `json:"error"`
}

type refusalError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    awareness.Error `json:"data"`
}

// refuse answers a peer that is no agent once, closes, and records it
// (at most once a minute per uid).
func (s *Server) refuse(c net.Conn, uid, gid int, name, why string) {
	msg, _ := json.Marshal(refusalLine{JSONRPC: "2.0", Error: refusalError{Code: CodeRefused, Message: "not_authorized: " + why,
		Data: awareness.Error{Op: "connect", Reason: awareness.ReasonNotAuthorized, Detail: why}}})
	c.SetWriteDeadline(time.Now().Add(time.Second))
	c.Write(append(msg, '\n'))
	s.Log.Warn("agent socket: peer refused", "uid", uid, "gid", gid, "why", why)
	if s.Record == nil {
		return
	}
	s.mu.Lock()
	if s.refused == nil {
		s.refused = map[int]*refusedTally{}
	}
	t := s.refused[uid]
	if t == nil {
		t = &refusedTally{}
		s.refused[uid] = t
	}
	now := time.Now()
	if !t.last.IsZero() && now.Sub(t.last) < refuseEvery {
		t.folded++
		s.mu.Unlock()
		return
	}
	r := Refusal{UID: uid, GID: gid, Name: name, Why: why, Folded: t.folded}
	t.last, t.folded = now, 0
	s.mu.Unlock()
	p, err := ledger.MarshalPayload(r)
	if err != nil {
		return
	}
	s.Record(ledger.Event{Type: EventRefused, ChannelID: "agent", Provenance: ledger.Observed, Payload: p})
}
