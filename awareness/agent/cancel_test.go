package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/hal"
)

// waitLED waits until the LED is at level, or fails saying what.
func (g *rig) waitLED(t *testing.T, level hal.Level, what string) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); g.led.Level() != level; time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s: the LED stayed %v", what, g.led.Level())
		}
	}
}

// A client that cancels its own gpio_pulse (the SDK's way: the CallTool
// context ends, and the SDK sends notifications/cancelled) stops the
// pulse: the LED goes back to its safe level (low) at once, and the
// action's record says cancelled, caller_cancelled, by whom and why. The
// session goes on.
func TestACancelledCallStopsItsAction(t *testing.T) {
	uid, _ := me()
	g := newRig(t, []config.AgentPrincipal{{Name: "pi", Subject: "agent:pi", UID: &uid, Trust: "high"}}, 2*time.Second)
	cs := g.dial(t, "pi")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	called := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "gpio_pulse",
			Arguments: map[string]any{"target": "gpio.led", "duration_ms": 20000, "idempotency_key": "k-cancel"}})
		called <- err
	}()
	g.waitLED(t, hal.High, "the pulse")
	started := time.Now()
	cancel()
	if err := <-called; !errors.Is(err, context.Canceled) {
		t.Errorf("the cancelled call returned %v, want context.Canceled", err)
	}
	g.waitLED(t, hal.Low, "after the call was cancelled")
	t.Logf("the LED went safe %v after the call was cancelled", time.Since(started).Round(time.Millisecond))

	// The record, as the agent reads it back.
	var res act.Result
	for end := time.Now().Add(10 * time.Second); res.Status != act.Cancelled; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the action's record: %+v, want it cancelled", res)
		}
		c, _ := call(t, cs, "action_result", map[string]any{"idempotency_key": "k-cancel"})
		data, _ := json.Marshal(c.Data)
		res = act.Result{}
		json.Unmarshal(data, &res)
	}
	by := res.CancelledBy
	if res.Reason != act.ReasonCallerCancelled || by == nil || by.Subject != "agent:pi" || !strings.HasPrefix(by.Session, "agent-") || by.Reason != "context canceled" {
		t.Errorf("the record: %+v by %+v, want caller_cancelled by agent:pi in its session, reason %q", res, by, "context canceled")
	}
	if !strings.Contains(res.Detail, "caller_cancelled by agent:pi (session "+by.Session+"): context canceled") {
		t.Errorf("the record's detail %q", res.Detail)
	}
	select {
	case e := <-g.ended:
		t.Errorf("the session ended (%+v): a cancelled call is not the session's end", e)
	default:
	}
	if c, _ := call(t, cs, "self_state", nil); c.Status != "success" {
		t.Errorf("a call after the cancelled one: %+v", c)
	}
}

// rawSession opens a connection to the rig and writes lines, each a
// message, then half-closes it (the client's stdin ended); it returns
// what the body answered, line by line, until it closed the connection.
func rawSession(t *testing.T, g *rig, lines ...string) (answers map[string]string, closedAfter time.Duration) {
	t.Helper()
	c, err := net.Dial("unix", g.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, l := range lines {
		fmt.Fprintln(c, l)
	}
	if err := c.(*net.UnixConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	ended := time.Now()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	answers = map[string]string{}
	sc := bufio.NewScanner(c)
	sc.Buffer(nil, 4<<20) // the tools' list is one long line
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			t.Fatalf("not JSON-RPC: %q", sc.Text())
		}
		if m.Method == "" {
			answers[string(m.ID)] = sc.Text()
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading the answers: %v (have %v)", err, answers)
	}
	return answers, time.Since(ended)
}

// A client that writes its requests and closes its side at once (`echo
// ... | tobe-body stdio`) gets every answer before the body closes: a
// pulse that ends within the heartbeat window with its result; one that
// would run longer is stopped by the deadman (the agent cannot be heard
// from) and answered cancelled, within the window and answerGrace.
func TestAnswersAfterTheClientsEnd(t *testing.T) {
	uid, _ := me()
	const heartbeat = 400 * time.Millisecond
	g := newRig(t, []config.AgentPrincipal{{Name: "pi", Subject: "agent:pi", UID: &uid, Trust: "high"}}, heartbeat)
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"echo","version":"1"}}}`
	inited := `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	pulse := func(id, ms int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"gpio_pulse","arguments":{"target":"gpio.led","duration_ms":%d}}}`, id, ms)
	}
	for _, tc := range []struct {
		name   string
		pulse  int
		status act.Status
		reason act.Reason
		ends   string // why the session ended
	}{
		{"a short pulse", 100, act.Succeeded, "", "closed"},
		{"a pulse longer than the window", 20000, act.Cancelled, act.ReasonSessionEnded, "silent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answers, took := rawSession(t, g, init, inited, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
				`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"self_state","arguments":{}}}`, pulse(4, tc.pulse))
			for _, id := range []string{"1", "2", "3", "4"} {
				if !strings.Contains(answers[id], `"result"`) {
					t.Errorf("request %s: answered %q, want its result", id, answers[id])
				}
			}
			var r struct {
				Result mcp.CallToolResult `json:"result"`
			}
			var c Content
			var res act.Result
			if json.Unmarshal([]byte(answers["4"]), &r) == nil && len(r.Result.Content) == 1 {
				json.Unmarshal([]byte(r.Result.Content[0].(*mcp.TextContent).Text), &c)
				data, _ := json.Marshal(c.Data)
				json.Unmarshal(data, &res)
			}
			if res.Status != tc.status || res.Reason != tc.reason {
				t.Errorf("the pulse answered %s %s (%s), want %s %s", res.Status, res.Reason, answers["4"], tc.status, tc.reason)
			}
			if g.led.Level() != hal.Low {
				t.Errorf("the LED is %v after the session, want low", g.led.Level())
			}
			if max := heartbeat + answerGrace + time.Second; took > max {
				t.Errorf("the body closed %v after the client's end, want within %v", took, max)
			}
			select {
			case e := <-g.ended:
				if e.Why != tc.ends {
					t.Errorf("the session ended %+v, want why %q", e, tc.ends)
				}
			case <-time.After(5 * time.Second):
				t.Errorf("the session did not end %s", tc.ends)
			}
		})
	}
}
