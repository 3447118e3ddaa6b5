// Package main is agentbench, the Go half of scripts/bench/agent.sh: the
// agent boundary's figures against a real daemon binary on the sim board.
//
//	agentbench -bin TOBE_BODY [-calls 1000] [-pushes 200] [-via socket|stdio]
//
// It starts `TOBE_BODY run --board sim` on a fresh data directory whose
// config makes the caller's uid an agent at high trust and has
// body.notified observed at high attention, with the gate told to push
// every one of them: novelty not weighed and no budget (the defaults
// rightly hold back the seventh like notice in ten minutes, and the
// thirty-first in an hour; this measures the transport and the push, not
// the gate's judgement, which scripts/bench/gate.sh measures) and a
// session's heartbeat at its longest, 60 s (the SDK's client sends nothing
// while the line client and the SDK alone are timed; over ssh on a busy
// machine that outlasted the default 2 s, and the body ended the session
// before its pushes were timed), connects as an agent with the
// official MCP SDK's client (to agent.sock, or through `TOBE_BODY stdio`
// with -via stdio), and measures:
//
//   - the round trip of an observe call (body_status), -calls times,
//     with the SDK's client and then, on a second session, with a client
//     of newline-delimited JSON-RPC that does nothing but write the
//     request and read the answer: the body's own share, without the Go
//     client's (an agent's client is ToBe's, in Node);
//   - the same number of round trips of the SDK alone, its server and
//     client in this process over a Unix socket, calling a tool that does
//     nothing: the floor the SDK sets on this machine, which the body's
//     figures are given against as ratios (-peer=false leaves it out);
//   - the push latency of -pushes observations: a local administrator
//     has the body notify (body.notify through the admin socket), and the
//     time from the event's commit (its ingested_at) to the client
//     reading its notification is taken.
//
// Each prints p50, p99 and max, and figure lines (scripts/bench/lib.sh)
// for the table of make bench. Figures of a shared machine: never a pass
// or fail.
package main

