package act

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/ledger"
)

// Settings are the config's act section checked against the board and
// resolved into what the runner, the takeover and the admin socket use.
type Settings struct {
	Rules  SafetyRules
	Limits RateLimits
	// Admission is the limit per principal every request takes a token
	// of before anything of it is recorded (Environment.Admission).
	Admission RateLimit
	Outputs   map[string]OutputSettings // by the profile's output name
	CapModes  map[string]body.State
	// ChanModes are the channel modes set in the registry.
	ChanModes map[string]body.State
	Controls  []HumanControl
	Admins    *LocalPrincipals
	Leases    *LeaseTable
	// raw is the section as configured, for the checks that need the
	// runner (capability names).
	raw config.Act
}

// OutputSettings are one output's risk and limits.
type OutputSettings struct {
	Risk   Risk
	Raised bool // the config raised the risk
	Config config.Output
}

// OutputRisk is an output's built-in risk class by its kind: a relay is
// an external side effect (R2), anything else (an LED, a buzzer) R1. The
// config may raise it, never lower it.
func OutputRisk(kind string) Risk {
	if kind == "relay" {
		return R2
	}
	return R1
}

// NewSettings checks c against the board p and the channels in reg
// (either may be nil: those checks are then skipped) and resolves it;
// channel modes are set in reg. The error is a config.Errors with one
// entry per problem, each naming its path in the config.
func NewSettings(c config.Act, p *body.BoardFacts, reg *body.Registry) (*Settings, error) {
	var errs config.Errors
	bad := func(path, format string, args ...any) {
		errs = append(errs, &config.Error{File: "config", Path: "$.act" + path, Reason: fmt.Sprintf(format, args...)})
	}
	s := &Settings{Outputs: map[string]OutputSettings{}, CapModes: map[string]body.State{}, ChanModes: map[string]body.State{},
		Leases: NewLeaseTable(0), raw: c}

	for _, f := range c.Safety.Forbidden {
		s.Rules.Forbidden = append(s.Rules.Forbidden, ForbiddenRule{Capability: f.Capability, Scope: f.Scope})
	}
	s.Rules.ForbidR3 = c.Safety.ForbidR3
	s.Rules.UnsyncedClockRefuseFrom = ClockRule(c.Safety.UnsyncedClockRefuseFrom)
	if err := s.Rules.Check(); err != nil {
		bad(".safety", "%v", err)
	}
	s.Limits = RateLimits{Default: RateLimit{Burst: c.RateLimits.Default.Burst, PerSecond: c.RateLimits.Default.PerSecond},
		ByCapability: map[string]RateLimit{}}
	for name, l := range c.RateLimits.ByCapability {
		s.Limits.ByCapability[name] = RateLimit{Burst: l.Burst, PerSecond: l.PerSecond}
	}
	if err := s.Limits.Check(); err != nil {
		bad(".rate_limits", "%v", err)
	}
	s.Admission = RateLimit{Burst: c.RateLimits.PerPrincipal.Burst, PerSecond: c.RateLimits.PerPrincipal.PerSecond}
	if err := s.Admission.check(); err != nil {
		bad(".rate_limits.per_principal", "%v", err)
	}

	// Outputs: by the profile's names, risk only upwards.
	kinds := map[string]string{}
	var buttons []string
	controls := map[string]bool{} // input devices whose keys are events
	if p != nil {
		kinds, buttons = p.Outputs, p.Buttons
		for _, c := range p.Controls {
			controls[c] = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Outputs)) {
		o := c.Outputs[name]
		kind, ok := kinds[name]
		if p != nil && !ok {
			bad(".outputs."+name, "board %s has no output %q (outputs: %s)", p.Name, name, strings.Join(slices.Sorted(maps.Keys(kinds)), ", "))
			continue
		}
		st := OutputSettings{Risk: OutputRisk(kind), Config: o}
		if o.Risk != "" {
			r, err := ParseRisk(o.Risk)
			if err != nil {
				bad(".outputs."+name+".risk", "%v", err)
				continue
			}
			if r < st.Risk {
				bad(".outputs."+name+".risk", "%s is below the %s's %s; a config may raise a risk, never lower it", o.Risk, kind, st.Risk)
				continue
			}
			st.Risk, st.Raised = r, true
		}
		s.Outputs[name] = st
	}

	// Channel modes: set in the registry, where the policy reads them.
	for _, id := range slices.Sorted(maps.Keys(c.ChannelModes)) {
		s.ChanModes[id] = body.State(c.ChannelModes[id])
		if reg != nil {
			if _, err := reg.Get(id); err != nil {
				bad(fmt.Sprintf(".channel_modes[%q]", id), "this body has no channel %s", id)
			}
		}
	}
	for name, m := range c.CapabilityModes {
		s.CapModes[name] = body.State(m)
	}

	// The people's controls: a button of the profile, or a key of an
	// input device that is a control; resources are outputs.
	for i, hc := range c.HumanControls {
		at := fmt.Sprintf(".human_controls[%d]", i)
		ctrl := hc.Control
		if p != nil {
			switch {
			case strings.HasPrefix(hc.Control, "gpio.") && !slices.Contains(buttons, hc.Control):
				bad(at+".control", "%s is not a button of board %s (buttons: %s)", hc.Control, p.Name, strings.Join(buttons, ", "))
			case strings.HasPrefix(hc.Control, "input.") && !controls[hc.Control]:
				bad(at+".control", "%s is not an input device of board %s with the control role (%s)", hc.Control, p.Name, strings.Join(slices.Sorted(maps.Keys(controls)), ", "))
			}
			for j, res := range hc.Resources {
				if _, ok := kinds[body.ChannelName(res)]; !ok || !strings.HasPrefix(res, "gpio.") {
					bad(fmt.Sprintf("%s.resources[%d]", at, j), "board %s has no output %s", p.Name, res)
				}
			}
		}
		if hc.Key != "" {
			ctrl = KeyControl(hc.Control, hc.Key)
		}
		s.Controls = append(s.Controls, HumanControl{Control: ctrl, Resources: hc.Resources, End: HoldEnd(hc.Release), After: hc.After()})
	}

	admins, perrs := NewLocalPrincipals(c.Principals)
	errs = append(errs, perrs...)
	s.Admins = admins
	if len(errs) > 0 {
		return nil, errs
	}
	if reg != nil {
		for id, m := range s.ChanModes {
			if err := setMode(reg, id, m); err != nil {
				return nil, config.Errors{{File: "config", Path: fmt.Sprintf("$.act.channel_modes[%q]", id), Reason: err.Error()}}
			}
		}
	}
	return s, nil
}

