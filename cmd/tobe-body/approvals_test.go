package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/cmd/tobe-body/internal/cli"
)

// vault is an R3 capability for tests only (no board has one): it counts
// what it did, on the body.notify channel's state.
type vault struct {
	mu   sync.Mutex
	done []string
}

func (v *vault) Capability() act.Capability {
	return act.Capability{Name: "test.irreversible", Risk: act.R3, Verify: "its own count"}
}

func (v *vault) Channel(target string, _ map[string]string) (string, error) {
	if target != "test.vault" {
		return "", errors.New("no such target")
	}
	return "body.notify", nil
}

func (v *vault) Do(_ context.Context, inv *act.Invocation) (string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.done = append(v.done, inv.ActionID)
	return "emptied the vault", nil
}

func (v *vault) Verify(_ context.Context, inv *act.Invocation) act.Verification {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, id := range v.done {
		if id == inv.ActionID {
			return act.Verification{Result: "verified", Evidence: "counted"}
		}
	}
	return act.Verification{Result: "failed", Evidence: "not counted"}
}

func (v *vault) ran() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.done...)
}

// withVault adds the test's R3 capability to the daemons the test starts.
func withVault(t *testing.T) *vault {
	v := &vault{}
	testActions = []act.Action{v}
	t.Cleanup(func() { testActions = nil })
	return v
}

// askVault asks for the R3 action through `do` and returns its id: it
// waits for approval.
func askVault(t *testing.T, data string, args ...string) string {
	t.Helper()
	out, err := runCmd(t, append([]string{"do", "test.irreversible", "test.vault", "--data", data}, args...)...)
	var ee *cli.ExitError
	if !errors.As(err, &ee) || ee.Code != 1 || !strings.Contains(out, " waiting_approval (approval_required): waiting until ") {
		t.Fatalf("do: %v\n%s", err, out)
	}
	id, _, _ := strings.Cut(out, " ")
	if !strings.Contains(out, "tobe-body approve "+id) {
		t.Errorf("do does not say how to approve:\n%s", out)
	}
	return id
}

func waitingList(t *testing.T, data string) []act.WaitingInvocation {
	t.Helper()
	out, err := runCmd(t, "approvals", "--json", "--data", data)
	var list []act.WaitingInvocation
	if err != nil || json.Unmarshal([]byte(out), &list) != nil {
		t.Fatalf("approvals: %v\n%s", err, out)
	}
	return list
}

