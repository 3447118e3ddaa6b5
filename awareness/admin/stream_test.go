package admin

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/ledger"
)

// blobIn asks for a stream of Size bytes; Lie makes the result say one
// byte more than follows; Short makes the bytes end ten early.
type blobIn struct {
	Size  int64 `json:"size"`
	Lie   bool  `json:"lie,omitempty"`
	Short bool  `json:"short,omitempty"`
}

// blob is a streaming output: its result, then Bytes bytes of pattern.
type blob struct {
	Bytes int64  `json:"bytes"`
	Sum   string `json:"sum"`

	r      io.Reader
	n      int64
	closed func()
}

func (b blob) Content() (io.Reader, int64) { return b.r, b.n }
func (b blob) Close() error {
	if b.closed != nil {
		b.closed()
	}
	return nil
}

// pattern is n bytes with newlines and braces in them, so a reader that
// took them for lines would see JSON-looking lines.
func pattern(n int64) []byte {
	unit := []byte("{\"jsonrpc\":\"2.0\",\"id\":1}\n\x00\xff")
	return bytes.Repeat(unit, int(n)/len(unit)+1)[:n]
}

var opBlob = awareness.Op[blobIn, blob]{Name: "blob", Kind: awareness.Observe, Least: awareness.Anyone, Description: "a stream"}

// streamServer serves echo and blob. Each blob reports its progress in
// four steps, and is read through gate (when not nil) and from a file
// with no name (so a leaked one shows in /proc/self/fd); its Close
// closes that file and sends on closed.
type streamServer struct {
	path   string
	closed chan string
	gate   func(io.Reader) io.Reader
	runs   chan struct{}
}

