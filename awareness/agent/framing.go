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
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
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
	reading  sync.WaitGroup // the reading goroutine
	lines    *lineReader    // the reading goroutine's, set by Connect
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
	t.lines = newLineReader(t.rwc, t.maxLine)
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
// io.EOF once the stream ended or the Transport was closed, the stream's
// read error if it failed, or ctx's error.
func (c *conn) Read(ctx context.Context) (jsonrpc.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case msg := <-c.incoming:
		return msg, nil
	case <-c.readDone:
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
	lr := t.lines
	for {
		line, tooLong, err := lr.next()
		if tooLong {
			bad := &badLine{code: CodeInvalidRequest, why: fmt.Sprintf("a line of more than %d bytes", t.maxLine)}
			if werr := t.refuse(bad); werr != nil {
				t.readErr = werr
				return
			}
		} else if line != nil {
			msg, bad := t.parse(line)
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
				select {
				case t.incoming <- msg:
				case <-t.closed:
					t.readErr = io.EOF
					return
				}
			}
		}
		if err != nil {
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
		}
	}
}

// The JSON-RPC error codes the Transport answers itself.
const (
	CodeParseError     = jsonrpc.CodeParseError     // -32700
	CodeInvalidRequest = jsonrpc.CodeInvalidRequest // -32600
)

// badLine is why a line was refused, and the id to answer with (nil for
// null); a badLine with noAnswer is only reported.
type badLine struct {
	code     int
	why      string
	id       json.RawMessage
	noAnswer bool
}

// refuse reports a bad line to OnBadLine and, unless it is a dropped
// response, answers it. It returns the error of writing the answer: then
// the stream is gone (io.EOF once the Transport was closed).
func (t *Transport) refuse(b *badLine) error {
	if t.opts.OnBadLine != nil {
		t.opts.OnBadLine(b.code, b.why)
	}
	if b.noAnswer {
		return nil
	}
	err := t.writeLine(append(errorLine(b.code, b.why, b.id), '\n'))
	if errors.Is(err, ErrClosed) {
		return io.EOF
	}
	return err
}

// errorLine is the JSON-RPC error response for a refused line. The SDK's
// encoder leaves out an id that is null, which an error response must
// carry, so it is built here.
func errorLine(code int, why string, id json.RawMessage) []byte {
	prefix := "Invalid Request: "
	if code == CodeParseError {
		prefix = "Parse error: "
	}
	if id == nil {
		id = json.RawMessage("null")
	}
	resp := struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id}
	resp.Error.Code = code
	resp.Error.Message = prefix + why
	data, err := json.Marshal(resp)
	if err != nil {
		// Every field is a string, an int or an id checked to be valid
		// JSON, so this cannot happen.
		panic(fmt.Sprintf("agent: encoding an error response: %v", err))
	}
	return data
}

// maxSafeID is the largest integer id the SDK, which reads ids through a
// float64, carries back unchanged.
const maxSafeID = 1<<53 - 1

