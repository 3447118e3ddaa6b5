package edge

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/tobe-body/tobe-body/awareness/edge/edgetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// readLines reads input with a LineReader of lines of at most maxLine
// bytes: the lines, "LONG" for each one over it, and the reader's peak.
func readLines(input []byte, maxLine int) (lines []string, peak int) {
	lr := NewLineReader(bufio.NewReaderSize(bytes.NewReader(input), 16), maxLine)
	for {
		line, err := lr.Next()
		switch {
		case errors.Is(err, ErrLineTooLong):
			lines = append(lines, "LONG")
		case err != nil:
			return lines, lr.Peak
		default:
			lines = append(lines, string(line))
		}
	}
}

var lineCases = []struct {
	name, input string
	want        []string
}{
	{"lf", "a\nb\n", []string{"a", "b"}},
	{"crlf", "a\r\nb\r\n", []string{"a", "b"}},
	{"a lone cr stays", "a\rb\n", []string{"a\rb"}},
	{"last line without newline", "a\nb", []string{"a", "b"}},
	{"last line without newline, with cr", "a\nb\r", []string{"a", "b"}},
	{"empty lines", "\n\n", []string{"", ""}},
	{"nothing", "", nil},
	{"exactly the limit", strings.Repeat("x", 32) + "\n", []string{strings.Repeat("x", 32)}},
	{"the limit and a cr", strings.Repeat("x", 32) + "\r\n", []string{"LONG"}},
	{"one over the limit", strings.Repeat("x", 33) + "\nok\n", []string{"LONG", "ok"}},
	{"far over the limit", strings.Repeat("x", 1000) + "\nok\n", []string{"LONG", "ok"}},
	{"over the limit at the end", "ok\n" + strings.Repeat("x", 1000), []string{"ok", "LONG"}},
}

// TestLineReader reads each input with a limit of 32 bytes: '\n' or
// "\r\n" end a line, a last line without its newline is a line, and a
// line over the limit is skipped whole, the next read as usual.
func TestLineReader(t *testing.T) {
	for _, tc := range lineCases {
		t.Run(tc.name, func(t *testing.T) {
			got, peak := readLines([]byte(tc.input), 32)
			if strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if peak > 32 {
				t.Errorf("line buffer peak %d, want at most 32", peak)
			}
		})
	}
}

