// Package main is attackbench, the Go half of scripts/bench/attack.sh: the
// resource figures of the local attack surface's review, against a real
// daemon binary on the sim board.
//
//	attackbench fill DIR [-events N] [-payload BYTES]
//	attackbench submits -bin TOBE_BODY -data DIR [-n 300]
//	attackbench queries -bin TOBE_BODY -data DIR [-clients 16] [-rounds 5] [-idle 10s]
//	attackbench client -sock SOCKET -n N -note BYTES
//	attackbench qclient -sock SOCKET -seed N -rounds N -events N [-spread]
//
// fill writes a body's data directory, an identity and a ledger with the
// daemon's ledger options, holding N events (bench.sample, a class kept
// locally, so the fill spends no time on the outbox budget) each with a
// payload of about BYTES.
//
// submits starts `TOBE_BODY run --board sim` on DIR with a config whose
// first act.principals rule gives a low-trust uid (65534 when run as root,
// the caller's own uid otherwise), and has that uid, through `attackbench
// client` run under its credentials, send N action.do requests with a
// 30 KiB note (the review's attack: refused, each recorded twice before
// the fix), then N requests with a 1 KiB note that the policy refuses
// (gpio.set at low trust); it reads the ledger's size and event count
// before and after each, stops the daemon (which writes the refusal
// summaries left) and reads them from the file: the summaries' counts by
// reason.
//
// queries starts the daemon on DIR (filled first), lets it settle for
// -idle, samples its memory, then runs -clients concurrent callers that
// each make -rounds `events` calls with limit 10000 (the largest query an
// administrator can make). Run as root, the callers are `attackbench
// qclient` processes of four high-trust uids, so the admin socket admits
// all sixteen at once (its caps hold one uid to 8 at high trust);
// otherwise they run in this process as its one uid, and the socket
// refuses those over its cap (counted as failed calls). First from the
// ledger's start, as the review
// did, then from random points of it, each touching pages of its own. It
// samples the daemon's memory every 5 ms meanwhile and prints the idle
// and peak resident memory (VmRSS, split into RssAnon, the heap and
// stacks, and RssFile, the ledger's pages the daemon maps and has read)
// and the peak the kernel kept (VmHWM, since the daemon started).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/admin"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/ledger"
	"github.com/tobe-body/tobe-body/scripts/bench/figure"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "attackbench:", err)
		os.Exit(1)
	}
}

var errUsage = errors.New("usage: attackbench fill DIR [flags] | submits -bin BIN -data DIR [flags] | queries -bin BIN -data DIR [flags] | client -sock SOCKET [flags] | qclient -sock SOCKET [flags]")

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) < 1 {
		return errUsage
	}
	switch args[0] {
	case "fill":
		return fill(ctx, args[1:], out)
	case "submits":
		return submits(ctx, args[1:], out)
	case "queries":
		return queries(ctx, args[1:], out)
	case "client":
		return client(ctx, args[1:], out)
	case "qclient":
		return qclient(ctx, args[1:], out)
	}
	return errUsage
}

func fill(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("fill", flag.ContinueOnError)
	events := fs.Int("events", 100_000, "events")
	payload := fs.Int("payload", 1024, "bytes of payload per event")
	if len(args) < 1 {
		return errUsage
	}
	dir := args[0]
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	id, _, err := body.LoadIdentity(dir, time.Now())
	if err != nil {
		return err
	}
	opts, err := body.LedgerOptions(config.Default().Ledger, dir, id, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})), awareness.Projections()...)
	if err != nil {
		return err
	}
	store, err := ledger.Open(opts)
	if err != nil {
		return err
	}
	defer store.Close()
	started := time.Now()
	pad := strings.Repeat("x", *payload)
	for i := 0; i < *events; i += 500 {
		var evs []ledger.Event
		for j := i; j < min(i+500, *events); j++ {
			p, err := ledger.MarshalPayload(map[string]any{"n": j, "zone": "door", "note": pad})
			if err != nil {
				return err
			}
			evs = append(evs, ledger.Event{Type: "bench.sample", ChannelID: "camera.front", Provenance: ledger.Observed, Trust: ledger.Medium,
				Privacy: ledger.Internal, Payload: p})
		}
		if _, err := store.Append(ctx, evs...); err != nil {
			return err
		}
	}
	st, err := store.Stats()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "filled %s: %d events, %d MB, in %v\n", dir, st.Events, st.FileBytes>>20, time.Since(started).Round(time.Second))
	return nil
}

