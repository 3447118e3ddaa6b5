package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/control/world"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/body/evidence"
	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/haltest"
	"github.com/tobe-body/tobe-body/hal/haltest/stepclock"
	"github.com/tobe-body/tobe-body/ledger"
	"github.com/tobe-body/tobe-body/sense"
)

// rig is a body of fakes with a real ledger, its table, and the agent
// socket serving it.
type rig struct {
	sock     string
	reg      *body.Registry
	table    *awareness.Table
	hub      *Hub
	store    *ledger.Store
	estop    *act.EStop
	runner   *act.Runner
	relay    *haltest.LineOut
	led      *haltest.LineOut
	mu       sync.Mutex
	recorded []ledger.Event
	ended    chan act.SessionEnd
	srv      *Server
	// evidence is a snapshot kept by agent:pi, which a grant lets it
	// look at.
	evidence string
}

// testJPEG is a small grey JPEG.
func testJPEG(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, image.NewGray(image.Rect(0, 0, 8, 8)), nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func newRig(t *testing.T, rules []config.AgentPrincipal, heartbeat time.Duration) *rig {
	t.Helper()
	return newRigWith(t, rules, heartbeat, nil)
}

// newRigWith is newRig whose server tune changes before it serves.
func newRigWith(t *testing.T, rules []config.AgentPrincipal, heartbeat time.Duration, tune func(*Server)) *rig {
	t.Helper()
	wm, err := world.Build(world.Config{}, world.Facts{Outputs: []string{"gpio.relay1", "gpio.led"}})
	if err != nil {
		t.Fatal(err)
	}
	store, err := ledger.Open(ledger.Options{Path: filepath.Join(t.TempDir(), "ledger.db"), Projections: awareness.Projections(),
		Derivers: []ledger.Deriver{&world.Deriver{Model: wm}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	chip := haltest.NewChip("test")
	chip.AddIn("estop", hal.Low)
	relay := chip.AddOut("relay1")
	led := chip.AddOut("led")
	in, _ := chip.In("estop", hal.InConfig{})
	rl, _ := chip.Out("relay1", hal.OutConfig{Safe: hal.Low})
	ll, _ := chip.Out("led", hal.OutConfig{Safe: hal.Low})
	reg := body.NewRegistry(time.Now)
	for _, id := range []string{"gpio.relay1", "gpio.led"} {
		if err := reg.Register(body.Channel{ID: id, Kind: "gpio-out", Device: id, Driver: "Loaded", State: body.Enabled, Health: "ok"}); err != nil {
			t.Fatal(err)
		}
	}
	reg.Seal()
	estop, err := act.NewEStop(act.EStopConfig{Main: in, MainStop: hal.High, Outputs: []hal.LineOut{rl, ll}})
	if err != nil {
		t.Fatal(err)
	}
	estop.Check()
	leases := act.NewLeaseTable(0)
	// agent:pi may pulse the LED (and only that), for the tests of what a
	// session's end stops.
	grants := []act.Grant{{ID: "g-led", Subject: "agent:pi", Capability: "gpio.pulse", Scope: "gpio.led", By: "admin:test", ByTrust: ledger.High}}
	r := act.NewRunner(act.Environment{EStop: estop, Registry: reg, Leases: leases,
		Health: func() body.Degradation { return body.LevelNormal }, Grants: func() []act.Grant { return grants }}, store)
	set, pulse := act.NewGPIOActions([]*act.GPIOOutput{
		{Name: "relay1", Channel: "gpio.relay1", Line: rl, Risk: act.R2},
		{Name: "led", Channel: "gpio.led", Line: ll, Risk: act.R1},
	}, nil)
	for _, a := range []act.Action{set, pulse} {
		if err := r.Register(a); err != nil {
			t.Fatal(err)
		}
	}
	estop.SetRunner(r, leases)
	// A snapshot of camera.front, which agent:pi may look at.
	ev, err := evidence.Open(t.Context(), evidence.Options{Dir: filepath.Join(t.TempDir(), "evidence"), Ledger: store})
	if err != nil {
		t.Fatal(err)
	}
	piece, err := ev.Keep(t.Context(), evidence.Media{Kind: evidence.Snapshot, Source: "camera.front", MediaType: "image/jpeg", Data: testJPEG(t), Width: 8, Height: 8, By: "agent:pi", Privacy: ledger.Sensitive})
	if err != nil {
		t.Fatal(err)
	}
	gs, err := act.LoadGrants(store, stepclock.New())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gs.Add(t.Context(), act.Grant{Subject: "agent:pi", Capability: awareness.EvidenceView, Scope: "camera.*", By: "admin:test", ByTrust: ledger.High}, act.Expiry{}); err != nil {
		t.Fatal(err)
	}
	privacy := sense.NewPrivacy(sense.PrivacyConfig{Running: store.Running}, nil)
	privacy.Start(t.Context(), store)
	parts := &awareness.Parts{Info: awareness.Status{Body: "test", Board: "test"}, Started: time.Now(), Registry: reg, EStop: estop, Runner: r, Store: store,
		Self: func() (body.SelfState, bool) { return body.SelfState{}, false }, World: wm, Evidence: ev, Grants: gs, Privacy: privacy}
	table, err := parts.Table()
	if err != nil {
		t.Fatal(err)
	}
	rs, err := NewRules(rules)
	if err != nil {
		t.Fatal(err)
	}
	g := &rig{sock: filepath.Join(t.TempDir(), SocketName), reg: reg, table: table, estop: estop, runner: r, relay: relay, led: led, ended: make(chan act.SessionEnd, 8),
		hub: &Hub{Batch: 100 * time.Millisecond, Queue: 4}, store: store, evidence: piece.ID}
	srv := &Server{Table: table, Caps: r, Rules: rs, Hub: g.hub, Store: store, Registry: reg, Log: slog.New(slog.DiscardHandler), Version: "test",
		Record: func(e ledger.Event) { g.mu.Lock(); g.recorded = append(g.recorded, e); g.mu.Unlock() }}
	srv.Sessions = act.NewSessions(r, heartbeat, func(e act.SessionEnd) { srv.Ended(e); g.ended <- e })
	if tune != nil {
		tune(srv)
	}
	g.srv = srv
	ln, err := Listen(g.sock, -1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); act.RecordEStop(ctx, estop, store, nil, slog.New(slog.DiscardHandler)) }()
	go func() { defer wg.Done(); srv.Sessions.Run(ctx) }()
	go func() { defer wg.Done(); srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return g
}

func me() (int, string) {
	uid := os.Getuid()
	return uid, fmt.Sprint(uid)
}

// dial connects to the socket, sending a preface when name is set, and
// returns an MCP client session over it (the official SDK's client).
func (g *rig) dial(t *testing.T, name string) *mcp.ClientSession {
	t.Helper()
	return g.dialWith(t, name, nil, "")
}

// dialWith is dial with the client's options, asking for protocol
// version (empty: the SDK's newest).
func (g *rig) dialWith(t *testing.T, name string, opts *mcp.ClientOptions, version string) *mcp.ClientSession {
	t.Helper()
	c, err := net.Dial("unix", g.sock)
	if err != nil {
		t.Fatal(err)
	}
	if name != "" {
		fmt.Fprintf(c, `{"tobe":"principal","name":%q}`+"\n", name)
	}
	cl := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, opts)
	cs, err := cl.Connect(context.Background(), &mcp.IOTransport{Reader: c, Writer: c}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		c.Close()
		t.Fatalf("connect: %v", err)
	}
	if version != "" && cs.InitializeResult().ProtocolVersion != version {
		t.Fatalf("connect: protocol %s, want %s", cs.InitializeResult().ProtocolVersion, version)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// call calls a tool and returns the content it answered.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args any) (Content, *mcp.CallToolResult) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Meta: mcp.Meta{CallIDKey: "call-" + tool}, Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("%s: %d contents", tool, len(res.Content))
	}
	text, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("%s: content %T", tool, res.Content[0])
	}
	var c Content
	if err := json.Unmarshal([]byte(text.Text), &c); err != nil {
		t.Fatalf("%s: content %q: %v", tool, text.Text, err)
	}
	if c.Status == "error" != res.IsError {
		t.Errorf("%s: status %s but isError %v", tool, c.Status, res.IsError)
	}
	if got := res.Meta[CallIDKey]; got != "call-"+tool {
		t.Errorf("%s: call id back as %v", tool, got)
	}
	return c, res
}

func TestAnAgentOverTheSocket(t *testing.T) {
	uid, _ := me()
	g := newRig(t, []config.AgentPrincipal{
		{Name: "pi", Subject: "agent:pi", UID: &uid, Trust: "low"},
		{Name: "pi-high", Subject: "agent:pi", UID: &uid, Trust: "high"},
	}, time.Minute)
	cs := g.dial(t, "pi")

	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	byName := map[string]*mcp.Tool{}
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		byName[tl.Name] = tl
	}
	// The tools are what the table derives for the session's principal,
	// the session's drain, and one per action capability: no hand list.
	want := []string{"drain", "gpio_pulse", "gpio_set"}
	for _, e := range g.table.Tools(act.Principal{Kind: act.AgentSession, Subject: "agent:pi", Session: "s", Trust: ledger.Low}) {
		want = append(want, e.Tool.Name)
		a := byName[e.Tool.Name].Annotations
		if a == nil || a.ReadOnlyHint != e.Tool.ReadOnly || a.IdempotentHint != e.Tool.Idempotent || !e.Tool.ReadOnly && (a.DestructiveHint == nil || *a.DestructiveHint != e.Tool.Destructive) {
			t.Errorf("%s annotations %+v, want those of %+v", e.Tool.Name, a, e.Tool)
		}
	}
	slices.Sort(want)
	if !slices.Equal(names, want) || !slices.Contains(names, "show_work") {
		t.Errorf("tools %q, want %q with show_work", names, want)
	}
	for _, n := range names {
		if strings.Contains(n, "reset") || strings.Contains(n, "grant") || strings.Contains(n, "approv") || strings.Contains(n, "backup") {
			t.Errorf("an agent has tool %s", n)
		}
	}
	if a := byName["body_status"].Annotations; a == nil || !a.ReadOnlyHint {
		t.Errorf("body_status annotations %+v: want readOnlyHint", a)
	}
	if a := byName["gpio_set"].Annotations; a == nil || a.ReadOnlyHint {
		t.Errorf("gpio_set annotations %+v: an interact tool", a)
	}
	schema, _ := json.Marshal(byName["gpio_set"].InputSchema)
	for _, s := range []string{`"target":{"description":"what to act on, as this body names it","enum":["gpio.led","gpio.relay1"],"type":"string"}`, `"state":{`, `"enum":["on","off"]`, `"required":["target","state"]`, `"caused_by":{`} {
		if !strings.Contains(string(schema), s) {
			t.Errorf("gpio_set's schema %s lacks %s", schema, s)
		}
	}

	// Observe.
	c, _ := call(t, cs, "body_status", map[string]any{})
	if data, _ := json.Marshal(c.Data); c.Status != "success" || !strings.Contains(string(data), `"body":"test"`) {
		t.Errorf("body_status: %+v", c)
	}
	// Interact, refused for the session's low trust, with its reason;
	// nothing driven.
	c, _ = call(t, cs, "gpio_set", map[string]any{"target": "gpio.relay1", "state": "on"})
	if data, _ := json.Marshal(c.Data); c.Status != "error" || c.Error.Reason != act.ReasonRiskExceedsTrust || !strings.Contains(string(data), `"status":"refused"`) ||
		c.Error.Op != "gpio_set" || c.Error.Record != nil {
		t.Errorf("gpio_set at low trust: %+v (the record as data, not in the error)", c)
	}
	var res act.Result
	data, _ := json.Marshal(c.Data)
	json.Unmarshal(data, &res)
	if res.Reason == "" || g.relay.Level() != hal.Low {
		t.Errorf("gpio_set at low trust: reason %q, relay %v", res.Reason, g.relay.Level())
	}
	t.Logf("gpio_set at low trust: refused (%s): %s", res.Reason, res.Detail)
	// Bad arguments name what is wrong.
	c, _ = call(t, cs, "gpio_set", map[string]any{"target": "gpio.relay1", "state": "on", "volume": 11})
	if c.Status != "error" || c.Error.Reason != awareness.ReasonInvalidParams || !strings.Contains(c.Error.Detail, `gpio.set takes no "volume"`) {
		t.Errorf("an unknown argument: %+v %+v", c, c.Error)
	}
	c, _ = call(t, cs, "gpio_set", map[string]any{"target": "gpio.relay1", "state": "on", "caused_by": "the front door"})
	if c.Status != "error" || c.Error.Reason != awareness.ReasonInvalidParams || !strings.Contains(c.Error.Detail, `caused_by "the front door": not an event id`) {
		t.Errorf("a cause that is not an event id: %+v %+v", c, c.Error)
	}
	c, _ = call(t, cs, "gpio_pulse", map[string]any{"target": "gpio.led", "duration_ms": 2.5})
	if c.Status != "error" || !strings.Contains(c.Error.Detail, "want a whole number") {
		t.Errorf("a fractional duration: %+v %+v", c, c.Error)
	}
	// The ledger, without what a low-trust agent may not see.
	for _, pr := range []ledger.Privacy{ledger.Internal, ledger.Sensitive, ledger.Restricted} {
		if _, err := g.store.Append(context.Background(), ledger.Event{Type: "test.seen", Provenance: ledger.Observed, Privacy: pr}); err != nil {
			t.Fatal(err)
		}
	}
	c, _ = call(t, cs, "events", map[string]any{"types": []string{"test."}})
	data, _ = json.Marshal(c.Data)
	var evs awareness.Events
	json.Unmarshal(data, &evs)
	if c.Status != "success" || len(evs.Events) != 1 || evs.Events[0].Privacy != "internal" || evs.Withheld != 2 {
		t.Errorf("events at low trust: %s", data)
	}
	// Anyone may trip the e-stop.
	c, _ = call(t, cs, "estop_trip", map[string]any{})
	if c.Status != "success" || !g.estop.Latched() {
		t.Errorf("estop_trip: %+v, latched %v", c, g.estop.Latched())
	}
}

// --principal narrows: a peer matching two rules must choose, and can
// choose only among its own.
func TestThePrefaceNarrows(t *testing.T) {
	uid, _ := me()
	other := uid + 1
	g := newRig(t, []config.AgentPrincipal{
		{Name: "pi", Subject: "agent:pi", UID: &uid, Trust: "low"},
		{Name: "pi-high", Subject: "agent:pi", UID: &uid, Trust: "high"},
		{Name: "someone", Subject: "agent:someone", UID: &other, Trust: "max"},
	}, time.Minute)
	for _, tc := range []struct{ name, want string }{
		{"", `matches agent principals "pi", "pi-high": choose one with --principal NAME`},
		{"someone", `may not be agent principal "someone" (it may be: "pi", "pi-high")`},
		{"nobody", `may not be agent principal "nobody"`},
	} {
		got := refusedLine(t, g.sock, tc.name)
		if got.Error.Code != CodeRefused || got.ID != nil || got.Error.Data.Reason != awareness.ReasonNotAuthorized || !strings.Contains(got.Error.Message, tc.want) {
			t.Errorf("preface %q: answered %+v, want %q", tc.name, got, tc.want)
		}
	}
	g.mu.Lock()
	n := len(g.recorded)
	g.mu.Unlock()
	if n != 1 {
		t.Errorf("%d refusals recorded, want 1 (one a minute per uid, the rest folded)", n)
	}
}

// A peer no rule names is refused at accept: one error line, closed, and
// recorded.
func TestAPeerNoRuleNamesIsRefused(t *testing.T) {
	uid, _ := me()
	other := uid + 1
	g := newRig(t, []config.AgentPrincipal{{Name: "someone", Subject: "agent:someone", UID: &other, Trust: "max"}}, time.Minute)
	got := refusedLine(t, g.sock, "")
	if !strings.Contains(got.Error.Data.Detail, fmt.Sprintf("uid %d is not an agent (no rule of agent.principals names it", uid)) {
		t.Errorf("answered %+v", got)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.recorded) != 1 || g.recorded[0].Type != EventRefused {
		t.Fatalf("recorded %+v", g.recorded)
	}
	var r Refusal
	if err := ledger.UnmarshalPayload(g.recorded[0].Payload, &r); err != nil || r.UID != uid {
		t.Errorf("refusal %+v %v", r, err)
	}
}

// refusedLine connects (with a preface when name is set), sends an
// initialize, and returns the one line the server answers before it
// closes the connection.
func refusedLine(t *testing.T, sock, name string) refusalLine {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if name != "" {
		fmt.Fprintf(c, `{"tobe":"principal","name":%q}`+"\n", name)
	}
	fmt.Fprintln(c, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	if _, err := br.ReadByte(); err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("the connection stayed open after the refusal: %v", err)
	}
	var r refusalLine
	if err := json.Unmarshal([]byte(line), &r); err != nil || !strings.Contains(line, `"id":null`) {
		t.Fatalf("answered %q: %v", line, err)
	}
	return r
}

// R1 and E7 at the socket. A client that answers the body's pings (the
// SDK's, as it comes) stays while it thinks, twenty windows idle, and its
// next call works. A frozen client (it reads nothing more, so it answers
// no ping) with a pulse running has the pulse stopped within the window
// and the ping's timeout, the LED back at its safe level. A frozen idle
// one is lost at its unanswered ping (which waits IdleAnswer for an idle
// session), its connection closed. A closed one ends at once.
func TestTheAgentsRhythm(t *testing.T) {
	uid, _ := me()
	// A ping waits half of it for its answer: 200 ms holds under
	// emulation on a loaded machine.
	const heartbeat = 400 * time.Millisecond
	// An idle session's ping waits longer for its answer (a busy machine's
	// late answer must not cut it off): here a second.
	g := newRigWith(t, []config.AgentPrincipal{{Name: "pi", Subject: "agent:pi", UID: &uid, Trust: "high"}}, heartbeat,
		func(s *Server) { s.IdleAnswer = time.Second })
	wantEnd := func(what string, whys ...string) act.SessionEnd {
		t.Helper()
		select {
		case e := <-g.ended:
			if !slices.Contains(whys, e.Why) {
				t.Errorf("%s: ended %+v, want %v", what, e, whys)
			}
			return e
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: not ended", what)
		}
		return act.SessionEnd{}
	}

	cs := g.dial(t, "")
	time.Sleep(20 * heartbeat)
	select {
	case e := <-g.ended:
		t.Fatalf("an idle session that answers pings was ended: %+v", e)
	default:
	}
	if c, _ := call(t, cs, "self_state", nil); c.Status != "success" {
		t.Errorf("a call after %v idle: %+v", 20*heartbeat, c)
	}
	cs.Close()
	wantEnd("a closed session", "closed")

	// Frozen with a pulse running: the deadman, or the unanswered ping,
	// whichever is first; both stop the pulse.
	raw := func() net.Conn {
		c, err := net.Dial("unix", g.sock)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		br := bufio.NewReader(c)
		fmt.Fprintln(c, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"frozen","version":"1"}}}`)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatalf("initialize: %v", err)
		}
		fmt.Fprintln(c, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		return c
	}
	c := raw()
	fmt.Fprintln(c, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"gpio_pulse","arguments":{"target":"gpio.led","duration_ms":20000}}}`)
	for end := time.Now().Add(10 * time.Second); g.led.Level() != hal.High; time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the pulse did not start")
		}
	}
	started := time.Now()
	e := wantEnd("a frozen session with a pulse running", "silent", "unanswered_ping")
	for end := time.Now().Add(10 * time.Second); g.led.Level() != hal.Low; time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the frozen session's end %+v: the LED stayed on", e)
		}
	}
	if len(e.Cancelled) != 1 {
		t.Errorf("the frozen session's end %+v: want its pulse cancelled", e)
	}
	t.Logf("a frozen session's pulse stopped %v after it started (%s), the window %v", time.Since(started).Round(time.Millisecond), e.Why, heartbeat)

	// Frozen and idle: lost at its unanswered ping, its connection closed.
	c = raw()
	e = wantEnd("a frozen idle session", "unanswered_ping")
	if len(e.Cancelled) != 0 {
		t.Errorf("a frozen idle session's end cancelled %v", e.Cancelled)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("the frozen session's connection: %v, want it closed", err)
	}
}

