package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/body/uplink/mosquittotest"
	"github.com/tobe-body/tobe-body/ledger"
)

var brokerUsers = map[string]string{"body": "body-pass", "sub": "sub-pass"}

func uplinkConfig(url string) string {
	return fmt.Sprintf(`, "mqtt": {"enabled": true, "broker": %q, "username": "body", "password": "body-pass", "keepalive_s": 5, "reconnect": {"min_ms": 100, "max_ms": 1000}}`, url)
}

// identity reads the body's ids from its data directory.
func identity(t *testing.T, data string) body.Identity {
	t.Helper()
	id, _, err := body.LoadIdentity(data, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func statusTopic(id body.Identity) string { return "tobe/" + id.AgentID + "/" + id.BodyID + "/status" }

// statusIs waits for the last status message the subscriber got to be v.
func statusIs(t *testing.T, sub *mosquittotest.Subscriber, topic, v string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		msgs := sub.Messages(topic)
		if len(msgs) > 0 && string(msgs[len(msgs)-1].Payload) == v {
			return time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("the status is not %q within %v (got %d status messages)", v, within, len(msgs))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// M2: the body as a process, killed with SIGKILL (its kernel closes the
// connection): the broker publishes its Last Will, offline (retained),
// at once, well within 1.5 times the keep-alive. Gone silent as a board
// that lost its power (the connection open and carrying nothing), the
// Will comes when the broker's keep-alive timeout says so. Started again
// the body says online; stopped cleanly it says offline at once.
func TestUplinkLastWillAndCleanStop(t *testing.T) {
	m := mosquittotest.Start(t, brokerUsers)
	cut := mosquittotest.NewCut(t, m.Addr)
	sub := m.Subscribe("sub", "sub-pass", "tobe/#")
	dir := t.TempDir()
	data, cfg := filepath.Join(dir, "data"), filepath.Join(dir, "config.json")
	os.WriteFile(cfg, []byte(`{"version": 1`+uplinkConfig(cut.URL())+`}`), 0o600)
	start := func() *exec.Cmd {
		cmd, stdout, _ := startProcess(t, "run", "--board", "sim", "--data", data, "--config", cfg)
		go func() {
			lines := bufio.NewScanner(stdout)
			for lines.Scan() {
			}
		}()
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	cmd := start()
	eventually(t, 10*time.Second, "the identity is written", func() bool {
		_, err := os.Stat(filepath.Join(data, body.IdentityFile))
		return err == nil
	})
	topic := statusTopic(identity(t, data))
	statusIs(t, sub, topic, "online", 10*time.Second)

	killed := time.Now()
	cmd.Process.Kill()
	cmd.Wait()
	statusIs(t, sub, topic, "offline", 15*time.Second)
	took := time.Since(killed)
	if took > 7500*time.Millisecond {
		t.Errorf("the Last Will came %v after the kill, want within 1.5 × keep-alive (7.5 s)", took)
	}
	t.Logf("killed: the Last Will (offline, retained) came after %v (keep-alive 5 s)", took.Round(time.Millisecond))

	cmd = start()
	statusIs(t, sub, topic, "online", 10*time.Second)
	// The peer: a client of the broker's own that falls silent at the
	// same moment.
	silent := make(chan time.Duration, 1)
	go func() {
		d, err := m.SilentTimeout("sub", "sub-pass", 5*time.Second)
		if err != nil {
			t.Errorf("a silent client: %v", err)
		}
		silent <- d
	}()
	frozen := time.Now()
	cut.Freeze()
	statusIs(t, sub, topic, "offline", 20*time.Second)
	took = time.Since(frozen)
	peer := <-silent
	// Here the broker alone decides, from the silence: MQTT says 1.5 ×
	// the keep-alive (7.5 s), and Debian's Mosquitto 2.0.11 takes about
	// 2.4 × (12 s for 5 s; 18 s for 10 s), for any client.
	if took > 15*time.Second {
		t.Errorf("the Last Will came %v after the link went silent, want within 3 × keep-alive (15 s)", took)
	}
	t.Logf("gone silent: the Last Will came after %v (keep-alive 5 s); the broker closed a silent client of its own after %v", took.Round(time.Millisecond), peer.Round(time.Millisecond))
	cut.Cut()
	cut.Mend()
	statusIs(t, sub, topic, "online", 15*time.Second)

	stopped := time.Now()
	cmd.Process.Signal(os.Interrupt)
	cmd.Wait()
	statusIs(t, sub, topic, "offline", 5*time.Second)
	t.Logf("stopped cleanly: offline %v after the signal", time.Since(stopped).Round(time.Millisecond))
	// The retained status is what a subscriber that comes later reads.
	late := m.Subscribe("sub", "sub-pass", topic)
	statusIs(t, late, topic, "offline", 5*time.Second)
	if msgs := late.Messages(topic); !msgs[0].Retain {
		t.Errorf("the status a late subscriber got was not retained")
	}
}

// M1 for the daemon: started with no broker, it runs and keeps its
// outbox; restarted while still offline, it keeps it still; once the
// broker is there every event of a class that leaves the device reaches
// a subscriber, and the outbox empties.
func TestUplinkStartedWithNoBrokerAndRestartedOffline(t *testing.T) {
	m := mosquittotest.Start(t, brokerUsers)
	cut := mosquittotest.NewCut(t, m.Addr)
	cut.Cut()
	sub := m.Subscribe("sub", "sub-pass", "tobe/#")
	dir := t.TempDir()
	data, cfg := filepath.Join(dir, "data"), filepath.Join(dir, "config.json")
	// Sensed events commit at once here: the test waits for an empty
	// outbox, which grouping keeps from it for up to its delay.
	os.WriteFile(cfg, []byte(`{"version": 1, "monitor": {"interval_ms": 100, "print": "always"}, "ledger": {"telemetry_commit_ms": 0}`+uplinkConfig(cut.URL())+`}`), 0o600)
	d := startDaemonIn(t, data, cfg)
	notify := func(i int) {
		if out, err := runCmd(t, "do", "body.notify", "home", fmt.Sprintf("message=offline %d", i), "--data", data); err != nil {
			t.Fatalf("notify %d: %v %s", i, err, out)
		}
	}
	for i := range 5 {
		notify(i)
	}
	out, _ := runCmd(t, "status", "--data", data)
	if !strings.Contains(out, "uplink    not connected to "+cut.URL()) {
		t.Errorf("status with no broker:\n%s", out)
	}
	d.stop(t)
	d = startDaemonIn(t, data, cfg)
	for i := 5; i < 10; i++ {
		notify(i)
	}
	cut.Mend()
	var sent uint64 // the last event when the outbox was empty
	eventually(t, 20*time.Second, "the outbox empties", func() bool {
		out, _ := runCmd(t, "status", "--data", data, "--json")
		var st struct {
			Ledger struct {
				LastSeq    uint64 `json:"last_seq"`
				OutboxRows uint64 `json:"outbox_rows"`
			} `json:"ledger"`
			Uplink *struct {
				Connected bool `json:"connected"`
			} `json:"uplink"`
		}
		if json.Unmarshal([]byte(out), &st) != nil || st.Uplink == nil || !st.Uplink.Connected || st.Ledger.OutboxRows != 0 {
			return false
		}
		sent = st.Ledger.LastSeq
		return true
	})
	d.stop(t)

	// Every event of a class that leaves the device is at the subscriber.
	id := identity(t, data)
	got := map[string]bool{}
	for _, msg := range sub.Messages("tobe/" + id.AgentID + "/" + id.BodyID + "/events/") {
		var e ledger.Event
		if err := ledger.Decode(msg.Payload, &e); err != nil {
			t.Fatal(err)
		}
		got[e.ID.String()] = true
	}
	classes, err := body.LedgerClasses(config.Default().Ledger)
	if err != nil {
		t.Fatal(err)
	}
	out, err = runCmd(t, "ledger", "events", "--json", "--data", data)
	if err != nil {
		t.Fatal(err)
	}
	var want, notified int
	for line := range strings.Lines(out) {
		var e ledger.EventView
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if e.Seq > sent || !classes.Of(e.Type).Outbox {
			continue // written after the outbox was seen empty, or kept on the device
		}
		want++
		if e.Type == "body.notified" {
			notified++
		}
		if !got[e.ID] {
			t.Errorf("%s %s (seq %d) never reached the broker", e.Type, e.ID, e.Seq)
		}
	}
	if notified != 10 {
		t.Errorf("%d body.notified events, want 10", notified)
	}
	t.Logf("%d events that leave the device, all at the subscriber, through a start with no broker and a restart offline", want)
}

// eventually polls cond every 20 ms for up to d.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Home Assistant: when it says online, the body announces itself (one
// device-based discovery document) and every state topic an entity reads
// holds a retained document; among the entities the world model's room
// (the sim's camera), whose document changes when the body is told the
// room is active.
func TestUplinkAnnouncesItselfToHomeAssistant(t *testing.T) {
	m := mosquittotest.Start(t, brokerUsers)
	d := startDaemon(t, uplinkConfig(m.URL()))
	defer d.stop(t)
	id := identity(t, d.data)
	ha := m.Subscribe("sub", "sub-pass", "homeassistant/#")
	eventually(t, 10*time.Second, "connected", func() bool {
		out, _ := runCmd(t, "status", "--data", d.data)
		return strings.Contains(out, "uplink    connected")
	})
	ha.Publish("homeassistant/status", []byte("online"), false)
	topic := "homeassistant/device/" + id.BodyID + "/config"
	var doc struct {
		Dev struct {
			IDs []string `json:"ids"`
		} `json:"dev"`
		Cmps map[string]struct {
			Platform        string `json:"p"`
			StateTopic      string `json:"state_topic"`
			DeviceClass     string `json:"device_class"`
			AttributesTopic string `json:"json_attributes_topic"`
		} `json:"cmps"`
	}
	eventually(t, 10*time.Second, "the discovery document", func() bool {
		msgs := ha.Messages(topic)
		return len(msgs) > 0 && json.Unmarshal(msgs[len(msgs)-1].Payload, &doc) == nil
	})
	if len(doc.Dev.IDs) == 0 || doc.Cmps["estop"].StateTopic == "" || doc.Cmps["motion_camera_front_frame"].StateTopic == "" {
		t.Fatalf("discovery: %+v", doc)
	}
	// A subscriber that comes now gets every state an entity reads, retained.
	states := m.Subscribe("sub", "sub-pass", "tobe/"+id.AgentID+"/"+id.BodyID+"/state/#")
	for name, c := range doc.Cmps {
		if c.Platform == "event" {
			continue // what happens, not retained
		}
		eventually(t, 10*time.Second, name+"'s state on "+c.StateTopic, func() bool {
			msgs := states.Messages(c.StateTopic)
			return len(msgs) > 0 && msgs[0].Retain && json.Valid(msgs[0].Payload)
		})
	}
	room := doc.Cmps["world_room_front"]
	roomTopic := "tobe/" + id.AgentID + "/" + id.BodyID + "/state/world/room.front"
	if room.DeviceClass != "occupancy" || room.StateTopic != roomTopic || room.AttributesTopic != roomTopic {
		t.Errorf("the room: %+v, want occupancy on %s", room, roomTopic)
	}
	type worldDoc struct {
		Entity, Kind, Value, Provenance string
		Since                           *time.Time `json:"since"`
		MadeAt                          time.Time  `json:"made_at"`
		ClockSynced                     *bool      `json:"clock_synced"`
	}
	last := func() worldDoc {
		var d worldDoc
		if msgs := states.Messages(roomTopic); len(msgs) > 0 {
			json.Unmarshal(msgs[len(msgs)-1].Payload, &d)
		}
		return d
	}
	if d := last(); d.Entity != "room.front" || d.Kind != "room" || d.MadeAt.IsZero() || d.ClockSynced == nil {
		t.Errorf("the room's document at the start: %+v", d)
	}
	if out, err := runCmd(t, "world", "tell", "room.front", "active", "--data", d.data); err != nil {
		t.Fatalf("world tell: %v %s", err, out)
	}
	eventually(t, 10*time.Second, "the room active", func() bool { return last().Value == "active" })
	if d := last(); d.Provenance != "told" || d.Since == nil || time.Since(*d.Since) > time.Minute {
		t.Errorf("the room told active: %+v", d)
	}
	t.Logf("%d entities, each with a retained state", len(doc.Cmps))
}

// M3 and the command topics: an action commanded twice with one id (a
// duplicate, and a replay after the body restarted) acts once, and every
// repeat returns the recorded result; MQTT trips the e-stop and may not
// reset it, nor call an administrative operation; bad payloads each get
// a result that says what is wrong, and the body goes on.
func TestUplinkCommands(t *testing.T) {
	m := mosquittotest.Start(t, brokerUsers)
	dir := t.TempDir()
	data, cfg := filepath.Join(dir, "data"), filepath.Join(dir, "config.json")
	os.WriteFile(cfg, []byte(`{"version": 1, "monitor": {"interval_ms": 100, "print": "always"}`+strings.Replace(uplinkConfig(m.URL()), `"keepalive_s"`,
		`"commands": {"enabled": true, "subject": "mqtt:home", "trust": "medium"}, "keepalive_s"`, 1)+`}`), 0o600)
	d := startDaemonIn(t, data, cfg)
	id := identity(t, data)
	base := "tobe/" + id.AgentID + "/" + id.BodyID
	sub := m.Subscribe("sub", "sub-pass", base+"/cmd_result/#")
	connected := func() bool {
		out, _ := runCmd(t, "status", "--data", data)
		return strings.Contains(out, "uplink    connected")
	}
	eventually(t, 10*time.Second, "connected", connected)
	if out, err := runCmd(t, "grant", "add", "--subject", "mqtt:home", "--capability", "body.notify", "--scope", "home",
		"--expires", time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "--data", data); err != nil {
		t.Fatalf("grant: %v %s", err, out)
	}
	type result struct {
		ID     string `json:"id"`
		Op     string `json:"op"`
		Status string `json:"status"`
		Repeat bool   `json:"repeat"`
		Data   struct {
			ActionID string `json:"action_id"`
			Status   string `json:"status"`
			Repeat   bool   `json:"repeat"`
			Latched  bool   `json:"latched"`
		} `json:"data"`
		Error *struct {
			Reason string `json:"reason"`
			Detail string `json:"detail"`
		} `json:"error"`
	}
	results := func(rid string) []result {
		var out []result
		for _, msg := range sub.Messages(base + "/cmd_result/" + rid) {
			var r result
			if err := json.Unmarshal(msg.Payload, &r); err != nil {
				t.Fatalf("result %s: %v", msg.Payload, err)
			}
			out = append(out, r)
		}
		return out
	}
	command := func(op, payload string) { sub.Publish(base+"/cmd/"+op, []byte(payload), false) }
	await := func(rid string, n int) []result {
		t.Helper()
		eventually(t, 10*time.Second, fmt.Sprintf("%d results for %s", n, rid), func() bool { return len(results(rid)) >= n })
		return results(rid)
	}

	notify := `{"id": "c-1", "args": {"capability": "body.notify", "target": "home", "params": {"message": "the parcel is here"}}}`
	command("action.do", notify)
	command("action.do", notify) // the same id again
	rs := await("c-1", 2)
	// The repeat waits for the first and both answers are sent as each
	// ends: they may reach the broker in either order.
	if rs[0].Data.Repeat && !rs[1].Data.Repeat {
		rs[0], rs[1] = rs[1], rs[0]
	}
	if rs[0].Status != "success" || rs[0].Data.Status != "succeeded" || rs[0].Data.Repeat || rs[1].Data.ActionID != rs[0].Data.ActionID || !rs[1].Data.Repeat {
		t.Fatalf("a command and its repeat: %+v %+v", rs, rs[0].Error)
	}
	// After a restart the runner's record still answers the id.
	d.stop(t)
	d = startDaemonIn(t, data, cfg)
	defer d.stop(t)
	eventually(t, 10*time.Second, "connected again", connected)
	command("action.do", notify)
	rs = await("c-1", 3)
	if rs[2].Data.ActionID != rs[0].Data.ActionID || !rs[2].Data.Repeat {
		t.Fatalf("the replay after a restart: %+v", rs[2])
	}
	out, _ := runCmd(t, "ledger", "events", "--json", "--data", data)
	if n := strings.Count(out, `"event_type":"body.notified"`); n != 1 {
		t.Errorf("%d body.notified events for one command sent three times, want 1", n)
	}

	// The e-stop: tripped from MQTT, not reset from it.
	command("estop.trip", `{"id": "stop-1"}`)
	if r := await("stop-1", 1)[0]; r.Status != "success" {
		t.Errorf("estop.trip: %+v", r)
	}
	command("estop.reset", `{"id": "reset-1"}`)
	if r := await("reset-1", 1)[0]; r.Status != "error" || r.Error == nil || r.Error.Reason != "not_authorized" {
		t.Errorf("estop.reset from MQTT: %+v", r)
	}
	st, _ := runCmd(t, "estop", "status", "--data", data)
	if !strings.Contains(st, "LATCHED") {
		t.Errorf("after a trip and a refused reset from MQTT: %s", st)
	}

	// Bad input: each gets a result saying what is wrong.
	for _, tc := range []struct{ op, payload, rid, reason, detail string }{
		{"status", `not json`, "invalid", "invalid_params", "not a command"},
		{"status", `{"id": "has space"}`, "invalid", "invalid_params", "id \"has space\""},
		{"status", `{"id": "x-1", "args": {}, "extra": 1}`, "x-1", "invalid_params", "unknown field"},
		{"action.do", `{"id": "x-2", "args": 5}`, "x-2", "invalid_params", "args"},
		{"action.do", `{"id": "x-3", "args": {"capability": "body.notify", "target": "home", "idempotency_key": "other"}}`, "x-3", "invalid_params", "idempotency key"},
		{"no.such", `{"id": "x-4"}`, "x-4", "not_found", "no operation"},
		{"grant.add", `{"id": "x-5", "args": {"subject": "mqtt:home", "capability": "gpio.set"}}`, "x-5", "not_authorized", "needs a local administrator"},
		{"ledger.backup", `{"id": "x-6"}`, "x-6", "not_authorized", ""},
		{"status", `{"id": "x-7", "args": {"verbose": true}}`, "x-7", "invalid_params", "verbose"},
	} {
		before := len(results(tc.rid))
		command(tc.op, tc.payload)
		rs := await(tc.rid, before+1)
		r := rs[len(rs)-1]
		if r.Status != "error" || r.Error == nil || r.Error.Reason != tc.reason || !strings.Contains(r.Error.Detail, tc.detail) {
			t.Errorf("%s %s: %+v %+v, want %s with %q", tc.op, tc.payload, r, r.Error, tc.reason, tc.detail)
		}
	}
	command("status", `{"id": "s-1"}`)
	if r := await("s-1", 1)[0]; r.Status != "success" {
		t.Errorf("status after the bad input: %+v", r)
	}
}

// A Home Assistant button: announced once the broker's principal may
// press it (a grant added while the body runs), and a press, its
// command template rendered as Home Assistant renders it (Jinja2, with
// now()), is one action.
func TestUplinkHomeAssistantButton(t *testing.T) {
	if err := exec.Command("python3", "-c", "import jinja2").Run(); err != nil {
		t.Skipf("no python3 with jinja2 here (%v): scripts/deps.sh installs python3-jinja2", err)
	}
	m := mosquittotest.Start(t, brokerUsers)
	cfg := strings.Replace(uplinkConfig(m.URL()), `"keepalive_s"`, `"commands": {"enabled": true, "trust": "medium"},
		"home_assistant": {"buttons": [{"id": "dinner", "name": "Dinner is ready", "capability": "body.notify", "target": "home", "params": {"message": "dinner"}}]},
		"keepalive_s"`, 1)
	d := startDaemon(t, cfg)
	defer d.stop(t)
	id := identity(t, d.data)
	ha := m.Subscribe("sub", "sub-pass", "homeassistant/#")
	results := m.Subscribe("sub", "sub-pass", "tobe/"+id.AgentID+"/"+id.BodyID+"/cmd_result/#")
	eventually(t, 10*time.Second, "connected", func() bool {
		out, _ := runCmd(t, "status", "--data", d.data)
		return strings.Contains(out, "uplink    connected")
	})
	topic := "homeassistant/device/" + id.BodyID + "/config"
	type button struct {
		P               string `json:"p"`
		CommandTopic    string `json:"command_topic"`
		CommandTemplate string `json:"command_template"`
	}
	latest := func() map[string]button {
		msgs := ha.Messages(topic)
		if len(msgs) == 0 {
			return nil
		}
		var doc struct {
			Cmps map[string]button `json:"cmps"`
		}
		json.Unmarshal(msgs[len(msgs)-1].Payload, &doc)
		return doc.Cmps
	}
	ha.Publish("homeassistant/status", []byte("online"), false)
	eventually(t, 10*time.Second, "the discovery document", func() bool { return latest() != nil })
	if _, ok := latest()["button_dinner"]; ok {
		t.Fatal("the button is announced before any grant lets the principal press it")
	}
	if out, err := runCmd(t, "grant", "add", "--subject", "mqtt:home", "--capability", "body.notify", "--scope", "home",
		"--expires", time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "--data", d.data); err != nil {
		t.Fatalf("grant: %v %s", err, out)
	}
	var b button
	eventually(t, 10*time.Second, "the button announced after the grant", func() bool {
		var ok bool
		b, ok = latest()["button_dinner"]
		return ok
	})
	if b.P != "button" || !strings.HasSuffix(b.CommandTopic, "/cmd/action.do") {
		t.Fatalf("button %+v", b)
	}
	// Home Assistant renders the template when the button is pressed.
	const script = `import datetime, jinja2, sys
print(jinja2.Environment().from_string(sys.stdin.read()).render(now=datetime.datetime.now), end="")`
	press := func() {
		cmd := exec.Command("python3", "-c", script)
		cmd.Stdin = strings.NewReader(b.CommandTemplate)
		payload, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("rendering %q: %v %s", b.CommandTemplate, err, payload)
		}
		ha.Publish(b.CommandTopic, payload, false)
	}
	press()
	time.Sleep(5 * time.Millisecond) // another moment: another press
	press()
	eventually(t, 10*time.Second, "two results", func() bool { return len(results.Messages("tobe/")) >= 2 })
	for _, msg := range results.Messages("tobe/") {
		var r struct {
			Status string `json:"status"`
		}
		if json.Unmarshal(msg.Payload, &r); r.Status != "success" {
			t.Errorf("a press: %s", msg.Payload)
		}
	}
	out, _ := runCmd(t, "ledger", "events", "--json", "--data", d.data)
	if n := strings.Count(out, `"event_type":"body.notified"`); n != 2 {
		t.Errorf("%d body.notified events for two presses, want 2", n)
	}
}