// daemon is a tobe-body run on the sim board.
type daemon struct {
	cmd  *exec.Cmd
	sock string
	done chan error

	stopOnce sync.Once
	stopErr  error
}

// startDaemon runs bin on dir with the config file cfg ("" none) and
// waits until its admin socket answers.
func startDaemon(ctx context.Context, bin, dir, cfg, log string) (*daemon, error) {
	args := []string{"run", "--board", "sim", "--data", dir}
	if cfg != "" {
		args = append(args, "--config", cfg)
	}
	logf, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = io.Discard, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	d := &daemon{cmd: cmd, sock: filepath.Join(dir, "admin.sock"), done: make(chan error, 1)}
	go func() { d.done <- cmd.Wait() }()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, err := admin.Call(ctx, &admin.Client{Path: d.sock, Timeout: 5 * time.Second}, awareness.OpStatus, awareness.None{})
		if err == nil {
			return d, nil
		}
		select {
		case err := <-d.done:
			return nil, fmt.Errorf("the daemon ended before it answered: %v (see %s)", err, log)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			d.stop()
			return nil, fmt.Errorf("the daemon did not answer on %s: %w", d.sock, err)
		}
	}
}

// stop stops the daemon with SIGINT, as systemd or Ctrl-C would, and
// waits for it; a second stop returns what the first did.
func (d *daemon) stop() error {
	d.stopOnce.Do(func() {
		d.cmd.Process.Signal(syscall.SIGINT)
		select {
		case d.stopErr = <-d.done:
		case <-time.After(time.Minute):
			d.cmd.Process.Kill()
			<-d.done
			d.stopErr = fmt.Errorf("the daemon did not stop within a minute of SIGINT: killed")
		}
	})
	return d.stopErr
}

// size is a ledger's size and event count.
type size struct {
	bytes  int64
	events int
}

func ledgerSize(ctx context.Context, sock, dir string) (size, error) {
	st, err := admin.Call(ctx, &admin.Client{Path: sock, Timeout: time.Minute}, awareness.OpLedgerStats, awareness.None{})
	if err != nil {
		return size{}, err
	}
	fi, err := os.Stat(filepath.Join(dir, body.LedgerFile))
	if err != nil {
		return size{}, err
	}
	return size{fi.Size(), st.Events}, nil
}

// tally is what a client's requests came to.
type tally struct {
	Sent     int            `json:"sent"`
	ByReason map[string]int `json:"by_reason"`
	Seconds  float64        `json:"seconds"`
}

