package agent

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/ledger"
)

// Rules say which peers of the agent socket are which agents: the
// config's agent.principals, read once.
type Rules struct {
	rules []rule
	// groupsOf returns the groups of uid beyond its primary one (nil:
	// the group database); a test replaces it.
	groupsOf func(uid int) []int
}

type rule struct {
	name, subject string
	peer          act.Peer
	trust         ledger.Level
}

// NewRules reads agent.principals. A user or group the body does not
// have is an error naming the rule.
func NewRules(ps []config.AgentPrincipal) (*Rules, error) {
	rs := &Rules{}
	for i, p := range ps {
		at := fmt.Sprintf("agent.principals[%d]", i)
		trust, err := ledger.ParseLevel(p.Trust)
		if err != nil {
			return nil, fmt.Errorf("%s.trust: %w", at, err)
		}
		peer, key, err := act.ParsePeer(p.UID, p.User, p.GID, p.Group)
		if err != nil {
			if key != "" {
				at += "." + key
			}
			return nil, fmt.Errorf("%s: %w", at, err)
		}
		rs.rules = append(rs.rules, rule{name: p.Name, subject: p.Subject, peer: peer, trust: trust})
	}
	return rs, nil
}

// Match lists the names of the rules a peer with uid and gid (its
// primary group, as the kernel gives it) matches, in the config's order,
// with off rules left out; empty when it is no agent.
func (rs *Rules) Match(uid, gid int) []string {
	var names []string
	for _, r := range rs.match(uid, gid) {
		names = append(names, r.name)
	}
	return names
}

func (rs *Rules) match(uid, gid int) []rule {
	groups := act.GroupsOf(uid, rs.groupsOf)
	var out []rule
	for _, r := range rs.rules {
		if r.trust > ledger.Off && r.peer.Matches(uid, gid, groups) {
			out = append(out, r)
		}
	}
	return out
}

// Resolve is the principal of a peer with uid and gid, as the rule named
// name gives it (name empty: the one rule the peer matches), with the
// session id; or an error saying why the peer is no agent. A name can
// only choose among the rules the peer matches: it narrows, never widens.
func (rs *Rules) Resolve(uid, gid int, name, session string) (act.Principal, error) {
	if uid < 0 {
		return act.Principal{}, fmt.Errorf("the peer's credentials could not be read: not an agent")
	}
	ms := rs.match(uid, gid)
	if len(ms) == 0 {
		return act.Principal{}, fmt.Errorf("uid %d is not an agent (no rule of agent.principals names it at a trust above off)", uid)
	}
	var r rule
	switch {
	case name != "":
		i := slices.IndexFunc(ms, func(r rule) bool { return r.name == name })
		if i < 0 {
			return act.Principal{}, fmt.Errorf("uid %d may not be agent principal %q (it may be: %s)", uid, name, names(ms))
		}
		r = ms[i]
	case len(ms) > 1:
		return act.Principal{}, fmt.Errorf("uid %d matches agent principals %s: choose one with --principal NAME", uid, names(ms))
	default:
		r = ms[0]
	}
	return act.Principal{Kind: act.AgentSession, Subject: r.subject, Session: session, Trust: r.trust}, nil
}

func names(rs []rule) string {
	var s []string
	for _, r := range rs {
		s = append(s, strconv.Quote(r.name))
	}
	return strings.Join(s, ", ")
}
