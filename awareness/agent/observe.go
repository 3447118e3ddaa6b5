package agent

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ownNotifications is the prefix of the body's own notification methods.
const ownNotifications = "notifications/tobe/"

// ObservingTransport is a client's mcp.Transport that delivers the body's
// own notifications (methods under "notifications/tobe/", such as
// ObservationMethod), which the SDK's client ignores, to On.
//
// It wraps Transport: the connection it returns reads from Transport's,
// hands every notification under "notifications/tobe/" to On instead of
// to the SDK, and passes everything else through. On is called on the
// client's reading goroutine, one notification at a time in the order
// read; it must not block for long (hand the notification to a channel
// with room, or drop it), and params are its to keep.
//
//	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
//	session, err := client.Connect(ctx, &agent.ObservingTransport{
//		Transport: &mcp.IOTransport{Reader: conn, Writer: conn},
//		On: func(method string, params json.RawMessage) { observations <- params },
//	}, nil)
type ObservingTransport struct {
	Transport mcp.Transport
	On        func(method string, params json.RawMessage)
}

// Connect implements mcp.Transport. It fails if Transport or On is nil,
// or with Transport's error.
func (t *ObservingTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	if t.Transport == nil || t.On == nil {
		return nil, errors.New("agent: an ObservingTransport needs a Transport and On")
	}
	inner, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &observingConn{Connection: inner, on: t.On}, nil
}

// observingConn intercepts the body's notifications on Read.
type observingConn struct {
	mcp.Connection
	on func(method string, params json.RawMessage)
}

// Read returns the next message that is not one of the body's own
// notifications, handing those to on as they pass.
func (c *observingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			return msg, err
		}
		req, ok := msg.(*jsonrpc.Request)
		if !ok || req.IsCall() || !strings.HasPrefix(req.Method, ownNotifications) {
			return msg, nil
		}
		c.on(req.Method, req.Params)
	}
}
