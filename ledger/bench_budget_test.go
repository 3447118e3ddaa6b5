package ledger

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkAppendOverBudget appends telemetry in batches of 16 (as the
// sense channels' outlets do) into a ledger whose outbox is under its
// budget and, side by side in the same run, into ones already over it:
// with only audit rows, which are never dropped (the body's actions with
// no uplink to take them), and with telemetry, which is. The budget is
// 10,000 rows (1,000,000 for the ledger under it, which stays under for
// the whole run). Reported: events/s, and the rows at the end.
//
//	go test -run XXX -bench AppendOverBudget -benchtime 25600x ./ledger/
func BenchmarkAppendOverBudget(b *testing.B) {
	audit := func(i int) Event {
		return Event{Type: "action.succeeded", ChannelID: "gpio.led", Provenance: Observed, SourceSequence: uint64(i)}
	}
	for _, tc := range []struct {
		name   string
		fill   func(int) Event
		n      int
		budget int
	}{
		{"under", nil, 0, 1_000_000},
		{"over/audit", audit, 50_000, 10_000},
		{"over/telemetry", motion, 50_000, 10_000},
	} {
		b.Run(tc.name, func(b *testing.B) {
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
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i += 16 {
				evs := make([]Event, 0, 16)
				for j := i; j < min(i+16, b.N); j++ {
					evs = append(evs, motion(j))
				}
				if _, err := s.Append(context.Background(), evs...); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
			st, _ := s.Stats()
			b.ReportMetric(float64(st.OutboxRows), "outbox-rows")
		})
	}
}
