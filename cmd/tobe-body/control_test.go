package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/admin"
	"github.com/tobe-body/tobe-body/awareness/agent"
	"github.com/tobe-body/tobe-body/awareness/control/gate"
	"github.com/tobe-body/tobe-body/awareness/control/wait"
	"github.com/tobe-body/tobe-body/awareness/control/work"
	"github.com/tobe-body/tobe-body/cmd/tobe-body/internal/cli"
	"github.com/tobe-body/tobe-body/ledger"
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
	cl := &admin.Client{Path: filepath.Join(d.data, cli.AdminSocket), Timeout: 30 * time.Second}
	it, err := admin.Call(t.Context(), cl, awareness.OpWorkCreate, work.Spec{ID: "door-watch", Goal: "know when someone comes to the door",
		DoneWhen: []string{"told of motion at the door"}})
	if err != nil || it.Version != 1 || it.Status != work.Open {
		t.Fatalf("work.create: %+v %v", it, err)
	}
	out, err := runCmd(t, "wait", "add", "--data", d.data, "--id", "door", "--owner", "door-watch", "--type", "camera.motion_started",
		"--channel", "camera.front", "--match", `[{"zone": {"names": ["door"]}}]`, "--priority", "high", "--cooldown", "1h", "--expires-in", "10m",
		"--follow-up", "look at who came to the door", "--done-when", "the person is named")
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
		{[]string{"--owner", "door-watch", "--type", "camera.motion_started", "--expires-in", "10m", "--follow-up", "look"}, "follow_up: done_when: at least one acceptance criterion"},
		{[]string{"--owner", "door-watch", "--type", "camera.motion_started", "--expires-in", "10m", "--done-when", "seen"}, "--done-when is the criterion of a --follow-up"},
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
	if first.Outcome != gate.Wake || first.Attention != "high" || first.WorkItem != "door-watch" || first.FollowUp != gate.FollowUpID(first.Event) {
		t.Errorf("the first crossing: %+v", first)
	}
	if second.FollowUp != "" {
		t.Errorf("the second crossing made a follow-up: %+v", second)
	}
	out, err = runCmd(t, "work", "show", "--data", d.data, first.FollowUp)
	var fu work.Item
	if err != nil || json.Unmarshal([]byte(out), &fu) != nil || fu.Parent != "door-watch" || fu.Source != first.Event ||
		fu.Goal != "look at who came to the door" || fu.Status != work.Open {
		t.Errorf("work show of the follow-up: %v\n%s", err, out)
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
	if err != nil || !strings.Contains(out, "decision  wake at high") || !strings.Contains(out, "relevance") ||
		!strings.Contains(out, "made work item "+first.FollowUp) {
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

// gatePushes are the observations the gate pushed for wait condition
// cond, from what the bridge received until the deadline. It pings the
// session as a client does, within its heartbeat window.
func gatePushes(t *testing.T, b *bridge, cond string, until time.Time, want int) []awareness.Observation {
	t.Helper()
	var got []awareness.Observation
	for time.Now().Before(until) && len(got) < want {
		select {
		case o := <-b.obs:
			if strings.Contains(o.Content, "(wait condition "+cond+" of work item ") {
				got = append(got, o)
			}
		case <-time.After(500 * time.Millisecond):
			if err := b.cs.Ping(context.Background(), nil); err != nil {
				t.Fatalf("ping: %v", err)
			}
		}
	}
	return got
}

// TestAgentScenarioOnTheSimBoard: the agent, through its tools over
// `tobe-body stdio` with the official MCP client, leaves "motion in zone
// door within 10 minutes" on the sim board; the sim's moving object
// produces exactly one wake at attention high with its work item named;
// a second crossing inside the cooldown is recorded as suppressed with
// the reason; explain shows both paths.
func TestAgentScenarioOnTheSimBoard(t *testing.T) {
	d := startDaemon(t, agentConfig()+zones)
	defer d.stop(t)
	// At high trust: a camera's events are sensitive, shown to an agent
	// at medium trust or above.
	// A snapshot of each wake, under grants of its own.
	grantID(t, d.data, "--subject", "agent:pi", "--capability", "camera.snapshot", "--scope", "camera.front")
	grantID(t, d.data, "--subject", "agent:pi", "--capability", "evidence.view", "--scope", "camera.front")
	b := startBridge(t, "--data", d.data, "--principal", "pi-high")
	defer b.stdin.Close()
	c := b.content(t, "work_create", map[string]any{"id": "door-watch", "goal": "know when someone comes to the door",
		"done_when": []string{"told of motion at the door"}})
	if c.Status != "success" {
		t.Fatalf("work_create: %+v", c)
	}
	c = b.content(t, "wait_add", map[string]any{"id": "door", "owner": "door-watch", "event_types": []string{"camera.motion_started"},
		"channels": []string{"camera.front"}, "match": []any{map[string]any{"zone": map[string]any{"names": []string{"door"}}}},
		"priority": "high", "cooldown_ms": 3_600_000, "expires_in": "10m",
		"evidence": map[string]any{"capability": "camera.snapshot", "params": map[string]any{"width": "160"}}})
	if c.Status != "success" {
		t.Fatalf("wait_add: %+v", c)
	}
	if c := b.content(t, "wait_add", map[string]any{"owner": "door-watch", "event_types": []string{"audio.voice_started"}, "expires_in": "10m",
		"evidence": map[string]any{"capability": "audio.clip", "params": map[string]any{"after_ms": "3000"}}}); c.Status != "error" ||
		!strings.Contains(c.Error.Detail, "evidence.params.after_ms") {
		t.Errorf("a condition's clip of what comes after: %+v", c)
	}
	if c := b.content(t, "wait_add", map[string]any{"owner": "door-watch", "event_types": []string{"camera.motion_started"}}); c.Status != "error" ||
		!strings.Contains(c.Error.Detail, "expires_at: a wait condition expires") {
		t.Errorf("a condition without an expiry: %+v", c)
	}

	pushed := gatePushes(t, b, "door", time.Now().Add(2*time.Minute), 1)
	if len(pushed) != 1 {
		t.Fatalf("no wake for the door in two minutes; the body's log:\n%s", d.stderr)
	}
	first := pushed[0]
	if first.Attention != ledger.High || first.Type != "camera.motion_started" || !strings.Contains(first.Content, "work item door-watch") {
		t.Fatalf("the wake: %+v", first)
	}
	// The wake names its snapshot, which is the one the agent gets.
	if ev := first.Evidence; ev == nil || ev.MediaType != "image/jpeg" || !strings.Contains(first.Content, "Evidence "+ev.ID) {
		t.Fatalf("the wake names no evidence: %+v", first)
	}
	r, err := b.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_evidence", Arguments: map[string]any{"id": first.Evidence.ID}})
	if err != nil || r.IsError || len(r.Content) != 2 {
		t.Fatalf("get_evidence of the wake's snapshot: %v %+v", err, r)
	}
	if img := r.Content[1].(*mcp.ImageContent); fmt.Sprintf("%x", sha256.Sum256(img.Data)) != first.Evidence.SHA256 {
		t.Errorf("the image's sha256 is not the one the wake named")
	}
	// The next crossing of the door, within the cooldown: decided, not
	// pushed.
	var second gate.Decision
	for deadline := time.Now().Add(2 * time.Minute); second.Event == "" && time.Now().Before(deadline); {
		if more := gatePushes(t, b, "door", time.Now().Add(500*time.Millisecond), 1); len(more) > 0 {
			t.Fatalf("a second wake for the door: %+v", more[0])
		}
		ev := b.content(t, "events", map[string]any{"types": []string{"camera.motion_started"}, "after": first.Seq, "limit": 20})
		raw, _ := json.Marshal(ev.Data)
		var evs awareness.Events
		json.Unmarshal(raw, &evs)
		for _, e := range evs.Events {
			if p, _ := e.Payload.(map[string]any); p["zone"] == "door" {
				x := b.content(t, "explain", map[string]any{"event_id": e.ID})
				raw, _ := json.Marshal(x.Data)
				var dec gate.Decision
				if json.Unmarshal(raw, &dec) == nil && dec.Condition == "door" {
					second = dec
				}
			}
		}
	}
	if second.Outcome != gate.Record || !strings.HasPrefix(second.Reason, "cooldown: condition door matched ") || !strings.Contains(second.Reason, first.ID) {
		t.Fatalf("the second crossing: %+v", second)
	}
	x := b.content(t, "explain", map[string]any{"event_id": first.ID})
	raw, _ := json.Marshal(x.Data)
	var fd gate.Decision
	if json.Unmarshal(raw, &fd) != nil || fd.Outcome != gate.Wake || fd.Attention != "high" || fd.WorkItem != "door-watch" || len(fd.Path) < 5 ||
		fd.Evidence == nil || *fd.Evidence != *first.Evidence {
		t.Errorf("explain the wake: %+v", x)
	}
	if more := gatePushes(t, b, "door", time.Now().Add(time.Second), 1); len(more) > 0 {
		t.Errorf("a second wake for the door: %+v", more[0])
	}
}

// TestGateAcrossAKill: conditions registered, the daemon killed with
// SIGKILL and started again: the next matching event is pushed, once,
// and no event decided before the kill is decided or pushed again.
func TestGateAcrossAKill(t *testing.T) {
	dir := t.TempDir()
	data, cfg := filepath.Join(dir, "data"), filepath.Join(dir, "config.json")
	if err := os.WriteFile(cfg, []byte(`{"version": 1, "monitor": {"interval_ms": 100, "print": "always"}`+agentConfig()+zones+`}`), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func() *exec.Cmd {
		cmd, stdout, stderr := startProcess(t, "run", "--board", "sim", "--data", data, "--config", cfg)
		lines := bufio.NewScanner(stdout)
		if !lines.Scan() {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the body printed nothing; stderr:\n%s", stderr)
		}
		go io.Copy(io.Discard, stdout)
		return cmd
	}
	p := start()
	cl := &admin.Client{Path: filepath.Join(data, cli.AdminSocket), Timeout: 30 * time.Second}
	if _, err := admin.Call(t.Context(), cl, awareness.OpWorkCreate, work.Spec{ID: "door-watch", Goal: "g", DoneWhen: []string{"x"}}); err != nil {
		t.Fatal(err)
	}
	// Critical: every crossing wakes (no budget, novelty or merging).
	if _, err := admin.Call(t.Context(), cl, awareness.OpWaitAdd, awareness.WaitAddIn{ID: "door", Owner: "door-watch", EventTypes: []string{"camera.motion_started"},
		Match: []wait.Clause{{Zone: &wait.Zone{Names: []string{"door"}}}}, Priority: wait.Max, ExpiresIn: "10m"}); err != nil {
		t.Fatal(err)
	}
	b := startBridge(t, "--data", data, "--principal", "pi-high")
	if got := gatePushes(t, b, "door", time.Now().Add(2*time.Minute), 1); len(got) != 1 {
		p.Process.Kill()
		p.Wait()
		t.Fatal("no wake before the kill")
	}
	if err := p.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.Wait()
	b.stdin.Close()

	decided := func() map[string]int {
		out, err := runCmd(t, "ledger", "events", "--data", data, "--type", "gate.decided", "--json")
		if err != nil {
			t.Fatal(err)
		}
		n := map[string]int{}
		for line := range strings.Lines(out) {
			var e struct {
				Payload gate.Decision `json:"payload"`
			}
			if json.Unmarshal([]byte(line), &e) == nil && e.Payload.Event != "" {
				n[e.Payload.Event]++
			}
		}
		return n
	}
	before := decided() // read from the file the kill left
	p = start()
	defer func() {
		p.Process.Signal(os.Interrupt)
		p.Wait()
	}()
	b = startBridge(t, "--data", data, "--principal", "pi-high")
	defer b.stdin.Close()
	got := gatePushes(t, b, "door", time.Now().Add(2*time.Minute), 1)
	if len(got) != 1 {
		t.Fatal("no wake after the restart")
	}
	if before[got[0].ID] != 0 {
		t.Fatalf("pushed again after the kill: %s was decided before it", got[0].ID)
	}
	for id, n := range decided() {
		if n != 1 {
			t.Errorf("event %s decided %d times", id, n)
		}
	}
}

// TestTheGatePushesWhatTheObservationRulesWant: with no wait condition,
// the gate pushes what the observation rules (its default rules) want,
// in their words, once each, and explain names the rule; the e-stop's
// trip is the hard rule's.
func TestTheGatePushesWhatTheObservationRulesWant(t *testing.T) {
	d := startDaemon(t, agentConfig()+zones)
	defer d.stop(t)
	b := startBridge(t, "--data", d.data, "--principal", "pi-high")
	defer b.stdin.Close()
	explain := func(id string) gate.Decision {
		t.Helper()
		x := b.content(t, "explain", map[string]any{"event_id": id})
		raw, _ := json.Marshal(x.Data)
		var dec gate.Decision
		if err := json.Unmarshal(raw, &dec); err != nil {
			t.Fatalf("explain %s: %+v", id, x)
		}
		return dec
	}
	seen := map[string]int{}
	// next is the next observation of an event type within a while,
	// counting every observation pushed; it pings as a client does.
	next := func(typ string, within time.Duration) awareness.Observation {
		t.Helper()
		for deadline := time.Now().Add(within); time.Now().Before(deadline); {
			select {
			case o := <-b.obs:
				if seen[o.ID]++; o.Type == typ {
					return o
				}
			case <-time.After(500 * time.Millisecond):
				if err := b.cs.Ping(context.Background(), nil); err != nil {
					t.Fatalf("ping: %v", err)
				}
			}
		}
		return awareness.Observation{}
	}
	motion := next("camera.motion_started", 2*time.Minute)
	if motion.ID == "" {
		t.Fatalf("no motion pushed in two minutes; the body's log:\n%s", d.stderr)
	}
	if motion.Attention != ledger.Medium || !strings.HasPrefix(motion.Content, "Motion in ") || strings.Contains(motion.Content, "wait condition") {
		t.Errorf("the motion's observation: %+v", motion)
	}
	if dec := explain(motion.ID); dec.Outcome != gate.Wake || dec.Attention != "medium" || !strings.HasSuffix(dec.Rule, "(camera.motion_started)") || dec.Condition != "" {
		t.Errorf("explain the motion: %+v", dec)
	}
	if c := b.content(t, "estop_trip", nil); c.Status != "success" {
		t.Fatalf("estop_trip: %+v", c)
	}
	trip := next("estop.tripped", 30*time.Second)
	if trip.Attention != ledger.Max || !strings.HasPrefix(trip.Content, "E-stop tripped") {
		t.Fatalf("the trip's observation: %+v", trip)
	}
	if dec := explain(trip.ID); dec.Outcome != gate.Wake || dec.Reason != "" || dec.Path[0].Rule != "hard rule" {
		t.Errorf("explain the trip: %+v", dec)
	}

	// An agent that was away reads what it missed, from the gate's
	// records, in the same words, through the resource any MCP client
	// may read; and the e-stop's resource says latched.
	b2 := startBridge(t, "--data", d.data, "--principal", "pi-high")
	defer b2.stdin.Close()
	res, err := b2.cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: fmt.Sprintf("tobe://observations?after=%d", motion.Seq-1)})
	if err != nil {
		t.Fatalf("read what was told after the motion: %v", err)
	}
	var missed agent.Replayed
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &missed); err != nil {
		t.Fatal(err)
	}
	var again []awareness.Observation
	for _, o := range missed.Observations {
		if o.ID == motion.ID || o.ID == trip.ID {
			again = append(again, o)
		}
	}
	if len(again) != 2 || again[0].Content != motion.Content || again[1].Content != trip.Content || again[1].Attention != ledger.Max || missed.Next < trip.Seq {
		t.Errorf("read again after %d: %+v", motion.Seq-1, missed)
	}
	res, err = b2.cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "tobe://estop"})
	if err != nil || !strings.Contains(res.Contents[0].Text, `"latched":true`) {
		t.Errorf("tobe://estop after the trip: %+v %v", res, err)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("event %s pushed %d times", id, n)
		}
	}
}
