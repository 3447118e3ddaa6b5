//go:build lab

package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/admin"
)

// What the card sees (issue 34): the sectors the lab's ext4 data disk
// wrote per event, beside the process's own write_bytes, for the sim
// body with the default grouping, and with a local administrator's
// body.notify a second besides (an action: audit records on disk before
// it goes on), one after the other on the same disk. The disk's count
// takes in what the process's leaves out: ext4's journal, its metadata,
// and what the kernel wrote back after the process's writes. Each run
// counts through a clean stop and a sync, so the ledger's fold is in it.
// On amd64 only (two minutes a run; the ARM labs run under emulation).
func TestLabFlashAtTheDevice(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the disk's figures are taken on amd64")
	}
	root := os.Getenv("LAB_DISK")
	if root == "" {
		t.Skip("LAB_DISK is not set: no disk to count")
	}
	stat := blockStat(t, root)
	secs := 120
	if s, err := strconv.Atoi(os.Getenv("LAB_FLASH_SECONDS")); err == nil && s > 0 {
		secs = s
	}
	type result struct {
		events, actions    uint64
		process, device    uint64
		processKiB, devKiB float64
	}
	measure := func(notify bool) result {
		data, cfg := labDir(t)
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		conf := fmt.Sprintf(`{"version": 1, "monitor": {"quiet": true}, "sense": {"self": {"disk_low_mb": 8, "disk_critical_mb": 2}},
 "act": {"rate_limits": {"per_principal": {"burst": 100000, "per_second": 100000}, "by_capability": {"body.notify": {"burst": 100000, "per_second": 100000}}}},
 "mqtt": {"enabled": true, "broker": "tcp://127.0.0.1:%d", "embedded_broker": true, "embedded_port": %d}}`, port, port)
		if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		b := startBodyOn(t, "sim", data, cfg)
		b.ready(t)
		adm := &admin.Client{Path: b.sock, Timeout: 10 * time.Second}
		time.Sleep(5 * time.Second) // the start's own writes settle
		st0, err := b.status(t)
		if err != nil {
			t.Fatal(err)
		}
		unix.Sync()
		w0 := writeBytesOf(t, b.cmd.Process.Pid)
		d0 := sectorsWritten(t, stat)
		var r result
		end := time.Now().Add(time.Duration(secs) * time.Second)
		for time.Now().Before(end) {
			if notify {
				res, err := admin.Call(t.Context(), adm, awareness.OpDo, awareness.DoIn{Capability: "body.notify", Target: "home",
					Params: map[string]string{"message": fmt.Sprintf("flash %d", r.actions)}})
				if err != nil || res.Status != "succeeded" {
					t.Fatalf("notify %d: %+v %v", r.actions, res, err)
				}
				r.actions++
			}
			time.Sleep(time.Second)
		}
		st1, err := b.status(t)
		if err != nil {
			t.Fatal(err)
		}
		b.cmd.Process.Signal(os.Interrupt)
		<-b.exited
		if b.err != nil {
			t.Fatalf("the body's stop: %v", b.err)
		}
		unix.Sync()
		ru, ok := b.cmd.ProcessState.SysUsage().(*syscall.Rusage)
		if !ok {
			t.Fatal("no resource usage for the body")
		}
		r.events = st1.Ledger.LastSeq - st0.Ledger.LastSeq
		r.process = uint64(ru.Oublock)*512 - w0
		r.device = (sectorsWritten(t, stat) - d0) * 512
		r.processKiB = float64(r.process) / float64(r.events) / 1024
		r.devKiB = float64(r.device) / float64(r.events) / 1024
		return r
	}
	sensed := measure(false)
	audit := measure(true)
	t.Logf("LAB flash: sensed %d events in %d s: %d bytes at the device (%.2f KiB an event), %d by the process (%.2f KiB)",
		sensed.events, secs, sensed.device, sensed.devKiB, sensed.process, sensed.processKiB)
	t.Logf("LAB flash: with an action a second, %d actions, %d events: %d bytes at the device (%.2f KiB an event), %d by the process (%.2f KiB)",
		audit.actions, audit.events, audit.device, audit.devKiB, audit.process, audit.processKiB)
	if more := audit.events - sensed.events; audit.events > sensed.events {
		t.Logf("LAB flash: audit events alone: %d more events, %.2f KiB each at the device, %.2f KiB by the process",
			more, (float64(audit.device)-float64(sensed.device))/float64(more)/1024, (float64(audit.process)-float64(sensed.process))/float64(more)/1024)
	}
	if sensed.events == 0 || audit.actions == 0 || sensed.device == 0 {
		t.Errorf("nothing to count: %+v %+v", sensed, audit)
	}
}

// blockStat is the stat file of the block device the file system at dir
// is on.
func blockStat(t *testing.T, dir string) string {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	p := fmt.Sprintf("/sys/dev/block/%d:%d/stat", unix.Major(uint64(st.Dev)), unix.Minor(uint64(st.Dev)))
	if _, err := os.Stat(p); err != nil {
		t.Skipf("%s is on no block device the kernel counts: %v", dir, err)
	}
	return p
}

// sectorsWritten is the device's count of 512-byte sectors written (the
// seventh field of its stat).
func sectorsWritten(t *testing.T, stat string) uint64 {
	t.Helper()
	b, err := os.ReadFile(stat)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) < 7 {
		t.Fatalf("%s: %q", stat, b)
	}
	n, err := strconv.ParseUint(f[6], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// writeBytesOf is a process's write_bytes.
func writeBytesOf(t *testing.T, pid int) uint64 {
	t.Helper()
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "io"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "write_bytes: "); ok {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no write_bytes in /proc/PID/io")
	return 0
}
