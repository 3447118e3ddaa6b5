package admin

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/tobe-body/tobe-body/awareness"
)

// Client calls the operations of a daemon's admin socket.
type Client struct {
	Path string
	// Timeout bounds one call when ctx has no deadline; 0 means 5 s.
	Timeout time.Duration
}

// ErrNotRunning: no daemon answers on the socket.
var ErrNotRunning = errors.New("admin: no tobe-body is running")

// RPCError is a JSON-RPC error that is not an operation's refusal
// (parse, request, method and params errors).
type RPCError struct {
	Code    int
	Message string
}

func (e *RPCError) Error() string { return fmt.Sprintf("%s (code %d)", e.Message, e.Code) }

// request is a JSON-RPC 2.0 request as the client writes it; ID nil is
// a notification.
type request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// Call runs op with in on the daemon and returns its output. An
// operation's refusal comes back as an *awareness.Error with its reason;
// a daemon that is not there as ErrNotRunning. A refusal that carries
// the body's record of what it refused (an action the runner refused:
// awareness.Error.Record) comes back with that record as out too, and as
// the error's Record, of type Out.
func Call[In, Out any](ctx context.Context, c *Client, op awareness.Op[In, Out], in In) (Out, error) {
	var out Out
	raw, err := c.call(ctx, op.Name, in)
	if err != nil {
		return recordOf[Out](err), err
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return out, fmt.Errorf("admin socket %s: %s: reading the answer: %w", c.Path, op.Name, err)
	}
	return out, nil
}

// recordOf is the record an operation's refusal err carries, read into
// an Out, which becomes the error's Record; the zero Out when there is
// none, or it is not an Out.
func recordOf[Out any](err error) Out {
	var out Out
	var oe *awareness.Error
	if !errors.As(err, &oe) {
		return out
	}
	raw, ok := oe.Record.(json.RawMessage)
	if !ok {
		return out
	}
	if json.Unmarshal(raw, &out) != nil {
		return *new(Out)
	}
	oe.Record = out
	return out
}

func (c *Client) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	conn, werr, err := c.send(ctx, method, params)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	res, err := c.response(ctx, bufio.NewReader(conn), method, nil)
	if err != nil && werr != nil {
		return nil, werr
	}
	return res, err
}

// bounded is ctx with the client's timeout when it has no deadline.
func (c *Client) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	t := c.Timeout
	if t <= 0 {
		t = 5 * time.Second
	}
	return context.WithTimeout(ctx, t)
}

// send dials the socket and writes one request, id 1. A request that
// could not be written is werr, with the connection still returned: a
// daemon that turned the connection away as it arrived has said why
// before closing it, so the caller reads the answer first and reports
// werr only when there is none.
func (c *Client) send(ctx context.Context, method string, params any) (conn net.Conn, werr, err error) {
	var d net.Dialer
	conn, err = d.DialContext(ctx, "unix", c.Path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, nil, fmt.Errorf("%w with admin socket %s (start it with 'tobe-body run', or pass --data or --socket)", ErrNotRunning, c.Path)
		}
		return nil, nil, fmt.Errorf("admin socket %s: %w", c.Path, err)
	}
	p, err := json.Marshal(params)
	var req []byte
	if err == nil {
		req, err = json.Marshal(request{JSONRPC: "2.0", ID: json.RawMessage("1"), Method: method, Params: p})
	}
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	conn.SetWriteDeadline(time.Now().Add(StreamStall))
	if _, err := conn.Write(append(req, '\n')); err != nil {
		werr = fmt.Errorf("admin socket %s: %w", c.Path, err)
	}
	conn.SetWriteDeadline(time.Time{})
	return conn, werr, nil
}

