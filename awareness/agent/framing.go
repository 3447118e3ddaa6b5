package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tobe-body/tobe-body/awareness/edge"
)

// DefaultMaxLine is the longest line, in bytes without its newline, that a
// Transport reads when TransportOptions.MaxLine is 0.
const DefaultMaxLine = 1 << 20

// ObservationMethod is the method of the notification that pushes an
// observation to the agent.
const ObservationMethod = "notifications/tobe/observation"

// ErrClosed is returned by Write and Notify after the Transport was closed.
// It wraps mcp.ErrConnectionClosed, so the SDK treats it as a closed
// connection.
var ErrClosed = fmt.Errorf("agent: %w", mcp.ErrConnectionClosed)

// errConnected is returned by a second Connect.
var errConnected = errors.New("agent: the transport is already connected")

// readBufSize is the size of the buffered reader under the line reader:
// what is read from the stream at a time, beside the line itself.
const readBufSize = 64 << 10

// TransportOptions configure a Transport. The zero value is valid.
type TransportOptions struct {
	// MaxLine is the longest line read, in bytes without its newline; 0
	// means DefaultMaxLine. A longer line is answered with -32600 and
	// skipped to its newline without being buffered.
	MaxLine int

	// OnMessage, if set, is called for every well-formed message read,
	// before it is handed to the SDK: the session's heartbeat. It runs on
	// the Transport's reading goroutine and must not block.
	OnMessage func()

	// OnBadLine, if set, is called for every line refused, with the
	// JSON-RPC code and why (the text after "Parse error: " or "Invalid
	// Request: "). It is called also for a malformed response from the
	// peer, which is dropped without an answer. It runs on the reading
	// goroutine and must not block.
	OnBadLine func(code int, why string)

	// Drain is how long, once the stream has ended (the peer closed its
	// side, or half-closed it to say it has nothing more to send), Read
	// keeps that end from the SDK while calls read before it are still
	// unanswered, so that their answers are written; 0: none, Read
	// returns io.EOF at once and the SDK drops the answers still to come.
	// The SDK cancels what is still running once Read returns io.EOF.
	Drain time.Duration
}

// Transport serves MCP over one byte stream (an accepted Unix connection,
// or stdin/stdout), one JSON-RPC message a line. It implements
// mcp.Transport.
//
// Unlike the SDK's own IOTransport, bad input does not end the session.
// Each bad line is answered with one JSON-RPC error, with id null unless
// the line's id could be read, and reading goes on at the next line:
//
//   - a line longer than MaxLine: -32600 "Invalid Request: a line of more
//     than N bytes", skipped to its newline without being buffered;
//   - not valid UTF-8, a NUL byte, not JSON, or data after the JSON value:
//     -32700 "Parse error: ...";
//   - a batch (a JSON array; MCP 2025-06-18 has none): -32600 "Invalid
//     Request: batches are not supported";
//   - JSON that is not a JSON-RPC 2.0 request or notification (not an
//     object, no "jsonrpc":"2.0", no method or one not a string, an id that
//     is not a string or an integer of at most 2^53-1 in magnitude, params
//     that are neither an object nor an array): -32600 "Invalid Request: ...".
//
// A line that looks like a response (no method, a result or an error) but
// is malformed is dropped and only reported to OnBadLine: answering it
// could start an endless exchange of errors with a peer that does the
// same. Empty and whitespace-only lines are ignored. A last line without
// its newline, at the end of the stream, is read like any other line;
// then Read returns io.EOF. Unknown methods and params of the wrong type
// are passed to the SDK, which answers them.
//
// Every message written, the SDK's, Notify's and the Transport's own
// errors, is one line ending in '\n', written whole under one lock, so
// lines never interleave; the stream carries nothing else.
type Transport struct {
	rwc     io.ReadWriteCloser
	maxLine int
	opts    TransportOptions

	mu        sync.Mutex // guards connected and isClosed
	connected bool
	isClosed  bool

	writeMu sync.Mutex // serialises writes to rwc

	incoming chan jsonrpc.Message // from the reading goroutine to Read
	readDone chan struct{}        // closed when the reading goroutine ends
	readErr  error                // why it ended; set before readDone closes

	closed   chan struct{} // closed by Close
	closeErr error
	reading  sync.WaitGroup   // the reading goroutine
	lines    *edge.LineReader // the reading goroutine's, set by Connect

	// callMu guards calls and byExtra: the calls read and not yet
	// answered (cancel.go).
	callMu   sync.Mutex
	calls    map[jsonrpc.ID]*pendingCall
	byExtra  map[*mcp.RequestExtra]*pendingCall
	answered chan struct{} // signalled (never blocking) when a call is answered
	endedAt  time.Time     // when the stream ended; set before readDone closes
}

