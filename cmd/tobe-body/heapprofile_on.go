//go:build heapprofile

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strings"
	"time"
)

// heapProfile is the footprint bench's heap profiler
// (scripts/bench/footprint.sh builds the body with the heapprofile tag; a
// release build has none of it). When TOBE_BODY_HEAPPROFILE names a file,
// the daemon writes its heap profile there once it has idled
// TOBE_BODY_HEAPPROFILE_AFTER (a duration, 60s unless set), or when it
// stops if that comes first, after a collection so the profile is the heap
// in use then. Beside it, FILE.metrics holds the runtime's memory classes
// at the same moment (heap objects, stacks, the runtime's own metadata),
// one "name value" a line, and FILE.goroutines what every goroutine waits
// in. GODEBUG=memprofilerate=1 samples every allocation from the first
// package's init on; without it the runtime samples one in 512 KiB.
func (d *daemon) heapProfile() {
	path := os.Getenv("TOBE_BODY_HEAPPROFILE")
	if path == "" {
		return
	}
	after := time.Minute
	if s := os.Getenv("TOBE_BODY_HEAPPROFILE_AFTER"); s != "" {
		v, err := time.ParseDuration(s)
		if err != nil || v < 0 {
			d.log.Error("TOBE_BODY_HEAPPROFILE_AFTER: not a duration; the profile is written when the body stops", "value", s)
			v = -1
		}
		after = v
	}
	d.log.Warn("heap profiler built in", "file", path, "after", after, "memprofilerate", runtime.MemProfileRate)
	write := func(when string) {
		if err := writeHeapProfile(path); err != nil {
			d.log.Error("heap profile", "file", path, "err", err)
			return
		}
		d.log.Info("heap profile written", "file", path, "when", when)
	}
	d.spawn("heap profile", func(ctx context.Context) {
		var idle <-chan time.Time
		if after >= 0 {
			t := time.NewTimer(after)
			defer t.Stop()
			idle = t.C
		}
		select {
		case <-ctx.Done():
			write("stopping")
		case <-idle:
			write("idle")
		}
	})
}

// writeHeapProfile writes the heap profile to path and the runtime's
// memory classes to path.metrics.
func writeHeapProfile(path string) error {
	runtime.GC()
	// The classes first: writing the profile allocates.
	var samples []metrics.Sample
	for _, d := range metrics.All() {
		if d.Kind == metrics.KindUint64 && (strings.HasPrefix(d.Name, "/memory/classes/") ||
			d.Name == "/gc/heap/goal:bytes" || d.Name == "/sched/goroutines:goroutines" || d.Name == "/gc/gogc:percent") {
			samples = append(samples, metrics.Sample{Name: d.Name})
		}
	}
	metrics.Read(samples)
	var m bytes.Buffer
	for _, s := range samples {
		fmt.Fprintf(&m, "%s %d\n", s.Name, s.Value.Uint64())
	}
	var prof bytes.Buffer
	if err := pprof.Lookup("heap").WriteTo(&prof, 0); err != nil {
		return err
	}
	var g bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&g, 1); err != nil {
		return err
	}
	if err := os.WriteFile(path+".metrics", m.Bytes(), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(path+".goroutines", g.Bytes(), 0o644); err != nil {
		return err
	}
	return os.WriteFile(path, prof.Bytes(), 0o644)
}
