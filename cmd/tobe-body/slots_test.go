package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/awareness/admin"
	"github.com/tobe-body/tobe-body/awareness/admin/admintest"
	"github.com/tobe-body/tobe-body/cmd/tobe-body/internal/cli"
)

// TestAdminSocketUnderHostilePeers runs the review's attacks on the
// admin socket against the daemon, with peers of other uids (in the
// socket's group, as root's group here; act.principals gives them their
// trust): a peer at trust off sending {} on sixteen connections, and
// long polls on every connection the others can get. Root is served
// until the places kept for high trust are taken too; then its status is
// refused busy and its `estop trip` is answered at once.
func TestAdminSocketUnderHostilePeers(t *testing.T) {
	bin, _ := admintest.Binary(t) // skips unless root
	d := startDaemon(t, `, "act": {"principals": [{"uid": 0, "trust": "max"}, {"uid": 2201, "trust": "low"}, {"uid": 2202, "trust": "low"},
		{"uid": 2203, "trust": "medium"}, {"uid": 2204, "trust": "high"}, {"uid": 2205, "trust": "off"}]}`)
	defer d.stop(t)
	admintest.Enter(t, filepath.Dir(d.data))
	sock := filepath.Join(d.data, cli.AdminSocket)

	admintest.Start(t, bin, sock, 2205, 0, admin.MaxConns, "{}").Want(t, 0, "uid 2205 is not a local administrator (uid 2205: trust off)")
	if out, err := runCmd(t, "status", "--data", d.data); err != nil {
		t.Fatalf("root's status after the peer at trust off: %v\n%s", err, out)
	}

	const poll = `{"jsonrpc":"2.0","id":1,"method":"events","params":{"types":["test.never."],"wait_ms":60000}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"status"}`
	for _, uid := range []int{2201, 2202, 2203} {
		admintest.Start(t, bin, sock, uid, 0, admin.MaxConnsPerUID+1, poll).Want(t, admin.MaxConnsPerUID, fmt.Sprintf("busy: 4 connections of uid %d already open", uid))
	}
	if out, err := runCmd(t, "status", "--data", d.data); err != nil {
		t.Fatalf("root's status with every place below high trust taken: %v\n%s", err, out)
	}
	admintest.Start(t, bin, sock, 2204, 0, admin.MaxConnsPerUID+1, poll).Want(t, admin.KeptForHigh, "busy: all 16 connections are open")

	out, err := runCmd(t, "status", "--data", d.data)
	if err == nil || !strings.Contains(err.Error(), "status: busy: all 16 connections are open") {
		t.Errorf("root's status with every place taken: %v\n%s, want busy", err, out)
	}
	// A trip that waited for a place would wait for a hostile peer to let
	// go (its long poll: 60 s), and the CLI's 5 s timeout would fail it;
	// one on its own path takes milliseconds. The time is logged for the
	// issue's figure (within 100 ms), not judged: a shared machine's
	// timings decide no test.
	var took []time.Duration
	for range 5 {
		start := time.Now()
		out, err := runCmd(t, "estop", "trip", "--data", d.data)
		took = append(took, time.Since(start))
		if err != nil || !strings.Contains(out, "tripped: requested by admin:uid=0") {
			t.Fatalf("root's estop trip: %v\n%s", err, out)
		}
	}
	slices.Sort(took)
	t.Logf("tobe-body estop trip answered in %v (median of %v) with every place held by uids 2201-2204", took[2], took)
}
