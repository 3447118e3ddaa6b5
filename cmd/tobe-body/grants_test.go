package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/cmd/tobe-body/internal/cli"
	"github.com/tobe-body/tobe-body/ledger"
)

func TestGrantCommandsThroughTheDaemon(t *testing.T) {
	d := startDaemon(t, "")
	// An absolute expiry, which a local administrator may give whether or
	// not this machine's clock is synchronised (a relative one waits for
	// it: the act and awareness tests show that on a step clock).
	out, err := runCmd(t, "grant", "add", "--subject", "agent:pi", "--capability", "gpio.set", "--scope", "gpio.relay1",
		"--expires", time.Now().Add(24*time.Hour).UTC().Format(time.RFC3339), "--reason", "the heater", "--data", d.data)
	if err != nil || !strings.Contains(out, "granted ") || !strings.Contains(out, "agent:pi may use gpio.set on gpio.relay1 until ") {
		t.Fatalf("add: %v %s", err, out)
	}
	if _, err := runCmd(t, "grant", "add", "--subject", "rule:doorbell", "--capability", "audio.*", "--scope", "*", "--data", d.data); err != nil {
		t.Fatal(err)
	}
	// Refusals name the field.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--subject", "pi", "--capability", "gpio.set", "--scope", "*"}, "subject"},
		{[]string{"--subject", "agent:pi", "--capability", "gpio.", "--scope", "*"}, `capability: "gpio." ends in a dot: write "gpio.*"`},
		{[]string{"--subject", "agent:pi", "--capability", "gpio.set", "--scope", "gpio/x"}, "scope"},
		{[]string{"--subject", "agent:pi", "--capability", "gpio.set", "--scope", "*", "--expires", "2020-01-01T00:00:00Z"}, "expires"},
		{[]string{"--subject", "agent:pi", "--capability", "gpio.set", "--scope", "*", "--expires", "tomorrow"}, "expires"},
		{[]string{"--subject", "agent:pi", "--capability", "estop.reset", "--scope", "*"}, "estop.reset cannot be granted"},
	} {
		out, err := runCmd(t, append([]string{"grant", "add", "--data", d.data}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("add %v: %v %s; want an error with %q", tc.args, err, out, tc.want)
		}
	}

	out, err = runCmd(t, "grant", "list", "--json", "--data", d.data)
	var list []awareness.GrantView
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list) != 2 {
		t.Fatalf("list: %v %s", err, out)
	}
	// The grant names the caller from the socket's peer credentials.
	me := fmt.Sprintf("admin:uid=%d", os.Getuid())
	g := list[0]
	if g.ID == "" || g.Subject != "agent:pi" || g.Capability != "gpio.set" || g.Scope != "gpio.relay1" || g.State != "active" ||
		g.By != me || g.Reason != "the heater" || time.Until(g.Expires) < 23*time.Hour || time.Until(g.Expires) > 25*time.Hour {
		t.Errorf("listed %+v", g)
	}
	out, err = runCmd(t, "grant", "list", "--data", d.data)
	if err != nil || !strings.Contains(out, g.ID) || !strings.Contains(out, "rule:doorbell") || !strings.Contains(out, "never") {
		t.Errorf("list: %v\n%s", err, out)
	}

	out, err = runCmd(t, "grant", "revoke", g.ID, "--reason", "summer", "--data", d.data)
	if err != nil || !strings.Contains(out, "revoked "+g.ID) {
		t.Fatalf("revoke: %v %s", err, out)
	}
	if out, err := runCmd(t, "grant", "revoke", g.ID, "--data", d.data); err == nil || !strings.Contains(err.Error(), "already revoked") {
		t.Errorf("second revoke: %v %s", err, out)
	}
	if out, err := runCmd(t, "grant", "revoke", "no-such-id", "--data", d.data); err == nil || !strings.Contains(err.Error(), "no such grant") {
		t.Errorf("revoke of an unknown id: %v %s", err, out)
	}
	out, _ = runCmd(t, "grant", "list", "--data", d.data)
	if strings.Contains(out, g.ID) || !strings.Contains(out, "rule:doorbell") {
		t.Errorf("list after revoke:\n%s", out)
	}

	// The ledger holds the events.
	out, err = runCmd(t, "ledger", "events", "--type", "grant.", "--json", "--data", d.data)
	if err != nil {
		t.Fatal(err)
	}
	var evs []ledger.EventView
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var e ledger.EventView
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("%v: %q", err, line)
		}
		evs = append(evs, e)
	}
	if len(evs) != 3 || evs[0].Type != "grant.added" || evs[1].Type != "grant.added" || evs[2].Type != "grant.revoked" {
		t.Fatalf("grant events %+v", evs)
	}
	added, _ := json.Marshal(evs[0].Payload)
	revoked, _ := json.Marshal(evs[2].Payload)
	for _, want := range []string{`"id":"` + g.ID + `"`, `"subject":"agent:pi"`, `"capability":"gpio.set"`, `"scope":"gpio.relay1"`, `"expires":"`, `"by":"` + me + `"`, `"reason":"the heater"`} {
		if !strings.Contains(string(added), want) {
			t.Errorf("grant.added payload %s lacks %s", added, want)
		}
	}
	if want := `{"by":"` + me + `","id":"` + g.ID + `","reason":"summer"}`; string(revoked) != want {
		t.Errorf("grant.revoked payload %s, want %s", revoked, want)
	}

	// After a restart the grants are read back from the ledger.
	d.stop(t)
	d = startDaemonIn(t, d.data, filepath.Join(filepath.Dir(d.data), "config.json"))
	defer d.stop(t)
	out, err = runCmd(t, "grant", "list", "--all", "--json", "--data", d.data)
	list = nil
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list) != 2 || list[0].State != "revoked" ||
		list[0].RevokeReason != "summer" || list[1].State != "active" {
		t.Errorf("after restart: %v %s", err, out)
	}
}

func TestGrantCommandUsage(t *testing.T) {
	for _, args := range [][]string{
		{"grant"}, {"grant", "give"}, {"grant", "revoke"}, {"grant", "revoke", "a", "b"},
		{"grant", "add", "--capability", "gpio.set", "--scope", "*"},
		{"grant", "add", "--subject", "agent:pi", "--scope", "*"},
		{"grant", "add", "--subject", "agent:pi", "--capability", "gpio.set"},
		{"grant", "list", "extra"},
	} {
		var errOut bytes.Buffer
		err := run(t.Context(), args, nil, io.Discard, &errOut)
		if code := cli.ExitCode(err, &errOut); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errOut.String())
		}
	}
	if out, err := runCmd(t, "grant", "list", "--data", t.TempDir()); err == nil || !strings.Contains(err.Error(), "no tobe-body is running") {
		t.Errorf("without a daemon: %v %s", err, out)
	}
}
