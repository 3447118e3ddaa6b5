package act

import (
	"fmt"
	"os"
	"os/user"
	"slices"
	"strconv"

	"github.com/tobe-body/tobe-body/body/config"
)

// Peer is the identity a rule of the config names for a socket's peers,
// as the kernel gives them (SO_PEERCRED): a uid or a gid (-1 for the one
// it is not), and what people call it ("user tobe", "gid 1001"). The
// admin socket's act.principals and the agent socket's agent.principals
// name peers this way.
type Peer struct {
	UID, GID int
	What     string
}

// ParsePeer reads the one identity of uid, user, gid and group that is
// set (config.DaemonIdentity is the daemon's own user or group). An
// error names the key at fault: a user or group the body does not have,
// or none or more than one set.
func ParsePeer(uid *int, userName string, gid *int, group string) (Peer, string, error) {
	n := 0
	for _, set := range []bool{uid != nil, userName != "", gid != nil, group != ""} {
		if set {
			n++
		}
	}
	if n != 1 {
		return Peer{}, "", fmt.Errorf("names %d identities; want exactly one of uid, user, gid or group", n)
	}
	p := Peer{UID: -1, GID: -1}
	switch {
	case uid != nil:
		p.UID, p.What = *uid, "uid "+strconv.Itoa(*uid)
	case gid != nil:
		p.GID, p.What = *gid, "gid "+strconv.Itoa(*gid)
	case userName == config.DaemonIdentity:
		p.UID, p.What = os.Getuid(), "the daemon's user"
	case group == config.DaemonIdentity:
		p.GID, p.What = os.Getgid(), "the daemon's group"
	case userName != "":
		u, err := user.Lookup(userName)
		if err != nil {
			return Peer{}, "user", fmt.Errorf("no user %q on this body", userName)
		}
		p.UID, _ = strconv.Atoi(u.Uid)
		p.What = "user " + userName
	default:
		g, err := user.LookupGroup(group)
		if err != nil {
			return Peer{}, "group", fmt.Errorf("no group %q on this body", group)
		}
		p.GID, _ = strconv.Atoi(g.Gid)
		p.What = "group " + group
	}
	return p, "", nil
}

// Groups gives the groups of a peer beyond its primary one, read once
// and only when a rule names a group the primary one is not.
type Groups struct {
	uid    int
	of     func(uid int) []int
	looked bool
	groups []int
}

// GroupsOf is uid's groups from of (nil: the group database).
func GroupsOf(uid int, of func(uid int) []int) *Groups {
	if of == nil {
		of = SupplementaryGroups
	}
	return &Groups{uid: uid, of: of}
}

func (g *Groups) has(gid int) bool {
	if !g.looked {
		g.groups, g.looked = g.of(g.uid), true
	}
	return slices.Contains(g.groups, gid)
}

// Matches tells whether a peer with uid and gid (its primary group, as
// the kernel gives it), and groups beyond it, is p.
func (p Peer) Matches(uid, gid int, groups *Groups) bool {
	if uid < 0 {
		return false
	}
	if p.UID >= 0 {
		return p.UID == uid
	}
	return p.GID >= 0 && (p.GID == gid || groups.has(p.GID))
}

// SupplementaryGroups are uid's groups from the group database.
func SupplementaryGroups(uid int) []int {
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
