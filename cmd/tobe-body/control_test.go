package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/admin"
	"github.com/tobe-body/tobe-body/ledger/gate"
	"github.com/tobe-body/tobe-body/ledger/work"
)

// zones is the sim camera's frame cut in two: the scene's object crosses
// the door, then the yard, every few seconds.
const zones = `, "sense": {"cameras": {"front": {"zones": [{"name": "door", "polygon": [[0,0],[0.5,0],[0.5,1],[0,1]]}, {"name": "yard", "polygon": [[0.5,0],[1,0],[1,1],[0.5,1]]}]}}}`

// TestControlPlaneThroughTheDaemon: a work item and a wait condition on
// the sim board (through the admin socket, as a local administrator);
// the sim's object crossing the door is decided: the first crossing
// woken for, at high, naming the work item; the next within the cooldown
// recorded with the reason; crossings of the yard not wanted; the CLI's
// work, wait and gate commands show it all.
func TestControlPlaneThroughTheDaemon(t *testing.T) {
	d := startDaemon(t, zones)
	defer d.stop(t)
	cl := &admin.Client{Path: filepath.Join(d.data, adminSocket), Timeout: 30 * time.Second}
	it, err := admin.Call(t.Context(), cl, awareness.OpWorkCreate, work.Spec{ID: "door-watch", Goal: "know when someone comes to the door",
		DoneWhen: []string{"told of motion at the door"}})
	if err != nil || it.Version != 1 || it.Status != work.Open {
		t.Fatalf("work.create: %+v %v", it, err)
	}
	out, err := runCmd(t, "wait", "add", "--data", d.data, "--id", "door", "--owner", "door-watch", "--type", "camera.motion_started",
		"--channel", "camera.front", "--match", `[{"zone": {"names": ["door"]}}]`, "--priority", "high", "--cooldown", "1h", "--expires-in", "10m")
	if err != nil || !strings.HasPrefix(out, "waiting: door for work item door-watch, until ") {
		t.Fatalf("wait add: %v\n%s", err, out)
	}
	// Bad input is refused, naming what was wrong.
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--owner", "door-watch", "--type", "camera.motion_started"}, "expires_at: a wait condition expires"},
		{[]string{"--type", "camera.motion_started", "--expires-in", "10m"}, "owner: a wait condition belongs to a work item"},
		{[]string{"--owner", "door-watch", "--type", "Camera", "--expires-in", "10m"}, `event_types[0]: "Camera"`},
		{[]string{"--owner", "door-watch", "--type", "camera.motion_started", "--expires-in", "10m", "--match", `[{"field": "zone"}]`}, "match[0]: no test"},
		{[]string{"--owner", "door-watch", "--type", "camera.motion_started", "--expires-in", "soon"}, `expires_in "soon"`},
	} {
		out, err := runCmd(t, append([]string{"wait", "add", "--data", d.data}, c.args...)...)
		if err == nil || !strings.Contains(out+err.Error(), c.says) {
			t.Errorf("wait add %v: %v\n%s, want %q", c.args, err, out, c.says)
		}
	}

	// Two crossings of the door after the condition.
	var decided []gate.Decision
	for deadline := time.Now().Add(2 * time.Minute); len(decided) < 2 && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		out, err := runCmd(t, "ledger", "events", "--data", d.data, "--type", "gate.decided", "--json")
		if err != nil {
			t.Fatal(err)
		}
		decided = decided[:0]
		for line := range strings.Lines(out) {
			var e struct {
				Payload gate.Decision `json:"payload"`
			}
			if json.Unmarshal([]byte(line), &e) == nil && e.Payload.Condition == "door" {
				decided = append(decided, e.Payload)
			}
		}
	}
	if len(decided) < 2 {
		t.Fatalf("%d decisions for the door in two minutes", len(decided))
	}
	first, second := decided[0], decided[1]
	if first.Outcome != gate.Wake || first.Attention != "high" || first.WorkItem != "door-watch" {
		t.Errorf("the first crossing: %+v", first)
	}
	if second.Outcome != gate.Record || !strings.HasPrefix(second.Reason, "cooldown: condition door matched ") {
		t.Errorf("the second crossing: %+v", second)
	}

	out, err = runCmd(t, "gate", "explain", "--data", d.data, second.Event)
	if err != nil || !strings.Contains(out, "decision  record") || !strings.Contains(out, "why       cooldown: condition door matched") ||
		!strings.Contains(out, "for       wait condition door of work item door-watch (band high)") {
		t.Errorf("gate explain: %v\n%s", err, out)
	}
	out, err = runCmd(t, "gate", "explain", "--data", d.data, first.Event)
	if err != nil || !strings.Contains(out, "decision  wake at high") || !strings.Contains(out, "relevance") {
		t.Errorf("gate explain the first: %v\n%s", err, out)
	}
	out, err = runCmd(t, "wait", "list", "--data", d.data)
	if err != nil || !strings.Contains(out, "door ") || !strings.Contains(out, "camera.motion_started") {
		t.Errorf("wait list: %v\n%s", err, out)
	}
	out, err = runCmd(t, "work", "list", "--data", d.data)
	if err != nil || !strings.Contains(out, "door-watch") || !strings.Contains(out, "open") {
		t.Errorf("work list: %v\n%s", err, out)
	}
	out, err = runCmd(t, "work", "close", "--data", d.data, "--version", "1", "door-watch")
	if err == nil || !strings.Contains(err.Error(), "only a running or verifiable item closes") {
		t.Errorf("work close of an open item: %v\n%s", err, out)
	}
	out, err = runCmd(t, "wait", "remove", "--data", d.data, "door")
	if err != nil || !strings.Contains(out, "removed door: removed by admin:uid=") {
		t.Errorf("wait remove: %v\n%s", err, out)
	}
}
