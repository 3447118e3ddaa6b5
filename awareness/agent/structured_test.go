package agent

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/edge/edgetest"
	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/ledger"
)

// outputSchemas lists cs's tools and returns each one's output schema,
// resolved as a client reads it from the wire. Every tool has one, of
// type object, as MCP 2025-06-18 asks.
func outputSchemas(t *testing.T, cs *mcp.ClientSession) map[string]*jsonschema.Resolved {
	t.Helper()
	l, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*jsonschema.Resolved{}
	for _, tl := range l.Tools {
		if tl.OutputSchema == nil {
			t.Errorf("%s: no outputSchema", tl.Name)
			continue
		}
		b, err := json.Marshal(tl.OutputSchema)
		if err != nil {
			t.Fatal(err)
		}
		var s jsonschema.Schema
		if err := json.Unmarshal(b, &s); err != nil {
			t.Errorf("%s: outputSchema %s: %v", tl.Name, b, err)
			continue
		}
		if s.Type != "object" {
			t.Errorf("%s: outputSchema of type %q, want object", tl.Name, s.Type)
		}
		rs, err := s.Resolve(nil)
		if err != nil {
			t.Errorf("%s: outputSchema %s does not resolve: %v", tl.Name, b, err)
			continue
		}
		out[tl.Name] = rs
	}
	return out
}