// parse checks one line and decodes it. It returns the message, or why the
// line is refused, or neither for a line of whitespace.
func (t *Transport) parse(line []byte) (jsonrpc.Message, *badLine) {
	trimmed := bytes.TrimLeft(line, " \t\r\n")
	if len(trimmed) == 0 {
		return nil, nil
	}
	switch {
	case bytes.IndexByte(line, 0) >= 0:
		return nil, &badLine{code: CodeParseError, why: "the line contains a NUL byte"}
	case !utf8.Valid(line):
		return nil, &badLine{code: CodeParseError, why: "the line is not valid UTF-8"}
	case !json.Valid(line):
		if json.NewDecoder(bytes.NewReader(line)).Decode(new(json.RawMessage)) == nil {
			return nil, &badLine{code: CodeParseError, why: "data after the JSON value"}
		}
		return nil, &badLine{code: CodeParseError, why: "not JSON"}
	case trimmed[0] == '[':
		// json.Valid checked the whole array without decoding its
		// elements; none is decoded here either.
		return nil, &badLine{code: CodeInvalidRequest, why: "batches are not supported"}
	case trimmed[0] != '{':
		return nil, &badLine{code: CodeInvalidRequest, why: "not a JSON-RPC message object"}
	}

	// The envelope is read as raw members so that a key's presence, and
	// its exact spelling, are seen (a struct would match keys regardless
	// of case, which the SDK does not).
	var env map[string]json.RawMessage
	if err := json.Unmarshal(line, &env); err != nil {
		return nil, &badLine{code: CodeInvalidRequest, why: "not a JSON-RPC message object"}
	}
	id, idOK, idWhy := readID(env)
	_, hasMethod := env["method"]
	_, hasResult := env["result"]
	_, hasError := env["error"]

	if !hasMethod && (hasResult || hasError) {
		// A response from the peer: never answered, only reported.
		drop := func(why string) *badLine {
			return &badLine{code: CodeInvalidRequest, why: "response dropped: " + why, noAnswer: true}
		}
		switch {
		case !versionOK(env):
			return nil, drop(`no "jsonrpc":"2.0"`)
		case !idOK:
			return nil, drop(idWhy)
		case id == nil:
			return nil, drop("no id")
		case hasResult && hasError:
			return nil, drop("both a result and an error")
		}
		msg, err := jsonrpc.DecodeMessage(bytes.Clone(line))
		if err != nil {
			return nil, drop(err.Error())
		}
		return msg, nil
	}

	// A request or a notification.
	answerID := id
	if !idOK {
		answerID = nil
	}
	invalid := func(why string) *badLine {
		return &badLine{code: CodeInvalidRequest, why: why, id: answerID}
	}
	if !versionOK(env) {
		return nil, invalid(`no "jsonrpc":"2.0"`)
	}
	if !idOK {
		return nil, invalid(idWhy)
	}
	if !hasMethod {
		return nil, invalid("no method")
	}
	var method string
	if err := json.Unmarshal(env["method"], &method); err != nil {
		return nil, invalid("the method is not a string")
	}
	p, ok := env["params"]
	if ok {
		if c := p[0]; c != '{' && c != '[' && string(p) != "null" {
			return nil, invalid("params must be an object or an array")
		}
	}
	// The request as jsonrpc.DecodeMessage would make it, from what was
	// read above (its decoder allocates 32 KiB a message).
	req := &jsonrpc.Request{Method: method, Params: p}
	if id != nil {
		var v any
		if err := json.Unmarshal(id, &v); err != nil {
			return nil, invalid("the id: " + err.Error())
		}
		// readID allowed integers of magnitude up to 2^53-1 only, exact
		// in the float64 they decode to, as the SDK reads them.
		var err error
		if req.ID, err = jsonrpc.MakeID(v); err != nil {
			return nil, invalid(err.Error())
		}
	}
	return req, nil
}

// versionOK reports whether env has "jsonrpc":"2.0".
func versionOK(env map[string]json.RawMessage) bool {
	var v string
	return json.Unmarshal(env["jsonrpc"], &v) == nil && v == "2.0"
}

// readID returns the envelope's id as raw JSON (nil when absent), whether
// it is usable, and if not why. An id must be a string or an integer of
// magnitude at most 2^53-1; null is refused, as MCP requires.
func readID(env map[string]json.RawMessage) (id json.RawMessage, ok bool, why string) {
	raw, present := env["id"]
	if !present {
		return nil, true, ""
	}
	switch c := raw[0]; {
	case c == '"':
		return raw, true, ""
	case c == '-' || c >= '0' && c <= '9':
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil || n > maxSafeID || n < -maxSafeID {
			return nil, false, "the id must be a string or an integer of at most 2^53-1"
		}
		return raw, true, ""
	case c == 'n':
		return nil, false, "the id must not be null"
	}
	return nil, false, "the id must be a string or an integer"
}

// lineReader reads lines of at most max bytes, without their newline,
// from a stream. A longer line is skipped to its newline: it is reported,
// never buffered. Its memory is its bufio.Reader and one line.
type lineReader struct {
	br  *bufio.Reader
	max int
	buf []byte

	// peak is the largest capacity buf ever had, for tests.
	peak int
}

func newLineReader(r io.Reader, maxLine int) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, readBufSize), max: maxLine}
}

// next returns the next line without its newline (and without a '\r'
// before it), or tooLong for a line of more than max bytes. A last line
// without a newline is returned with the stream's error; a nil line with
// an error means nothing was left. The line is valid until the next call.
func (r *lineReader) next() (line []byte, tooLong bool, err error) {
	r.buf = r.buf[:0]
	n := 0 // the line's length so far, kept or not
	for {
		chunk, err := r.br.ReadSlice('\n')
		content := bytes.TrimSuffix(chunk, []byte{'\n'})
		n += len(content)
		if !tooLong {
			if n > r.max {
				tooLong = true
				r.buf = r.buf[:0]
			} else {
				if len(r.buf)+len(content) > cap(r.buf) {
					// Grow by doubling, but never past max: the line's
					// buffer is bounded by the longest line kept.
					grown := make([]byte, len(r.buf), min(max(2*cap(r.buf), len(r.buf)+len(content)), r.max))
					copy(grown, r.buf)
					r.buf = grown
				}
				r.buf = append(r.buf, content...)
				r.peak = max(r.peak, cap(r.buf))
			}
		}
		switch {
		case err == nil:
			return bytes.TrimSuffix(r.buf, []byte{'\r'}), tooLong, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case n == 0 && !tooLong:
			return nil, false, err
		case tooLong:
			return nil, true, err
		default:
			return bytes.TrimSuffix(r.buf, []byte{'\r'}), false, err
		}
	}
}