func serveStreams(t *testing.T, gate func(io.Reader) io.Reader) *streamServer {
	t.Helper()
	ss := &streamServer{path: filepath.Join(t.TempDir(), "admin.sock"), closed: make(chan string, 16), gate: gate, runs: make(chan struct{}, 16)}
	tb, err := awareness.NewTable(
		awareness.Bind(opEcho, func(_ context.Context, p act.Principal, in echoIn) (echoOut, error) {
			return echoOut{Text: in.Text, By: p.Subject}, nil
		}),
		awareness.Bind(opBlob, func(ctx context.Context, _ act.Principal, in blobIn) (blob, error) {
			ss.runs <- struct{}{}
			data := pattern(in.Size)
			if report := awareness.Progress(ctx); report != nil {
				for i := int64(1); i <= 4; i++ {
					report(in.Size*i/4, in.Size)
				}
			}
			f, err := os.CreateTemp(t.TempDir(), "blob")
			if err != nil {
				return blob{}, err
			}
			os.Remove(f.Name())
			f.Write(data)
			f.Seek(0, io.SeekStart)
			sum := sha256.Sum256(data)
			b := blob{Bytes: in.Size, Sum: fmt.Sprintf("%x", sum), n: in.Size, r: f, closed: func() {
				f.Close()
				ss.closed <- f.Name()
			}}
			if ss.gate != nil {
				b.r = ss.gate(f)
			}
			if in.Lie {
				b.Bytes++
			}
			if in.Short {
				b.r = io.LimitReader(b.r, in.Size-10)
			}
			return b, nil
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := Listen(ss.path)
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(tb, admin(ledger.Max))
	stop := s.run(ln)
	t.Cleanup(stop)
	return ss
}

// waitClosed waits for a blob's Close.
func (ss *streamServer) waitClosed(t *testing.T) {
	t.Helper()
	select {
	case <-ss.closed:
	case <-time.After(10 * time.Second): // a hang detector
		t.Fatal("the stream was never closed")
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd here: %v", err)
	}
	return len(ents)
}

// The protocol as the package doc says it: progress notifications
// naming the call, the response with bytes, exactly that many raw bytes,
// and the next line after them.
func TestStreamProtocol(t *testing.T) {
	ss := serveStreams(t, nil)
	p := dial(t, ss.path)
	const size = 300 << 10
	p.send(t, `{"jsonrpc":"2.0","id":"b1","method":"blob","params":{"size":307200}}`)
	var last int64
	var notes int
	for {
		line, err := p.r.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		var n struct {
			JSONRPC string         `json:"jsonrpc"`
			Method  string         `json:"method"`
			Params  ProgressParams `json:"params"`
			Result  *blob          `json:"result"`
		}
		if err := json.Unmarshal(line, &n); err != nil || n.JSONRPC != "2.0" {
			t.Fatalf("line %q: %v", line, err)
		}
		if n.Method == "" {
			if n.Result == nil || n.Result.Bytes != size {
				t.Fatalf("response %s, want a result with bytes %d", line, size)
			}
			data := make([]byte, size)
			if _, err := io.ReadFull(p.r, data); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(data, pattern(size)) {
				t.Error("the bytes are not the blob's")
			}
			break
		}
		notes++
		if n.Method != "progress" || string(n.Params.ID) != `"b1"` || n.Params.Total != size || n.Params.Done < last {
			t.Errorf("notification %s after done %d", line, last)
		}
		last = n.Params.Done
	}
	if notes == 0 || last != size {
		t.Errorf("%d progress notifications, the last at %d; want at least one, the last at %d", notes, last, size)
	}
	ss.waitClosed(t)
	// The next line follows the bytes.
	p.send(t, `{"jsonrpc":"2.0","id":2,"method":"echo","params":{"text":"after"}}`)
	if r := p.read(t); string(r.ID) != "2" || r.Error != nil {
		t.Fatalf("after the stream: %+v", r)
	}
}

// gated is a reader that waits for open before its first read, and says
// when that first read began.
type gated struct {
	r       io.Reader
	started chan struct{}
	open    chan struct{}
	once    sync.Once
}

func (g *gated) Read(p []byte) (int, error) {
	g.once.Do(func() {
		close(g.started)
		<-g.open
	})
	return g.r.Read(p)
}

// Other answers on the connection wait until the stream is written:
// nothing comes between the response and its last byte.
func TestOtherAnswersWaitForTheStream(t *testing.T) {
	g := &gated{started: make(chan struct{}), open: make(chan struct{})}
	ss := serveStreams(t, func(r io.Reader) io.Reader { g.r = r; return g })
	p := dial(t, ss.path)
	const size = 1 << 20
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"blob","params":{"size":1048576}}`)
	<-g.started // the response line is written; the bytes wait
	// As many as the connection runs beside the stream's own call: their
	// answers wait for the writer, so they stay running until then.
	const others = MaxInFlight - 1
	for i := range others {
		p.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"echo","params":{"text":"x"}}`, 10+i))
	}
	close(g.open)
	for {
		r := p.read(t)
		if string(r.ID) == "1" {
			break
		}
		if r.ID == nil {
			continue // progress
		}
		t.Fatalf("answer %s before the stream's response", r.ID)
	}
	data := make([]byte, size)
	if _, err := io.ReadFull(p.r, data); err != nil || !bytes.Equal(data, pattern(size)) {
		t.Fatalf("the stream's bytes are not whole: %v", err)
	}
	for range others {
		if r := p.read(t); r.Error != nil || string(r.Result) != `{"text":"x","by":"admin:test"}` {
			t.Fatalf("after the stream: %+v %s", r.Error, r.Result)
		}
	}
}

