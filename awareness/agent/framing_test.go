package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"go.uber.org/goleak"

	"github.com/tobe-body/tobe-body/awareness/edge/edgetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// lockedBuffer is a bytes.Buffer safe for the reading goroutine's and the
// test's writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// fixedStream reads a fixed input and records what is written.
type fixedStream struct {
	io.Reader
	out *lockedBuffer
}

func (s fixedStream) Write(p []byte) (int, error) { return s.out.Write(p) }
func (s fixedStream) Close() error                { return nil }

// readAll serves input to a Transport and returns the messages read, as
// re-encoded lines, what the Transport wrote, and the line reader's peak.
func readAll(t testing.TB, input []byte, opts TransportOptions) (msgs []string, written string, peak int) {
	t.Helper()
	out := &lockedBuffer{}
	tr := NewTransport(fixedStream{bytes.NewReader(input), out}, opts)
	c, err := tr.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for {
		msg, err := c.Read(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Read: got %v, want a message or io.EOF", err)
		}
		data, err := jsonrpc.EncodeMessage(msg)
		if err != nil {
			t.Fatalf("re-encoding %#v: %v", msg, err)
		}
		msgs = append(msgs, string(data))
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	return msgs, out.String(), tr.lines.Peak
}

const ping = `{"jsonrpc":"2.0","id":7,"method":"ping"}`

// errLine is the error line the Transport writes.
func errLine(id string, code int, message string) string {
	m, _ := json.Marshal(message)
	return `{"jsonrpc":"2.0","id":` + id + `,"error":{"code":` + itoa(code) + `,"message":` + string(m) + "}}\n"
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// framingCases are bad inputs, each followed by a good line in the test.
var framingCases = []struct {
	name  string
	input string
	want  string // what the Transport writes for input
}{
	{"bad JSON", `{"jsonrpc":"2.0","id":1,"method":`, errLine("null", -32700, "Parse error: not JSON")},
	{"trailing data", ping + ` x`, errLine("null", -32700, "Parse error: data after the JSON value")},
	{"two values", ping + ping, errLine("null", -32700, "Parse error: data after the JSON value")},
	{"NUL", `{"jsonrpc":"2.0","id":1,"method":"ping"` + "\x00}", errLine("null", -32700, "Parse error: the line contains a NUL byte")},
	{"NUL in a string", `{"jsonrpc":"2.0","id":1,"method":"pi` + "\x00" + `ng"}`, errLine("null", -32700, "Parse error: the line contains a NUL byte")},
	{"bad UTF-8", `{"jsonrpc":"2.0","id":1,"method":"` + "\xff\xfe" + `"}`, errLine("null", -32700, "Parse error: the line is not valid UTF-8")},
	{"batch", "[" + ping + "," + ping + "]", errLine("null", -32600, "Invalid Request: batches are not supported")},
	{"bad batch", "[" + ping + ",", errLine("null", -32700, "Parse error: not JSON")},
	{"empty batch", "[]", errLine("null", -32600, "Invalid Request: batches are not supported")},
	{"number", `42`, errLine("null", -32600, "Invalid Request: not a JSON-RPC message object")},
	{"string", `"ping"`, errLine("null", -32600, "Invalid Request: not a JSON-RPC message object")},
	{"null", `null`, errLine("null", -32600, "Invalid Request: not a JSON-RPC message object")},
	{"no jsonrpc", `{"id":1,"method":"ping"}`, errLine("1", -32600, `Invalid Request: no "jsonrpc":"2.0"`)},
	{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":"a","method":"ping"}`, errLine(`"a"`, -32600, `Invalid Request: no "jsonrpc":"2.0"`)},
	{"jsonrpc a number", `{"jsonrpc":2.0,"id":1,"method":"ping"}`, errLine("1", -32600, `Invalid Request: no "jsonrpc":"2.0"`)},
	{"JSONRPC upper case", `{"JSONRPC":"2.0","id":1,"method":"ping"}`, errLine("1", -32600, `Invalid Request: no "jsonrpc":"2.0"`)},
	{"id an object", `{"jsonrpc":"2.0","id":{},"method":"ping"}`, errLine("null", -32600, "Invalid Request: the id must be a string or an integer")},
	{"id a bool", `{"jsonrpc":"2.0","id":true,"method":"ping"}`, errLine("null", -32600, "Invalid Request: the id must be a string or an integer")},
	{"id a fraction", `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, errLine("null", -32600, "Invalid Request: the id must be a string or an integer of at most 2^53-1")},
	{"id too big", `{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`, errLine("null", -32600, "Invalid Request: the id must be a string or an integer of at most 2^53-1")},
	{"id null", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, errLine("null", -32600, "Invalid Request: the id must not be null")},
	{"no method", `{"jsonrpc":"2.0","id":5}`, errLine("5", -32600, "Invalid Request: no method")},
	{"method a number", `{"jsonrpc":"2.0","id":5,"method":5}`, errLine("5", -32600, "Invalid Request: the method is not a string")},
	{"params a string", `{"jsonrpc":"2.0","id":"p","method":"ping","params":"x"}`, errLine(`"p"`, -32600, "Invalid Request: params must be an object or an array")},
	{"notification without version", `{"method":"notifications/initialized"}`, errLine("null", -32600, `Invalid Request: no "jsonrpc":"2.0"`)},
	{"empty line", ``, ``},
	{"whitespace", " \t \r", ``},
	{"response without id", `{"jsonrpc":"2.0","result":{}}`, ``},
	{"error response with id null", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`, ``},
	{"response with result and error", `{"jsonrpc":"2.0","id":3,"result":{},"error":{"code":1,"message":"x"}}`, ``},
	{"response with a bad error", `{"jsonrpc":"2.0","id":3,"error":"no"}`, ``},
	{"line too long", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("x", 300) + `"}}`, errLine("null", -32600, "Invalid Request: a line of more than 256 bytes")},
}

// TestFraming reads each bad input followed by a good line: the bad one is
// answered with its error, the good one is read.
func TestFraming(t *testing.T) {
	for _, tc := range framingCases {
		t.Run(tc.name, func(t *testing.T) {
			msgs, written, _ := readAll(t, []byte(tc.input+"\n"+ping+"\n"), TransportOptions{MaxLine: 256})
			if written != tc.want {
				t.Errorf("written: got %q, want %q", written, tc.want)
			}
			if len(msgs) != 1 || msgs[0] != ping {
				t.Errorf("read: got %q, want only %q: the stream recovers at the next line", msgs, ping)
			}
		})
	}
}

// TestFramingLineEnds checks what is a line: '\n' or "\r\n" end it, and a
// last line without its newline is read like any other, then io.EOF.
func TestFramingLineEnds(t *testing.T) {
	cases := []struct {
		name, input string
		msgs        int
		want        string
	}{
		{"crlf", ping + "\r\n" + ping + "\r\n", 2, ""},
		{"last line without newline", ping + "\n" + ping, 2, ""},
		{"EOF mid-line", ping + "\n" + `{"jsonrpc":"2.0","id":8,"meth`, 1, errLine("null", -32700, "Parse error: not JSON")},
		{"EOF mid-line after a long line", strings.Repeat("x", 1000), 0, errLine("null", -32600, "Invalid Request: a line of more than 256 bytes")},
		{"a line of exactly MaxLine", lineOf(256) + "\n", 1, ""},
		{"a line of MaxLine and one", lineOf(257) + "\n", 0, errLine("null", -32600, "Invalid Request: a line of more than 256 bytes")},
		{"only newlines", "\n\n\n", 0, ""},
		{"nothing", "", 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msgs, written, _ := readAll(t, []byte(tc.input), TransportOptions{MaxLine: 256})
			if len(msgs) != tc.msgs {
				t.Errorf("read: got %d messages %q, want %d", len(msgs), msgs, tc.msgs)
			}
			if written != tc.want {
				t.Errorf("written: got %q, want %q", written, tc.want)
			}
		})
	}
}

// lineOf returns a ping of n bytes.
func lineOf(n int) string {
	const head, tail = `{"jsonrpc":"2.0","id":7,"method":"ping","params":{"p":"`, `"}}`
	return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
}

// TestFramingHooks checks that OnMessage counts every well-formed message
// and OnBadLine every refused line, answered or dropped.
func TestFramingHooks(t *testing.T) {
	var good int
	var bad []int
	input := ping + "\n{\n" + `{"jsonrpc":"2.0","result":1}` + "\n" + `{"jsonrpc":"2.0","id":9,"result":{}}` + "\n" + `{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"
	_, _, _ = readAll(t, []byte(input), TransportOptions{
		OnMessage: func() { good++ },
		OnBadLine: func(code int, why string) { bad = append(bad, code) },
	})
	if good != 3 {
		t.Errorf("OnMessage: got %d calls, want 3 (a request, a response, a notification)", good)
	}
	if len(bad) != 2 || bad[0] != -32700 || bad[1] != -32600 {
		t.Errorf("OnBadLine: got codes %v, want [-32700 -32600]", bad)
	}
}

// TestFramingMemory checks that a line of 10 MiB, or of any length, is
// skipped without being buffered: the line buffer never holds more than
// MaxLine, and reading it allocates far less than the line.
func TestFramingMemory(t *testing.T) {
	const size = 10 << 20
	input := io.MultiReader(strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"p":"`), &repeatReader{b: 'x', n: size}, strings.NewReader("\"}}\n"+ping+"\n"))
	out := &lockedBuffer{}
	tr := NewTransport(fixedStream{input, out}, TransportOptions{})
	allocated := allocatedBy(func() {
		c, err := tr.Connect(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		msg, err := c.Read(context.Background())
		if err != nil {
			t.Fatalf("Read: got %v, want the ping after the long line", err)
		}
		if req, ok := msg.(*jsonrpc.Request); !ok || req.Method != "ping" {
			t.Errorf("Read: got %#v, want the ping", msg)
		}
		if _, err := c.Read(context.Background()); !errors.Is(err, io.EOF) {
			t.Errorf("Read at the end: got %v, want io.EOF", err)
		}
		c.Close()
	})
	t.Logf("a %d-byte line: %d bytes allocated, line buffer peak %d", size, allocated, tr.lines.Peak)
	if want := errLine("null", -32600, "Invalid Request: a line of more than 1048576 bytes"); out.String() != want {
		t.Errorf("written: got %q, want %q", out.String(), want)
	}
	if tr.lines.Peak > DefaultMaxLine {
		t.Errorf("line buffer: got a peak of %d bytes, want at most MaxLine, %d", tr.lines.Peak, DefaultMaxLine)
	}
	if allocated > 4<<20 {
		t.Errorf("reading a %d-byte line allocated %d bytes, want under 4 MiB", size, allocated)
	}
}

// repeatReader reads n copies of b without holding them.
type repeatReader struct {
	b byte
	n int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	k := min(len(p), r.n)
	for i := range p[:k] {
		p[i] = r.b
	}
	r.n -= k
	return k, nil
}

// FuzzFraming checks that for any input the Transport does not panic,
// every line it writes is one JSON-RPC error response, every message it
// hands on re-encodes, and its line buffer stays within MaxLine.
func FuzzFraming(f *testing.F) {
	for _, tc := range framingCases {
		f.Add([]byte(tc.input + "\n" + ping + "\n"))
	}
	f.Add([]byte("[" + strings.Repeat(ping+",", 100) + ping + "]\n"))
	f.Add([]byte(ping + "\n" + `{"jsonrpc":"2.0","id":8,"meth`))
	f.Fuzz(func(t *testing.T, input []byte) {
		const maxLine = 128
		_, written, peak := readAll(t, input, TransportOptions{MaxLine: maxLine})
		if peak > maxLine {
			t.Errorf("line buffer peak %d, want at most %d", peak, maxLine)
		}
		if written == "" {
			return
		}
		if !strings.HasSuffix(written, "\n") {
			t.Fatalf("written %q does not end in a newline", written)
		}
		for _, line := range strings.Split(strings.TrimSuffix(written, "\n"), "\n") {
			if err := edgetest.ErrorLine([]byte(line)); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// allocatedBy returns the bytes the program allocated while f ran.
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// The Transport reads requests itself rather than through
// jsonrpc.DecodeMessage; whatever it accepts as a request, the SDK's
// decoder reads as the same request.
func FuzzParseAsSDK(f *testing.F) {
	for _, tc := range framingCases {
		f.Add([]byte(tc.input))
	}
	for _, s := range []string{
		ping,
		`{"jsonrpc":"2.0","id":"a\u00e9\"b","method":"tools/call","params":{"name":"x","_meta":{"tobe/call_id":"c1"}}}`,
		`{"jsonrpc":"2.0","id":-9007199254740991,"method":"m","params":[1,2]}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","method":"m","params":null}`,
		`{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}`,
		` {"method":"m","jsonrpc":"2.0","id":7, "params" : { } } `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		tr := &Transport{}
		msg, bad := tr.parse(line)
		req, ok := msg.(*jsonrpc.Request)
		if bad != nil || !ok {
			return
		}
		sdk, err := jsonrpc.DecodeMessage(bytes.Clone(line))
		if err != nil {
			t.Fatalf("%q: read as %+v, but the SDK's decoder refuses it: %v", line, req, err)
		}
		want, ok := sdk.(*jsonrpc.Request)
		if !ok {
			t.Fatalf("%q: read as a request, the SDK's decoder reads %T", line, sdk)
		}
		if req.ID != want.ID || req.Method != want.Method || !bytes.Equal(req.Params, want.Params) {
			t.Fatalf("%q: read as {%v %q %s}, the SDK's decoder reads {%v %q %s}", line, req.ID.Raw(), req.Method, req.Params, want.ID.Raw(), want.Method, want.Params)
		}
	})
}

// A successful response is written around its result as it is; the line
// is the one jsonrpc.EncodeMessage makes of it, byte for byte, for the
// compact results the SDK marshals.
func TestResultLineIsTheSDKsEncoding(t *testing.T) {
	for _, tc := range []struct {
		id     any
		result string
	}{
		{int64(1), `{}`},
		{int64(-9007199254740991), `{"content":[{"type":"text","text":"{\"status\":\"success\"}"}]}`},
		{"abc", `{"tools":[]}`},
		{"é\"<>&\u2028", `{"x":"<>&"}`},
		{int64(0), `[1,2,3]`},
	} {
		var id jsonrpc.ID
		switch v := tc.id.(type) {
		case int64:
			id = mustIntID(t, v)
		case string:
			var err error
			if id, err = jsonrpc.MakeID(v); err != nil {
				t.Fatal(err)
			}
		}
		resp := &jsonrpc.Response{ID: id, Result: json.RawMessage(tc.result)}
		line, ok := resultLine(resp)
		if !ok {
			t.Fatalf("%v: no line", tc.id)
		}
		want, err := jsonrpc.EncodeMessage(resp)
		if err != nil {
			t.Fatal(err)
		}
		if string(line) != string(want)+"\n" {
			t.Errorf("%v: wrote %s, the SDK encodes %s", tc.id, line, want)
		}
	}
	// What it leaves to the SDK.
	for _, msg := range []jsonrpc.Message{
		&jsonrpc.Request{Method: "m"},
		&jsonrpc.Response{ID: mustIntID(t, 1), Error: &jsonrpc.Error{Code: 1, Message: "no"}},
		&jsonrpc.Response{ID: mustIntID(t, 1)},
		&jsonrpc.Response{Result: json.RawMessage(`{}`)},
	} {
		if line, ok := resultLine(msg); ok {
			t.Errorf("%#v: wrote %s, want it left to jsonrpc.EncodeMessage", msg, line)
		}
	}
}

func mustIntID(t *testing.T, n int64) jsonrpc.ID {
	t.Helper()
	id, err := jsonrpc.MakeID(float64(n))
	if err != nil {
		t.Fatal(err)
	}
	return id
}
