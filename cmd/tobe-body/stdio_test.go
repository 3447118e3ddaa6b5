package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/agent"
	"github.com/tobe-body/tobe-body/ledger"
)

// agentConfig makes this test's user an agent: "pi" at low trust and
// "pi-high" at high, so the bridge must say which.
func agentConfig() string {
	uid := os.Getuid()
	return fmt.Sprintf(`, "agent": {"principals": [{"name": "pi", "subject": "agent:pi", "uid": %d, "trust": "low"}, {"name": "pi-high", "subject": "agent:pi", "uid": %d, "trust": "high"}]}`, uid, uid)
}

// bridge runs `tobe-body stdio` in this process with pipes for its stdin
// and stdout, and an MCP client (the official SDK's) over them.
type bridge struct {
	cs     *mcp.ClientSession
	obs    chan awareness.Observation
	stdin  *io.PipeWriter
	done   chan error
	stderr *bytes.Buffer
}

func startBridge(t *testing.T, args ...string) *bridge {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	b := &bridge{stdin: inW, done: make(chan error, 1), stderr: &bytes.Buffer{}, obs: make(chan awareness.Observation, 64)}
	go func() {
		err := run(context.Background(), append([]string{"stdio"}, args...), inR, outW, b.stderr)
		outW.Close()
		inR.Close()
		b.done <- err
	}()
	cl := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := cl.Connect(context.Background(), &agent.ObservingTransport{Transport: &mcp.IOTransport{Reader: outR, Writer: inW},
		On: func(method string, params json.RawMessage) {
			var o awareness.Observation
			if method == agent.ObservationMethod && json.Unmarshal(params, &o) == nil {
				select {
				case b.obs <- o:
				default:
				}
			}
		}}, nil)
	if err != nil {
		t.Fatalf("connect through the bridge: %v (stderr %s)", err, b.stderr)
	}
	b.cs = cs
	return b
}

