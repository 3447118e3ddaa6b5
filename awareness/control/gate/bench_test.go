package gate_test

import (
	"fmt"
	"testing"

	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/control/gate"
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
			rules := gate.DefaultRules()
			rules.Defaults = observer.Defaults()
			gate.BenchDecide(b, n, rules)
		})
	}
}