// structured checks res, the result of tool: its structuredContent is
// there (an error's too), validates against the tool's output schema and
// is what its text says; it returns the content.
func structured(t *testing.T, schemas map[string]*jsonschema.Resolved, tool string, res *mcp.CallToolResult) Content {
	t.Helper()
	rs := schemas[tool]
	if rs == nil {
		t.Fatalf("%s: no output schema listed", tool)
	}
	if res.StructuredContent == nil {
		t.Fatalf("%s: no structuredContent", tool)
	}
	if err := rs.Validate(res.StructuredContent); err != nil {
		sc, _ := json.Marshal(res.StructuredContent)
		t.Errorf("%s: structuredContent %s: got %v, want it valid against the tool's outputSchema", tool, sc, err)
	}
	// The text, and after it, for a piece of media, the media.
	if len(res.Content) == 2 && !res.IsError {
		switch m := res.Content[1].(type) {
		case *mcp.ImageContent:
			if !strings.HasPrefix(m.MIMEType, "image/") || len(m.Data) == 0 {
				t.Errorf("%s: image content of %s, %d bytes", tool, m.MIMEType, len(m.Data))
			}
		case *mcp.AudioContent:
			if !strings.HasPrefix(m.MIMEType, "audio/") || len(m.Data) == 0 {
				t.Errorf("%s: audio content of %s, %d bytes", tool, m.MIMEType, len(m.Data))
			}
		default:
			t.Errorf("%s: a second content %T, want media", tool, m)
		}
	} else if len(res.Content) != 1 {
		t.Fatalf("%s: %d contents, want the text", tool, len(res.Content))
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("%s: content %T, want the text", tool, res.Content[0])
	}
	text := tc.Text
	var fromText any
	if err := json.Unmarshal([]byte(text), &fromText); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromText, res.StructuredContent) {
		sc, _ := json.Marshal(res.StructuredContent)
		t.Errorf("%s: structuredContent %s, text %s: want the same", tool, sc, text)
	}
	var c Content
	if err := json.Unmarshal([]byte(text), &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestResultsAreStructured calls every tool an agent is offered, through
// the official SDK's client, on its success path and its refusals (bad
// params, a refused action with the runner's record as data, a thing
// not found): every result carries structuredContent that validates
// against the tool's outputSchema and is what its text says.
func TestResultsAreStructured(t *testing.T) {
	uid, _ := me()
	g := newRig(t, []config.AgentPrincipal{
		{Name: "pi", Subject: "agent:pi", UID: &uid, Trust: "low"},
		{Name: "pi-high", Subject: "agent:pi", UID: &uid, Trust: "high"},
	}, time.Minute)
	high, low := g.dial(t, "pi-high"), g.dial(t, "pi")
	schemas := outputSchemas(t, high)
	lowSchemas := outputSchemas(t, low)
	for name := range lowSchemas {
		if schemas[name] == nil {
			t.Errorf("tool %s of a low-trust session is not a high-trust one's", name)
		}
	}
	ev, err := g.store.Append(context.Background(), ledger.Event{Type: "test.seen", Provenance: ledger.Observed, Privacy: ledger.Internal})
	if err != nil {
		t.Fatal(err)
	}
	g.hub.Publish(awareness.Observation{ID: "o1", Source: "test", Actor: "signal", Content: "a cup", Trust: ledger.Medium, Attention: ledger.Low, Type: "test.event"})

	// What the calls learn, for the calls after them.
	var actionID, workID, waitID string
	var workVersion uint64
	data := func(c Content, v any) {
		b, _ := json.Marshal(c.Data)
		json.Unmarshal(b, v)
	}
	keepVersion := func(c Content) {
		var it struct {
			Version uint64 `json:"version"`
		}
		data(c, &it)
		workVersion = it.Version
	}
	cases := []struct {
		name   string
		cs     *mcp.ClientSession
		tool   string
		args   func() any
		status string
		// record says the refusal carries the runner's record as its data.
		record bool
		then   func(Content)
	}{
		{name: "status", tool: "body_status", status: "success"},
		{name: "channels", tool: "list_channels", status: "success"},
		{name: "self before a sample", tool: "self_state", status: "success"},
		{name: "e-stop", tool: "estop_status", status: "success"},
		{name: "capabilities", tool: "capabilities", status: "success"},
		{name: "events", tool: "events", args: func() any { return map[string]any{"types": []string{"test."}} }, status: "success"},
		{name: "events with an unknown key", tool: "events", args: func() any { return map[string]any{"nope": 1} }, status: "error"},
		{name: "a pulse", tool: "gpio_pulse", args: func() any { return map[string]any{"target": "gpio.led", "duration_ms": 1} }, status: "success",
			then: func(c Content) {
				var r struct {
					ActionID string `json:"action_id"`
				}
				data(c, &r)
				actionID = r.ActionID
			}},
		{name: "a set refused at low trust", cs: low, tool: "gpio_set", args: func() any { return map[string]any{"target": "gpio.relay1", "state": "on"} }, status: "error", record: true},
		{name: "a set with an unknown argument", tool: "gpio_set", args: func() any { return map[string]any{"target": "gpio.relay1", "state": "on", "volume": 11} }, status: "error"},
		{name: "the pulse's result", tool: "action_result", args: func() any { return map[string]any{"action_id": actionID} }, status: "success"},
		{name: "no such action", tool: "action_result", args: func() any { return map[string]any{"action_id": "no-such"} }, status: "error"},
		{name: "a work item", tool: "work_create", args: func() any { return map[string]any{"goal": "tidy", "done_when": []string{"tidy"}} }, status: "success",
			then: func(c Content) {
				var it struct {
					ID      string `json:"id"`
					Version uint64 `json:"version"`
				}
				data(c, &it)
				workID, workVersion = it.ID, it.Version
			}},
		{name: "a work item without a goal", tool: "work_create", args: func() any { return map[string]any{"done_when": []string{"tidy"}} }, status: "error"},
		{name: "the work item", tool: "show_work", args: func() any { return map[string]any{"id": workID} }, status: "success"},
		{name: "no such work item", tool: "show_work", args: func() any { return map[string]any{"id": "no-such"} }, status: "error"},
		{name: "progress", tool: "work_update", args: func() any { return map[string]any{"id": workID, "version": workVersion, "progress": true} }, status: "success",
			then: keepVersion},
		{name: "a stale update", tool: "work_update", args: func() any { return map[string]any{"id": workID, "version": 0, "progress": true} }, status: "error"},
		{name: "the work", tool: "list_work", status: "success"},
		{name: "close an open item", tool: "work_close", args: func() any { return map[string]any{"id": workID, "version": workVersion} }, status: "error"},
		{name: "a wait", tool: "wait_add", args: func() any {
			return map[string]any{"owner": workID, "event_types": []string{"test.seen"}, "expires_in": "1h"}
		}, status: "success",
			then: func(c Content) {
				var w struct {
					ID string `json:"id"`
				}
				data(c, &w)
				waitID = w.ID
			}},
		{name: "a wait without an expiry", tool: "wait_add", args: func() any { return map[string]any{"owner": workID, "event_types": []string{"test.seen"}} }, status: "error"},
		{name: "the waits", tool: "list_waits", status: "success"},
		{name: "remove the wait", tool: "wait_remove", args: func() any { return map[string]any{"id": waitID} }, status: "success"},
		{name: "remove no such wait", tool: "wait_remove", args: func() any { return map[string]any{"id": "no-such"} }, status: "error"},
		{name: "ready the work", tool: "work_update", args: func() any {
			return map[string]any{"id": workID, "version": workVersion, "status": "ready", "reason": "planned"}
		}, status: "success",
			then: keepVersion},
		{name: "start the work", tool: "work_update", args: func() any {
			return map[string]any{"id": workID, "version": workVersion, "status": "running", "reason": "begun"}
		}, status: "success",
			then: keepVersion},
		{name: "close the running item", tool: "work_close", args: func() any { return map[string]any{"id": workID, "version": workVersion, "reason": "tidy"} }, status: "success"},
		{name: "explain an event", tool: "explain", args: func() any { return map[string]any{"event_id": ev[0].ID.String()} }, status: "success"},
		{name: "explain nothing", tool: "explain", args: func() any { return map[string]any{} }, status: "error"},
		{name: "the world", tool: "world_now", status: "success"},
		{name: "an output an hour ago", tool: "world_at", args: func() any {
			return map[string]any{"entity": "output.relay1", "at": time.Now().Add(-time.Hour).Format(time.RFC3339)}
		}, status: "success"},
		{name: "an output yesterday", tool: "world_at", args: func() any { return map[string]any{"entity": "output.relay1", "at": "yesterday"} }, status: "error"},
		{name: "an output's history", tool: "world_history", args: func() any { return map[string]any{"entity": "output.relay1"} }, status: "success"},
		{name: "no such entity's history", tool: "world_history", args: func() any { return map[string]any{"entity": "room.nope"} }, status: "error"},
		{name: "tell", tool: "world_tell", args: func() any { return map[string]any{"entity": "output.relay1", "value": "on", "for": "1m"} }, status: "success"},
		{name: "tell nonsense", tool: "world_tell", args: func() any { return map[string]any{"entity": "output.relay1", "value": "purple"} }, status: "error"},
		{name: "explain the output", tool: "world_explain", args: func() any { return map[string]any{"entity": "output.relay1"} }, status: "success"},
		{name: "explain nothing there", tool: "world_explain", args: func() any { return map[string]any{"entity": "room.nope"} }, status: "error"},
		{name: "the evidence", tool: "list_evidence", status: "success"},
		{name: "evidence of an unknown kind", tool: "list_evidence", args: func() any { return map[string]any{"kind": "video"} }, status: "error"},
		{name: "evidence with an unknown key", tool: "list_evidence", args: func() any { return map[string]any{"nope": 1} }, status: "error"},
		{name: "a snapshot", tool: "get_evidence", args: func() any { return map[string]any{"id": g.evidence} }, status: "success"},
		{name: "no such snapshot", tool: "get_evidence", args: func() any { return map[string]any{"id": "no-such"} }, status: "error"},
		{name: "delete the snapshot", tool: "delete_evidence", args: func() any { return map[string]any{"id": g.evidence, "why": "seen"} }, status: "success"},
		{name: "delete it again", tool: "delete_evidence", args: func() any { return map[string]any{"id": g.evidence} }, status: "error"},
		{name: "privacy", tool: "privacy_status", status: "success"},
		{name: "a pause", tool: "privacy_pause", args: func() any { return map[string]any{"for": "1m", "reason": "test"} }, status: "success"},
		{name: "a pause until yesterday", tool: "privacy_pause", args: func() any { return map[string]any{"for": "yesterday"} }, status: "error"},
		{name: "drain", tool: "drain", status: "success"},
		{name: "drain a negative limit", tool: "drain", args: func() any { return map[string]any{"limit": -1} }, status: "error"},
		{name: "trip", tool: "estop_trip", args: func() any { return map[string]any{"reason": "test"} }, status: "success"},
		{name: "a pulse refused while latched", tool: "gpio_pulse", args: func() any { return map[string]any{"target": "gpio.led", "duration_ms": 1} }, status: "error", record: true},
	}
	seen := map[string][]string{} // tool: the statuses its results had
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cs := tc.cs
			if cs == nil {
				cs = high
			}
			var args any = map[string]any{}
			if tc.args != nil {
				args = tc.args()
			}
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tc.tool, Arguments: args})
			if err != nil {
				t.Fatalf("%s: %v", tc.tool, err)
			}
			c := structured(t, schemas, tc.tool, res)
			seen[tc.tool] = append(seen[tc.tool], c.Status)
			if c.Status != tc.status || (c.Status == "error") != res.IsError {
				t.Fatalf("%s: got status %s (isError %v), want %s: %+v %+v", tc.tool, c.Status, res.IsError, tc.status, c, c.Error)
			}
			if tc.status == "error" && (c.Data != nil) != tc.record {
				t.Errorf("%s: data %v beside the refusal %+v, want the runner's record: %v", tc.tool, c.Data, c.Error, tc.record)
			}
			if tc.then != nil {
				tc.then(c)
			}
		})
	}
	// Every tool was called, and answered both ways, but those that
	// refuse nothing an agent can send them, and gpio_set, which no grant
	// of the rig's lets an agent use (gpio_pulse's success has the same
	// schema, action.do's output).
	refusesNothing := []string{"body_status", "list_channels", "self_state", "estop_status", "capabilities", "list_work", "list_waits", "estop_trip", "world_now", "privacy_status"}
	for name := range schemas {
		wantSuccess, wantError := name != "gpio_set", !slices.Contains(refusesNothing, name)
		if wantSuccess && !slices.Contains(seen[name], "success") || wantError && !slices.Contains(seen[name], "error") {
			t.Errorf("tool %s: results %v, want a success %v and a refusal %v", name, seen[name], wantSuccess, wantError)
		}
	}
}