func (b *bridge) content(t *testing.T, tool string, args map[string]any) agent.Content {
	t.Helper()
	res, err := b.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var c agent.Content
	if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// The agent over `tobe-body stdio` to a running daemon: the tools, an
// observe call, an action refused for the session's trust with its
// reason, the e-stop tripped; the bridge exits 0 when its stdin ends.
func TestStdioBridge(t *testing.T) {
	d := startDaemon(t, agentConfig())
	defer d.stop(t)
	b := startBridge(t, "--data", d.data, "--principal", "pi")
	tools, err := b.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	for _, want := range []string{"body_status", "estop_trip", "gpio_set", "gpio_pulse", "audio_tone", "body_notify"} {
		if !strings.Contains(strings.Join(names, " "), want) {
			t.Errorf("tools %q lack %s", names, want)
		}
	}
	if c := b.content(t, "body_status", nil); c.Status != "success" {
		t.Errorf("body_status: %+v", c)
	}
	c := b.content(t, "gpio_set", map[string]any{"target": "gpio.relay1", "state": "on"})
	data, _ := json.Marshal(c.Data)
	var res act.Result
	json.Unmarshal(data, &res)
	if c.Status != "error" || c.Error.Reason != act.ReasonRiskExceedsTrust || res.Status != act.Refused || res.Reason != act.ReasonRiskExceedsTrust {
		t.Errorf("gpio_set at low trust: %+v %s", c, data)
	}
	if c := b.content(t, "estop_trip", nil); c.Status != "success" {
		t.Errorf("estop_trip: %+v", c)
	}
	out, _ := runCmd(t, "estop", "status", "--data", d.data)
	if !strings.Contains(out, "LATCHED") && !strings.Contains(out, "latched") {
		t.Errorf("estop status after the agent's trip:\n%s", out)
	}
	// The trip, pushed at once as an observation at max attention.
	deadline := time.After(10 * time.Second)
	for seen := false; !seen; {
		select {
		case o := <-b.obs:
			if o.Type == "estop.tripped" {
				seen = true
				if o.Attention != ledger.Max || o.Actor != "system" || !strings.HasPrefix(o.Content, "E-stop tripped") || o.ID == "" {
					t.Errorf("the trip's observation: %+v", o)
				}
			}
		case <-deadline:
			t.Fatal("no observation of the trip was pushed")
		}
	}
	b.stdin.Close() // the SSH session ends
	select {
	case err := <-b.done:
		if err != nil {
			t.Errorf("the bridge ended with %v (stderr %s)", err, b.stderr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the bridge did not end with its stdin")
	}
	b.cs.Close()
	if b.stderr.Len() != 0 {
		t.Errorf("the bridge wrote on stderr: %s", b.stderr)
	}
}

// A bridge that may not be who it asks for gets the daemon's refusal on
// stdout and ends with an error; one whose daemon stops ends with one too.
func TestStdioBridgeEnds(t *testing.T) {
	d := startDaemon(t, agentConfig())
	inR, inW := io.Pipe()
	defer inW.Close()
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"stdio", "--data", d.data, "--principal", "someone"}, inR, &out, &errOut)
	if err == nil || !strings.Contains(out.String(), `may not be agent principal \"someone\"`) {
		t.Errorf("a principal the peer may not be: %v, stdout %q", err, out.String())
	}
	b := startBridge(t, "--data", d.data, "--principal", "pi-high")
	if _, err := b.cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	d.stop(t)
	select {
	case err := <-b.done:
		if err == nil || !strings.Contains(err.Error(), "the body closed the connection") {
			t.Errorf("the bridge after the daemon stopped: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the bridge did not end when its daemon stopped")
	}
	b.stdin.Close()
	b.cs.Close()
	if _, err := runCmd(t, "stdio", "--data", t.TempDir()); err == nil || !strings.Contains(err.Error(), "is tobe-body running") {
		t.Errorf("no daemon: %v", err)
	}
}

// RELIABILITY B2 through tobe-body stdio to the daemon: each bad input is
// answered with its JSON-RPC error, the next line is served, and stdout
// carries nothing but protocol.
func TestStdioBadInput(t *testing.T) {
	d := startDaemon(t, agentConfig())
	defer d.stop(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	var stderr bytes.Buffer
	go func() {
		err := run(context.Background(), []string{"stdio", "--data", d.data, "--principal", "pi"}, inR, outW, &stderr)
		outW.Close()
		done <- err
	}()
	lines := bufio.NewReader(outR)
	send := func(s string) {
		t.Helper()
		if _, err := io.WriteString(inW, s); err != nil {
			t.Fatal(err)
		}
	}
	// answer reads lines until the one for id (a number, or null), and
	// returns its error code (0: a result).
	answer := func(id string) int {
		t.Helper()
		for {
			line, err := lines.ReadString('\n')
			if err != nil {
				t.Fatalf("waiting for the answer to %s: %v", id, err)
			}
			var m struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Method  string          `json:"method"`
				Error   *struct {
					Code int `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(line), &m); err != nil || m.JSONRPC != "2.0" {
				t.Fatalf("stdout carried something that is not JSON-RPC: %q", line)
			}
			if m.Method != "" {
				continue // a notification (an observation)
			}
			if string(m.ID) == id {
				if m.Error != nil {
					return m.Error.Code
				}
				return 0
			}
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n")
	if c := answer("1"); c != 0 {
		t.Fatalf("initialize: %d", c)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")
	batch := "[" + strings.Repeat(`{"jsonrpc":"2.0","id":9,"method":"ping"},`, 9999) + `{"jsonrpc":"2.0","id":9,"method":"ping"}]` + "\n"
	for i, tc := range []struct {
		name, line, id string
		code           int
	}{
		{"bad JSON", `{"jsonrpc":"2.0",` + "\n", "null", -32700},
		{"a 10 MiB line", `{"jsonrpc":"2.0","id":3,"method":"ping","params":{"x":"` + strings.Repeat("a", 10<<20) + `"}}` + "\n", "null", -32600},
		{"NUL", "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\x00\"}\n", "null", -32700},
		{"bad UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"p\xffing\"}\n", "null", -32700},
		{"a batch of 10,000", batch, "null", -32600},
		{"an unknown method", `{"jsonrpc":"2.0","id":6,"method":"no/such"}` + "\n", "6", -32601},
		{"wrong types", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":7}}` + "\n", "7", -32602},
	} {
		send(tc.line)
		if c := answer(tc.id); c != tc.code {
			t.Errorf("%s: answered %d, want %d", tc.name, c, tc.code)
		}
		ping := fmt.Sprint(100 + i)
		send(`{"jsonrpc":"2.0","id":` + ping + `,"method":"ping"}` + "\n")
		if c := answer(ping); c != 0 {
			t.Errorf("after %s, the next line's ping: %d", tc.name, c)
		}
	}
	// EOF in the middle of a line: answered as a line, then the bridge
	// ends 0 once the daemon closes.
	send(`{"jsonrpc":"2.0","id":200,"meth`)
	inW.Close()
	if c := answer("null"); c != -32700 {
		t.Errorf("EOF mid-line: %d, want -32700", c)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the bridge: %v (stderr %s)", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the bridge did not end")
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr: %s", stderr.String())
	}
}

// A client that writes its requests and closes its stdin at once (`echo
// ... | tobe-body stdio`, or the same through ssh) gets every answer on
// stdout before the bridge exits 0: the bridge half-closes the socket at
// the end of stdin and copies the body's answers until the body closes.
func TestStdioAnswersAfterStdinEnds(t *testing.T) {
	d := startDaemon(t, agentConfig())
	defer d.stop(t)
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"echo","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"self_state","arguments":{}}}`,
	}, "\n") + "\n"
	var out, stderr bytes.Buffer
	start := time.Now()
	if err := run(t.Context(), []string{"stdio", "--data", d.data, "--principal", "pi"}, strings.NewReader(in), &out, &stderr); err != nil {
		t.Fatalf("the bridge: %v (stderr %s)", err, stderr.String())
	}
	t.Logf("the bridge exited %v after it started", time.Since(start).Round(time.Millisecond))
	answers := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		var m struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Method  string          `json:"method"`
			Result  json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil || m.JSONRPC != "2.0" {
			t.Fatalf("stdout carried something that is not JSON-RPC: %q", line)
		}
		if m.Method == "" {
			answers[string(m.ID)] = string(m.Result)
		}
	}
	for _, tc := range []struct{ id, want string }{
		{"1", `"serverInfo"`},
		{"2", `"self_state"`},
		{"3", `\"status\":\"success\"`},
	} {
		if !strings.Contains(answers[tc.id], tc.want) {
			t.Errorf("request %s: answered %q, want a result with %s", tc.id, answers[tc.id], tc.want)
		}
	}
	if stderr.Len() != 0 {
		t.Errorf("the bridge wrote on stderr: %s", stderr.String())
	}
}
