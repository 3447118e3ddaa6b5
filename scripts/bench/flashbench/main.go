// Package main is flashbench, the go half of scripts/bench/flash.sh: the
// bytes the daemon has the kernel write to storage per event it records
// (its /proc/PID/io write_bytes), with the uplink running against the
// embedded broker and acknowledging, for one setting of
// ledger.telemetry_commit_ms.
//
//	flashbench -bin TOBE_BODY [-board sim] [-seconds 600] [-commit-ms 5000] [-notify-per-s 0]
//
// It starts `TOBE_BODY run` on a fresh data directory under /var/tmp (a
// disk, not a tmpfs), waits 10 s for the start to settle, then counts
// the events recorded for -seconds, and write_bytes from then to the end
// of a clean stop after them (which folds the ledger's journal into its
// file). With -notify-per-s a
// local administrator has the body notify that often (an action: audit
// records, durable before anything goes on); against a run without it,
// the difference is what audit events cost alone.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/admin"
)

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "flashbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("flashbench", flag.ContinueOnError)
	bin := fs.String("bin", "", "the tobe-body binary")
	boardName := fs.String("board", "sim", "the board")
	seconds := fs.Int("seconds", 600, "how long to count")
	commitMS := fs.Int("commit-ms", 5000, "ledger.telemetry_commit_ms")
	notify := fs.Float64("notify-per-s", 0, "body.notify actions a second, from a local administrator")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *bin == "" {
		return errors.New("-bin: the tobe-body binary")
	}
	dir, err := os.MkdirTemp("/var/tmp", "flashbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	conf := fmt.Sprintf(`{"version": 1, "monitor": {"quiet": true}, "ledger": {"telemetry_commit_ms": %d},
 "act": {"rate_limits": {"per_principal": {"burst": 100000, "per_second": 100000}, "by_capability": {"body.notify": {"burst": 100000, "per_second": 100000}}}},
 "mqtt": {"enabled": true, "broker": "tcp://127.0.0.1:%d", "embedded_broker": true, "embedded_port": %d}}`, *commitMS, port, port)
	cfg := filepath.Join(dir, "config.json")
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		return err
	}
	data := filepath.Join(dir, "data")
	cmd := exec.Command(*bin, "run", "--board", *boardName, "--data", data, "--config", cfg)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Signal(os.Interrupt)
			cmd.Wait()
		}
	}()
	adm := &admin.Client{Path: filepath.Join(data, "admin.sock"), Timeout: 10 * time.Second}
	status := func() (awareness.Status, error) { return admin.Call(ctx, adm, awareness.OpStatus, awareness.None{}) }
	deadline := time.Now().Add(30 * time.Second)
	for {
		if st, err := status(); err == nil && st.Uplink != nil && st.Uplink.Connected {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("the daemon did not come up with its uplink connected within 30 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(10 * time.Second)
	st0, err := status()
	if err != nil {
		return err
	}
	w0, err := writeBytes(cmd.Process.Pid)
	if err != nil {
		return err
	}
	end := time.Now().Add(time.Duration(*seconds) * time.Second)
	var actions int
	for time.Now().Before(end) {
		if *notify > 0 {
			res, err := admin.Call(ctx, adm, awareness.OpDo, awareness.DoIn{Capability: "body.notify", Target: "home",
				Params: map[string]string{"message": fmt.Sprintf("flash %d", actions)}})
			if err != nil || res.Status != "succeeded" {
				return fmt.Errorf("notify %d: %+v %v", actions, res, err)
			}
			actions++
			time.Sleep(time.Duration(float64(time.Second) / *notify))
		} else {
			time.Sleep(time.Second)
		}
	}
	st1, err := status()
	if err != nil {
		return err
	}
	// Through a clean stop: the ledger folds what its journal holds into
	// its file then (and every ledger.fold_s before), and those bytes
	// are the events' too. The kernel's count of what the process had
	// written over its life comes back with its exit (ru_oublock, in
	// 512-byte units, is write_bytes).
	cmd.Process.Signal(os.Interrupt)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("the daemon's stop: %w", err)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return errors.New("no resource usage for the daemon")
	}
	w1 := uint64(ru.Oublock) * 512
	events := st1.Ledger.LastSeq - st0.Ledger.LastSeq
	if events == 0 {
		return errors.New("no events in the run")
	}
	var acked uint64
	if st0.Uplink != nil && st1.Uplink != nil {
		acked = st1.Uplink.Acked - st0.Uplink.Acked
	}
	fmt.Printf("board %s, telemetry_commit_ms %d, %d s%s: %d events recorded, %d acknowledged by the broker; %d bytes written: %.0f bytes (%.2f KiB) per event [events=%d bytes=%d]\n",
		*boardName, *commitMS, *seconds, map[bool]string{true: fmt.Sprintf(", %d actions", actions), false: ""}[*notify > 0],
		events, acked, w1-w0, float64(w1-w0)/float64(events), float64(w1-w0)/float64(events)/1024, events, w1-w0)
	return nil
}

// writeBytes is the process's write_bytes.
func writeBytes(pid int) (uint64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "write_bytes: "); ok {
			return strconv.ParseUint(v, 10, 64)
		}
	}
	return 0, errors.New("no write_bytes in /proc/PID/io")
}