// response reads lines from br until the response, passing progress
// notifications to progress (when not nil), and returns its result or
// its error.
func (c *Client) response(ctx context.Context, br *bufio.Reader, method string, progress func(done, total int64)) (json.RawMessage, error) {
	for {
		line, err := br.ReadBytes('\n')
		if err != nil && (len(line) == 0 || !errors.Is(err, io.EOF)) {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("admin socket %s: %s: %w", c.Path, method, ctx.Err())
			}
			return nil, fmt.Errorf("admin socket %s: reading the answer: %w", c.Path, err)
		}
		var resp struct {
			Method string          `json:"method"`
			Params ProgressParams  `json:"params"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
				Data    *struct {
					awareness.Error
					Record json.RawMessage `json:"record"` // read into its type by Call
				} `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal(line, &resp); err != nil {
			return nil, fmt.Errorf("admin socket %s: reading the answer: %w", c.Path, err)
		}
		if resp.Method == MethodProgress {
			if progress != nil {
				progress(resp.Params.Done, resp.Params.Total)
			}
			continue
		}
		if resp.Method != "" {
			continue // a notification this client does not know
		}
		if e := resp.Error; e != nil {
			if d := e.Data; d != nil && d.Reason != "" {
				oe := d.Error
				if len(d.Record) > 0 && string(d.Record) != "null" {
					oe.Record = d.Record
				}
				return nil, &oe
			}
			return nil, &RPCError{Code: e.Code, Message: e.Message}
		}
		return resp.Result, nil
	}
}

// CallStream runs a streaming operation (awareness.Entry.Streams) and
// hands its bytes to recv. progress, when not nil, gets the daemon's
// progress notifications while it prepares them. The client's Timeout
// (when ctx has no deadline) bounds the wait for the result, not the
// bytes: each read of those waits at most StreamStall, and ctx ends the
// call at any point. recv gets the result and a reader of exactly the
// result's "bytes"; it may refuse before reading (no room for them):
// its error is returned, and the daemon, whose stream stops, drops the
// connection. A reader that ends short returns io.ErrUnexpectedEOF, and
// bytes recv left unread are an error. Refusals come back as in Call.
func CallStream[In, Out any](ctx context.Context, c *Client, op awareness.Op[In, Out], in In, progress func(done, total int64),
	recv func(out Out, bytes io.Reader) error) (Out, error) {
	var out Out
	wait, cancel := c.bounded(ctx)
	defer cancel()
	conn, werr, err := c.send(wait, op.Name, in)
	if err != nil {
		return out, err
	}
	defer conn.Close()
	sr := &stallReader{conn: conn}
	stop := context.AfterFunc(wait, sr.cancel)
	defer stop()
	br := bufio.NewReaderSize(conn, StreamChunk)
	raw, err := c.response(wait, br, op.Name, progress)
	if err != nil {
		if werr != nil {
			return out, werr
		}
		return recordOf[Out](err), err
	}
	if !stop() { // the wait ended as the result came
		return out, fmt.Errorf("admin socket %s: %s: %w", c.Path, op.Name, wait.Err())
	}
	conn.SetDeadline(time.Time{})
	stop = context.AfterFunc(ctx, sr.cancel)
	defer stop()
	var count struct {
		Bytes *int64 `json:"bytes"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return out, fmt.Errorf("admin socket %s: %s: reading the answer: %w", c.Path, op.Name, err)
	}
	if err := json.Unmarshal(raw, &count); err != nil || count.Bytes == nil || *count.Bytes < 0 {
		return out, fmt.Errorf("admin socket %s: %s: the answer does not say how many bytes follow", c.Path, op.Name)
	}
	sr.r, sr.left = br, *count.Bytes
	if err := recv(out, sr); err != nil {
		if ctx.Err() != nil {
			return out, fmt.Errorf("admin socket %s: %s: %w", c.Path, op.Name, ctx.Err())
		}
		return out, err
	}
	if sr.left > 0 {
		return out, fmt.Errorf("admin socket %s: %s: %d of the answer's bytes were left unread", c.Path, op.Name, sr.left)
	}
	return out, nil
}

// stallReader reads what is left of a stream, each read within
// StreamStall; cancel makes every read from then on fail at once.
type stallReader struct {
	conn net.Conn
	r    io.Reader
	left int64

	mu        sync.Mutex
	cancelled bool
}

func (s *stallReader) cancel() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cancelled = true
	s.conn.SetDeadline(time.Unix(1, 0))
}

func (s *stallReader) Read(p []byte) (int, error) {
	if s.left <= 0 {
		return 0, io.EOF
	}
	s.mu.Lock()
	if s.cancelled {
		s.mu.Unlock()
		return 0, context.Canceled
	}
	s.conn.SetReadDeadline(time.Now().Add(stallTimeout))
	s.mu.Unlock()
	n, err := s.r.Read(p[:min(int64(len(p)), s.left)])
	s.left -= int64(n)
	switch {
	case s.left == 0:
		return n, nil
	case errors.Is(err, io.EOF):
		return n, fmt.Errorf("the connection ended %d bytes short: %w", s.left, io.ErrUnexpectedEOF)
	}
	return n, err
}
