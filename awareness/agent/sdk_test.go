package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type addIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

type addOut struct {
	Sum int `json:"sum"`
}

// peer is a raw client over the other end of a net.Pipe from a real
// mcp.Server served by a Transport.
type peer struct {
	t     *testing.T
	tr    *Transport
	conn  net.Conn
	lines chan string
	done  chan struct{}
	ss    *mcp.ServerSession
}

// newPeer serves an mcp.Server with one tool, "add", over a Transport and
// initializes the session from the raw end.
func newPeer(t *testing.T) *peer {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "add", Description: "adds"}, func(ctx context.Context, req *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
		return nil, addOut{Sum: in.A + in.B}, nil
	})
	serverEnd, clientEnd := net.Pipe()
	p := &peer{t: t, conn: clientEnd, lines: make(chan string, 1024), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer close(p.lines)
		sc := bufio.NewScanner(clientEnd)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	p.tr = NewTransport(serverEnd, TransportOptions{})
	ss, err := server.Connect(context.Background(), p.tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.ss = ss
	t.Cleanup(p.close)
	p.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
	if got := p.until(`"init"`); !strings.Contains(got[len(got)-1], `"serverInfo"`) {
		t.Fatalf("initialize: got %q, want a result with serverInfo", got)
	}
	p.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return p
}

func (p *peer) close() {
	p.ss.Close()
	p.ss.Wait()
	p.conn.Close()
	<-p.done
}

func (p *peer) send(line string) {
	p.t.Helper()
	if _, err := p.conn.Write([]byte(line + "\n")); err != nil {
		p.t.Fatalf("sending %.80q: %v", line, err)
	}
}

// until returns the lines read up to and including the response with id
// (raw JSON), and fails if the stream ends first.
func (p *peer) until(id string) []string {
	p.t.Helper()
	var got []string
	for line := range p.lines {
		got = append(got, line)
		var r struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal([]byte(line), &r) == nil && r.Method == "" && string(r.ID) == id {
			return got
		}
	}
	p.t.Fatalf("the stream ended before the response %s; read %q", id, got)
	return nil
}

// reply is the id and error code of a response line, code 0 for a result.
type reply struct {
	ID   string
	Code int
}

func replyOf(t *testing.T, line string) reply {
	t.Helper()
	var r struct {
		ID    json.RawMessage `json:"id"`
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		t.Fatalf("line %q: %v", line, err)
	}
	if r.Error == nil {
		return reply{string(r.ID), 0}
	}
	return reply{string(r.ID), r.Error.Code}
}

// TestSDKServer drives a real mcp.Server over a Transport: the good
// exchange, then each bad input of the reliability table, each followed by
// a good request on the next line that is answered.
func TestSDKServer(t *testing.T) {
	p := newPeer(t)

	p.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if got := p.until("1"); len(got) != 1 || !strings.Contains(got[0], `"name":"add"`) {
		t.Fatalf("tools/list: got %q, want the add tool", got)
	}
	p.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"add","arguments":{"a":2,"b":3}}}`)
	if got := p.until("2"); len(got) != 1 || !strings.Contains(got[0], `"structuredContent":{"sum":5}`) {
		t.Fatalf("tools/call: got %q, want a sum of 5", got)
	}

	batch := "[" + strings.Repeat(`{"jsonrpc":"2.0","id":1,"method":"ping"},`, 9999) + `{"jsonrpc":"2.0","id":1,"method":"ping"}]`
	cases := []struct {
		name  string
		input string
		want  []reply
		in    string // in the answer, if set
	}{
		{name: "bad JSON", input: `{"jsonrpc":"2.0",`, want: []reply{{"null", -32700}}},
		{name: "trailing data", input: `{"jsonrpc":"2.0","id":3,"method":"ping"}}`, want: []reply{{"null", -32700}}},
		{name: "10 MiB line", input: `{"jsonrpc":"2.0","id":3,"method":"ping","params":{"p":"` + strings.Repeat("x", 10<<20) + `"}}`, want: []reply{{"null", -32600}}},
		{name: "NUL", input: "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}\x00", want: []reply{{"null", -32700}}},
		{name: "bad UTF-8", input: "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"\xc3\x28\"}", want: []reply{{"null", -32700}}},
		{name: "10,000-element batch", input: batch, want: []reply{{"null", -32600}}},
		{name: "not an object", input: `[1]`, want: []reply{{"null", -32600}}},
		{name: "no version", input: `{"id":3,"method":"ping"}`, want: []reply{{"3", -32600}}},
		{name: "unknown method", input: `{"jsonrpc":"2.0","id":4,"method":"no/such"}`, want: []reply{{"4", -32601}}},
		{name: "unknown notification", input: `{"jsonrpc":"2.0","method":"notifications/no_such"}`, want: nil},
		{name: "tools/call name a number", input: `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":5}}`, want: []reply{{"5", -32602}}},
		{name: "tools/call unknown tool", input: `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"nope"}}`, want: []reply{{"6", -32602}}},
		// The SDK answers arguments that fail the tool's input schema
		// with a tool result that is an error, not a JSON-RPC error.
		{"tools/call argument a string", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"add","arguments":{"a":"x"}}}`, []reply{{"7", 0}}, `"isError":true`},
		{name: "tools/list params an array", input: `{"jsonrpc":"2.0","id":8,"method":"tools/list","params":[1]}`, want: []reply{{"8", -32602}}},
		{name: "empty line", input: ``, want: nil},
		{name: "response to nothing", input: `{"jsonrpc":"2.0","id":"x","result":{}}`, want: nil},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p.t = t
			p.send(tc.input)
			id := fmt.Sprintf(`"after-%d"`, i)
			p.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"ping"}`)
			// The SDK may answer a call after the ping that follows it
			// (it runs tools/call asynchronously): wait for both.
			waitFor := []string{id}
			for _, r := range tc.want {
				if r.ID != "null" {
					waitFor = append(waitFor, r.ID)
				}
			}
			var answers []string
			var pingReply *reply
			for _, w := range waitFor {
				if slices.ContainsFunc(answers, func(l string) bool { return replyOf(t, l).ID == w }) {
					continue
				}
				for _, line := range p.until(w) {
					if r := replyOf(t, line); r.ID == id {
						pingReply = &r
					} else {
						answers = append(answers, line)
					}
				}
			}
			var replies []reply
			for _, line := range answers {
				replies = append(replies, replyOf(t, line))
			}
			t.Logf("answered %q", answers)
			if fmt.Sprint(replies) != fmt.Sprint(tc.want) {
				t.Errorf("answers: got %v, want %v", replies, tc.want)
			}
			if tc.in != "" && (len(answers) == 0 || !strings.Contains(answers[0], tc.in)) {
				t.Errorf("answer: got %q, want it to hold %s", answers, tc.in)
			}
			if pingReply == nil || pingReply.Code != 0 {
				t.Errorf("the ping after it: got %v, want a result: the stream recovers at the next line", pingReply)
			}
		})
	}
	p.t = t
}