import (
	"bufio"
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
	"github.com/tobe-body/tobe-body/scripts/bench/figure"
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
	peer := fs.Bool("peer", true, "also time the SDK alone in this process (its server and client over a Unix socket, a tool that does nothing), the peer of the call figures")
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
 "agent": {"heartbeat_ms": 60000, "principals": [{"name": "bench", "subject": "agent:bench", "uid": %d, "trust": "high"}],
  "observations": {"rules": [{"type": "body.notified", "actor": "service", "attention": "high", "trust": "high", "text": "{message}"}]}},
 "gate": {"novelty_half_life_s": 0, "global_budget": {"max": 0, "window_s": 0}, "item_budget": {"max": 0, "window_s": 0}}}`, uid)
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
	// dial opens one session's stream: the socket, or the bridge's
	// standard input and output.
	var sshd *sshdtest.SSHD
	if *via == "ssh" {
		if sshd, err = sshdtest.Start(dir, fmt.Sprintf("exec %s stdio --data %s", *bin, data)); err != nil {
			return fmt.Errorf("-via ssh: %w", err)
		}
		defer sshd.Close()
	}
	dial := func() (io.ReadWriteCloser, error) {
		switch *via {
		case "socket":
			return net.Dial("unix", sock)
		case "stdio":
			return startCommand(exec.Command(*bin, "stdio", "--data", data))
		case "ssh":
			return startCommand(sshd.Command())
		}
		return nil, fmt.Errorf("-via %q: socket, stdio or ssh", *via)
	}
	stream, err := dial()
	if err != nil {
		return err
	}
	defer stream.Close() // before the daemon stops: a bridge left open would say the body went away
	t := &mcp.IOTransport{Reader: stream, Writer: stream}
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
	fmt.Fprintf(out, "observe call (%s) over %s, the SDK's client: %s (%d calls)\n", *tool, *via, summary(rt), *calls)

	// The same calls from a line client, on a session of its own.
	ls, err := dial()
	if err != nil {
		return err
	}
	lrt, err := lineCalls(ls, *tool, *calls)
	ls.Close()
	if err != nil {
		return fmt.Errorf("the line client: %w", err)
	}
	fmt.Fprintf(out, "observe call (%s) over %s, a line client: %s (%d calls)\n", *tool, *via, summary(lrt), *calls)
	var floor []time.Duration
	if *peer {
		floor, err = sdkFloor(ctx, dir, *calls)
		if err != nil {
			return fmt.Errorf("the SDK alone: %w", err)
		}
		fmt.Fprintf(out, "peer: the SDK alone, in one process over a Unix socket, a tool that does nothing: %s (%d calls)\n", summary(floor), *calls)
		for _, m := range []struct {
			name string
			ds   []time.Duration
		}{{"the SDK's client", rt}, {"a line client", lrt}} {
			fmt.Fprintf(out, "  over %s with %s, to the peer: p50 %.2fx, p99 %.2fx\n", *via, m.name,
				ratio(m.ds, floor, 0.50), ratio(m.ds, floor, 0.99))
		}
	}
	for _, m := range []struct {
		name string
		ds   []time.Duration
	}{{"sdk_client", rt}, {"line_client", lrt}} {
		for _, q := range []struct {
			name string
			q    float64
		}{{"p50", 0.50}, {"p99", 0.99}} {
			f := figure.Figure{Name: fmt.Sprintf("agent.call.%s.%s.%s", *via, m.name, q.name), Value: ms(quantile(m.ds, q.q)), Unit: "ms", Peer: figure.NoPeer()}
			if *via == "socket" && q.name == "p99" {
				f.Goal = figure.Goal{Of: "value", Op: "<=", N: 2}
			}
			if floor != nil {
				f.Peer, f.Vs = ms(quantile(floor, q.q)), "mcp-sdk-alone"
			}
			if err := figure.Print(out, f); err != nil {
				return err
			}
		}
	}

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
	for _, q := range []struct {
		name string
		q    float64
		goal figure.Goal
	}{{"p50", 0.50, figure.Goal{}}, {"p99", 0.99, figure.Goal{Of: "value", Op: "<=", N: 20}}} {
		if err := figure.Print(out, figure.Figure{Name: fmt.Sprintf("agent.push.%s.%s", *via, q.name), Value: ms(quantile(lat, q.q)), Unit: "ms",
			Peer: figure.NoPeer(), Goal: q.goal}); err != nil {
			return err
		}
	}
	return nil
}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Round(time.Microsecond)) / 1e6 }

// startCommand starts cmd with its standard input and output as the
// stream; closing the stream closes its input and waits for it.
func startCommand(cmd *exec.Cmd) (io.ReadWriteCloser, error) {
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &cmdStream{cmd: cmd, in: in, out: outp}, nil
}

type cmdStream struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out io.ReadCloser
}

func (c *cmdStream) Read(p []byte) (int, error)  { return c.out.Read(p) }
func (c *cmdStream) Write(p []byte) (int, error) { return c.in.Write(p) }
func (c *cmdStream) Close() error {
	c.in.Close()
	return c.cmd.Wait()
}

// lineCalls is an MCP session of newline-delimited JSON-RPC done by hand:
// initialize, initialized, then n calls of tool, each timed from writing
// the request to reading its answer (notifications between are skipped).
func lineCalls(rw io.ReadWriter, tool string, n int) ([]time.Duration, error) {
	r := bufio.NewReaderSize(rw, 1<<20)
	call := func(id int, method string, params any) error {
		req, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		if err != nil {
			return err
		}
		if _, err := rw.Write(append(req, '\n')); err != nil {
			return err
		}
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return err
			}
			var m struct {
				ID     *int            `json:"id"`
				Error  json.RawMessage `json:"error"`
				Result *struct {
					IsError bool `json:"isError"`
				} `json:"result"`
			}
			if err := json.Unmarshal(line, &m); err != nil {
				return fmt.Errorf("%q: %w", line, err)
			}
			if m.ID == nil || *m.ID != id {
				continue
			}
			if m.Error != nil || m.Result == nil || m.Result.IsError {
				return fmt.Errorf("%s: %s", method, line)
			}
			return nil
		}
	}
	if err := call(0, "initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "agentbench-lines", "version": "1"}}); err != nil {
		return nil, err
	}
	if _, err := io.WriteString(rw, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		return nil, err
	}
	each := make([]time.Duration, 0, n)
	params := map[string]any{"name": tool}
	for i := 1; i <= n; i++ {
		start := time.Now()
		if err := call(i, "tools/call", params); err != nil {
			return nil, err
		}
		each = append(each, time.Since(start))
	}
	return each, nil
}

// sdkFloor is n round trips of the SDK alone: its server, with one tool
// that does nothing, and its client, in this process over a Unix socket.
func sdkFloor(ctx context.Context, dir string, n int) ([]time.Duration, error) {
	ln, err := net.Listen("unix", filepath.Join(dir, "floor.sock"))
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	srv := mcp.NewServer(&mcp.Implementation{Name: "floor", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "nothing", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"status":"success"}`}}}, nil
		})
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	cc, err := net.Dial("unix", ln.Addr().String())
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	sc := <-accepted
	if sc == nil {
		return nil, errors.New("no connection accepted")
	}
	defer sc.Close()
	ss, err := srv.Connect(ctx, &mcp.IOTransport{Reader: sc, Writer: sc}, nil)
	if err != nil {
		return nil, err
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "floor-client", Version: "1"}, nil).Connect(ctx, &mcp.IOTransport{Reader: cc, Writer: cc}, nil)
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	each := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "nothing"}); err != nil {
			return nil, err
		}
		each = append(each, time.Since(start))
	}
	return each, nil
}

// ratio is the quantile q of a over that of b.
func ratio(a, b []time.Duration, q float64) float64 {
	return float64(quantile(a, q)) / float64(quantile(b, q))
}

func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// summary is p50, p99 and max of ds.
func summary(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	return strings.Join([]string{"p50 " + quantile(ds, 0.50).Round(time.Microsecond).String(), "p99 " + quantile(ds, 0.99).Round(time.Microsecond).String(),
		"max " + slices.Max(ds).Round(time.Microsecond).String()}, ", ")
}
