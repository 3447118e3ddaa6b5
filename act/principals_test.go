package act

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/ledger"
)

// actFrom loads an act section as the config does, layered over the
// defaults.
func actFrom(t *testing.T, section string) config.Act {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.json")
	os.WriteFile(p, []byte(`{"version": 1, "act": `+section+`}`), 0o600)
	l, err := config.Load(config.Sources{File: p})
	if err != nil {
		t.Fatal(err)
	}
	return l.Act
}

// The admin socket's peers, by the kernel's uid and gid, to principals.
func TestLocalPrincipals(t *testing.T) {
	uid, gid := os.Getuid(), os.Getgid()
	groups := map[int][]int{1000: {27, 1000}, 1001: {1001}}
	for _, tc := range []struct {
		name     string
		rules    string
		uid, gid int
		trust    ledger.Level
		refused  string
	}{
		{"root by default", `[]`, 0, 0, ledger.Max, ""},
		{"the daemon's user by default", `[]`, uid, 99999, ledger.Max, ""},
		{"the daemon's group by default", `[]`, 4242, gid, ledger.Max, ""},
		{"anyone else by default", `[]`, 4242, 4242, 0, "uid 4242 is not a local administrator"},
		{"unreadable credentials", `[]`, -1, -1, 0, "could not be read"},
		{"a uid at medium", `[{"uid": 1000, "trust": "medium"}]`, 1000, 1000, ledger.Medium, ""},
		{"a supplementary group", `[{"gid": 27, "trust": "low"}]`, 1000, 1000, ledger.Low, ""},
		{"not in the group", `[{"gid": 27, "trust": "low"}]`, 1001, 1001, 0, "no rule of act.principals names it"},
		{"the first rule wins", `[{"uid": 1000, "trust": "off"}, {"gid": 27, "trust": "max"}]`, 1000, 1000, 0, "uid 1000 is not a local administrator (uid 1000: trust off)"},
		{"root only when listed", `[{"uid": 1000, "trust": "high"}]`, 0, 0, 0, "not a local administrator"},
		{"root at max", `[{"uid": 0, "trust": "max"}]`, 0, 0, ledger.Max, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := config.Default().Act
			if tc.rules != `[]` {
				a = actFrom(t, `{"principals": `+tc.rules+`}`)
			}
			s, err := NewSettings(a, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			s.Admins.groupsOf = func(uid int) []int { return groups[uid] }
			p, err := s.Admins.Resolve(tc.uid, tc.gid)
			switch {
			case tc.refused != "":
				if err == nil || !strings.Contains(err.Error(), tc.refused) {
					t.Errorf("got %+v %v, want refused %q", p, err, tc.refused)
				}
			case err != nil:
				t.Errorf("refused: %v", err)
			case p.Trust != tc.trust || p.Kind != LocalAdmin || p.Subject != "admin:uid="+itoa(tc.uid):
				t.Errorf("got %+v, want trust %s", p, tc.trust)
			}
		})
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