// A line that arrives in parts, with a pause longer than a read's
// deadline between them, is read whole.
func TestALineInParts(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) net.Conn {
		f := os.NewFile(uintptr(fd), "socketpair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := conn(fds[0]), conn(fds[1])
	defer a.Close()
	defer b.Close()
	lr := NewLineReader(bufio.NewReader(b), 64)
	a.Write([]byte(`{"jsonrpc":`))
	b.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := lr.Next(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("first part: %v, want the deadline", err)
	}
	a.Write([]byte(`"2.0"}` + "\n"))
	b.SetReadDeadline(time.Time{})
	line, err := lr.Next()
	if err != nil || string(line) != `{"jsonrpc":"2.0"}` {
		t.Fatalf("got %q %v", line, err)
	}
}

const ping = `{"jsonrpc":"2.0","id":7,"method":"ping"}`

// parseCases are lines and how Parse reads them: the error line it
// answers (or "" for a message, "drop" for a response dropped).
var parseCases = []struct {
	name, line, want string
}{
	{"a request", ping, ""},
	{"a string id", `{"jsonrpc":"2.0","id":"a","method":"m","params":{}}`, ""},
	{"the largest id", `{"jsonrpc":"2.0","id":-9007199254740991,"method":"m"}`, ""},
	{"a notification", `{"jsonrpc":"2.0","method":"m"}`, ""},
	{"a response", `{"jsonrpc":"2.0","id":3,"result":{}}`, ""},
	{"bad JSON", `{"jsonrpc":"2.0","id":1,"method":`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: not JSON"}}`},
	{"trailing data", ping + ` x`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: data after the JSON value"}}`},
	{"NUL", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"\x00}", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the line contains a NUL byte"}}`},
	{"bad UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the line is not valid UTF-8"}}`},
	{"a batch", "[" + ping + "]", `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: batches are not supported"}}`},
	{"a number", `42`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: not a JSON-RPC message object"}}`},
	{"no jsonrpc", `{"id":1,"method":"ping"}`, `{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"Invalid Request: no \"jsonrpc\":\"2.0\""}}`},
	{"JSONRPC upper case", `{"JSONRPC":"2.0","id":1,"method":"ping"}`, `{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"Invalid Request: no \"jsonrpc\":\"2.0\""}}`},
	{"id an object", `{"jsonrpc":"2.0","id":{},"method":"ping"}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: the id must be a string or an integer"}}`},
	{"id a fraction", `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: the id must be a string or an integer of at most 2^53-1"}}`},
	{"id too big", `{"jsonrpc":"2.0","id":9007199254740992,"method":"ping"}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: the id must be a string or an integer of at most 2^53-1"}}`},
	{"id null", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: the id must not be null"}}`},
	{"no method", `{"jsonrpc":"2.0","id":5}`, `{"jsonrpc":"2.0","id":5,"error":{"code":-32600,"message":"Invalid Request: no method"}}`},
	{"method a number", `{"jsonrpc":"2.0","id":"m","method":5}`, `{"jsonrpc":"2.0","id":"m","error":{"code":-32600,"message":"Invalid Request: the method is not a string"}}`},
	{"a response without id", `{"jsonrpc":"2.0","result":{}}`, "drop"},
	{"a response with result and error", `{"jsonrpc":"2.0","id":3,"result":{},"error":{}}`, "drop"},
}

// TestParse reads each line: a message, or the one error line that
// answers it, with the id when it could be read and null otherwise.
func TestParse(t *testing.T) {
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			m, bad := Parse([]byte(tc.line))
			switch {
			case tc.want == "" && bad != nil:
				t.Fatalf("refused: %+v", bad)
			case tc.want == "drop" && (bad == nil || !bad.Drop):
				t.Fatalf("got %+v %+v, want a response dropped", m, bad)
			case tc.want == "drop", tc.want == "":
				return
			case bad == nil || bad.Drop:
				t.Fatalf("got %+v %+v, want it answered", m, bad)
			}
			if got := string(ErrorLine(bad.ID, bad.Error())); got != tc.want+"\n" {
				t.Errorf("answered %s, want %s", got, tc.want)
			}
		})
	}
	m, _ := Parse([]byte(`{"jsonrpc":"2.0","id":"a","method":"m","params":[1]}`))
	if string(m.ID) != `"a"` || m.Method != "m" || string(m.Params) != "[1]" || m.Response {
		t.Errorf("read %+v", m)
	}
}

// FuzzCodec checks, for any input, that the LineReader's lines are the
// input's lines (split at '\n', a '\r' before it dropped, those over the
// limit skipped) and its buffer stays within the limit; and that every
// line is a message or answered by one JSON-RPC error line whose id is
// the message's, a string or an integer within MaxID, or null.
func FuzzCodec(f *testing.F) {
	for _, tc := range lineCases {
		f.Add([]byte(tc.input))
	}
	for _, tc := range parseCases {
		f.Add([]byte(tc.line + "\n" + ping + "\r\n"))
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		const maxLine = 64
		got, peak := readLines(input, maxLine)
		if peak > maxLine {
			t.Errorf("line buffer peak %d, want at most %d", peak, maxLine)
		}
		var want []string
		rest := input
		for len(rest) > 0 {
			line, after, _ := bytes.Cut(rest, []byte("\n"))
			line = bytes.TrimSuffix(line, []byte("\r"))
			// The limit counts the '\r': it was read.
			if n := len(line); len(rest) > n && rest[n] == '\r' {
				n++ // the '\r' dropped
				if n > maxLine {
					line = []byte("LONG")
				}
			}
			if len(line) > maxLine {
				line = []byte("LONG")
			}
			want = append(want, string(line))
			rest = after
		}
		if strings.Join(got, "\x00") != strings.Join(want, "\x00") || len(got) != len(want) {
			t.Fatalf("read %q, want %q", got, want)
		}
		for _, line := range got {
			if line == "LONG" || Blank([]byte(line)) {
				continue
			}
			m, bad := Parse([]byte(line))
			if bad == nil {
				if m.ID != nil && (string(m.ID) == "null" || !edgetest.ValidID(m.ID)) {
					t.Fatalf("%q: read with id %s", line, m.ID)
				}
				if m.Method == "" && !m.Response {
					t.Fatalf("%q: read as %+v", line, m)
				}
				continue
			}
			if err := edgetest.ErrorLine(ErrorLine(bad.ID, bad.Error())); err != nil {
				t.Fatal(err)
			}
		}
	})
}
