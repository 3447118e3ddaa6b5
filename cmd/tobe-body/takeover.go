package main

import (
	"sort"

	"github.com/tobe-body/tobe-body/ledger"
)

// heldAtStop returns the controls whose holds the ledger shows in force
// when the body stopped: a resource whose last lease.human_ event is a
// takeover.
func heldAtStop(store *ledger.Store) ([]string, error) {
	evs, err := store.Events(ledger.Filter{Types: []string{"lease.human_takeover", "lease.human_released"}, Limit: 1 << 20})
	if err != nil {
		return nil, err
	}
	type state struct {
		held    bool
		control string
	}
	last := map[string]state{} // by resource
	for _, e := range evs {
		var p map[string]any
		if ledger.UnmarshalPayload(e.Payload, &p) != nil {
			continue
		}
		res, _ := p["resource"].(string)
		ctrl, _ := p["control"].(string)
		last[res] = state{held: e.Type == "lease.human_takeover", control: ctrl}
	}
	seen := map[string]bool{}
	var out []string
	for _, st := range last {
		if st.held && !seen[st.control] {
			seen[st.control] = true
			out = append(out, st.control)
		}
	}
	sort.Strings(out)
	return out, nil
}
