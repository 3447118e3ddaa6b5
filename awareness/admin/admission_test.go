package admin

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/edge/edgetest"
	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/ledger"
)

// dialAs connects to path as a peer of uid, as edgetest.Cred reads it.
func dialAs(t *testing.T, path string, uid int) *peer {
	t.Helper()
	c, err := edgetest.Dial(path, uid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return &peer{c: c, r: bufio.NewReader(c)}
}

// rules are the daemon's own resolver over rules naming uids: uid → trust
// ("off" is refused, as is a uid no rule names).
func rules(t *testing.T, trust map[int]string) Resolver {
	t.Helper()
	var ps []config.Principal
	for uid, l := range trust {
		ps = append(ps, config.Principal{UID: &uid, Trust: l})
	}
	lp, errs := act.NewLocalPrincipals(ps)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return lp.Resolve
}

// serveSeam starts a server whose peers' uids come from their addresses;
// tune changes its durations before it serves.
func serveSeam(t *testing.T, resolve Resolver, tune func(*Server)) (s *Server, path string, release chan struct{}) {
	t.Helper()
	release = make(chan struct{})
	path = filepath.Join(t.TempDir(), "admin.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	s = newServer(testTable(t, release), resolve)
	s.cred = edgetest.Cred
	if tune != nil {
		tune(s)
	}
	t.Cleanup(s.run(ln))
	return s, path, release
}

// places are what uid holds: places served and connections being
// answered once.
func (s *Server) places(uid int) (slots, brief int) { return s.edge().Holds(uid) }

func (s *Server) openConns() int { return s.edge().Open() }

// waitFor polls cond until it holds; what the server does after a peer
// closes happens in its own goroutines.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("waited 10 s for %s", what)
		}
	}
}

// closed tells whether the server has closed p: its next read ends.
func (p *peer) closed(t *testing.T) error {
	t.Helper()
	line, err := p.r.ReadBytes('\n')
	if err == nil {
		return fmt.Errorf("still answering: %s", line)
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		return fmt.Errorf("read: %v, want EOF", err)
	}
	return nil
}