// A client that stops reading mid-stream is dropped once a chunk waits
// longer than the stall timeout: the stream is closed, no descriptor
// stays open, and the slot serves the next client.
func TestAClientThatStopsReadingIsDropped(t *testing.T) {
	old := stallTimeout
	stallTimeout = 200 * time.Millisecond
	t.Cleanup(func() { stallTimeout = old })
	ss := serveStreams(t, nil)
	fds := openFDs(t)
	c, err := net.Dial("unix", ss.path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const size = 16 << 20 // far more than the socket buffers hold
	fmt.Fprintln(c, `{"jsonrpc":"2.0","id":1,"method":"blob","params":{"size":16777216}}`)
	ss.waitClosed(t) // the server gave up on it: nothing was read
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.Copy(io.Discard, c)
	if err != nil || got >= size {
		t.Errorf("read %d bytes (%v) before the end, want the connection closed short of %d", got, err, size)
	}
	c.Close()
	q := dial(t, ss.path) // t.Cleanup closes it
	q.send(t, `{"jsonrpc":"2.0","id":2,"method":"echo","params":{"text":"next"}}`)
	if r := q.read(t); r.Error != nil {
		t.Fatalf("the next client: %+v", r.Error)
	}
	if got := openFDs(t); got != fds+2 { // q's two ends
		t.Errorf("%d descriptors open with one client, want %d", got, fds+2)
	}
}

// A result that does not say its bytes is answered failed with nothing
// after it; a stream shorter than its count ends the connection; a
// streaming call without an id is not run. Every stream is closed.
func TestStreamFaults(t *testing.T) {
	ss := serveStreams(t, nil)
	p := dial(t, ss.path)
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"blob","params":{"size":100,"lie":true}}`)
	r := p.read(t)
	for r.ID == nil {
		r = p.read(t)
	}
	if r.Error == nil || r.Error.Data == nil || r.Error.Data.Reason != awareness.ReasonFailed || !strings.Contains(r.Error.Message, "does not say its 100 bytes") {
		t.Fatalf("a lying result: %+v", r)
	}
	ss.waitClosed(t)
	p.send(t, `{"jsonrpc":"2.0","method":"blob","params":{"size":100}}`)
	p.send(t, `{"jsonrpc":"2.0","id":2,"method":"echo","params":{"text":"x"}}`)
	if r := p.read(t); string(r.ID) != "2" {
		t.Fatalf("got %+v, want the echo's answer alone", r)
	}
	if len(ss.runs) != 1 {
		t.Errorf("the blob ran %d times, want once: a notification does not run it", len(ss.runs))
	}

	_, err := CallStream(context.Background(), &Client{Path: ss.path}, opBlob, blobIn{Size: 1000, Short: true}, nil, func(_ blob, r io.Reader) error {
		_, err := io.Copy(io.Discard, r)
		return err
	})
	// The server reads a chunk before it writes it: none of this one.
	if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "the connection ended 1000 bytes short") {
		t.Errorf("a short stream: got %v, want io.ErrUnexpectedEOF 1000 bytes short", err)
	}
	ss.waitClosed(t)
}

// CallStream hands over the progress and exactly the bytes; a recv that
// refuses before reading ends the call with its error, and the daemon
// closes the stream.
func TestCallStream(t *testing.T) {
	ss := serveStreams(t, nil)
	c := &Client{Path: ss.path}
	const size = 1 << 20
	var progress [][2]int64
	var got []byte
	out, err := CallStream(context.Background(), c, opBlob, blobIn{Size: size}, func(done, total int64) {
		progress = append(progress, [2]int64{done, total})
	}, func(out blob, r io.Reader) error {
		var err error
		got, err = io.ReadAll(r)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if out.Bytes != size || !bytes.Equal(got, pattern(size)) || fmt.Sprintf("%x", sha256.Sum256(got)) != out.Sum {
		t.Errorf("got %d bytes for a result of %d", len(got), out.Bytes)
	}
	if len(progress) == 0 || progress[len(progress)-1] != [2]int64{size, size} {
		t.Errorf("progress %v, want it to end at %d of %d", progress, size, size)
	}
	ss.waitClosed(t)

	noRoom := errors.New("no room for it")
	_, err = CallStream(context.Background(), c, opBlob, blobIn{Size: 16 << 20}, nil, func(blob, io.Reader) error { return noRoom })
	if !errors.Is(err, noRoom) {
		t.Errorf("a refusing recv: got %v", err)
	}
	ss.waitClosed(t)

	_, err = CallStream(context.Background(), c, opBlob, blobIn{Size: 100}, nil, func(_ blob, r io.Reader) error {
		_, err := io.ReadFull(r, make([]byte, 50))
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "50 of the answer's bytes were left unread") {
		t.Errorf("half read: got %v", err)
	}
	ss.waitClosed(t)
}

// FuzzStreamFraming feeds arbitrary bytes to a connection whose table
// has a streaming operation: read as the package doc says (lines, and
// after a response with bytes that many raw bytes), every reply is one
// JSON-RPC 2.0 object, and every stream is the blob's.
func FuzzStreamFraming(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"blob","params":{"size":70}}` + "\n" + `{"jsonrpc":"2.0","id":2,"method":"echo"}` + "\n",
		`{"jsonrpc":"2.0","method":"blob","params":{"size":5}}` + "\n",
		`{"jsonrpc":"2.0","id":1,"method":"blob","params":{"size":3,"lie":true}}` + "\n" + `{"jsonrpc":"2.0","id":1,"method":"blob","params":{"size":0}}`,
		`{"jsonrpc":"2.0","id":1,"method":"blob","params":{"size":-1}}` + "\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tb, err := awareness.NewTable(
			awareness.Bind(opEcho, func(_ context.Context, p act.Principal, in echoIn) (echoOut, error) {
				return echoOut{Text: in.Text}, nil
			}),
			awareness.Bind(opBlob, func(ctx context.Context, _ act.Principal, in blobIn) (blob, error) {
				if in.Size < 0 || in.Size > 1<<20 {
					return blob{}, errors.New("size out of range")
				}
				if report := awareness.Progress(ctx); report != nil {
					report(in.Size, in.Size)
				}
				b := blob{Bytes: in.Size, r: bytes.NewReader(pattern(in.Size)), n: in.Size}
				if in.Lie {
					b.Bytes++
				}
				return b, nil
			}))
		if err != nil {
			t.Fatal(err)
		}
		s := newServer(tb, admin(ledger.Max))
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
		client.Write(data)
		client.CloseWrite()
		<-done
		<-read
		client.Close()
		cancel()
		br := bufio.NewReader(&out)
		for {
			l, err := br.ReadBytes('\n')
			if len(l) == 0 && err != nil {
				break
			}
			var r struct {
				reply
				Method string `json:"method"`
			}
			if err := json.Unmarshal(l, &r); err != nil || r.JSONRPC != "2.0" {
				t.Fatalf("reply %q is not a JSON-RPC 2.0 object", l)
			}
			var res struct {
				Bytes *int64 `json:"bytes"`
			}
			if r.Method == "" && r.Error == nil && json.Unmarshal(r.Result, &res) == nil && res.Bytes != nil {
				b := make([]byte, *res.Bytes)
				if _, err := io.ReadFull(br, b); err != nil || !bytes.Equal(b, pattern(*res.Bytes)) {
					t.Fatalf("a stream of %d bytes: %v", *res.Bytes, err)
				}
			}
		}
	})
}