// setMode puts a channel in the configured mode. A channel that is
// offline or failed stays so when the mode is enabled (it cannot act
// anyway) and goes to disabled when it is disabled; shadow on such a
// channel is an error, since the body could not honour it.
func setMode(reg *body.Registry, id string, m body.State) error {
	ch, err := reg.Get(id)
	if err != nil {
		return err
	}
	if ch.State == m || m == body.Enabled && ch.State != body.Disabled && ch.State != body.Shadow {
		return nil
	}
	return reg.Set(id, m, ch.Health)
}

// CheckCapabilities checks the names the config gives capabilities
// against what the runner offers.
func (s *Settings) CheckCapabilities(r *Runner) error {
	offered := map[string]bool{}
	var names []string
	for _, c := range r.Capabilities() {
		offered[c.Name] = true
		names = append(names, c.Name)
	}
	var errs config.Errors
	check := func(path string, m map[string]bool) {
		for _, name := range slices.Sorted(maps.Keys(m)) {
			if !offered[name] {
				errs = append(errs, &config.Error{File: "config", Path: fmt.Sprintf("$.act.%s[%q]", path, name),
					Reason: fmt.Sprintf("this body offers no capability %s (%s)", name, strings.Join(names, ", "))})
			}
		}
	}
	modes, limits := map[string]bool{}, map[string]bool{}
	for name := range s.raw.CapabilityModes {
		modes[name] = true
	}
	for name := range s.raw.RateLimits.ByCapability {
		limits[name] = true
	}
	check("capability_modes", modes)
	check("rate_limits.by_capability", limits)
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// KeyControl names a key of an input device as a control.
func KeyControl(device, key string) string { return device + " " + key }

// LocalPrincipals map the admin socket's peers, as the kernel names them
// (SO_PEERCRED), to a local administrator's trust: the first rule that
// matches decides; a peer no rule matches, or one at trust off, is
// refused.
type LocalPrincipals struct {
	rules []localRule
	// groupsOf returns the groups of uid beyond its primary one, from the
	// group database; a test replaces it.
	groupsOf func(uid int) []int
}

type localRule struct {
	peer  Peer
	trust ledger.Level
}

// NewLocalPrincipals reads the config's act.principals rules.
func NewLocalPrincipals(ps []config.Principal) (*LocalPrincipals, config.Errors) {
	var errs config.Errors
	lp := &LocalPrincipals{groupsOf: SupplementaryGroups}
	for i, p := range ps {
		bad := func(key, format string, args ...any) {
			errs = append(errs, &config.Error{File: "config", Path: fmt.Sprintf("$.act.principals[%d].%s", i, key), Reason: fmt.Sprintf(format, args...)})
		}
		trust, err := ledger.ParseLevel(p.Trust)
		if err != nil {
			bad("trust", "%v", err)
			continue
		}
		peer, key, err := ParsePeer(p.UID, p.User, p.GID, p.Group)
		if err != nil {
			bad(key, "%v", err)
			continue
		}
		lp.rules = append(lp.rules, localRule{peer: peer, trust: trust})
	}
	return lp, errs
}

// Resolve is the principal of a peer with uid and gid (its primary group,
// as the kernel gives it), or an error saying why it is not a local
// administrator.
func (lp *LocalPrincipals) Resolve(uid, gid int) (Principal, error) {
	if uid < 0 {
		return Principal{}, fmt.Errorf("the caller's credentials could not be read: not a local administrator")
	}
	groups := GroupsOf(uid, lp.groupsOf)
	for _, r := range lp.rules {
		if !r.peer.Matches(uid, gid, groups) {
			continue
		}
		if r.trust <= ledger.Off {
			return Principal{}, fmt.Errorf("uid %d is not a local administrator (%s: trust off)", uid, r.peer.What)
		}
		return Principal{Kind: LocalAdmin, Subject: fmt.Sprintf("admin:uid=%d", uid), Session: "admin", Trust: r.trust}, nil
	}
	return Principal{}, fmt.Errorf("uid %d is not a local administrator (no rule of act.principals names it)", uid)
}

// Speaker is the config of the speaker named name (zero: the defaults).
func (s *Settings) Speaker(name string) config.Speaker { return s.raw.Speakers[name] }
