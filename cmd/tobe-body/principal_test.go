package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/admin/admintest"
)

// peerMain is this test binary run as another user's client of the admin
// socket at path: for each method it connects, sends one request and
// prints the reply as it came, one a line, then exits.
func peerMain(path string, methods []string) int {
	for i, m := range methods {
		line, err := peerCall(path, i, m)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", m, err)
			return 1
		}
		fmt.Print(line)
	}
	return 0
}

func peerCall(path string, id int, method string) (string, error) {
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := fmt.Fprintf(c, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":{}}`+"\n", id, method); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

// reachable lets other users through dir and the directories above it,
// up to the temporary directory, without letting them list any.
func reachable(dir string) {
	for ; dir != "/" && dir != os.TempDir(); dir = filepath.Dir(dir) {
		os.Chmod(dir, 0o711)
	}
}

// asPeer runs peerMain (from bin, see admintest.Binary) as uid and gid, and
// returns its replies.
func asPeer(t *testing.T, bin string, uid, gid uint32, path string, methods []string) []string {
	t.Helper()
	cmd := exec.Command(bin, methods...)
	cmd.Env = append(os.Environ(), "TOBE_BODY_TEST_PEER="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("peer uid %d: %v\n%s", uid, err, stderr.String())
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// A peer the kernel names as a user no rule admits, or one a rule puts at
// trust off, reaches no operation: every one of the table's is refused
// not_authorized, and none of them did anything (the e-stop is not
// tripped, no grant was added). The peers are real processes of other
// users, so SO_PEERCRED reports what the kernel knows; their group is
// the socket's, so the file's mode lets them connect and only the rules
// stand between them and the operations.
func TestNoPrincipalReachesNoOperation(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the peers run as other users")
	}
	bin, _ := admintest.Binary(t)
	d := startDaemon(t, `, "act": {"principals": [{"uid": 0, "trust": "max"}, {"uid": 12346, "trust": "off"}]}`)
	defer d.stop(t)
	// The peers reach the socket through the test's directories.
	reachable(d.data)
	os.Chmod(d.data, 0o750)
	tb, err := (&awareness.Parts{}).Table()
	if err != nil {
		t.Fatal(err)
	}
	var methods []string
	for _, e := range tb.Entries() {
		methods = append(methods, e.Name)
	}
	sock := filepath.Join(d.data, "admin.sock")
	for _, uid := range []uint32{12345, 12346} {
		replies := asPeer(t, bin, uid, 0, sock, methods)
		if len(replies) != len(methods) {
			t.Fatalf("uid %d: %d replies to %d requests", uid, len(replies), len(methods))
		}
		for i, line := range replies {
			var r struct {
				Result json.RawMessage `json:"result"`
				Error  *struct {
					Code int              `json:"code"`
					Data *awareness.Error `json:"data"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(line), &r); err != nil || r.Error == nil || r.Error.Data == nil ||
				r.Error.Data.Reason != awareness.ReasonNotAuthorized || r.Result != nil {
				t.Errorf("uid %d, %s: got %s, want not_authorized", uid, methods[i], line)
			}
		}
	}
	// The same peer as root is answered: what refused the others was the
	// rules, not the way they called.
	if r := asPeer(t, bin, 0, 0, sock, []string{"status"}); len(r) != 1 || !strings.Contains(r[0], `"result":{"body"`) {
		t.Errorf("root's status: %v", r)
	}
	out, err := runCmd(t, "estop", "status", "--data", d.data)
	if err != nil || !strings.Contains(out, "armed") {
		t.Errorf("after the peers, the e-stop: %v\n%s", err, out)
	}
	out, err = runCmd(t, "grant", "list", "--data", d.data, "--all")
	if err != nil || strings.Contains(out, "agent") {
		t.Errorf("after the peers, grants: %v\n%s", err, out)
	}
}