// NewTransport returns a Transport over rwc, which the Transport owns:
// Close closes it. rwc's Close must make a pending Read return (a
// net.Conn's does, and an io.Pipe's); Close waits for the reading
// goroutine, which ends when rwc's Read returns an error.
func NewTransport(rwc io.ReadWriteCloser, opts TransportOptions) *Transport {
	maxLine := opts.MaxLine
	if maxLine <= 0 {
		maxLine = DefaultMaxLine
	}
	return &Transport{
		rwc:      rwc,
		maxLine:  maxLine,
		opts:     opts,
		incoming: make(chan jsonrpc.Message),
		readDone: make(chan struct{}),
		closed:   make(chan struct{}),
		calls:    map[jsonrpc.ID]*pendingCall{},
		byExtra:  map[*mcp.RequestExtra]*pendingCall{},
		answered: make(chan struct{}, 1),
	}
}

// Connect implements mcp.Transport: it starts reading the stream and
// returns the connection the SDK reads and writes. It may be called once;
// a second call returns an error. The connection's Close is the
// Transport's.
func (t *Transport) Connect(ctx context.Context) (mcp.Connection, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.isClosed:
		return nil, ErrClosed
	case t.connected:
		return nil, errConnected
	}
	t.connected = true
	t.lines = edge.NewLineReader(bufio.NewReaderSize(t.rwc, readBufSize), t.maxLine)
	t.reading.Add(1)
	go t.readLoop()
	return (*conn)(t), nil
}

// Notify writes a notification to the peer: a request without id, with
// method and params marshalled as JSON (nil params are left out). It is
// safe to call concurrently with the SDK's writes; the line is written
// whole. It returns ErrClosed after Close, ctx's error if ctx is done
// before the write, or the stream's write error.
func (t *Transport) Notify(ctx context.Context, method string, params any) error {
	var raw json.RawMessage
	if params != nil {
		b, err := json.Marshal(params)
		if err != nil {
			return fmt.Errorf("agent: notify %s: marshalling params: %w", method, err)
		}
		raw = b
	}
	return t.writeMessage(ctx, &jsonrpc.Request{Method: method, Params: raw})
}

// Close closes the stream once, makes a pending or later Read return
// io.EOF and later writes ErrClosed, and waits for the reading goroutine.
// It is safe to call more than once and concurrently; each call returns
// the stream's Close error.
func (t *Transport) Close() error {
	t.mu.Lock()
	if !t.isClosed {
		t.isClosed = true
		close(t.closed)
		t.closeErr = t.rwc.Close()
	}
	t.mu.Unlock()
	t.reading.Wait()
	return t.closeErr
}

// conn is the Transport seen as an mcp.Connection.
type conn Transport

