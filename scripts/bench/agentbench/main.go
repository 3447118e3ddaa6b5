// Package main is agentbench, the Go half of scripts/bench/agent.sh: the
// agent boundary's figures against a real daemon binary on the sim board.
//
//	agentbench -bin TOBE_BODY [-calls 1000] [-pushes 200] [-via socket|stdio]
//
// It starts `TOBE_BODY run --board sim` on a fresh data directory whose
// config makes the caller's uid an agent at high trust and has
// body.notified observed at high attention, connects as an agent with the
// official MCP SDK's client (to agent.sock, or through `TOBE_BODY stdio`
// with -via stdio), and measures:
//
//   - the round trip of an observe call (body_status), -calls times;
//   - the push latency of -pushes observations: a local administrator
//     has the body notify (body.notify through the admin socket), and the
//     time from the event's commit (its ingested_at) to the client
//     reading its notification is taken.
//
// Each prints p50, p99 and max. Figures of a shared machine: never a
// pass or fail.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/admin"
	"github.com/tobe-body/tobe-body/awareness/agent"
	"github.com/tobe-body/tobe-body/awareness/agent/sshdtest"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "agentbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("agentbench", flag.ContinueOnError)
	bin := fs.String("bin", "", "the tobe-body binary")
	calls := fs.Int("calls", 1000, "observe calls to time")
	pushes := fs.Int("pushes", 200, "observations to time")
	via := fs.String("via", "socket", "socket (agent.sock), stdio (through tobe-body stdio) or ssh (a real sshd on loopback whose forced command is tobe-body stdio; as root)")
	tool := fs.String("tool", "body_status", "the observe tool whose calls are timed")
	boardName := fs.String("board", "sim", "the board the daemon runs on")
	clientGC := fs.Int("client-gogc", 0, "the client's GOGC (0: as GOGC says), to tell the client's collections from the daemon's")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *clientGC != 0 {
		debug.SetGCPercent(*clientGC)
	}
	if *bin == "" {
		return errors.New("-bin: the tobe-body binary to measure")
	}
	dir, err := os.MkdirTemp("", "agentbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	data := filepath.Join(dir, "data")
	cfg := filepath.Join(dir, "config.json")
	uid := os.Getuid()
	conf := fmt.Sprintf(`{"version": 1, "monitor": {"quiet": true},
 "act": {"rate_limits": {"per_principal": {"burst": 100000, "per_second": 100000}, "by_capability": {"body.notify": {"burst": 100000, "per_second": 100000}}}},
 "agent": {"principals": [{"name": "bench", "subject": "agent:bench", "uid": %d, "trust": "high"}],
  "observations": {"rules": [{"type": "body.notified", "actor": "service", "attention": "high", "trust": "high", "text": "{message}"}]}}}`, uid)
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		return err
	}
	daemon := exec.Command(*bin, "run", "--board", *boardName, "--data", data, "--config", cfg)
	daemon.Stdout, daemon.Stderr = io.Discard, io.Discard
	if err := daemon.Start(); err != nil {
		return err
	}
	defer func() {
		daemon.Process.Signal(os.Interrupt)
		daemon.Wait()
	}()
	sock := filepath.Join(data, agent.SocketName)
	adm := &admin.Client{Path: filepath.Join(data, "admin.sock"), Timeout: 10 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := admin.Call(ctx, adm, awareness.OpStatus, awareness.None{}); err == nil {
			if _, err := os.Stat(sock); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			return errors.New("the daemon did not answer within 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}

	var mu sync.Mutex
	seen := map[uint64]time.Time{} // by the event's seq: when its notification was read
	arrived := make(chan struct{}, *pushes+16)
	on := func(method string, params json.RawMessage) {
		now := time.Now()
		var o awareness.Observation
		if method != agent.ObservationMethod || json.Unmarshal(params, &o) != nil || o.Type != "body.notified" {
			return
		}
		mu.Lock()
		seen[o.Seq] = now
		mu.Unlock()
		arrived <- struct{}{}
	}
	var t mcp.Transport
	switch *via {
	case "socket":
		c, err := net.Dial("unix", sock)
		if err != nil {
			return err
		}
		defer c.Close()
		t = &mcp.IOTransport{Reader: c, Writer: c}
	case "stdio":
		cmd := exec.Command(*bin, "stdio", "--data", data)
		cmd.Stderr = os.Stderr
		t = &mcp.CommandTransport{Command: cmd}
	case "ssh":
		sshd, err := sshdtest.Start(dir, fmt.Sprintf("exec %s stdio --data %s", *bin, data))
		if err != nil {
			return fmt.Errorf("-via ssh: %w", err)
		}
		defer sshd.Close()
		cmd := sshd.Command()
		cmd.Stderr = os.Stderr
		t = &mcp.CommandTransport{Command: cmd}
	default:
		return fmt.Errorf("-via %q: socket, stdio or ssh", *via)
	}
	cl := mcp.NewClient(&mcp.Implementation{Name: "agentbench", Version: "1"}, nil)
	cs, err := cl.Connect(ctx, &agent.ObservingTransport{Transport: t, On: on}, nil)
	if err != nil {
		return err
	}
	defer cs.Close()

	// Round trips of an observe call.
	rt := make([]time.Duration, 0, *calls)
	for range *calls {
		start := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: *tool})
		if err != nil {
			return err
		}
		if res.IsError {
			return fmt.Errorf("%s: %v", *tool, res.Content)
		}
		rt = append(rt, time.Since(start))
	}
	fmt.Fprintf(out, "observe call (%s) over %s: %s (%d calls)\n", *tool, *via, summary(rt), *calls)

	// Pushes: each notify's commit to its notification read.
	var lat []time.Duration
	for i := range *pushes {
		res, err := admin.Call(ctx, adm, awareness.OpDo, awareness.DoIn{Capability: "body.notify", Target: "home",
			Params: map[string]string{"message": fmt.Sprintf("bench %d", i), "attention": "high"}})
		if err != nil || res.Status != "succeeded" {
			return fmt.Errorf("notify %d: %+v %v", i, res, err)
		}
		select {
		case <-arrived:
		case <-time.After(10 * time.Second):
			return fmt.Errorf("the observation of notify %d was not pushed within 10 s", i)
		}
	}
	mu.Lock()
	seqs := make([]uint64, 0, len(seen))
	for s := range seen {
		seqs = append(seqs, s)
	}
	mu.Unlock()
	slices.Sort(seqs)
	for _, s := range seqs {
		evs, err := admin.Call(ctx, adm, awareness.OpEvents, awareness.EventsIn{After: s - 1, Limit: 1})
		if err != nil || len(evs.Events) != 1 || evs.Events[0].Seq != s {
			return fmt.Errorf("the event at %d: %v", s, err)
		}
		at, err := time.Parse(time.RFC3339Nano, evs.Events[0].IngestedAt)
		if err != nil {
			return err
		}
		lat = append(lat, seen[s].Sub(at))
	}
	fmt.Fprintf(out, "push, commit to notification read, over %s: %s (%d observations)\n", *via, summary(lat), len(lat))
	return nil
}

// summary is p50, p99 and max of ds.
func summary(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	q := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return strings.Join([]string{"p50 " + q(0.50).Round(time.Microsecond).String(), "p99 " + q(0.99).Round(time.Microsecond).String(),
		"max " + s[len(s)-1].Round(time.Microsecond).String()}, ", ")
}