// call sends one request and reads its answer.
func (p *peer) call(t *testing.T, id int, method string) reply {
	t.Helper()
	p.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q}`, id, method))
	return p.read(t)
}

func wantRefusal(t *testing.T, r reply, id string, reason act.Reason, detail string) {
	t.Helper()
	if r.Error == nil || r.Error.Code != CodeRefused || r.Error.Data == nil || r.Error.Data.Reason != reason {
		t.Fatalf("got %+v, want a refusal %s", r, reason)
	}
	if string(r.ID) != id {
		t.Errorf("id %s, want %s", r.ID, id)
	}
	if !strings.Contains(r.Error.Message, detail) {
		t.Errorf("message %q, want %q", r.Error.Message, detail)
	}
}

func wantResult(t *testing.T, r reply, id string) {
	t.Helper()
	if r.Error != nil || string(r.ID) != id {
		t.Fatalf("got %s %+v, want a result for %s", r.ID, r.Error, id)
	}
}

// The review's attack: a peer at trust off held all sixteen connections
// by sending {} every 4 s, and root's status and trip timed out. Now its
// every connection is answered once, with the refusal naming why, and
// closed; it never holds a place, and root is served throughout.
func TestAPeerAtTrustOffIsAnsweredOnceAndClosed(t *testing.T) {
	// A second for the first line: at 100 ms, a request written just
	// after its dial came too late under armv7 emulation on a loaded
	// machine, and found the connection answered and closed.
	s, path, _ := serveSeam(t, rules(t, map[int]string{0: "max", 2001: "off"}), func(s *Server) { s.firstLine = time.Second })
	var peers []*peer
	for range MaxConns {
		peers = append(peers, dialAs(t, path, 2001))
	}
	root := dialAs(t, path, 0)
	wantResult(t, root.call(t, 1, "echo"), "1")
	for i, p := range peers {
		// Past the few answered once, a connection was told why and
		// closed as it came: this write may find it closed.
		io.WriteString(p.c, "{}\n")
		r := p.read(t)
		wantRefusal(t, r, "null", awareness.ReasonNotAuthorized, "uid 2001 is not a local administrator (uid 2001: trust off)")
		io.WriteString(p.c, "{}\n") // 4 s later, as the review's peer did
		if err := p.closed(t); err != nil {
			t.Errorf("connection %d after its refusal: %v", i, err)
		}
	}
	if slots, _ := s.places(2001); slots != 0 {
		t.Errorf("uid 2001 holds %d places, want none", slots)
	}
	wantResult(t, root.call(t, 2, "echo"), "2")

	// A request gets the refusal under its own id and operation.
	p := dialAs(t, path, 2001)
	r := p.call(t, 7, "trip")
	wantRefusal(t, r, "7", awareness.ReasonNotAuthorized, "trust off")
	if r.Error.Data.Op != "trip" {
		t.Errorf("op %q, want trip", r.Error.Data.Op)
	}
	// One that says nothing is told why, once, and closed.
	p = dialAs(t, path, 2001)
	wantRefusal(t, p.read(t), "null", awareness.ReasonNotAuthorized, "trust off")
	if err := p.closed(t); err != nil {
		t.Error(err)
	}
	waitFor(t, "uid 2001's connections to close", func() bool { return s.openConns() == 1 })
}

// The same peer with a principal (low trust) that sends only lines that
// earn errors is closed after IdleTimeout, however often it sends them;
// one whose calls are served, or whose long poll runs, is not.
func TestLinesThatOnlyEarnErrorsDoNotKeepAConnection(t *testing.T) {
	const idle = 500 * time.Millisecond // calls come every idle/10: a generous margin on a loaded machine
	s, path, release := serveSeam(t, rules(t, map[int]string{2002: "low"}), func(s *Server) { s.idle = idle })
	junk := []string{`{}`, `{"jsonrpc":"2.0","id":1,"method":"high"}`, `{"jsonrpc":"2.0","id":2,"method":"nope"}`, `not json`,
		`{"jsonrpc":"2.0","id":3,"method":"echo","params":{"bad":1}}`}
	p := dialAs(t, path, 2002)
	done := make(chan struct{})
	go func() { // the review's keepalive, every idle/10
		defer close(done)
		for i := 0; ; i++ {
			if _, err := io.WriteString(p.c, junk[i%len(junk)]+"\n"); err != nil {
				return
			}
			time.Sleep(idle / 10)
		}
	}()
	start, answers := time.Now(), 0
	for ; ; answers++ {
		if _, err := p.r.ReadBytes('\n'); err != nil {
			break
		}
	}
	p.c.Close()
	<-done
	t.Logf("closed after %v, with %d error answers", time.Since(start).Round(time.Millisecond), answers)
	if answers == 0 {
		t.Error("no answers: the lines were never read")
	}

	// Calls served keep it open past the timeout, and so does a long poll.
	p = dialAs(t, path, 2002)
	for i := range 3 * 10 {
		wantResult(t, p.call(t, i, "echo"), strconv.Itoa(i))
		time.Sleep(idle / 10)
	}
	p.send(t, `{"jsonrpc":"2.0","id":99,"method":"slow"}`)
	time.Sleep(3 * idle)
	close(release)
	wantResult(t, p.read(t), "99")
	wantResult(t, p.call(t, 100, "echo"), "100")
	if slots, _ := s.places(2002); slots != 1 {
		t.Errorf("uid 2002 holds %d places, want 1", slots)
	}
}

// hold opens a connection as uid with a long poll in progress, and
// returns its first answer: echo's result when it has a place.
func hold(t *testing.T, path string, uid int) (*peer, reply) {
	t.Helper()
	p := dialAs(t, path, uid)
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"slow"}`+"\n"+`{"jsonrpc":"2.0","id":2,"method":"echo"}`) // one write: a refused peer is closed after the first line
	return p, p.read(t)
}

// The review's second attack: long polls on every connection. One uid
// gets its share, the next is refused busy, saying so, and closed; other
// administrators are served, and the last places are kept for high trust.
func TestOneUIDCannotTakeEveryPlace(t *testing.T) {
	s, path, _ := serveSeam(t, rules(t, map[int]string{0: "max", 2003: "low", 2004: "medium", 2005: "low", 2006: "low", 2007: "low", 2008: "high"}), nil)
	for range MaxConnsPerUID {
		_, r := hold(t, path, 2003)
		wantResult(t, r, "2")
	}
	p, r := hold(t, path, 2003)
	wantRefusal(t, r, "1", awareness.ReasonBusy, "busy: 4 connections of uid 2003 already open (at most 4 at low trust)")
	if err := p.closed(t); err != nil {
		t.Error(err)
	}
	// Another administrator is served.
	p = dialAs(t, path, 2004)
	wantResult(t, p.call(t, 1, "echo"), "1")
	p.c.Close()
	waitFor(t, "uid 2004's place back", func() bool { n, _ := s.places(2004); return n == 0 })

	// Two more uids take their shares: the places below high trust are
	// all taken.
	for _, uid := range []int{2005, 2006} {
		for range MaxConnsPerUID {
			_, r := hold(t, path, uid)
			wantResult(t, r, "2")
		}
	}
	_, r = hold(t, path, 2007)
	wantRefusal(t, r, "1", awareness.ReasonBusy, "busy: 12 connections already open (the last 4 of 16 are kept for high trust)")
	// High and max trust are still served.
	for _, uid := range []int{2008, 0} {
		_, r := hold(t, path, uid)
		wantResult(t, r, "2")
	}
}

