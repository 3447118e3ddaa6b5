package admin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/admin/admintest"
	"github.com/tobe-body/tobe-body/ledger"
)

func TestMain(m *testing.M) {
	admintest.Main() // a hostile peer of hostile_test.go, run as another uid, stops here
	goleak.VerifyTestMain(m)
}

type echoIn struct {
	Text string `json:"text"`
}

type echoOut struct {
	Text string `json:"text"`
	By   string `json:"by"`
}

var (
	opEcho   = awareness.Op[echoIn, echoOut]{Name: "echo", Kind: awareness.Observe, Least: awareness.Anyone, Description: "echo"}
	opSlow   = awareness.Op[awareness.None, echoOut]{Name: "slow", Kind: awareness.Observe, Least: awareness.Anyone, Description: "waits for release"}
	opRefuse = awareness.Op[awareness.None, echoOut]{Name: "refuse", Kind: awareness.Interact, Least: awareness.Anyone, Description: "refuses"}
	opHigh   = awareness.Op[awareness.None, echoOut]{Name: "high", Kind: awareness.Admin, Least: awareness.HighAdmin, Description: "high"}
	opTrip   = awareness.Op[awareness.None, echoOut]{Name: "trip", Kind: awareness.Interact, Least: awareness.Anyone, Stop: true, Description: "stops"}
	opMark   = awareness.Op[awareness.None, echoOut]{Name: "mark", Kind: awareness.Interact, Least: awareness.Anyone, Description: "counts its runs in marked"}
)

// marked counts the runs of mark.
var marked atomic.Int32