func submits(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("submits", flag.ContinueOnError)
	bin := fs.String("bin", "", "the tobe-body binary")
	dir := fs.String("data", "", "the data directory (made if missing)")
	n := fs.Int("n", 300, "requests of each kind")
	prefix := fs.String("figures", "", "print figure lines (scripts/bench/lib.sh) named under this prefix")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *bin == "" || *dir == "" {
		return errUsage
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	// The low-trust caller: nobody (uid 65534) in the daemon's group,
	// which reaches the socket, when run as root; else this user.
	uid, gid := os.Getuid(), os.Getgid()
	var cred *syscall.Credential
	if uid == 0 {
		uid = 65534
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	}
	if err := os.MkdirAll(*dir, 0o750); err != nil {
		return err
	}
	cfg := filepath.Join(filepath.Dir(*dir), filepath.Base(*dir)+".config.json")
	rules := fmt.Sprintf(`[{"uid": %d, "trust": "low"}, {"uid": 0, "trust": "max"}]`, uid)
	if err := os.WriteFile(cfg, []byte(`{"version": 1, "act": {"principals": `+rules+`}}`), 0o644); err != nil {
		return err
	}
	d, err := startDaemon(ctx, *bin, *dir, cfg, *dir+".log")
	if err != nil {
		return err
	}
	defer d.stop()
	before, err := ledgerSize(ctx, d.sock, *dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "ledger at start: %d bytes, %d events; the caller: uid %d at low trust\n", before.bytes, before.events, uid)
	prev := before
	for _, phase := range []struct {
		name string
		note int
	}{{"30 KiB notes (out of bounds)", 30 << 10}, {"1 KiB notes (refused by the policy)", 1 << 10}} {
		cmd := exec.CommandContext(ctx, self, "client", "-sock", d.sock, "-n", strconv.Itoa(*n), "-note", strconv.Itoa(phase.note))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		cmd.Stderr = os.Stderr
		res, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("%s: the client: %w", phase.name, err)
		}
		var t tally
		if err := json.Unmarshal(res, &t); err != nil {
			return fmt.Errorf("%s: the client said %q: %w", phase.name, res, err)
		}
		now, err := ledgerSize(ctx, d.sock, *dir)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%d requests with %s in %.2f s: %v; the ledger grew by %d bytes (%.1f KiB) and %d events\n",
			t.Sent, phase.name, t.Seconds, t.ByReason, now.bytes-prev.bytes, float64(now.bytes-prev.bytes)/1024, now.events-prev.events)
		prev = now
	}
	if err := d.stop(); err != nil {
		return fmt.Errorf("the daemon's stop: %w", err)
	}
	// The file as the stopped daemon left it: its summaries written.
	st, err := exec.CommandContext(ctx, *bin, "ledger", "stats", "--json", "--data", *dir).Output()
	if err != nil {
		return fmt.Errorf("ledger stats: %w", err)
	}
	var stats ledger.Stats
	if err := json.Unmarshal(st, &stats); err != nil {
		return err
	}
	evs, err := exec.CommandContext(ctx, *bin, "ledger", "events", "--json", "--type", act.EventRefusals, "--data", *dir).Output()
	if err != nil {
		return fmt.Errorf("ledger events: %w", err)
	}
	sums, count := 0, map[string]uint64{}
	for _, line := range strings.Split(strings.TrimSpace(string(evs)), "\n") {
		if line == "" {
			continue
		}
		var e struct {
			Payload act.RefusalSummary `json:"payload"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			return fmt.Errorf("a refusal summary: %w", err)
		}
		sums++
		for r, k := range e.Payload.ByReason {
			count[string(r)] += k
		}
	}
	grew := stats.FileBytes - before.bytes
	fmt.Fprintf(out, "after the stop: %d bytes, %d events: grew by %d bytes (%.1f KiB, goal under 1 MiB) and %d events; %d action.refusals summaries counting %v\n",
		stats.FileBytes, stats.Events, grew, float64(grew)/1024, stats.Events-before.events, sums, count)
	if *prefix != "" {
		return figure.Print(out, figure.Figure{Name: *prefix + ".refused_growth", Value: math.Round(float64(grew)/1024*10) / 10, Unit: "KiB", Peer: figure.NoPeer(),
			Goal: figure.Goal{Of: "value", Op: "<=", N: 1024}})
	}
	return nil
}

// client sends n action.do requests with a note of noteBytes, one after
// another, and prints what they came to as JSON.
func client(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	sock := fs.String("sock", "", "the admin socket")
	n := fs.Int("n", 300, "requests")
	noteBytes := fs.Int("note", 1024, "bytes of note")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c := &admin.Client{Path: *sock, Timeout: time.Minute}
	t := tally{ByReason: map[string]int{}}
	note := strings.Repeat("n", *noteBytes)
	start := time.Now()
	for i := range *n {
		in := awareness.DoIn{Capability: "gpio.set", Target: "gpio.led", Params: map[string]string{"state": "on"}, Note: note,
			IdempotencyKey: fmt.Sprintf("attack-%d-%d-%d", *noteBytes, start.UnixNano(), i)}
		res, err := admin.Call(ctx, c, awareness.OpDo, in)
		t.Sent++
		switch {
		case err != nil && awareness.ErrorOf(err).Record == nil: // not an action the runner refused
			t.ByReason["error: "+string(awareness.ReasonOf(err))]++
		case res.Reason != "":
			t.ByReason[string(res.Reason)]++
		default:
			t.ByReason[string(res.Status)]++
		}
	}
	t.Seconds = time.Since(start).Seconds()
	return json.NewEncoder(out).Encode(t)
}

// queryUIDs are the callers of the queries when run as root.
var queryUIDs = []uint32{2101, 2102, 2103, 2104}

// queryTally is what one caller of the queries got.
type queryTally struct {
	Calls, Got, More, Errs int
	FirstErr               string `json:",omitempty"`
}

// qclient is one caller of the queries, run as another uid: rounds
// events calls of the largest limit, from the start or from random points
// (spread), and a queryTally as JSON on out.
func qclient(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("qclient", flag.ContinueOnError)
	sock := fs.String("sock", "", "the admin socket")
	seed := fs.Uint64("seed", 0, "random points from this seed")
	rounds := fs.Int("rounds", 5, "calls")
	events := fs.Int("events", 0, "events in the ledger")
	spread := fs.Bool("spread", false, "from random points")
	if err := fs.Parse(args); err != nil {
		return err
	}
	return json.NewEncoder(out).Encode(queryRounds(ctx, *sock, *seed, *rounds, *events, *spread))
}

// queryRounds makes rounds events calls of limit MaxEvents.
func queryRounds(ctx context.Context, sock string, seed uint64, rounds, events int, spread bool) queryTally {
	rng := rand.New(rand.NewPCG(seed, 1))
	c := &admin.Client{Path: sock, Timeout: 5 * time.Minute}
	var t queryTally
	for range rounds {
		after := uint64(0)
		if spread && events > awareness.MaxEvents {
			after = rng.Uint64N(uint64(events - awareness.MaxEvents))
		}
		reply, err := admin.Call(ctx, c, awareness.OpEvents, awareness.EventsIn{After: after, Limit: awareness.MaxEvents})
		t.Calls++
		if err != nil {
			t.Errs++
			if t.FirstErr == "" {
				t.FirstErr = err.Error()
			}
			continue
		}
		t.Got += len(reply.Events)
		if reply.More {
			t.More++
		}
	}
	return t
}

// mem is a sample of a process's memory, in KiB.
type mem struct{ rss, anon, file, hwm int }

func sample(pid int) (mem, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return mem{}, err
	}
	var m mem
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.Atoi(f[1])
		switch f[0] {
		case "VmRSS:":
			m.rss = v
		case "RssAnon:":
			m.anon = v
		case "RssFile:":
			m.file = v
		case "VmHWM:":
			m.hwm = v
		}
	}
	return m, nil
}

func queries(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("queries", flag.ContinueOnError)
	bin := fs.String("bin", "", "the tobe-body binary")
	dir := fs.String("data", "", "the data directory, filled")
	clients := fs.Int("clients", 16, "concurrent callers")
	rounds := fs.Int("rounds", 5, "calls per caller")
	idle := fs.Duration("idle", 10*time.Second, "how long the daemon settles before the idle sample")
	prefix := fs.String("figures", "", "print figure lines (scripts/bench/lib.sh) named under this prefix")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *bin == "" || *dir == "" {
		return errUsage
	}
	// As root the callers are processes of queryUIDs, high-trust local
	// administrators in the daemon's group, spread so that the admin
	// socket admits all sixteen at once (it holds one uid to 8
	// connections at high trust, 16 in all): the most the daemon lets
	// run, which is what its memory must bear. Otherwise they are this
	// process, one uid, of which the socket admits fewer.
	cfg := ""
	if os.Getuid() == 0 {
		rules := `{"uid": 0, "trust": "max"}`
		for _, u := range queryUIDs {
			rules += fmt.Sprintf(`, {"uid": %d, "trust": "high"}`, u)
		}
		cfg = filepath.Join(filepath.Dir(*dir), filepath.Base(*dir)+".config.json")
		if err := os.WriteFile(cfg, []byte(`{"version": 1, "act": {"principals": [`+rules+`]}}`), 0o644); err != nil {
			return err
		}
	}
	d, err := startDaemon(ctx, *bin, *dir, cfg, *dir+".log")
	if err != nil {
		return err
	}
	defer d.stop()
	st, err := admin.Call(ctx, &admin.Client{Path: d.sock, Timeout: time.Minute}, awareness.OpLedgerStats, awareness.None{})
	if err != nil {
		return err
	}
	time.Sleep(*idle)
	idleMem, err := sample(d.cmd.Process.Pid)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "ledger: %d events, %d MB; idle after %v: VmRSS %d KiB (RssAnon %d, RssFile %d), VmHWM so far %d KiB\n",
		st.Events, st.FileBytes>>20, *idle, idleMem.rss, idleMem.anon, idleMem.file, idleMem.hwm)

	for _, spread := range []bool{false, true} {
		if err := storm(ctx, out, d, st.Events, *clients, *rounds, spread, idleMem, *prefix); err != nil {
			return err
		}
	}
	return d.stop()
}

// storm runs clients concurrent callers of rounds events calls each with
// limit MaxEvents, from the ledger's start (the review's attack) or, with
// spread, from random points of its events (each touching pages of its
// own), sampling the daemon's memory every 5 ms, and prints the peaks
// against idle.
func storm(ctx context.Context, out io.Writer, d *daemon, events, clients, rounds int, spread bool, idleMem mem, prefix string) error {
	pid := d.cmd.Process.Pid
	// The daemon's memory, every 5 ms, while the callers run.
	var peak mem
	stop := make(chan struct{})
	var sampled sync.WaitGroup
	sampled.Go(func() {
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			if m, err := sample(pid); err == nil {
				peak.rss, peak.anon, peak.file = max(peak.rss, m.rss), max(peak.anon, m.anon), max(peak.file, m.file)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var calls, got, more, replyErrs int
	var firstErr error
	add := func(t queryTally, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			t.Errs, t.FirstErr = max(t.Errs, 1), err.Error()
		}
		calls, got, more, replyErrs = calls+t.Calls, got+t.Got, more+t.More, replyErrs+t.Errs
		if t.FirstErr != "" && firstErr == nil {
			firstErr = errors.New(t.FirstErr)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	start := time.Now()
	for w := range clients {
		wg.Go(func() {
			if os.Getuid() != 0 {
				add(queryRounds(ctx, d.sock, uint64(w), rounds, events, spread), nil)
				return
			}
			uid := queryUIDs[w%len(queryUIDs)]
			cmd := exec.CommandContext(ctx, self, "qclient", "-sock", d.sock, "-seed", strconv.Itoa(w), "-rounds", strconv.Itoa(rounds),
				"-events", strconv.Itoa(events), "-spread="+strconv.FormatBool(spread))
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: 0, Groups: []uint32{}}}
			cmd.Stderr = os.Stderr
			res, err := cmd.Output()
			var t queryTally
			if err == nil {
				err = json.Unmarshal(res, &t)
			}
			add(t, err)
		})
	}
	wg.Wait()
	took := time.Since(start)
	close(stop)
	sampled.Wait()
	end, err := sample(pid)
	if err != nil {
		return err
	}
	if replyErrs > 0 {
		fmt.Fprintf(out, "%d of the calls failed; the first: %v\n", replyErrs, firstErr)
	}
	from := "the start"
	if spread {
		from = "random points"
	}
	fmt.Fprintf(out, "%d callers x %d events calls (limit %d, from %s) in %.2f s: %d events, %.0f a reply, %d replies said more\n",
		clients, rounds, awareness.MaxEvents, from, took.Seconds(), got, float64(got)/float64(max(calls-replyErrs, 1)), more)
	fmt.Fprintf(out, "peak while they ran: VmRSS %d KiB (RssAnon %d, RssFile %d); VmHWM %d KiB\n", peak.rss, peak.anon, peak.file, end.hwm)
	fmt.Fprintf(out, "  VmHWM / idle VmRSS: %.2fx (goal under 2x); peak RssAnon / idle RssAnon: %.2fx\n",
		float64(end.hwm)/float64(idleMem.rss), float64(peak.anon)/float64(idleMem.anon))
	if prefix == "" {
		return nil
	}
	where := "start"
	if spread {
		where = "random"
	}
	if err := figure.Print(out, figure.Figure{Name: prefix + ".queries_from_" + where + ".peak", Value: mib(end.hwm), Unit: "MiB",
		Peer: mib(idleMem.rss), Vs: "idle-rss", Goal: figure.Goal{Of: "ratio", Op: "<=", N: 2}}); err != nil {
		return err
	}
	// The anonymous part alone (the heap and stacks): the peak above
	// counts the ledger's pages the queries mapped in, which the kernel
	// may take back at will.
	return figure.Print(out, figure.Figure{Name: prefix + ".queries_from_" + where + ".peak_anon", Value: mib(peak.anon), Unit: "MiB",
		Peer: mib(idleMem.anon), Vs: "idle-anon"})
}

// mib is kib KiB in MiB, to a tenth.
func mib(kib int) float64 { return math.Round(float64(kib)/1024*10) / 10 }
