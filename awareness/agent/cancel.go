package agent

import (
	"context"
	"encoding/json"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tobe-body/tobe-body/act"
)

// methodCancelled is MCP's notification that the peer cancels a request
// of its own: params {requestId, reason}.
const methodCancelled = "notifications/cancelled"

// pendingCall is a call read from the stream and not yet answered.
type pendingCall struct {
	// n counts the unanswered calls of its id: a client may send an id
	// again while the first is in flight (the SDK refuses the second).
	n int
	// extra is the call's RequestExtra, which its handler sees.
	extra *mcp.RequestExtra
	// cancelled is set when the peer cancelled the call
	// (notifications/cancelled), with the reason it gave.
	cancelled bool
	reason    string
}

// track notes what the SDK is about to get: a call (a request with an
// id) is unanswered until its response is written, and gets a
// RequestExtra of its own by which its handler's middleware finds it
// (callerCancels); a notifications/cancelled for an unanswered call marks
// it cancelled by the peer, with the reason given, before the SDK cancels
// the call's context. It runs on the reading goroutine.
func (t *Transport) track(req *jsonrpc.Request) {
	switch {
	case req.ID.IsValid():
		t.callMu.Lock()
		defer t.callMu.Unlock()
		if c := t.calls[req.ID]; c != nil {
			c.n++
			return
		}
		c := &pendingCall{n: 1, extra: &mcp.RequestExtra{}}
		req.Extra = c.extra
		t.calls[req.ID] = c
		t.byExtra[c.extra] = c
	case req.Method == methodCancelled:
		var p mcp.CancelledParams
		if json.Unmarshal(req.Params, &p) != nil {
			return // the SDK reads it too, and ignores it as well
		}
		id, err := jsonrpc.MakeID(p.RequestID)
		if err != nil {
			return
		}
		t.callMu.Lock()
		defer t.callMu.Unlock()
		if c := t.calls[id]; c != nil {
			c.cancelled, c.reason = true, p.Reason
		}
	}
}

// answer notes that the call id was answered (its response written).
func (t *Transport) answer(id jsonrpc.ID) {
	t.callMu.Lock()
	c := t.calls[id]
	if c != nil {
		if c.n--; c.n <= 0 {
			delete(t.calls, id)
			delete(t.byExtra, c.extra)
		}
	}
	t.callMu.Unlock()
	if c != nil {
		select {
		case t.answered <- struct{}{}:
		default:
		}
	}
}

// cancelledBy tells whether the peer cancelled the unanswered call whose
// RequestExtra is extra, and the reason it gave.
func (t *Transport) cancelledBy(extra *mcp.RequestExtra) (reason string, ok bool) {
	t.callMu.Lock()
	defer t.callMu.Unlock()
	c := t.byExtra[extra]
	if c == nil || !c.cancelled {
		return "", false
	}
	return c.reason, true
}

// unanswered counts the calls read and not yet answered.
func (t *Transport) unanswered() int {
	t.callMu.Lock()
	defer t.callMu.Unlock()
	return len(t.calls)
}

// drain waits, once the stream has ended, until every call read is
// answered, at most opts.Drain after the end, or until the Transport is
// closed or ctx is done.
func (t *Transport) drain(ctx context.Context) {
	if t.opts.Drain <= 0 {
		return
	}
	timer := time.NewTimer(time.Until(t.endedAt.Add(t.opts.Drain)))
	defer timer.Stop()
	for t.unanswered() > 0 {
		select {
		case <-t.answered:
		case <-timer.C:
			return
		case <-t.closed:
			return
		case <-ctx.Done():
			return
		}
	}
}

// Ended is closed once the stream has ended (or failed, or the Transport
// was closed): nothing more will be read from the peer, its answers to
// pings included, though calls read before may still be answered
// (TransportOptions.Drain).
func (t *Transport) Ended() <-chan struct{} { return t.readDone }

// callerCancels is the middleware by which a peer that cancels its own
// tools/call (notifications/cancelled) cancels what the call runs: the
// SDK cancels the call's context whether the peer cancelled it or the
// stream ended, and only the Transport knows which (track). The handler
// gets a context that ends when the SDK's does, with the cause
// act.CallerCancel carrying the peer's reason when the peer cancelled
// the call, and the SDK's own cause otherwise; the runner tells them
// apart (act.Runner.Submit).
func callerCancels(t *Transport) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			extra := req.GetExtra()
			if method != "tools/call" || extra == nil {
				return next(ctx, method, req)
			}
			cctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
			defer cancel(nil)
			stop := context.AfterFunc(ctx, func() {
				cause := context.Cause(ctx)
				if reason, ok := t.cancelledBy(extra); ok {
					cause = &act.CallerCancel{Reason: reason}
				}
				cancel(cause)
			})
			defer stop()
			return next(cctx, method, req)
		}
	}
}
