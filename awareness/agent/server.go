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
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/edge"
	"github.com/tobe-body/tobe-body/body"
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

// Limits of the agent socket, admitted as package edge admits (the
// admin socket's policy). An agent's session holds an MCP server, a
// queue of observations and a heartbeat, so there are fewer places than
// on the admin socket.
const (
	// MaxConns sessions are served at once, every agent's together; the
	// last KeptForHigh of them only for principals at high or max trust.
	MaxConns    = 8
	KeptForHigh = 2
	// A uid holds at most MaxConnsPerUID of them below high trust,
	// MaxConnsPerUIDHigh at high or max.
	MaxConnsPerUID     = 4
	MaxConnsPerUIDHigh = 6
	// A principal without a place gets a brief session (see Server); at
	// most MaxBrief are open at once, the last BriefKeptForHigh of them
	// for high or max trust, and MaxBriefPerUID for one uid. Beyond those
	// a connection gets one line saying why and is closed.
	MaxBrief         = 16
	BriefKeptForHigh = 4
	MaxBriefPerUID   = 4
	// A brief session lasts at most BriefFor, and reads at most
	// BriefMessages messages.
	BriefFor      = 10 * time.Second
	BriefMessages = 8
	// No more than MaxOpen connections are open at once however they are
	// answered, MaxOpenPerUID of one uid (counting those whose preface is
	// still awaited); more are turned away as they come.
	MaxOpen       = 64
	MaxOpenPerUID = MaxConnsPerUIDHigh + MaxBriefPerUID + 4
)

// limits are the limits above, as package edge takes them.
var limits = edge.Limits{MaxConns: MaxConns, KeptForHigh: KeptForHigh, MaxConnsPerUID: MaxConnsPerUID, MaxConnsPerUIDHigh: MaxConnsPerUIDHigh,
	MaxBrief: MaxBrief, BriefKeptForHigh: BriefKeptForHigh, MaxBriefPerUID: MaxBriefPerUID, MaxOpen: MaxOpen, MaxOpenPerUID: MaxOpenPerUID}

// socketName names the socket in logs and errors.
const socketName = "agent socket"

// Server serves the agent socket: one MCP session per connection, with
// the connection's principal, over the table's operations. Set its
// fields, then call Serve.
//
// Admission: a connection is accepted at once; its principal is the one
// Rules give its peer (narrowed by its preface). A peer without one is
// answered at once with one line saying why (id null, CodeRefused,
// reason not_authorized), closed and recorded (EventRefused). A
// principal then gets a place (a session) by the limits above, the last
// places kept for high and max trust; without one it gets a brief
// session, within BriefFor and BriefMessages, whose tools/list has only
// estop_trip and where every other tool call is refused busy naming the
// limit, so that an agent over its caps can still stop the body; past
// the brief caps, one line saying why (reason busy), and it is closed.
type Server struct {
	Table *awareness.Table
	// Caps gives the action tools their capabilities.
	Caps  Capabilities
	Rules *Rules
	// Sessions watches each connection's heartbeat; its onEnd must call
	// Ended so that a silent session's connection is closed.
	Sessions *act.Sessions
	// IdleAnswer is how long a ping of a session that runs nothing waits
	// for its answer (0: DefaultIdleAnswer or ten heartbeat windows,
	// whichever is longer).
	IdleAnswer time.Duration
	// Hub, when not nil, pushes observations to every session and keeps
	// them for its drain tool.
	Hub *Hub
	// Store and Registry, when not nil, say when the table's resources
	// change: the events the ledger commits, the channels' changes.
	Store    *ledger.Store
	Registry *body.Registry
	// Record, when not nil, writes an event (a refused peer).
	Record  func(ledger.Event)
	Log     *slog.Logger
	Version string

	// cred reads a connection's peer (nil: edge.PeerCred); tests replace
	// it.
	cred func(net.Conn) (uid, gid int)

	once sync.Once
	e    *edge.Edge

	mu       sync.Mutex
	conns    map[string]io.Closer // by session
	watchers map[string]*watcher  // by session
	refused  map[int]*refusedTally
	n        uint64
}

type refusedTally struct {
	last   time.Time
	folded int
}