// TestApprovalCommandsThroughTheDaemon: an R3 action waits; approvals,
// approve and deny through the admin socket; a second approve is refused;
// the e-stop cancels what waits; a restart cancels what waited; the
// ledger holds every step.
func TestApprovalCommandsThroughTheDaemon(t *testing.T) {
	v := withVault(t)
	// R3 waits for a synchronised clock (act.safety.unsynced_clock_refuse_from),
	// which this machine's may not be: approvals are what is tested here.
	d := startDaemon(t, `, "act": {"safety": {"unsynced_clock_refuse_from": "never"}}`)
	cfg := filepath.Join(filepath.Dir(d.data), "config.json")
	me := fmt.Sprintf("admin:uid=%d", os.Getuid())
	// R3 needs a grant, a local administrator's too.
	if out, err := runCmd(t, "grant", "add", "--subject", me, "--capability", "test.irreversible", "--scope", "test.vault", "--data", d.data); err != nil {
		t.Fatalf("grant: %v\n%s", err, out)
	}
	if out, err := runCmd(t, "approvals", "--data", d.data); err != nil || !strings.Contains(out, "nothing waits for approval") {
		t.Errorf("approvals with nothing waiting: %v\n%s", err, out)
	}

	id := askVault(t, d.data, "what=everything", "--key", "k-1")
	if len(v.ran()) != 0 {
		t.Fatal("the R3 action ran before it was approved")
	}
	out, err := runCmd(t, "approvals", "--data", d.data)
	if err != nil || !strings.Contains(out, id) || !strings.Contains(out, "test.irreversible") || !strings.Contains(out, `what="everything"`) || !strings.Contains(out, me) {
		t.Errorf("approvals:\n%v\n%s", err, out)
	}
	if list := waitingList(t, d.data); len(list) != 1 || list[0].ActionID != id || list[0].Risk != "R3" || list[0].Principal != me {
		t.Errorf("approvals --json: %+v", list)
	}
	out, err = runCmd(t, "approve", id, "--data", d.data)
	if err != nil || !strings.Contains(out, id+" succeeded") || !strings.Contains(out, "did:      emptied the vault") {
		t.Fatalf("approve: %v\n%s", err, out)
	}
	if ran := v.ran(); len(ran) != 1 || ran[0] != id {
		t.Errorf("ran %v, want %s once", ran, id)
	}
	// Never twice: a second approve is refused, and the same key again
	// returns the result.
	if out, err := runCmd(t, "approve", id, "--data", d.data); err == nil || !strings.Contains(err.Error(), "approved by "+me+" already and is succeeded") {
		t.Errorf("second approve: %v\n%s", err, out)
	}
	if out, _ := runCmd(t, "do", "test.irreversible", "test.vault", "what=everything", "--key", "k-1", "--data", d.data); !strings.Contains(out, id+" succeeded") {
		t.Errorf("the same key again:\n%s", out)
	}
	if len(v.ran()) != 1 {
		t.Errorf("ran %v", v.ran())
	}

	// Deny, with a reason.
	denied := askVault(t, d.data)
	out, err = runCmd(t, "deny", denied, "--why", "not today", "--data", d.data)
	if err != nil || !strings.Contains(out, denied+" cancelled (approval_denied): denied by "+me+": not today") {
		t.Errorf("deny: %v\n%s", err, out)
	}
	if out, err := runCmd(t, "approve", denied, "--data", d.data); err == nil || !strings.Contains(err.Error(), "denied by") {
		t.Errorf("approve after deny: %v\n%s", err, out)
	}
	if out, err := runCmd(t, "approve", "no-such-action", "--data", d.data); err == nil || !strings.Contains(err.Error(), "no invocation with that id waits for approval") {
		t.Errorf("approve of an unknown id: %v\n%s", err, out)
	}

	// The e-stop cancels what waits; after a reset it still cannot be approved.
	tripped := askVault(t, d.data)
	out, err = runCmd(t, "estop", "trip", "--data", d.data)
	if err != nil || !strings.Contains(out, tripped) {
		t.Errorf("trip does not say it cancelled %s: %v\n%s", tripped, err, out)
	}
	if out, err := runCmd(t, "estop", "reset", "--data", d.data); err != nil {
		t.Fatalf("reset: %v\n%s", err, out)
	}
	if out, err := runCmd(t, "approve", tripped, "--data", d.data); err == nil || !strings.Contains(err.Error(), "cancelled (estop_latched)") {
		t.Errorf("approve after a trip: %v\n%s", err, out)
	}
	if list := waitingList(t, d.data); len(list) != 0 {
		t.Errorf("still waiting after the trip: %+v", list)
	}

	// A restart: what waited is cancelled, and cannot be approved after.
	restarted := askVault(t, d.data)
	d.stop(t)
	d = startDaemonIn(t, d.data, cfg)
	if list := waitingList(t, d.data); len(list) != 0 {
		t.Errorf("waiting after a restart: %+v", list)
	}
	if out, err := runCmd(t, "approve", restarted, "--data", d.data); err == nil || !strings.Contains(err.Error(), "not waiting for approval") {
		t.Errorf("approve after a restart: %v\n%s", err, out)
	}
	d.stop(t)
	if len(v.ran()) != 1 {
		t.Errorf("ran %v, want one", v.ran())
	}

	out, err = runCmd(t, "ledger", "events", "--type", "action.", "--json", "--data", d.data)
	if err != nil {
		t.Fatal(err)
	}
	steps := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var e struct {
			Type      string `json:"event_type"`
			Aggregate string `json:"aggregate_id"`
			Payload   struct {
				Result struct {
					Reason string `json:"reason"`
				} `json:"result"`
			} `json:"payload"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		s := strings.TrimPrefix(e.Type, "action.")
		if e.Payload.Result.Reason != "" && s == "cancelled" {
			s += "(" + e.Payload.Result.Reason + ")"
		}
		id := strings.TrimPrefix(e.Aggregate, "action:")
		steps[id] = append(steps[id], s)
	}
	for id, want := range map[string]string{
		id:        "proposed waiting_approval approved running succeeded",
		denied:    "proposed waiting_approval cancelled(approval_denied)",
		tripped:   "proposed waiting_approval cancelled(estop_latched)",
		restarted: "proposed waiting_approval cancelled(approval_expired)",
	} {
		if got := strings.Join(steps[id], " "); got != want {
			t.Errorf("%s recorded %q, want %q", id, got, want)
		}
	}
}

func TestApprovalCommandUsage(t *testing.T) {
	for _, args := range [][]string{
		{"approve"}, {"approve", "a", "b"}, {"deny"}, {"approvals", "extra"}, {"approve", "a", "--why", "x"},
	} {
		var errOut bytes.Buffer
		err := run(t.Context(), args, nil, io.Discard, &errOut)
		if code := cli.ExitCode(err, &errOut); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errOut.String())
		}
	}
	if out, err := runCmd(t, "approvals", "--data", t.TempDir()); err == nil || !strings.Contains(err.Error(), "no tobe-body is running") {
		t.Errorf("without a daemon: %v %s", err, out)
	}
}
