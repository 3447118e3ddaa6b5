package main

import (
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