// Listen opens the agent socket at path, mode 0660, in group gid (-1:
// the daemon's); see edge.Listen.
func Listen(path string, gid int) (net.Listener, error) { return edge.Listen(socketName, path, gid) }

// edge is the server's admission, made on first use.
func (s *Server) edge() *edge.Edge {
	s.once.Do(func() {
		s.e = &edge.Edge{What: socketName, Limits: limits, Log: s.Log, Refusal: refusalOf, Cred: s.cred}
	})
	return s.e
}

// Serve accepts connections on ln until ctx is done, then closes every
// connection and waits for their sessions to end.
func (s *Server) Serve(ctx context.Context, ln net.Listener) {
	fctx, cancel := context.WithCancel(ctx)
	var following sync.WaitGroup
	following.Go(func() { s.follow(fctx) })
	defer func() {
		cancel()
		following.Wait()
	}()
	s.edge().Serve(ctx, ln, s.serveConn)
}

// answerGrace is how long, past the heartbeat window, a session whose
// peer has ended its side (stdin closed behind `tobe-body stdio`) is kept
// to answer the calls it read before: within the window what they run
// finishes as it would (a session that cannot be heard from keeps its
// actions that long, the deadman's rule); past it the deadman stops them,
// and a stopped action is answered in milliseconds (outputs safe, a
// record, a read-back). A call that is still unanswered then (a long
// poll) is cancelled unanswered, and the connection closes.
const answerGrace = time.Second

// hangUp is a session's connection as Ended closes it: at once, unless
// the peer has ended its side already; the Transport's drain then closes
// it once the calls read are answered, bounded by the heartbeat window
// and answerGrace.
type hangUp struct {
	c net.Conn
	t *Transport
}

func (h hangUp) Close() error {
	select {
	case <-h.t.Ended():
		return nil
	default:
		return h.c.Close()
	}
}

// Ended closes the connection of a session that ended silent (the
// Sessions' onEnd calls it); one that closed is gone already, and one
// whose peer ended its side is left to answer what it read (hangUp).
func (s *Server) Ended(e act.SessionEnd) {
	s.mu.Lock()
	c := s.conns[e.Session]
	s.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// serveConn finds who is at the other end of c and answers it as its
// admission says.
func (s *Server) serveConn(ctx context.Context, c net.Conn, uid, gid int) {
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
	t := s.edge().Admit(uid, p, nil)
	defer t.Release()
	if t.Refusal != nil {
		s.edge().Warn(uid, "a connection without a place", "gid", gid, "subject", p.Subject, "brief", t.As == edge.Brief, "why", t.Refusal.Detail)
	}
	rwc := struct {
		io.Reader
		io.Writer
		io.Closer
	}{io.MultiReader(bytes.NewReader(rest), br), c, c}
	switch t.As {
	case edge.Served:
		s.session(ctx, c, rwc, p, uid)
	case edge.Brief:
		s.brief(ctx, rwc, p, t.Refusal)
	default:
		s.edge().TurnAway(c, t.Refusal)
	}
}

// newMCP is an MCP server with the tools of principal p; tune, when not
// nil, sets more of its options.
func (s *Server) newMCP(p act.Principal, instructions string, tune func(*mcp.ServerOptions)) (*mcp.Server, error) {
	opts := &mcp.ServerOptions{Logger: slog.New(warnings{s.Log.Handler()}), Instructions: instructions,
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}}}
	if tune != nil {
		tune(opts)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "tobe-body", Version: s.Version}, opts)
	if err := addTools(srv, s.Table, s.Caps, p); err != nil {
		s.Log.Error("agent tools", "err", err)
		return nil, err
	}
	return srv, nil
}

