package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/ledger"
)

func TestLedgerCommandsThroughTheDaemonAndOffline(t *testing.T) {
	d := startDaemon(t, "")
	out, err := runCmd(t, "ledger", "events", "--data", d.data, "--json")
	if err != nil {
		t.Fatalf("events: %v %s", err, out)
	}
	var ev ledger.EventView
	if err := json.Unmarshal([]byte(strings.Split(out, "\n")[0]), &ev); err != nil || ev.Type != "body.started" || ev.Seq != 1 {
		t.Fatalf("first event %+v (%v) from %q", ev, err, out)
	}
	out, err = runCmd(t, "ledger", "stats", "--data", d.data, "--json")
	var st ledger.Stats
	// body.started, and what the sense channels saw meanwhile (the
	// self-state's level at start at least); with no uplink configured,
	// nothing queued for one.
	if err != nil || json.Unmarshal([]byte(out), &st) != nil || st.Events < 2 || st.OutboxRows != 0 {
		t.Errorf("stats: %v %s", err, out)
	}
	if out, err := runCmd(t, "ledger", "verify", "--data", d.data); err != nil || !strings.Contains(out, "ok: the ledger is consistent") {
		t.Errorf("verify: %v %s", err, out)
	}
	backup := filepath.Join(t.TempDir(), "b.db")
	if out, err := runCmd(t, "ledger", "backup", backup, "--data", d.data); err != nil || !strings.Contains(out, backup) {
		t.Errorf("backup: %v %s", err, out)
	}
	if out, err := runCmd(t, "ledger", "compact", "--data", d.data); err == nil || !strings.Contains(err.Error(), "stop it first") {
		t.Errorf("compact while running: %v %s", err, out)
	}
	out, _ = runCmd(t, "status", "--data", d.data)
	if !strings.Contains(out, "safety    normal") || !strings.Contains(out, "ledger    ") || !strings.Contains(out, " events (last seq ") {
		t.Errorf("status:\n%s", out)
	}
	d.stop(t)

	// Offline: the file itself.
	out, err = runCmd(t, "ledger", "events", "--data", d.data, "--type", "body.")
	if err != nil || !strings.Contains(out, "body.started") || !strings.Contains(out, "body.stopped") {
		t.Errorf("offline events: %v %s", err, out)
	}
	if out, err := runCmd(t, "ledger", "verify", "--data", d.data); err != nil {
		t.Errorf("offline verify: %v %s", err, out)
	}
	if out, err := runCmd(t, "ledger", "compact", "--data", d.data); err != nil || !strings.Contains(out, "compacted") {
		t.Errorf("compact: %v %s", err, out)
	}
	if out, err := runCmd(t, "ledger", "stats", "--data", t.TempDir()); err == nil || !strings.Contains(out+err.Error(), "no ledger at") {
		t.Errorf("stats of an empty data dir: %v %s", err, out)
	}
	if out, err := runCmd(t, "ledger", "events", "--since", "yesterday", "--data", d.data); err == nil {
		t.Errorf("bad --since accepted: %s", out)
	}
}

func TestDamagedLedgerStartsLatched(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	os.MkdirAll(data, 0o750)
	os.WriteFile(filepath.Join(data, body.LedgerFile), []byte("this is not a ledger, it is a crash during first creation"), 0o640)
	cfg := filepath.Join(dir, "c.json")
	os.WriteFile(cfg, []byte(`{"version": 1, "monitor": {"interval_ms": 100, "print": "always"}}`), 0o600)
	d := startDaemonIn(t, data, cfg)
	out, err := runCmd(t, "status", "--data", data)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "safety    latched: the ledger was damaged") || !strings.Contains(out, ".corrupt.") {
		t.Errorf("status after a damaged ledger:\n%s", out)
	}
	// Latched means latched: the e-stop says so and nothing acts, though
	// the fresh ledger would take the records. What the damaged one held
	// (a latch among it) is unknown.
	out, _ = runCmd(t, "estop", "status", "--data", data)
	if !strings.Contains(out, "LATCHED: latched at start: the ledger was damaged") {
		t.Errorf("e-stop after a damaged ledger:\n%s", out)
	}
	out, err = runCmd(t, "do", "gpio.set", "gpio.led", "state=on", "--data", data)
	if err == nil || !strings.Contains(out, "refused (estop_latched)") {
		t.Errorf("an action after a damaged ledger: %v\n%s", err, out)
	}
	d.stop(t)
	moved, _ := filepath.Glob(filepath.Join(data, body.LedgerFile+".corrupt.*"))
	if len(moved) != 1 {
		t.Errorf("the damaged file was not kept aside: %v", moved)
	}
	out, _ = runCmd(t, "ledger", "events", "--data", data, "--type", "ledger.")
	if !strings.Contains(out, "ledger.recovered") {
		t.Errorf("no ledger.recovered event: %s", out)
	}
}

