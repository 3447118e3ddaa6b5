package admin

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
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

// Call runs op with in on the daemon and returns its output. An
// operation's refusal comes back as an *awareness.Error with its reason;
// a daemon that is not there as ErrNotRunning.
func Call[In, Out any](ctx context.Context, c *Client, op awareness.Op[In, Out], in In) (Out, error) {
	var out Out
	raw, err := c.call(ctx, op.Name, in)
	if err != nil {
		return out, err
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return out, fmt.Errorf("admin socket %s: %s: reading the answer: %w", c.Path, op.Name, err)
	}
	return out, nil
}

func (c *Client) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	if _, ok := ctx.Deadline(); !ok {
		t := c.Timeout
		if t <= 0 {
			t = 5 * time.Second
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t)
		defer cancel()
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.Path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("%w with admin socket %s (start it with 'tobe-body run', or pass --data or --socket)", ErrNotRunning, c.Path)
		}
		return nil, fmt.Errorf("admin socket %s: %w", c.Path, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	p, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	req, err := json.Marshal(request{JSONRPC: "2.0", ID: json.RawMessage("1"), Method: method, Params: p})
	if err != nil {
		return nil, err
	}
	_, werr := conn.Write(append(req, '\n'))
	var resp struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int              `json:"code"`
			Message string           `json:"message"`
			Data    *awareness.Error `json:"data"`
		} `json:"error"`
	}
	// A daemon that turned the connection away has said why before
	// closing it, so the answer is read even when the request could not
	// be written.
	if err := json.NewDecoder(bufio.NewReader(conn)).Decode(&resp); err != nil {
		if werr != nil {
			return nil, fmt.Errorf("admin socket %s: %w", c.Path, werr)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("admin socket %s: %s: %w", c.Path, method, ctx.Err())
		}
		return nil, fmt.Errorf("admin socket %s: reading the answer: %w", c.Path, err)
	}
	if e := resp.Error; e != nil {
		if e.Data != nil && e.Data.Reason != "" {
			return nil, e.Data
		}
		return nil, &RPCError{Code: e.Code, Message: e.Message}
	}
	return resp.Result, nil
}
