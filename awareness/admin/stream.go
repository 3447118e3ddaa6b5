package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/edge"
)

// Limits of a streaming answer.
const (
	// StreamChunk is how many bytes of a stream are written at once.
	StreamChunk = 64 << 10
	// StreamStall bounds the write of one chunk: a client that takes
	// none for this long is dropped, and what the stream held released.
	// The client bounds each read of the stream by it too.
	StreamStall = 10 * time.Second
)

// stallTimeout is StreamStall; tests shorten it.
var stallTimeout = StreamStall

// MethodProgress is the method of the progress notifications a
// streaming call sends before its response.
const MethodProgress = "progress"

// notification is a JSON-RPC 2.0 notification from the server.
type notification struct {
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

// ProgressParams are a progress notification's params: the call it is
// about (its id) and how far it is, in bytes.
type ProgressParams struct {
	ID    json.RawMessage `json:"id"`
	Done  int64           `json:"done"`
	Total int64           `json:"total"`
}

// progress sends one call's progress notifications without ever holding
// up the operation (which reports while it holds the ledger's read
// transaction): report keeps the latest figures, and a goroutine of its
// own writes them when the connection's writer is free. finish stops it
// after writing the last figures reported, so they come before the
// response.
type progress struct {
	cn   *conn
	id   json.RawMessage
	kick chan struct{}
	stop chan struct{}
	wg   sync.WaitGroup

	mu          sync.Mutex
	done, total int64
	fresh       bool
}

func (cn *conn) startProgress(id json.RawMessage) *progress {
	p := &progress{cn: cn, id: id, kick: make(chan struct{}, 1), stop: make(chan struct{})}
	p.wg.Go(func() {
		for {
			select {
			case <-p.kick:
				p.send()
			case <-p.stop:
				return
			}
		}
	})
	return p
}

// report keeps done and total to send; it never blocks.
func (p *progress) report(done, total int64) {
	p.mu.Lock()
	p.done, p.total, p.fresh = done, total, true
	p.mu.Unlock()
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// send writes the latest figures, if they were not sent yet.
func (p *progress) send() {
	p.mu.Lock()
	params := ProgressParams{ID: p.id, Done: p.done, Total: p.total}
	fresh := p.fresh
	p.fresh = false
	p.mu.Unlock()
	if fresh {
		p.cn.writeLine(notification{JSONRPC: "2.0", Method: MethodProgress, Params: params})
	}
}

// finish stops the sender and writes what it had not sent.
func (p *progress) finish() {
	close(p.stop)
	p.wg.Wait()
	p.send()
}

// callStreaming runs a streaming operation for m with its progress sent as
// notifications.
func (cn *conn) callStreaming(ctx context.Context, e *awareness.Entry, m edge.Message) (any, error) {
	p := cn.startProgress(m.ID)
	res, err := e.Call(awareness.WithProgress(ctx, p.report), cn.p, m.Params)
	p.finish()
	return res, err
}

// stream answers m with st's result, then exactly the count of bytes
// Content gives, and closes st, on every path. It holds the
// connection's writer from the result's first byte to the stream's last,
// so other answers wait. A result whose "bytes" is not Content's count is
// answered failed and nothing follows it. A chunk the client does not
// take within stallTimeout, or a stream that cannot be read to its
// count, ends the connection: the client, short of bytes, knows.
func (cn *conn) stream(m edge.Message, st awareness.Streaming) {
	defer st.Close()
	r, n := st.Content()
	line, err := json.Marshal(edge.Response{JSONRPC: "2.0", ID: m.ID, Result: st})
	var count struct {
		Result struct {
			Bytes *int64 `json:"bytes"`
		} `json:"result"`
	}
	if err == nil {
		if err = json.Unmarshal(line, &count); err == nil && (count.Result.Bytes == nil || *count.Result.Bytes != n) {
			err = fmt.Errorf("the result does not say its %d bytes", n)
		}
	}
	if err != nil {
		cn.reply(m, nil, rpcErrorOf(&awareness.Error{Reason: awareness.ReasonFailed, Detail: err.Error()}))
		return
	}
	cn.wmu.Lock()
	defer cn.wmu.Unlock()
	if err := cn.streamLocked(append(line, '\n'), r, n); err != nil {
		cn.s.Log.Warn("admin socket: a stream was not sent whole; the connection is closed", "method", m.Method, "err", err)
		cn.c.Close() // the connection's reader ends, and with it the connection
	}
}

// streamLocked writes line, then n bytes of r, a chunk at a time, each
// within stallTimeout. The caller holds wmu.
func (cn *conn) streamLocked(line []byte, r io.Reader, n int64) error {
	cn.c.SetWriteDeadline(time.Now().Add(stallTimeout))
	if _, err := cn.c.Write(line); err != nil {
		return err
	}
	buf := make([]byte, min(StreamChunk, n))
	var sent int64
	for sent < n {
		k, err := io.ReadFull(r, buf[:min(int64(len(buf)), n-sent)])
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				err = fmt.Errorf("the stream ended at %d of %d bytes", sent+int64(k), n)
			}
			return err
		}
		cn.c.SetWriteDeadline(time.Now().Add(stallTimeout))
		if _, err := cn.c.Write(buf[:k]); err != nil {
			return fmt.Errorf("after %d of %d bytes: %w", sent, n, err)
		}
		sent += int64(k)
	}
	return nil
}