// estop.trip is never queued: not behind the calls running on its
// connection, and not behind the places, when every one is taken.
func TestTheTripIsNeverQueued(t *testing.T) {
	t.Run("behind its connection's calls", func(t *testing.T) {
		_, path, release := serveSeam(t, rules(t, map[int]string{0: "max"}), nil)
		p := dialAs(t, path, 0)
		for i := range MaxInFlight {
			p.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"slow"}`, i))
		}
		// One more call is refused at once, and the trip after it runs.
		wantRefusal(t, p.call(t, 100, "echo"), "100", awareness.ReasonBusy, "busy: 8 calls already running on this connection")
		wantResult(t, p.call(t, 101, "trip"), "101")
		close(release)
		for range MaxInFlight {
			p.read(t)
		}
	})
	t.Run("behind the places", func(t *testing.T) {
		s, path, _ := serveSeam(t, rules(t, map[int]string{0: "max", 2011: "low", 2012: "low", 2013: "low", 2014: "high"}), nil)
		for _, uid := range []int{2011, 2012, 2013, 2014} {
			for range MaxConnsPerUID {
				_, r := hold(t, path, uid)
				wantResult(t, r, "2")
			}
		}
		_, r := hold(t, path, 2014)
		wantRefusal(t, r, "1", awareness.ReasonBusy, "busy: all 16 connections are open")
		// Root, with every place taken: its status is refused, its trip
		// served.
		_, r = hold(t, path, 0)
		wantRefusal(t, r, "1", awareness.ReasonBusy, "busy: all 16 connections are open")
		p := dialAs(t, path, 0)
		r = p.call(t, 5, "trip")
		wantResult(t, r, "5")
		var out echoOut
		if json.Unmarshal(r.Result, &out) != nil || out.Text != "tripped" || out.By != "admin:uid=0" {
			t.Errorf("trip answered %s, want tripped by admin:uid=0", r.Result)
		}
		if err := p.closed(t); err != nil {
			t.Error(err)
		}
		// A low peer over its caps may trip too: the table admits it.
		p = dialAs(t, path, 2011)
		wantResult(t, p.call(t, 6, "trip"), "6")
		if slots, _ := s.places(0); slots != 0 {
			t.Errorf("root holds %d places, want none", slots)
		}
	})
}

// A request read after its peer has closed is not run, and the calls in
// progress of a peer that closed are cancelled.
func TestARequestOfAPeerThatHasGoneIsNotRun(t *testing.T) {
	marked.Store(0)
	s := newServer(testTable(t, make(chan struct{})), admin(ledger.Max))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client, server := socketPair(t)
	for i := range 3 {
		fmt.Fprintf(client, `{"jsonrpc":"2.0","id":%d,"method":"mark"}`+"\n", i)
	}
	client.Close() // gone before the server reads: as a client that timed out
	s.serveConn(ctx, server, 0, 0)
	server.Close()
	if n := marked.Load(); n != 0 {
		t.Errorf("mark ran %d times for a peer that had gone, want 0", n)
	}

	// One that only shut down writing still waits for its answer.
	client, server = socketPair(t)
	fmt.Fprintln(client, `{"jsonrpc":"2.0","id":1,"method":"mark"}`)
	client.CloseWrite()
	s.serveConn(ctx, server, 0, 0)
	server.Close()
	if n := marked.Load(); n != 1 {
		t.Errorf("mark ran %d times for a peer waiting for its answer, want 1", n)
	}
	p := &peer{c: client, r: bufio.NewReader(client)}
	wantResult(t, p.read(t), "1")
	client.Close()

	// A long poll in progress ends when its peer closes: the connection
	// is let go only once its calls have returned, and slow returns only
	// when released (never, here) or cancelled.
	s, path, _ := serveSeam(t, rules(t, map[int]string{0: "max"}), nil)
	p = dialAs(t, path, 0)
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"slow"}`)
	wantResult(t, p.call(t, 2, "echo"), "2") // the slow call is running
	p.c.Close()
	waitFor(t, "the long poll to be cancelled", func() bool { return s.openConns() == 0 })
}