// The backup itself, of a ledger far larger than the socket's buffers,
// to a client that reads its result and then nothing: the server drops
// it when a chunk stalls, and once the server has stopped, the
// snapshot's file is closed with everything else: no descriptor is left.
func TestABackupClientThatStopsReadingIsDropped(t *testing.T) {
	old := stallTimeout
	stallTimeout = 200 * time.Millisecond
	t.Cleanup(func() { stallTimeout = old })
	fds := openFDs(t)
	store, err := ledger.Open(ledger.Options{Path: filepath.Join(t.TempDir(), "ledger.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	payload, _ := ledger.MarshalPayload(map[string]string{"note": strings.Repeat("n", 4000)})
	for range 40 {
		batch := make([]ledger.Event, 100)
		for i := range batch {
			batch[i] = ledger.Event{Type: "test.filler", Provenance: ledger.Observed, Payload: payload}
		}
		if _, err := store.Append(t.Context(), batch...); err != nil {
			t.Fatal(err)
		}
	}
	tb, err := (&awareness.Parts{Store: store}).Table()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "admin.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(tb, admin(ledger.Max))
	stop := s.run(ln)
	defer stop()
	fdsServing := openFDs(t)
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintln(c, `{"jsonrpc":"2.0","id":1,"method":"ledger.backup"}`)
	br := bufio.NewReader(c)
	var size int64
	for size == 0 {
		line, err := br.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Result *awareness.Backup `json:"result"`
		}
		if json.Unmarshal(line, &r); r.Result != nil {
			size = r.Result.Bytes
		}
	}
	if size < 8<<20 {
		t.Fatalf("a snapshot of %d bytes: too small to fill the socket's buffers", size)
	}
	// Read nothing for longer than a chunk may stall, then see how much
	// came before the server closed the connection.
	time.Sleep(4 * stallTimeout)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.Copy(io.Discard, br)
	if err != nil || got >= size {
		t.Errorf("read %d bytes (%v) before the end, want the connection closed short of %d", got, err, size)
	}
	// Dropped, the call lets go of the snapshot's file: the connection's
	// goroutines end on their own, so wait for it (a hang detector).
	for deadline := time.Now().Add(10 * time.Second); openFDs(t) > fdsServing+1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d descriptors still open with the client dropped, want %d (the client's end)", openFDs(t), fdsServing+1)
		}
	}
	c.Close()
	stop()
	store.Close()
	if n := openFDs(t); n != fds {
		t.Errorf("%d descriptors open after all is closed, want %d", n, fds)
	}
}
