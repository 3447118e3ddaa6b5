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

// The gate the daemon runs has the config's rules and a noise pool of
// the config's size; a config the rules refuse makes no gate.
func TestGateFromTheConfig(t *testing.T) {
	c := config.Default().Gate
	g, err := gate.FromConfig(nil, c, nil, ledger.DefaultClasses())
	if err != nil {
		t.Fatal(err)
	}
	rules, _ := gate.RulesFrom(c, nil)
	if !reflect.DeepEqual(g.Sal.Rules, rules) {
		t.Errorf("rules %+v, want %+v", g.Sal.Rules, rules)
	}
	if want := (gate.Pool{Per: 8, TTL: 24 * time.Hour, MaxKeys: 1024}); g.Pool.Per != want.Per || g.Pool.TTL != want.TTL || g.Pool.MaxKeys != want.MaxKeys {
		t.Errorf("noise pool %d a key, %v, %d keys; want %d, %v, %d", g.Pool.Per, g.Pool.TTL, g.Pool.MaxKeys, want.Per, want.TTL, want.MaxKeys)
	}
	c.MinTrust = "sometimes"
	if _, err := gate.FromConfig(nil, c, nil, ledger.DefaultClasses()); err == nil {
		t.Error("a gate made with min_trust \"sometimes\"")
	}
}
