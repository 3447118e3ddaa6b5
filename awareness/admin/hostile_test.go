package admin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/admin/admintest"
)

// holdLines are a long poll and a quick call after it: the quick one's
// answer shows the connection has a place.
const holdLines = `{"jsonrpc":"2.0","id":1,"method":"slow"}` + "\n" + `{"jsonrpc":"2.0","id":2,"method":"echo"}`

// "estop trip answered within 100 ms while every other slot is held by a
// hostile peer": peers of four uids take every place they can, one at
// trust off hammers the socket with {}, and root's trip is answered at
// once while its status is refused busy.
func TestTripWhileHostileUIDsHoldEveryPlace(t *testing.T) {
	bin, dir := admintest.Binary(t)
	socket := filepath.Join(dir, "admin.sock")
	ln, err := Listen(socket)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(socket, 0o666) // the peers' own groups: the socket's mode is not what this tests
	srv := newServer(testTable(t, make(chan struct{})), rules(t, map[int]string{0: "max", 2101: "low", 2102: "medium", 2103: "low", 2104: "high", 2105: "off"}))
	stop := srv.run(ln)
	defer stop()

	for _, uid := range []int{2101, 2102, 2103} {
		admintest.Start(t, bin, socket, uid, uid, MaxConnsPerUID+1, holdLines).Want(t, MaxConnsPerUID, fmt.Sprintf("busy: 4 connections of uid %d already open", uid))
	}
	admintest.Start(t, bin, socket, 2105, 2105, MaxConns, "{}\n{}\n{}").Want(t, 0, "not_authorized: uid 2105 is not a local administrator (uid 2105: trust off)")
	admintest.Start(t, bin, socket, 2104, 2104, MaxConnsPerUID+1, holdLines).Want(t, KeptForHigh, "busy: all 16 connections are open")
	if slots, _ := srv.places(2104); slots != KeptForHigh {
		t.Fatalf("uid 2104 holds %d places, want %d", slots, KeptForHigh)
	}

	cl := &Client{Path: socket}
	_, err = Call(context.Background(), cl, opEcho, echoIn{Text: "status"})
	var ae *awareness.Error
	if !errors.As(err, &ae) || ae.Reason != awareness.ReasonBusy || !strings.Contains(err.Error(), "busy: all 16 connections are open") {
		t.Errorf("root's status with every place taken: %v, want busy", err)
	}
	// A trip that waited for a place would wait until a hostile peer let
	// go (never, here), and the client's 5 s timeout would fail it; one on
	// its own path takes a millisecond or so. The time is logged for the
	// issue's figure (within 100 ms), not judged: a shared machine's
	// timings decide no test.
	var took []time.Duration
	for range 5 {
		start := time.Now()
		out, err := Call(context.Background(), cl, opTrip, awareness.None{})
		took = append(took, time.Since(start))
		if err != nil || out.Text != "tripped" || out.By != "admin:uid=0" {
			t.Fatalf("root's trip: %+v, %v", out, err)
		}
	}
	slices.Sort(took)
	t.Logf("root's trip answered in %v (median of %v) with every place held by uids 2101-2104", took[2], took)
}