// TestBriefRefusalsAreStructured: a session without a place answers a
// call of any tool but the stop busy, and that refusal, and the stop's
// result, validate against the tools' output schemas as a full session
// lists them.
func TestBriefRefusalsAreStructured(t *testing.T) {
	const low = 3101
	u := low
	g := newRigWith(t, []config.AgentPrincipal{{Name: "a", Subject: "agent:a", UID: &u, Trust: "low"}}, time.Minute, func(s *Server) {
		s.cred = edgetest.Cred
		s.Rules.groupsOf = func(int) []int { return nil }
	})
	var schemas map[string]*jsonschema.Resolved
	for i := range MaxConnsPerUID {
		cs := g.dialAs(t, low)
		if i == 0 {
			schemas = outputSchemas(t, cs)
		}
	}
	g.holds(t, low, MaxConnsPerUID)
	brief := g.dialAs(t, low)
	for _, tc := range []struct {
		tool, status string
		reason       string
	}{
		{"body_status", "error", string(awareness.ReasonBusy)},
		{"gpio_pulse", "error", string(awareness.ReasonBusy)},
		{"drain", "error", string(awareness.ReasonBusy)},
		{"estop_trip", "success", ""},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			res, err := brief.CallTool(context.Background(), &mcp.CallToolParams{Name: tc.tool, Arguments: map[string]any{}})
			if err != nil {
				t.Fatal(err)
			}
			c := structured(t, schemas, tc.tool, res)
			if c.Status != tc.status || c.Error != nil && string(c.Error.Reason) != tc.reason {
				t.Errorf("%s in a brief session: got %+v %+v, want %s %s", tc.tool, c, c.Error, tc.status, tc.reason)
			}
		})
	}
}