// Read returns the next well-formed message from the stream. It returns
// io.EOF once the stream ended (after the drain: TransportOptions.Drain)
// or the Transport was closed, the stream's read error if it failed, or
// ctx's error.
func (c *conn) Read(ctx context.Context) (jsonrpc.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case msg := <-c.incoming:
		return msg, nil
	case <-c.readDone:
		if errors.Is(c.readErr, io.EOF) {
			(*Transport)(c).drain(ctx)
		}
		return nil, c.readErr
	case <-c.closed:
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Write writes msg as one line. It is safe to call concurrently.
func (c *conn) Write(ctx context.Context, msg jsonrpc.Message) error {
	return (*Transport)(c).writeMessage(ctx, msg)
}

// Close closes the Transport.
func (c *conn) Close() error { return (*Transport)(c).Close() }

// SessionID returns "": a stream is one session.
func (c *conn) SessionID() string { return "" }

// writeMessage encodes msg and writes it as one line.
func (t *Transport) writeMessage(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r, ok := msg.(*jsonrpc.Response); ok && r.ID.IsValid() {
		defer t.answer(r.ID)
	}
	if line, ok := resultLine(msg); ok {
		return t.writeLine(line)
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("agent: encoding a message: %w", err)
	}
	return t.writeLine(append(data, '\n'))
}

// resultLine is the line of a successful response, written around its
// result as it is: the SDK marshalled the result itself, and encoding it
// again as part of the envelope (which jsonrpc.EncodeMessage does)
// would only compact and check a tool's whole output once more. Any
// other message, and a response whose result or id is not as the SDK
// makes them, is left to jsonrpc.EncodeMessage (ok false).
func resultLine(msg jsonrpc.Message) (line []byte, ok bool) {
	r, isResp := msg.(*jsonrpc.Response)
	if !isResp || r.Error != nil || len(r.Result) == 0 || !r.ID.IsValid() {
		return nil, false
	}
	line = make([]byte, 0, len(r.Result)+64)
	line = append(line, `{"jsonrpc":"2.0","id":`...)
	switch id := r.ID.Raw().(type) {
	case int64:
		line = strconv.AppendInt(line, id, 10)
	case string:
		// As the SDK encodes it: HTML characters are not escaped.
		var q bytes.Buffer
		enc := json.NewEncoder(&q)
		enc.SetEscapeHTML(false)
		if enc.Encode(id) != nil {
			return nil, false
		}
		line = append(line, bytes.TrimSuffix(q.Bytes(), []byte{'\n'})...)
	default:
		return nil, false
	}
	line = append(line, `,"result":`...)
	line = append(line, r.Result...)
	return append(line, '}', '\n'), true
}

// writeLine writes line, which ends in its only newline, in one Write
// under the write lock. encoding/json's output never has a newline in
// it; the check is for the line that would break the framing anyway.
func (t *Transport) writeLine(line []byte) error {
	if i := bytes.IndexByte(line, '\n'); i != len(line)-1 {
		return errors.New("agent: a message encoded with a newline in it")
	}
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	select {
	case <-t.closed:
		return ErrClosed
	default:
	}
	if _, err := t.rwc.Write(line); err != nil {
		select {
		case <-t.closed:
			return ErrClosed
		default:
		}
		return fmt.Errorf("agent: writing to the stream: %w", err)
	}
	return nil
}

// readLoop reads lines until the stream ends or fails, hands each
// well-formed message to Read and answers bad lines. It is the
// Transport's only reading goroutine; Close waits for it.
func (t *Transport) readLoop() {
	defer t.reading.Done()
	defer close(t.readDone)
	defer func() { t.endedAt = time.Now() }()
	for {
		line, err := t.lines.Next()
		var msg jsonrpc.Message
		var bad *edge.Bad
		switch {
		case errors.Is(err, edge.ErrLineTooLong):
			bad = edge.LongLine(t.maxLine)
		case err != nil:
			select {
			case <-t.closed:
				t.readErr = io.EOF
			default:
				if errors.Is(err, io.EOF) {
					t.readErr = io.EOF
				} else {
					t.readErr = fmt.Errorf("agent: reading the stream: %w", err)
				}
			}
			return
		default:
			msg, bad = t.parse(line)
		}
		switch {
		case bad != nil:
			if werr := t.refuse(bad); werr != nil {
				t.readErr = werr
				return
			}
		case msg != nil:
			if t.opts.OnMessage != nil {
				t.opts.OnMessage()
			}
			if req, ok := msg.(*jsonrpc.Request); ok {
				t.track(req)
			}
			select {
			case t.incoming <- msg:
			case <-t.closed:
				t.readErr = io.EOF
				return
			}
		}
	}
}

// The JSON-RPC error codes the Transport answers itself.
const (
	CodeParseError     = edge.CodeParse          // -32700
	CodeInvalidRequest = edge.CodeInvalidRequest // -32600
)

// refuse reports a bad line to OnBadLine and, unless it is a dropped
// response, answers it. It returns the error of writing the answer: then
// the stream is gone (io.EOF once the Transport was closed).
func (t *Transport) refuse(b *edge.Bad) error {
	if t.opts.OnBadLine != nil {
		t.opts.OnBadLine(b.Code, b.Why)
	}
	if b.Drop {
		return nil
	}
	err := t.writeLine(edge.ErrorLine(b.ID, b.Error()))
	if errors.Is(err, ErrClosed) {
		return io.EOF
	}
	return err
}

// parse checks one line and decodes it (the envelope by edge.Parse). It
// returns the message, or why the line is refused, or neither for a
// line of whitespace.
func (t *Transport) parse(line []byte) (jsonrpc.Message, *edge.Bad) {
	if edge.Blank(line) {
		return nil, nil
	}
	m, bad := edge.Parse(line)
	switch {
	case bad != nil:
		return nil, bad
	case m.Response:
		msg, err := jsonrpc.DecodeMessage(bytes.Clone(line))
		if err != nil {
			return nil, &edge.Bad{Code: CodeInvalidRequest, Why: "response dropped: " + err.Error(), Drop: true}
		}
		return msg, nil
	}
	invalid := func(why string) (jsonrpc.Message, *edge.Bad) {
		return nil, &edge.Bad{Code: CodeInvalidRequest, Why: why, ID: m.ID}
	}
	if p := m.Params; p != nil {
		if c := p[0]; c != '{' && c != '[' && string(p) != "null" {
			return invalid("params must be an object or an array")
		}
	}
	// The request as jsonrpc.DecodeMessage would make it, from what was
	// read (its decoder allocates 32 KiB a message).
	req := &jsonrpc.Request{Method: m.Method, Params: m.Params}
	if m.ID != nil {
		var v any
		if err := json.Unmarshal(m.ID, &v); err != nil {
			return invalid("the id: " + err.Error())
		}
		// edge.Parse allowed integers of magnitude up to edge.MaxID
		// only, exact in the float64 they decode to, as the SDK reads
		// them.
		var err error
		if req.ID, err = jsonrpc.MakeID(v); err != nil {
			return invalid(err.Error())
		}
	}
	return req, nil
}
