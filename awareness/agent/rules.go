package agent

import (
	"fmt"
	"os/user"
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
	// groupsOf returns the groups of uid beyond its primary one; a test
	// replaces it.
	groupsOf func(uid int) []int
}

type rule struct {
	name, subject string
	uid, gid      int // -1: not this kind
	trust         ledger.Level
	what          string // for people: "user tobe"
}

// NewRules reads agent.principals. A user or group the body does not
// have is an error naming the rule.
func NewRules(ps []config.AgentPrincipal) (*Rules, error) {
	rs := &Rules{groupsOf: groupsOf}
	for i, p := range ps {
		at := fmt.Sprintf("agent.principals[%d]", i)
		trust, err := ledger.ParseLevel(p.Trust)
		if err != nil {
			return nil, fmt.Errorf("%s.trust: %w", at, err)
		}
		r := rule{name: p.Name, subject: p.Subject, uid: -1, gid: -1, trust: trust}
		switch {
		case p.UID != nil:
			r.uid, r.what = *p.UID, "uid "+strconv.Itoa(*p.UID)
		case p.GID != nil:
			r.gid, r.what = *p.GID, "gid "+strconv.Itoa(*p.GID)
		case p.User != "":
			u, err := user.Lookup(p.User)
			if err != nil {
				return nil, fmt.Errorf("%s.user: no user %q on this body", at, p.User)
			}
			r.uid, _ = strconv.Atoi(u.Uid)
			r.what = "user " + p.User
		case p.Group != "":
			g, err := user.LookupGroup(p.Group)
			if err != nil {
				return nil, fmt.Errorf("%s.group: no group %q on this body", at, p.Group)
			}
			r.gid, _ = strconv.Atoi(g.Gid)
			r.what = "group " + p.Group
		default:
			return nil, fmt.Errorf("%s names no uid, user, gid or group", at)
		}
		rs.rules = append(rs.rules, r)
	}
	return rs, nil
}

func groupsOf(uid int) []int {
	u, err := user.LookupId(strconv.Itoa(uid))
	if err != nil {
		return nil
	}
	ids, err := u.GroupIds()
	if err != nil {
		return nil
	}
	var out []int
	for _, id := range ids {
		if n, err := strconv.Atoi(id); err == nil {
			out = append(out, n)
		}
	}
	return out
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
	if uid < 0 {
		return nil
	}
	var groups []int
	looked := false
	var out []rule
	for _, r := range rs.rules {
		ok := r.uid >= 0 && r.uid == uid
		if !ok && r.gid >= 0 {
			if r.gid == gid {
				ok = true
			} else {
				if !looked {
					groups, looked = rs.groupsOf(uid), true
				}
				ok = slices.Contains(groups, r.gid)
			}
		}
		if ok && r.trust > ledger.Off {
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