// Observations: max and high pushed at once, low and medium together at
// the batch's end, every one in the drain queue too, which drops the
// oldest past its size and says how many.
func TestObservationsArePushedAndDrained(t *testing.T) {
	uid, _ := me()
	g := newRig(t, []config.AgentPrincipal{{Name: "pi", Subject: "agent:pi", UID: &uid, Trust: "high"}}, time.Minute)
	c, err := net.Dial("unix", g.sock)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan awareness.Observation, 16)
	cl := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := cl.Connect(context.Background(), &ObservingTransport{Transport: &mcp.IOTransport{Reader: c, Writer: c},
		On: func(method string, params json.RawMessage) {
			var o awareness.Observation
			if method == ObservationMethod && json.Unmarshal(params, &o) == nil {
				got <- o
			}
		}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	waitSubscribed(t, g.hub, 1)
	obs := func(id string, att ledger.Level) awareness.Observation {
		return awareness.Observation{ID: id, Source: "test", Actor: "signal", Content: id, Trust: ledger.Medium, Attention: att, Type: "test.event"}
	}
	g.hub.Publish(obs("calm", ledger.Medium))
	g.hub.Publish(obs("urgent", ledger.Max))
	next := func() awareness.Observation {
		select {
		case o := <-got:
			return o
		case <-time.After(10 * time.Second):
			t.Fatal("no observation pushed")
			return awareness.Observation{}
		}
	}
	if o := next(); o.ID != "urgent" {
		t.Errorf("pushed first %q, want the max one at once", o.ID)
	}
	if o := next(); o.ID != "calm" {
		t.Errorf("pushed next %q, want the medium one with its batch", o.ID)
	}
	for _, id := range []string{"a", "b", "c"} {
		g.hub.Publish(obs(id, ledger.Low))
	}
	d, _ := call(t, cs, "drain", map[string]any{"limit": 3})
	data, _ := json.Marshal(d.Data)
	var dr Drained
	json.Unmarshal(data, &dr)
	var ids []string
	for _, o := range dr.Observations {
		ids = append(ids, o.ID)
	}
	// The queue holds 4: calm and urgent, then a, b, c drop the oldest.
	if !slices.Equal(ids, []string{"urgent", "a", "b"}) || dr.Dropped != 1 || !dr.More {
		t.Errorf("drain: %q dropped %d more %v; want urgent a b, 1 dropped, more", ids, dr.Dropped, dr.More)
	}
	d, _ = call(t, cs, "drain", nil)
	data, _ = json.Marshal(d.Data)
	dr = Drained{}
	json.Unmarshal(data, &dr)
	if len(dr.Observations) != 1 || dr.Observations[0].ID != "c" || dr.Dropped != 0 {
		t.Errorf("second drain: %+v", dr)
	}
}

func waitSubscribed(t *testing.T, h *Hub, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		h.mu.Lock()
		k := len(h.subs)
		h.mu.Unlock()
		if k >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions subscribed, want %d", k, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// refusalLine is the one line a refused connection gets.
type refusalLine struct {
	JSONRPC string `json:"jsonrpc"`
	ID      *int   `json:"id"` // null: the refusal answers no request
	Error   struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    awareness.Error `json:"data"`
	} `json:"error"`
}