// testTable is a table of small operations: echo, one that waits until
// release is closed (or its call ends), one that refuses, one for high
// trust only, a Stop one (trip) and one that counts its runs (mark).
func testTable(t testing.TB, release chan struct{}) *awareness.Table {
	ok := func(_ context.Context, p act.Principal, _ awareness.None) (echoOut, error) {
		return echoOut{By: p.Subject}, nil
	}
	tb, err := awareness.NewTable(
		awareness.Bind(opEcho, func(_ context.Context, p act.Principal, in echoIn) (echoOut, error) {
			return echoOut{Text: in.Text, By: p.Subject}, nil
		}),
		awareness.Bind(opSlow, func(ctx context.Context, p act.Principal, _ awareness.None) (echoOut, error) {
			select {
			case <-release:
				return echoOut{Text: "slow", By: p.Subject}, nil
			case <-ctx.Done():
				return echoOut{}, ctx.Err()
			}
		}),
		awareness.Bind(opRefuse, func(context.Context, act.Principal, awareness.None) (echoOut, error) {
			return echoOut{}, &act.Refusal{Reason: act.ReasonEStopLatched, Detail: "latched", Err: errors.New("refused")}
		}),
		awareness.Bind(opHigh, ok),
		awareness.Bind(opTrip, func(_ context.Context, p act.Principal, _ awareness.None) (echoOut, error) {
			return echoOut{Text: "tripped", By: p.Subject}, nil
		}),
		awareness.Bind(opMark, func(_ context.Context, p act.Principal, _ awareness.None) (echoOut, error) {
			marked.Add(1)
			return echoOut{Text: "marked", By: p.Subject}, nil
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func admin(trust ledger.Level) Resolver {
	return func(uid, gid int) (act.Principal, error) {
		return act.Principal{Kind: act.LocalAdmin, Subject: "admin:test", Session: "admin", Trust: trust}, nil
	}
}

// newServer is a server of t for resolve, logging nowhere.
func newServer(t *awareness.Table, resolve Resolver) *Server {
	return &Server{Table: t, Resolve: resolve, Log: slog.New(slog.DiscardHandler)}
}

// run serves ln until stop, which returns once Serve has.
func (s *Server) run(ln net.Listener) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Serve(ctx, ln)
	}()
	return func() {
		cancel()
		<-done
	}
}

// serve starts a server on a socket in a temporary directory.
func serve(t *testing.T, resolve Resolver) (path string, release chan struct{}) {
	t.Helper()
	release = make(chan struct{})
	path = filepath.Join(t.TempDir(), "admin.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(testTable(t, release), resolve)
	stop := s.run(ln)
	t.Cleanup(stop)
	return path, release
}

type peer struct {
	c net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, path string) *peer {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return &peer{c: c, r: bufio.NewReader(c)}
}

func (p *peer) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(p.c, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

type reply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int              `json:"code"`
		Message string           `json:"message"`
		Data    *awareness.Error `json:"data"`
	} `json:"error"`
}

func (p *peer) read(t *testing.T) reply {
	t.Helper()
	line, err := p.r.ReadBytes('\n')
	if err != nil {
		t.Fatalf("reading a reply: %v", err)
	}
	var r reply
	if err := json.Unmarshal(line, &r); err != nil {
		t.Fatalf("a reply that is not JSON: %q", line)
	}
	if r.JSONRPC != "2.0" {
		t.Fatalf("reply %s: jsonrpc %q", line, r.JSONRPC)
	}
	return r
}

func TestJSONRPCErrorCodes(t *testing.T) {
	path, _ := serve(t, admin(ledger.Max))
	long := `{"jsonrpc":"2.0","id":1,"method":"echo","params":{"text":"` + strings.Repeat("x", MaxLine) + `"}}`
	for _, tc := range []struct {
		name, line string
		code       int
		id         string
		reason     act.Reason
	}{
		{"not JSON", `{"jsonrpc":"2.0","id":1,`, CodeParse, "null", ""},
		{"NUL and bad UTF-8", "\x00\xff\xfe", CodeParse, "null", ""},
		{"trailing garbage", `{"jsonrpc":"2.0","id":1,"method":"echo"} x`, CodeParse, "null", ""},
		{"a number", `5`, CodeInvalidRequest, "null", ""},
		{"a batch", `[{"jsonrpc":"2.0","id":1,"method":"echo"}]`, CodeInvalidRequest, "null", ""},
		{"wrong version", `{"jsonrpc":"1.0","id":7,"method":"echo"}`, CodeInvalidRequest, "7", ""},
		{"no method", `{"jsonrpc":"2.0","id":"a"}`, CodeInvalidRequest, `"a"`, ""},
		{"method not a string", `{"jsonrpc":"2.0","id":3,"method":5}`, CodeInvalidRequest, "3", ""},
		{"id an object", `{"jsonrpc":"2.0","id":{},"method":"echo"}`, CodeInvalidRequest, "null", ""},
		{"a line over the limit", long, CodeInvalidRequest, "null", ""},
		{"unknown method", `{"jsonrpc":"2.0","id":4,"method":"nope"}`, CodeMethodNotFound, "4", ""},
		{"unknown param", `{"jsonrpc":"2.0","id":5,"method":"echo","params":{"txt":"a"}}`, CodeInvalidParams, "5", awareness.ReasonInvalidParams},
		{"param of the wrong type", `{"jsonrpc":"2.0","id":5,"method":"echo","params":{"text":1}}`, CodeInvalidParams, "5", awareness.ReasonInvalidParams},
		{"params an array", `{"jsonrpc":"2.0","id":6,"method":"echo","params":["a"]}`, CodeInvalidParams, "6", ""},
		{"refused", `{"jsonrpc":"2.0","id":8,"method":"refuse"}`, CodeRefused, "8", act.ReasonEStopLatched},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := dial(t, path)
			p.send(t, tc.line)
			r := p.read(t)
			if r.Error == nil || r.Error.Code != tc.code {
				t.Fatalf("got %+v, want error code %d", r.Error, tc.code)
			}
			if string(r.ID) != tc.id {
				t.Errorf("id %s, want %s", r.ID, tc.id)
			}
			if tc.reason != "" && (r.Error.Data == nil || r.Error.Data.Reason != tc.reason) {
				t.Errorf("data %+v, want reason %s", r.Error.Data, tc.reason)
			}
			// The stream goes on at the next line.
			p.send(t, `{"jsonrpc":"2.0","id":99,"method":"echo","params":{"text":"after"}}`)
			if r := p.read(t); string(r.ID) != "99" || r.Error != nil {
				t.Fatalf("after the bad line: %+v", r)
			}
		})
	}
}

