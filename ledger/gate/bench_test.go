package gate_test

import (
	"fmt"
	"testing"

	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/ledger/gate"
	"github.com/tobe-body/tobe-body/ledger/wait"
	"github.com/tobe-body/tobe-body/ledger/work"
)

// BenchmarkGateAsTheDaemonRunsIt is BenchmarkGate with L1 as the daemon
// sets it up: the built-in observation rules as its default rules, which
// an event no condition wanted is weighed against. Run with -cpu 1.
func BenchmarkGateAsTheDaemonRunsIt(b *testing.B) {
	observer, err := awareness.NewObserver(awareness.DefaultObservationRules)
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprintf("conditions=%d", n), func(b *testing.B) {
			conds, evs, now := gate.BenchWorld(n)
			ix := gate.Build(conds)
			rules := gate.DefaultRules()
			rules.Defaults = observer.Defaults()
			s := gate.NewSalience(rules)
			items := func(id string) (work.Item, bool) { return work.Item{ID: id, Status: work.Running}, id == "w" }
			out := make([]*wait.Condition, 0, 64)
			woke := 0
			b.ResetTimer()
			for i := range b.N {
				e := &evs[i%len(evs)]
				out = ix.Match(e, now.UnixMilli(), out[:0])
				if d := s.Decide(e, out, items, now); d.Outcome == gate.Wake {
					woke++
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(woke)/float64(b.N), "wakes/event")
		})
	}
}