func TestLedgerClassesFromConfig(t *testing.T) {
	for _, tc := range []struct {
		classes map[string]string
		want    string // "" ok
	}{
		{map[string]string{"workitem.": "audit", "sense.": "telemetry"}, ""},
		{map[string]string{"estop.": "telemetry"}, "would move audit events"},
		{map[string]string{"": "local"}, "would move audit events"},
		{map[string]string{"est": "local"}, "would move audit events"},
		{map[string]string{"x.": "loud"}, "unknown class"},
		{map[string]string{"estop.": "audit"}, "would move estop. events out of the safety class"},
		{map[string]string{"body.degradation": "state"}, "would move body.degradation events out of the safety class"},
		{map[string]string{"camera.": "state", "gpio.button": "safety"}, ""},
	} {
		_, err := body.LedgerClasses(config.Ledger{TelemetryTTLDays: 3, Classes: tc.classes})
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.classes, err, tc.want)
		}
	}
	c, _ := body.LedgerClasses(config.Ledger{TelemetryTTLDays: 3, Classes: map[string]string{"sense.": "telemetry"}})
	if got := c.Of("sense.x").TTL; got != 72*time.Hour {
		t.Errorf("configured telemetry TTL %v", got)
	}
	if got := c.Of("camera.motion_started").TTL; got != 72*time.Hour {
		t.Errorf("built-in telemetry TTL %v", got)
	}
	if c.Of("estop.tripped").Droppable || c.Of("estop.tripped").TTL != 0 {
		t.Error("estop events became droppable or expiring")
	}
	c, _ = body.LedgerClasses(config.Ledger{TelemetryTTLDays: 3, Classes: map[string]string{"lease.": "audit"}})
	for _, typ := range []string{"estop.tripped", "lease.human_takeover", "body.degradation"} {
		if cl := c.Of(typ); !cl.Urgent || cl.Droppable || cl.TTL != 0 {
			t.Errorf("%s: class %+v, want it urgent, kept and never dropped", typ, cl)
		}
	}
	if c.Of("body.self_state").Urgent || c.Of("lease.granted").Urgent {
		t.Error("a type that is not about safety went urgent")
	}
}

func TestLedgerEventsFollow(t *testing.T) {
	d := startDaemon(t, "")
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"ledger", "events", "--follow", "--json", "--data", d.data}, nil, pw, io.Discard)
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	var types []string
	next := func() string {
		if !lines.Scan() {
			t.Fatalf("follow ended after %v", types)
		}
		var e ledger.EventView
		json.Unmarshal(lines.Bytes(), &e)
		types = append(types, e.Type)
		return e.Type
	}
	if got := next(); got != "body.started" {
		t.Fatalf("first followed event %s", got)
	}
	d.stop(t) // records body.stopped last: the follower gets it from the daemon, or from the file once it stopped
	for got := next(); got != "body.stopped"; got = next() {
		if len(types) > 100 {
			t.Fatalf("followed %v, no body.stopped", types)
		}
	}
	cancel()
	go io.Copy(io.Discard, pr)
	<-done
}