// TestNotifyInterleaved sends notifications while concurrent tool calls are
// answered: every line written is one complete JSON object.
func TestNotifyInterleaved(t *testing.T) {
	p := newPeer(t)
	const calls, notes = 50, 200
	var wg sync.WaitGroup
	for i := range notes {
		wg.Go(func() {
			if err := p.tr.Notify(context.Background(), ObservationMethod, map[string]any{"seq": i, "text": strings.Repeat("o", i)}); err != nil {
				t.Errorf("Notify: %v", err)
			}
		})
	}
	wg.Go(func() {
		for i := range calls {
			p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"add","arguments":{"a":%d,"b":1}}}`, 100+i, i))
		}
	})
	results, notifications := 0, 0
	for results < calls || notifications < notes {
		line, ok := <-p.lines
		if !ok {
			t.Fatalf("the stream ended after %d results and %d notifications", results, notifications)
		}
		var m struct {
			JSONRPC string          `json:"jsonrpc"`
			Method  string          `json:"method"`
			Result  json.RawMessage `json:"result"`
		}
		dec := json.NewDecoder(strings.NewReader(line))
		if err := dec.Decode(&m); err != nil || dec.More() || m.JSONRPC != "2.0" {
			t.Fatalf("line %q is not one JSON-RPC message: %v", line, err)
		}
		switch {
		case m.Method == ObservationMethod:
			notifications++
		case m.Result != nil:
			results++
		default:
			t.Fatalf("unexpected line %q", line)
		}
	}
	wg.Wait()
}

// TestNotifyAfterClose checks that Notify and Write fail once the
// Transport is closed, and a pending Read returns.
func TestNotifyAfterClose(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	tr := NewTransport(a, TransportOptions{})
	c, err := tr.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Connect(context.Background()); err == nil {
		t.Error("a second Connect: got no error, want one")
	}
	read := make(chan error)
	go func() {
		_, err := c.Read(context.Background())
		read <- err
	}()
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-read; !errors.Is(err, io.EOF) {
		t.Errorf("a pending Read after Close: got %v, want io.EOF", err)
	}
	if err := tr.Notify(context.Background(), ObservationMethod, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Notify after Close: got %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("a second Close: got %v, want nil", err)
	}
}

// TestObservingClient connects the SDK's own client through an
// ObservingTransport: a notification sent by Notify reaches On, and the
// session goes on.
func TestObservingClient(t *testing.T) {
	ctx := context.Background()
	server := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	serverEnd, clientEnd := net.Pipe()
	tr := NewTransport(serverEnd, TransportOptions{})
	ss, err := server.Connect(ctx, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Wait()
	defer ss.Close()

	type note struct {
		method string
		params string
	}
	observed := make(chan note, 1)
	client := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &ObservingTransport{
		Transport: &mcp.IOTransport{Reader: clientEnd, Writer: clientEnd},
		On:        func(method string, params json.RawMessage) { observed <- note{method, string(params)} },
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	if err := tr.Notify(ctx, ObservationMethod, map[string]string{"channel": "camera", "text": "a cup"}); err != nil {
		t.Fatal(err)
	}
	got := <-observed
	if want := (note{ObservationMethod, `{"channel":"camera","text":"a cup"}`}); got != want {
		t.Errorf("observed: got %+v, want %+v", got, want)
	}
	if err := cs.Ping(ctx, nil); err != nil {
		t.Errorf("a ping after the notification: %v", err)
	}
}