func TestNoReplyToANotification(t *testing.T) {
	path, _ := serve(t, admin(ledger.Max))
	p := dial(t, path)
	p.send(t, `{"jsonrpc":"2.0","method":"echo","params":{"text":"n"}}`)
	p.send(t, `{"jsonrpc":"2.0","method":"nope"}`)
	p.send(t, `{"jsonrpc":"2.0","method":"echo","params":{"bad":1}}`)
	// A null id is no notification: it is refused (MCP's rule, which
	// both sockets keep), and the refusal has id null.
	p.send(t, `{"jsonrpc":"2.0","id":null,"method":"echo","params":{"text":"null id"}}`)
	p.send(t, `{"jsonrpc":"2.0","id":2,"method":"echo","params":{"text":"request"}}`)
	// Calls run concurrently: the two replies come in either order, and
	// nothing else comes.
	got := map[string]reply{}
	for range 2 {
		r := p.read(t)
		got[string(r.ID)] = r
	}
	if r, ok := got["null"]; !ok || r.Error == nil || r.Error.Code != CodeInvalidRequest {
		t.Fatalf("the null id answered %+v, want %d", r, CodeInvalidRequest)
	}
	if r, ok := got["2"]; !ok || r.Error != nil {
		t.Fatalf("replies %v, want one to 2", got)
	}
	p.send(t, `{"jsonrpc":"2.0","id":3,"method":"slow","params":{"x":1}}`)
	if r := p.read(t); string(r.ID) != "3" {
		t.Fatalf("reply %s, want 3: a notification was answered", r.ID)
	}
}

func TestASlowCallDoesNotBlockAFastOne(t *testing.T) {
	path, release := serve(t, admin(ledger.Max))
	p := dial(t, path)
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"slow"}`)
	p.send(t, `{"jsonrpc":"2.0","id":2,"method":"echo","params":{"text":"fast"}}`)
	if r := p.read(t); string(r.ID) != "2" {
		t.Fatalf("first reply %s, want the fast call's (2)", r.ID)
	}
	close(release)
	r := p.read(t)
	var out echoOut
	if string(r.ID) != "1" || json.Unmarshal(r.Result, &out) != nil || out.Text != "slow" {
		t.Fatalf("second reply %+v, want the slow call's", r)
	}
}

func TestThePeersPrincipalReachesTheTable(t *testing.T) {
	for _, tc := range []struct {
		name    string
		resolve Resolver
		method  string
		reason  act.Reason
	}{
		{"a medium admin below high", admin(ledger.Medium), "high", awareness.ReasonNotAuthorized},
		{"a peer no rule names", func(uid, gid int) (act.Principal, error) {
			return act.Principal{Kind: act.LocalAdmin, Subject: "x", Trust: ledger.Max}, errors.New("uid 1000 is not a local administrator")
		}, "echo", awareness.ReasonNotAuthorized},
		{"a high admin", admin(ledger.High), "high", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, _ := serve(t, tc.resolve)
			p := dial(t, path)
			p.send(t, `{"jsonrpc":"2.0","id":1,"method":"`+tc.method+`"}`)
			r := p.read(t)
			switch {
			case tc.reason == "" && r.Error != nil:
				t.Fatalf("refused: %+v", r.Error)
			case tc.reason != "" && (r.Error == nil || r.Error.Code != CodeRefused || r.Error.Data.Reason != tc.reason):
				t.Fatalf("got %+v, want %s", r, tc.reason)
			}
		})
	}
}

func TestClient(t *testing.T) {
	path, _ := serve(t, admin(ledger.Medium))
	c := &Client{Path: path}
	out, err := Call(context.Background(), c, opEcho, echoIn{Text: "hi"})
	if err != nil || out.Text != "hi" || out.By != "admin:test" {
		t.Fatalf("echo: %+v, %v", out, err)
	}
	_, err = Call(context.Background(), c, opHigh, awareness.None{})
	var ae *awareness.Error
	if !errors.As(err, &ae) || ae.Reason != awareness.ReasonNotAuthorized || ae.Need == nil || ae.Need.Trust != ledger.High {
		t.Fatalf("high as medium: %v, want not_authorized needing high", err)
	}
	_, err = Call(context.Background(), &Client{Path: filepath.Join(t.TempDir(), "none.sock")}, opEcho, echoIn{})
	if !errors.Is(err, ErrNotRunning) {
		t.Fatalf("no daemon: %v", err)
	}
}

func TestCloseEndsCallsInProgress(t *testing.T) {
	release := make(chan struct{})
	path := filepath.Join(t.TempDir(), "admin.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(testTable(t, release), admin(ledger.Max))
	stop := s.run(ln)
	p := dial(t, path)
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"slow"}`)
	idle := dial(t, path)
	_ = idle
	// The slow call is in progress once a later call on the same
	// connection has been answered.
	p.send(t, `{"jsonrpc":"2.0","id":2,"method":"echo"}`)
	p.read(t)
	stop() // returns only when the slow call and both connections ended
}