// session runs one connection's session, on a place, to its end.
func (s *Server) session(ctx context.Context, c net.Conn, rwc io.ReadWriteCloser, p act.Principal, uid int) {
	session := p.Session
	res := &resources{s: s, p: p}
	srv, err := s.newMCP(p, "", res.serverOptions)
	if err != nil {
		return
	}
	if s.Hub != nil {
		res.sub = s.Hub.join(session, p)
		defer s.Hub.leave(session)
		addDrain(srv, res.sub)
	}
	sub := res.sub
	res.install(srv)
	var heard atomic.Int64 // when the last message came (UnixNano)
	heard.Store(time.Now().UnixNano())
	t := NewTransport(rwc, TransportOptions{OnMessage: func() {
		heard.Store(time.Now().UnixNano())
		s.Sessions.Beat(session)
	},
		OnBadLine: func(code int, why string) {
			s.Log.Debug("agent: a bad line", "session", session, "code", code, "why", why)
		},
		Drain: s.Sessions.Window() + answerGrace})
	defer t.Close()
	srv.AddReceivingMiddleware(callerCancels(t))
	s.mu.Lock()
	if s.conns == nil {
		s.conns, s.watchers = map[string]io.Closer{}, map[string]*watcher{}
	}
	s.conns[session], s.watchers[session] = hangUp{c: c, t: t}, res.w
	s.mu.Unlock()
	s.Sessions.Beat(session)
	defer func() {
		s.mu.Lock()
		delete(s.conns, session)
		delete(s.watchers, session)
		s.mu.Unlock()
		if ids := s.Sessions.End(session); len(ids) > 0 {
			s.Log.Warn("agent session closed: its actions stopped", "session", session, "subject", p.Subject, "cancelled", ids)
		}
	}()
	s.Log.Info("agent connected", "session", session, "subject", p.Subject, "trust", p.Trust, "uid", uid)
	ss, err := srv.Connect(ctx, t, nil)
	if err != nil {
		s.Log.Warn("agent session", "session", session, "err", err)
		return
	}
	stop := context.AfterFunc(ctx, func() { ss.Close() })
	defer stop()
	kctx, stopPings := context.WithCancel(ctx)
	var pinging sync.WaitGroup
	pinging.Go(func() { s.keepAlive(kctx, ss, session, &heard) })
	pinging.Go(func() { res.w.run(kctx) })
	pinging.Go(func() {
		// Once the peer's side has ended, no answer to a ping can come:
		// the deadman judges the session from its last message.
		select {
		case <-t.Ended():
			stopPings()
		case <-kctx.Done():
		}
	})
	defer func() {
		stopPings()
		pinging.Wait()
	}()
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

// keepAlive pings the session whenever it has been silent for half the
// heartbeat window, and waits for the answer: any answer, an error too,
// shows the link lives (and beats, as every message does). While the
// session runs something it waits the other half of the window; one that
// runs nothing it waits IdleAnswer (a late answer from a busy machine must
// not cut off an agent that holds nothing, and the deadman guards what it
// starts meanwhile). A session that does not answer in time is lost: what
// it runs stops, the end is recorded (unanswered_ping), and its
// connection closes. So an agent that thinks between calls stays as long
// as its client answers pings, as the MCP SDKs' clients do, and a frozen
// client's actions stop within the window. It returns when ctx ends or
// the session closes.
func (s *Server) keepAlive(ctx context.Context, ss *mcp.ServerSession, session string, heard *atomic.Int64) {
	half := s.Sessions.Window() / 2
	for {
		if wait := time.Until(time.Unix(0, heard.Load()).Add(half)); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		if stateless(ss) && !s.Sessions.Runs(session) {
			// The revision has no ping, and a session that runs nothing
			// holds nothing: it ends with its link.
			heard.Store(time.Now().UnixNano())
			continue
		}
		within := half
		if !s.Sessions.Runs(session) {
			within = s.idleAnswer()
		}
		pctx, cancel := context.WithTimeout(ctx, within)
		err := ss.Ping(pctx, nil)
		cancel()
		var answered *jsonrpc.Error
		switch {
		case ctx.Err() != nil:
			return
		case err == nil || errors.As(err, &answered):
			heard.Store(time.Now().UnixNano())
		case errors.Is(err, context.DeadlineExceeded):
			ids := s.Sessions.Lost(session, "unanswered_ping")
			s.Log.Warn("agent session lost: a ping went unanswered", "session", session, "within", within, "cancelled", ids)
			ss.Close()
			return
		default:
			return // the session is closing
		}
	}
}

// DefaultIdleAnswer is how long the body waits for the answer to a ping
// of a session that runs nothing, at least (IdleAnswer).
const DefaultIdleAnswer = 30 * time.Second

// idleAnswer is IdleAnswer, or the longer of DefaultIdleAnswer and ten
// heartbeat windows.
func (s *Server) idleAnswer() time.Duration {
	if s.IdleAnswer > 0 {
		return s.IdleAnswer
	}
	return max(DefaultIdleAnswer, 10*s.Sessions.Window())
}

// Stateless is the first protocol revision without initialize, ping or
// sessions (SEP-2575).
const Stateless = "2026-07-28"

// stateless tells whether the session speaks Stateless or later.
func stateless(ss *mcp.ServerSession) bool {
	ip := ss.InitializeParams()
	return ip != nil && ip.ProtocolVersion >= Stateless
}

// brief runs the brief session of a principal without a place: at most
// BriefFor and BriefMessages messages; tools/list has only the table's
// stop tools (estop_trip), and a call of any other tool is refused busy
// with the refusal's detail. It is no session of Sessions (a stop needs
// no heartbeat) and gets no observations.
func (s *Server) brief(ctx context.Context, rwc io.ReadWriteCloser, p act.Principal, refusal *awareness.Error) {
	srv, err := s.newMCP(p, fmt.Sprintf("busy: %s; this connection has no place, and only the e-stop trip is served on it", refusal.Detail), nil)
	if err != nil {
		rwc.Close()
		return
	}
	srv.AddReceivingMiddleware(onlyStops(s.stopTools(), refusal))
	ctx, cancel := context.WithTimeout(ctx, BriefFor)
	defer cancel()
	var read atomic.Int32
	t := NewTransport(rwc, TransportOptions{OnMessage: func() {
		if read.Add(1) > BriefMessages {
			cancel()
		}
	}})
	defer t.Close()
	ss, err := srv.Connect(ctx, t, nil)
	if err != nil {
		return
	}
	stop := context.AfterFunc(ctx, func() { ss.Close() })
	defer stop()
	ss.Wait()
}

// stopTools are the names of the tools of the table's Stop operations.
func (s *Server) stopTools() map[string]bool {
	stops := map[string]bool{}
	for _, e := range s.Table.Entries() {
		if e.Stop && e.Tool.Name != "" {
			stops[e.Tool.Name] = true
		}
	}
	return stops
}

// onlyStops lets through the calls of the stop tools, and lists only
// them; any other tool's call is answered busy (the refusal), as a tool
// result, without running.
func onlyStops(stops map[string]bool, refusal *awareness.Error) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch call, _ := req.(*mcp.CallToolRequest); {
			case method == "tools/call" && call != nil && !stops[call.Params.Name]:
				busy := *refusal
				busy.Op = call.Params.Name
				return toolReply(call, Content{Status: "error", Error: &busy}), nil
			case method == "tools/list":
				res, err := next(ctx, method, req)
				if l, ok := res.(*mcp.ListToolsResult); ok && err == nil {
					l.Tools = slices.DeleteFunc(l.Tools, func(t *mcp.Tool) bool { return !stops[t.Name] })
				}
				return res, err
			}
			return next(ctx, method, req)
		}
	}
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
// line, whose data is the refusal (reason not_authorized, or busy).
const CodeRefused = -32001

// refusalOf is the JSON-RPC error of a connection's refusal: its reason
// and detail as the message, and itself, as op "connect", as the data.
func refusalOf(r *awareness.Error) *edge.Error {
	e := *r
	e.Op = "connect"
	return &edge.Error{Code: CodeRefused, Message: string(e.Reason) + ": " + e.Detail, Data: &e}
}

// refuse answers a peer that is no agent once, closes, and records it
// (at most once a minute per uid).
func (s *Server) refuse(c net.Conn, uid, gid int, name, why string) {
	s.edge().TurnAway(c, &awareness.Error{Reason: awareness.ReasonNotAuthorized, Detail: why})
	s.edge().Warn(uid, "peer refused", "gid", gid, "why", why)
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

// warnings is the SDK's log: its warnings and errors only (it tells of
// every subscription and notification at info).
type warnings struct{ slog.Handler }

func (w warnings) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && w.Handler.Enabled(ctx, l)
}

func (w warnings) WithAttrs(as []slog.Attr) slog.Handler { return warnings{w.Handler.WithAttrs(as)} }
func (w warnings) WithGroup(name string) slog.Handler    { return warnings{w.Handler.WithGroup(name)} }
