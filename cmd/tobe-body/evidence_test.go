package main

import (
	"bytes"
	"context"
	"encoding/json"
	"image/jpeg"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/ledger"
)

// grantID runs grant add and returns the new grant's id.
func grantID(t *testing.T, data string, args ...string) string {
	t.Helper()
	out, err := runCmd(t, append([]string{"grant", "add", "--data", data}, args...)...)
	if err != nil {
		t.Fatalf("grant add %v: %v\n%s", args, err, out)
	}
	f := strings.Fields(out) // granted ID: ...
	return strings.TrimSuffix(f[1], ":")
}

// evidenceRecords lists the evidence records in the daemon's ledger, as
// "type by via", oldest first.
func evidenceRecords(t *testing.T, data string) []string {
	t.Helper()
	out, err := runCmd(t, "ledger", "events", "--data", data, "--type", "evidence.", "--json")
	if err != nil {
		t.Fatalf("ledger events: %v\n%s", err, out)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var e struct {
			Type    string `json:"event_type"`
			Payload struct{ By, Via string }
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		got = append(got, strings.TrimSpace(e.Type+" "+e.Payload.By+" "+e.Payload.Via))
	}
	return got
}

// An agent through `tobe-body stdio` and the official SDK's client: a
// snapshot under a grant of its own; looking at it refused without the
// view grant, and the snapshot then comes back as image content; every
// look in the ledger; revoking the capture's grant deletes what it
// captured.
func TestEvidenceOverMCP(t *testing.T) {
	d := startDaemon(t, agentConfig())
	defer d.stop(t)
	capture := grantID(t, d.data, "--subject", "agent:pi", "--capability", "camera.snapshot", "--scope", "camera.front")
	b := startBridge(t, "--data", d.data, "--principal", "pi-high")
	defer b.cs.Close()
	c := b.content(t, "camera_snapshot", map[string]any{"target": "camera.front", "width": 320, "note": "who is there?"})
	if c.Status != "success" {
		t.Fatalf("camera_snapshot: %+v", c)
	}
	var res struct {
		Evidence string `json:"evidence"`
	}
	data, _ := json.Marshal(c.Data)
	json.Unmarshal(data, &res)
	if res.Evidence == "" {
		t.Fatalf("the snapshot's result names no evidence: %s", data)
	}
	// Without evidence.view: refused, and listed as nothing.
	call := func(tool string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		r, err := b.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		return r
	}
	if c := b.content(t, "get_evidence", map[string]any{"id": res.Evidence}); c.Status != "error" || c.Error.Reason != "no_grant" {
		t.Errorf("get_evidence without a view grant: %+v", c)
	}
	if c := b.content(t, "list_evidence", nil); c.Status != "success" || !strings.Contains(mustJSON(t, c.Data), `"evidence":[]`) {
		t.Errorf("list_evidence without a view grant: %+v", c)
	}
	grantID(t, d.data, "--subject", "agent:pi", "--capability", "evidence.view", "--scope", "camera.front")
	r := call("get_evidence", map[string]any{"id": res.Evidence})
	if r.IsError || len(r.Content) != 2 {
		t.Fatalf("get_evidence with the view grant: error %v, %d contents", r.IsError, len(r.Content))
	}
	img, ok := r.Content[1].(*mcp.ImageContent)
	if !ok || img.MIMEType != "image/jpeg" {
		t.Fatalf("the second content is %T, want image/jpeg", r.Content[1])
	}
	cfg, err := jpeg.DecodeConfig(bytes.NewReader(img.Data))
	if err != nil || cfg.Width != 320 || cfg.Height != 240 {
		t.Fatalf("the image: %dx%d, %v", cfg.Width, cfg.Height, err)
	}
	var got struct {
		Data awareness.EvidenceEntry `json:"data"`
	}
	json.Unmarshal([]byte(r.Content[0].(*mcp.TextContent).Text), &got)
	if got.Data.ID != res.Evidence || got.Data.By != "agent:pi" || got.Data.Why != "who is there?" || got.Data.Grant != capture || got.Data.Views != 1 {
		t.Errorf("the record beside the image: %+v", got.Data)
	}
	if c := b.content(t, "list_evidence", nil); !strings.Contains(mustJSON(t, c.Data), res.Evidence) {
		t.Errorf("list_evidence with the view grant: %+v", c)
	}
	// A local administrator's look, through the CLI.
	out, err := runCmd(t, "evidence", "get", "--data", d.data, res.Evidence, filepath.Join(t.TempDir(), "snap.jpg"))
	if err != nil {
		t.Fatalf("evidence get: %v\n%s", err, out)
	}
	want := []string{"evidence.captured agent:pi", "evidence.viewed agent:pi agent", "evidence.viewed admin:uid=0 admin"}
	if got := evidenceRecords(t, d.data); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("evidence records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The capture's grant revoked: what it captured is deleted, and a
	// new capture refused.
	if out, err := runCmd(t, "grant", "revoke", "--data", d.data, capture, "--reason", "enough"); err != nil {
		t.Fatalf("grant revoke: %v\n%s", err, out)
	}
	if c := b.content(t, "get_evidence", map[string]any{"id": res.Evidence}); c.Status != "error" || c.Error.Reason != awareness.ReasonNotFound {
		t.Errorf("get_evidence after the capture's grant was revoked: %+v", c)
	}
	if c := b.content(t, "camera_snapshot", map[string]any{"target": "camera.front"}); c.Status != "error" || c.Error.Reason != "grant_revoked" {
		t.Errorf("camera_snapshot after its grant was revoked: %+v", c)
	}
	recs := evidenceRecords(t, d.data)
	if last := recs[len(recs)-1]; last != "evidence.deleted admin:uid=0" {
		t.Errorf("the last evidence record is %q, want the revocation's deletion", last)
	}
	if _, err := ledger.ParseUUID(res.Evidence); err != nil {
		t.Error(err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// An agent pauses sensing (more privacy) and is told of it; a capture is
// then refused for privacy, whatever its grants; the agent has no way to
// resume; a local administrator does, and the agent is told.
func TestPrivacyPauseOverMCP(t *testing.T) {
	d := startDaemon(t, agentConfig())
	defer d.stop(t)
	grantID(t, d.data, "--subject", "agent:pi", "--capability", "camera.snapshot", "--scope", "camera.front")
	b := startBridge(t, "--data", d.data, "--principal", "pi-high")
	defer b.cs.Close()
	tools, err := b.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools.Tools {
		if strings.Contains(tl.Name, "resume") {
			t.Errorf("an agent is offered %s", tl.Name)
		}
	}
	if c := b.content(t, "privacy_pause", map[string]any{"reason": "the guests are here"}); c.Status != "success" || !strings.Contains(mustJSON(t, c.Data), `"paused":true`) {
		t.Fatalf("privacy_pause: %+v", c)
	}
	observed := func(prefix string) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case o := <-b.obs:
				if o.Type == "privacy.changed" && strings.HasPrefix(o.Content, prefix) {
					return
				}
			case <-deadline:
				t.Fatalf("no observation %q was pushed", prefix)
			}
		}
	}
	observed("Sensing is paused (paused by agent:pi (the guests are here))")
	if c := b.content(t, "camera_snapshot", map[string]any{"target": "camera.front"}); c.Status != "error" || c.Error.Reason != "privacy_paused" {
		t.Errorf("camera_snapshot while paused: %+v", c)
	}
	out, err := runCmd(t, "status", "--data", d.data)
	if err != nil || !strings.Contains(out, "privacy   PAUSED: paused by agent:pi") {
		t.Errorf("status while paused: %v\n%s", err, out)
	}
	if out, err := runCmd(t, "privacy", "resume", "--data", d.data); err != nil || !strings.HasPrefix(out, "sensing") {
		t.Fatalf("privacy resume: %v\n%s", err, out)
	}
	observed("Sensing resumed (resumed by admin:uid=")
}
