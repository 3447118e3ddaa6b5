package gate

import (
	"fmt"
	"time"

	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/ledger"
)

// RulesFrom are the gate's rules from its config section, with defaults
// (the observation rules, in their order) as its default rules. An error
// names the config key that is wrong.
func RulesFrom(c config.Gate, defaults []Default) (Rules, error) {
	s := func(n int) time.Duration { return time.Duration(n) * time.Second }
	trust, err := ledger.ParseLevel(c.MinTrust)
	if err != nil {
		return Rules{}, fmt.Errorf("config: gate.min_trust: %w", err)
	}
	r := Rules{
		Bands:           map[string]Band{},
		NoveltyHalfLife: s(c.NoveltyHalfLifeS),
		Repeats:         c.NoveltyRepeats,
		MinTrust:        trust,
		ItemBudget:      Budget{Max: c.ItemBudget.Max, Window: s(c.ItemBudget.WindowS)},
		Global:          Budget{Max: c.GlobalBudget.Max, Window: s(c.GlobalBudget.WindowS)},
		Merge:           s(c.MergeS),
		AnswerWithin:    s(c.AnswerWithinS),
		Defaults:        defaults,
	}
	for sel, b := range c.Bands {
		r.Bands[sel] = Band(b)
	}
	for _, q := range c.Quiet {
		r.Quiet = append(r.Quiet, Quiet{From: q.From, To: q.To})
	}
	if err := r.Check(); err != nil {
		return Rules{}, fmt.Errorf("config: gate: %w", err)
	}
	return r, nil
}

// FromConfig is the gate the daemon runs over store: its rules from its
// config section with defaults as its default rules (see RulesFrom), its
// noise pool sized by the section, and classes to judge what events
// expire. The caller sets what remains (Log, From, Push) before Load.
func FromConfig(store *ledger.Store, c config.Gate, defaults []Default, classes ledger.Classes) (*Gate, error) {
	rules, err := RulesFrom(c, defaults)
	if err != nil {
		return nil, err
	}
	np := c.NoisePool
	return &Gate{Store: store, Sal: NewSalience(rules), Pool: &Pool{Per: np.Per, TTL: time.Duration(np.TTLS) * time.Second, MaxKeys: np.MaxKeys},
		Classes: classes}, nil
}
