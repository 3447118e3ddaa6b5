//go:build unix

package ledger

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// BenchmarkAppendOverBudget appends telemetry in batches of 16 (as the
// sense channels' outlets do) into a ledger whose outbox is under its
// budget and, side by side, into ones already over it: with only audit
// rows, which are never dropped (the body's actions with no uplink to
// take them), and with telemetry, which is. The budget is 10,000 rows
// (1,000,000 for the ledger under it, which stays under for the whole
// run). The three take turns batch by batch, so that a shared machine's
// noise (its disk's above all: every batch is a commit and an fsync)
// falls on all three alike. Reported for each: events/s, the process's
// CPU time per event (user and system, of the commit loop too: one
// append runs at a time), the rows at the end, and the rates and CPU
// times over budget as ratios to those under it.
//
//	go test -run XXX -bench AppendOverBudget -benchtime 25600x ./ledger/
func BenchmarkAppendOverBudget(b *testing.B) {
	audit := func(i int) Event {
		return Event{Type: "action.succeeded", ChannelID: "gpio.led", Provenance: Observed, SourceSequence: uint64(i)}
	}
	cases := []struct {
		name   string
		fill   func(int) Event
		n      int
		budget int
	}{
		{"under", nil, 0, 1_000_000},
		{"over-audit", audit, 50_000, 10_000},
		{"over-telemetry", motion, 50_000, 10_000},
	}
	stores := make([]*Store, len(cases))
	for k, tc := range cases {
		s, err := Open(Options{Path: filepath.Join(b.TempDir(), "l.db"), AgentID: testAgent, BodyID: testBody, OutboxMaxRows: tc.budget})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		for i := 0; i < tc.n; i += 500 {
			evs := make([]Event, 0, 500)
			for j := i; j < i+500; j++ {
				evs = append(evs, tc.fill(j))
			}
			if _, err := s.Append(context.Background(), evs...); err != nil {
				b.Fatal(err)
			}
		}
		stores[k] = s
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	wall := make([]time.Duration, len(cases))
	used := make([]time.Duration, len(cases))
	b.ResetTimer()
	for i := 0; i < b.N; i += 16 {
		evs := make([]Event, 0, 16)
		for j := i; j < min(i+16, b.N); j++ {
			evs = append(evs, motion(j))
		}
		for turn := range stores {
			k := (turn + i/16) % len(stores) // each goes first in turn
			batch := append([]Event(nil), evs...)
			t0, c0 := time.Now(), cpu()
			if _, err := stores[k].Append(context.Background(), batch...); err != nil {
				b.Fatal(err)
			}
			used[k] += cpu() - c0
			wall[k] += time.Since(t0)
		}
	}
	b.StopTimer()
	rate := func(k int) float64 { return float64(b.N) / wall[k].Seconds() }
	perEvent := func(k int) float64 { return float64(used[k].Microseconds()) / float64(b.N) }
	for k, tc := range cases {
		b.ReportMetric(rate(k), tc.name+"-events/s")
		b.ReportMetric(perEvent(k), tc.name+"-cpu-µs/event")
		st, _ := stores[k].Stats()
		b.ReportMetric(float64(st.OutboxRows), tc.name+"-outbox-rows")
		if k > 0 {
			b.ReportMetric(rate(k)/rate(0), tc.name+"/under-rate")
			b.ReportMetric(perEvent(k)/perEvent(0), tc.name+"/under-cpu")
		}
	}
	b.ReportMetric(0, "ns/op") // the time of all three together says nothing
}
