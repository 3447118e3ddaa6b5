package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/admin"
	"github.com/tobe-body/tobe-body/awareness/agent"
	"github.com/tobe-body/tobe-body/awareness/agent/sshdtest"
	"github.com/tobe-body/tobe-body/cmd/tobe-body/internal/cli"
)

// startSSHD runs sshd on loopback whose forced command, for the test's
// client key, is this test binary as `tobe-body stdio --data data
// --principal principal`.
func startSSHD(t *testing.T, data, principal string) *sshdtest.SSHD {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("the sshd tests run sshd as root (it logs in as this user with a forced command)")
	}
	// Under a user-mode emulator (the cross build runs the ARM tests with
	// qemu-user, not through binfmt_misc) sshd cannot execute this test
	// binary as its forced command; make test runs it natively.
	if err := exec.Command(os.Args[0], "-test.run=^$").Run(); errors.Is(err, syscall.ENOEXEC) {
		t.Skipf("this kernel cannot execute the test binary (%v): it runs under an emulator, and sshd needs a real process", err)
	}
	forced := fmt.Sprintf("TOBE_BODY_TEST_MAIN=1 exec %s stdio --data %s --principal %s", os.Args[0], data, principal)
	s, err := sshdtest.Start(t.TempDir(), forced)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sshd wrote:\n%s", s.Log())
		}
		s.Close()
	})
	return s
}

// connect runs ssh to s with the official SDK's client over it.
func connect(t *testing.T, s *sshdtest.SSHD, obs chan<- awareness.Observation) (*mcp.ClientSession, *exec.Cmd) {
	t.Helper()
	cmd := s.Command()
	cmd.Stderr = os.Stderr
	on := func(method string, params json.RawMessage) {
		var o awareness.Observation
		if obs != nil && method == agent.ObservationMethod && json.Unmarshal(params, &o) == nil {
			select {
			case obs <- o:
			default:
			}
		}
	}
	cl := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := cl.Connect(context.Background(), &agent.ObservingTransport{Transport: &mcp.CommandTransport{Command: cmd}, On: on}, nil)
	if err != nil {
		t.Fatalf("MCP over ssh: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, cmd
}

// Through a real sshd with the forced command: tools, a call, a pushed
// observation; a client that asks for a shell or another command gets
// only the bridge.
func TestAgentOverSSH(t *testing.T) {
	d := startDaemon(t, agentConfig())
	defer d.stop(t)
	s := startSSHD(t, d.data, "pi")
	obs := make(chan awareness.Observation, 16)
	cs, _ := connect(t, s, obs)
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) < 8 {
		t.Fatalf("tools over ssh: %v %v", tools, err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "estop_trip"})
	if err != nil || res.IsError {
		t.Fatalf("estop_trip over ssh: %+v %v", res, err)
	}
	select {
	case o := <-obs:
		if o.Type != "estop.tripped" || o.Attention.String() != "max" {
			t.Errorf("pushed %+v", o)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no observation over ssh")
	}
	cs.Close()

	// Another command, or a shell: the forced command runs instead; with
	// nothing on its stdin the bridge ends at once and prints nothing.
	for _, remote := range [][]string{{"echo", "pwned;", "id"}, {}} {
		cmd := s.Command(remote...)
		cmd.Stdin = strings.NewReader("")
		out, err := cmd.CombinedOutput()
		if err != nil || strings.Contains(string(out), "pwned") || strings.Contains(string(out), "uid=") || len(out) != 0 {
			t.Errorf("ssh %q: %v, printed %q: want only the bridge, ending quietly", remote, err, out)
		}
	}
}

// E7 end to end: the SSH connection is cut while a long gpio_pulse of its
// session runs; the pulse stops within the heartbeat window, and another
// session's pulse goes on.
func TestSSHCutStopsItsSessionsPulse(t *testing.T) {
	d := startDaemon(t, agentConfig())
	defer d.stop(t)
	if out, err := runCmd(t, "grant", "add", "--subject", "agent:pi", "--capability", "gpio.*", "--scope", "*", "--data", d.data); err != nil {
		t.Fatalf("grant: %v\n%s", err, out)
	}
	s := startSSHD(t, d.data, "pi-high")
	cs, sshCmd := connect(t, s, nil)
	other := startBridge(t, "--data", d.data, "--principal", "pi-high") // a second session, beside the socket
	defer func() { other.stdin.Close(); other.cs.Close() }()
	// The other session stays alive as a client does: a ping well within
	// the heartbeat window (a session silent for the window is ended, and
	// this test runs longer than one).
	alive, stopPinging := context.WithCancel(context.Background())
	var pinging sync.WaitGroup
	pinging.Go(func() {
		tick := time.NewTicker(act.DefaultHeartbeat / 4)
		defer tick.Stop()
		for {
			select {
			case <-alive.Done():
				return
			case <-tick.C:
				other.cs.Ping(alive, nil)
			}
		}
	})
	defer func() { stopPinging(); pinging.Wait() }()
	adm := &admin.Client{Path: filepath.Join(d.data, cli.AdminSocket), Timeout: 10 * time.Second}
	if out, err := runCmd(t, "estop", "reset", "--data", d.data); err != nil {
		t.Logf("estop reset: %v %s", err, out)
	}

	pulse := func(cs *mcp.ClientSession, target, key string) {
		go cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "gpio_pulse",
			Arguments: map[string]any{"target": target, "duration_ms": 15000, "idempotency_key": key}})
	}
	running := func(key string) string {
		var id string
		waitForCond(t, "the pulse "+key+" running", 10*time.Second, func() bool {
			r, err := admin.Call(context.Background(), adm, awareness.OpEvents, awareness.EventsIn{Types: []string{"action.running"}, Limit: 100})
			if err != nil {
				return false
			}
			for _, e := range r.Events {
				if strings.Contains(fmt.Sprint(e.Payload), key) {
					id = strings.TrimPrefix(e.AggregateID, "action:")
					return true
				}
			}
			return false
		})
		return id
	}
	pulse(cs, "gpio.relay2", "cut-me")
	mine := running("cut-me")
	pulse(other.cs, "gpio.led", "keep-me")
	theirs := running("keep-me")

	cut := time.Now()
	sshCmd.Process.Kill() // the SSH connection drops
	var stopped time.Duration
	waitForCond(t, "the cut session's pulse to stop", 10*time.Second, func() bool {
		r, err := admin.Call(context.Background(), adm, awareness.OpResult, awareness.ResultIn{ActionID: mine})
		if err == nil && r.Status.Final() {
			stopped = time.Since(cut)
			if r.Status != act.Cancelled || r.Reason != act.ReasonSessionEnded {
				t.Errorf("the cut session's pulse: %s %s %s", r.Status, r.Reason, r.Detail)
			}
			return true
		}
		return false
	})
	t.Logf("E7 over ssh: the cut session's pulse stopped %v after the cut (heartbeat window %v)", stopped.Round(time.Millisecond), act.DefaultHeartbeat)
	if stopped > act.DefaultHeartbeat+3*time.Second { // E7: within the window (a bound, with room for a loaded machine)
		t.Errorf("the pulse stopped %v after the cut, beyond the heartbeat window", stopped)
	}
	if r, err := admin.Call(context.Background(), adm, awareness.OpResult, awareness.ResultIn{ActionID: theirs}); err != nil || r.Status.Final() {
		t.Errorf("the other session's pulse: %+v %v, want it still running", r, err)
	}
}

func waitForCond(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