// A secret in the config reaches none of stdout, stderr, status, the
// ledger or the broker (the embedded one, where a subscriber takes
// everything the body publishes).
func TestSecretNeverLeavesTheDaemon(t *testing.T) {
	const canary = "CANARY-daemon-4c1e"
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	d := startDaemon(t, fmt.Sprintf(`, "log": {"level": "debug"}, "mqtt": {"enabled": true, "broker": "tcp://127.0.0.1:%d", "embedded_broker": true, "embedded_port": %d, "json_mirror": ["audit", "safety", "state", "telemetry"], "username": "body", "password": "`+canary+`"}`, port, port))
	var mu sync.Mutex
	var published strings.Builder
	sub := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(fmt.Sprintf("tcp://127.0.0.1:%d", port)).SetClientID("canary-watch").SetAutoReconnect(false))
	if tok := sub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connect to the embedded broker: %v", tok.Error())
	}
	defer sub.Disconnect(100)
	tok := sub.Subscribe("#", 1, func(_ mqtt.Client, m mqtt.Message) {
		mu.Lock()
		published.WriteString(m.Topic() + " " + string(m.Payload()) + "\n")
		mu.Unlock()
	})
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	var seen strings.Builder
	for range 3 { // a few reports of what the body sees
		if d.lines.Scan() {
			seen.WriteString(d.lines.Text())
		}
	}
	st, _ := runCmd(t, "status", "--json", "--data", d.data)
	evs, _ := runCmd(t, "ledger", "events", "--json", "--data", d.data)
	d.stop(t)
	mu.Lock()
	mqttSeen := published.String()
	mu.Unlock()
	if !strings.Contains(mqttSeen, "/status online") {
		t.Errorf("the subscriber saw nothing of the body: %q", mqttSeen)
	}
	for name, s := range map[string]string{"stdout": seen.String(), "stderr": d.stderr.String(), "status": st, "ledger": evs, "MQTT": mqttSeen} {
		if strings.Contains(s, canary) {
			t.Errorf("the secret is in %s: %s", name, s)
		}
	}
	raw, _ := os.ReadFile(filepath.Join(d.data, body.LedgerFile))
	if strings.Contains(string(raw), canary) {
		t.Error("the secret is in the ledger file")
	}
}

// `ledger events` prints every event asked for though each reply stops at
// its byte budget: it follows the replies' cursor (more, last_seq).
func TestLedgerEventsFollowsTheCursor(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o750); err != nil {
		t.Fatal(err)
	}
	id, _, err := body.LoadIdentity(data, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	opts, err := body.LedgerOptions(config.Default().Ledger, data, id, nil, act.Projections()...)
	if err != nil {
		t.Fatal(err)
	}
	store, err := ledger.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	// About 2.4 MB of events: many replies' worth.
	const n = 300
	pad := strings.Repeat("x", 8<<10)
	var evs []ledger.Event
	for i := range n {
		p, _ := ledger.MarshalPayload(map[string]any{"n": i, "pad": pad})
		evs = append(evs, ledger.Event{Type: "test.padded", Provenance: ledger.Observed, Payload: p})
	}
	if _, err := store.Append(t.Context(), evs...); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "c.json")
	os.WriteFile(cfg, []byte(`{"version": 1, "monitor": {"interval_ms": 100, "print": "always"}}`), 0o600)
	for _, running := range []bool{true, false} {
		var d *testDaemon
		if running {
			d = startDaemonIn(t, data, cfg)
		}
		for _, args := range [][]string{{}, {"--limit", "250"}} {
			out, err := runCmd(t, append([]string{"ledger", "events", "--json", "--type", "test.padded", "--data", data}, args...)...)
			if err != nil {
				if d != nil {
					t.Log(d.stderr)
				}
				t.Fatalf("events %v: %v", args, err)
			}
			want := n
			if len(args) > 0 {
				want = 250
			}
			seen := map[uint64]bool{}
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				var e ledger.EventView
				if err := json.Unmarshal([]byte(line), &e); err != nil {
					t.Fatalf("a line that is not an event: %.80q: %v", line, err)
				}
				if seen[e.Seq] {
					t.Errorf("event %d printed twice", e.Seq)
				}
				seen[e.Seq] = true
			}
			if len(seen) != want {
				t.Errorf("daemon running %v, %v: got %d events, want %d", running, args, len(seen), want)
			}
		}
		if d != nil {
			d.stop(t)
		}
	}
}