// socketPair is a connected pair of Unix sockets, as the server's
// connections are, with half-close.
func socketPair(t *testing.T) (a, b *net.UnixConn) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "socketpair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c.(*net.UnixConn)
	}
	return conn(fds[0]), conn(fds[1])
}

// FuzzFraming feeds arbitrary bytes to one connection: every reply is one
// JSON-RPC 2.0 object a line, there are no more replies than lines (one,
// to a peer without a principal), and the server neither panics nor
// hangs.
func FuzzFraming(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"echo","params":{"text":"a"}}` + "\n",
		`{"jsonrpc":"2.0","method":"echo"}` + "\n" + `[1,2]` + "\n",
		"{\n}\n\x00\xff\n",
		`{"jsonrpc":"2.0","id":1,"method":"echo","params":{"text":"` + strings.Repeat("y", 100) + `"}}`,
		`{"jsonrpc":"2.0","id":1e999,"method":"refuse"}` + "\n" + `{"jsonrpc":"2.0","id":"x","method":"high","params":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// A peer with a principal, and one without, answered once.
		for _, resolve := range []Resolver{admin(ledger.Max), rules(t, map[int]string{0: "off"})} {
			release := make(chan struct{})
			close(release)
			s := newServer(testTable(t, release), resolve)
			ctx, cancel := context.WithCancel(context.Background())
			client, server := socketPair(t)
			done := make(chan struct{})
			go func() {
				defer close(done)
				s.serveConn(ctx, server, 0, 0)
				server.Close()
			}()
			var out bytes.Buffer
			read := make(chan struct{})
			go func() {
				io.Copy(&out, client)
				close(read)
			}()
			client.SetDeadline(time.Now().Add(10 * time.Second))
			client.Write(data) // the one answered once may be closed before it is all written
			client.CloseWrite()
			<-done
			<-read
			client.Close()
			cancel()
			lines := bytes.Count(data, []byte("\n")) + 2
			if _, err := resolve(0, 0); err != nil {
				lines = 1
			}
			for i, l := range bytes.Split(bytes.TrimSuffix(out.Bytes(), []byte("\n")), []byte("\n")) {
				if len(l) == 0 {
					continue
				}
				if i >= lines {
					t.Fatalf("more replies than lines: %q", out.Bytes())
				}
				var r reply
				if err := json.Unmarshal(l, &r); err != nil || r.JSONRPC != "2.0" {
					t.Fatalf("reply %q is not a JSON-RPC 2.0 object", l)
				}
			}
		}
	})
}

func TestCloseWithIdleConnections(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(testTable(t, make(chan struct{})), admin(ledger.Max))
	stop := srv.run(ln)
	dial := func() net.Conn {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// The first asks and is answered: it holds a place before the others
	// come (which of them gets one is the scheduler's to say).
	conns := []net.Conn{dial()}
	fmt.Fprintln(conns[0], `{"jsonrpc":"2.0","id":7,"method":"echo"}`)
	var resp struct{ ID int }
	if err := json.NewDecoder(conns[0]).Decode(&resp); err != nil || resp.ID != 7 {
		t.Errorf("answer %+v %v", resp, err)
	}
	for range MaxConns + 3 { // more than are served: the rest are answered once or turned away
		conns = append(conns, dial())
	}
	stop() // must not wait for the idle ones
	for _, c := range conns {
		c.Close()
	}
	// Something that is not a socket is never removed.
	os.WriteFile(path, []byte("keep me"), 0o600)
	if _, err := Listen(path); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("listen over a file: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "keep me" {
		t.Error("the file was removed")
	}
}
