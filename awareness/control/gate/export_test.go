package gate

import (
	"math/rand/v2"
	"time"

	"github.com/tobe-body/tobe-body/awareness/control/wait"
	"github.com/tobe-body/tobe-body/ledger"
)

// BenchWorld is BenchmarkGate's world for the benchmarks outside the
// package: n conditions, 10 of which want some of the 4,096 events, and
// the time they are decided at (before the conditions expire).
func BenchWorld(n int) ([]wait.Condition, []ledger.Stored, time.Time) {
	r := rand.New(rand.NewPCG(3, 4))
	w, conds := benchWorld(r, n)
	evs := make([]ledger.Stored, 4096)
	for i := range evs {
		evs[i] = ledger.Stored{Seq: uint64(i + 1), Event: w.event(r)}
		evs[i].Trust = ledger.Medium
	}
	return conds, evs, t0
}

// BenchDecide is BenchmarkGate's loop, for the benchmarks outside the
// package: BenchWorld's n conditions and events, decided with rules.
var BenchDecide = benchDecide
