package gate_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/control/gate"
	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/ledger"
)

// TestGateRulesFromTheConfig: the config's built-in gate settings are the
// gate's own defaults, the observation rules its default rules in order,
// and a setting changed in the config reaches the rules.
func TestGateRulesFromTheConfig(t *testing.T) {
	observer, err := awareness.NewObserver(awareness.DefaultObservationRules)
	if err != nil {
		t.Fatal(err)
	}
	c := config.Default().Gate
	r, err := gate.RulesFrom(c, observer.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	want := gate.DefaultRules()
	want.Defaults = observer.Defaults()
	if !reflect.DeepEqual(r, want) {
		t.Errorf("from the config's defaults:\n%+v\nthe gate's:\n%+v", r, want)
	}
	if len(r.Defaults) != len(awareness.DefaultObservationRules) || r.Defaults[0].Type != "estop.tripped" || r.Defaults[0].Attention != "max" {
		t.Errorf("default rules %+v", r.Defaults)
	}
	c.Quiet = []config.QuietPeriod{{From: "22:00", To: "07:00"}}
	c.MinTrust, c.GlobalBudget = "medium", config.Budget{Max: 3, WindowS: 600}
	if r, err = gate.RulesFrom(c, observer.Defaults()); err != nil || len(r.Quiet) != 1 || r.MinTrust != ledger.Medium || r.Global != (gate.Budget{Max: 3, Window: 10 * time.Minute}) {
		t.Errorf("changed: %+v %v", r, err)
	}
}
