package uplink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"go.uber.org/goleak"

	"github.com/tobe-body/tobe-body/ledger"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	agentID = ledger.UUID{1}
	bodyID  = ledger.UUID{2}
)

func openStore(t testing.TB) *ledger.Store {
	t.Helper()
	s, err := ledger.Open(ledger.Options{Path: filepath.Join(t.TempDir(), "ledger.db"), AgentID: agentID, BodyID: bodyID})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func motion(i int) ledger.Event {
	return ledger.Event{Type: "camera.motion_started", ChannelID: "camera.front", Provenance: ledger.Observed, SourceSequence: uint64(i)}
}

func trip(i int) ledger.Event {
	return ledger.Event{Type: "estop.tripped", ChannelID: "estop.main", Provenance: ledger.Observed, SourceSequence: uint64(i)}
}

func appendN(t testing.TB, s *ledger.Store, from, n int, mk func(int) ledger.Event) {
	t.Helper()
	const batch = 500
	for i := from; i < from+n; i += batch {
		evs := make([]ledger.Event, 0, batch)
		for j := i; j < min(i+batch, from+n); j++ {
			evs = append(evs, mk(j))
		}
		if _, err := s.Append(context.Background(), evs...); err != nil {
			t.Fatal(err)
		}
	}
}

func testOptions(b *broker) Options {
	return Options{Broker: b.url(), AgentID: agentID.String(), BodyID: bodyID.String(),
		Keepalive: 5 * time.Second, ReconnectMin: 10 * time.Millisecond, ReconnectMax: 50 * time.Millisecond, AckCommit: 20 * time.Millisecond, WriteTimeout: 500 * time.Millisecond}
}

// run starts a relay; the returned stop ends it and waits.
func run(t testing.TB, s Outbox, opts Options) (*Relay, func()) {
	t.Helper()
	r, err := New(s, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.Run(ctx)
	}()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return r, stop
}

func outboxRows(t testing.TB, s *ledger.Store) uint64 {
	t.Helper()
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return st.OutboxRows
}

// checkOnce fails unless the broker got every one of want's events, each
// at least once, in the order of their sequence within each event type.
func checkOnce(t testing.TB, b *broker, opts Options, want int) {
	t.Helper()
	evs, seen := b.events(t, opts.base()+"/events/")
	if len(evs) != want {
		t.Fatalf("the subscriber has %d distinct events, want %d", len(evs), want)
	}
	last := map[string]uint64{}
	dups := 0
	for _, e := range evs {
		if e.SourceSequence < last[e.Type] {
			t.Fatalf("%s %d came after %d", e.Type, e.SourceSequence, last[e.Type])
		}
		last[e.Type] = e.SourceSequence
		dups += seen[e.ID] - 1
	}
	t.Logf("%d events, %d sent more than once (a consumer deduplicates them by event_id)", len(evs), dups)
}

func TestRelayDeliversTheOutboxAndEmptiesIt(t *testing.T) {
	b := startBroker(t)
	s := openStore(t)
	opts := testOptions(b)
	opts.Mirror = func(typ string) bool { return typ == "estop.tripped" }
	appendN(t, s, 0, 2000, motion)
	appendN(t, s, 0, 3, trip)
	r, stop := run(t, s, opts)
	opts = r.opts
	eventually(t, 10*time.Second, "the outbox empties", func() bool { return outboxRows(t, s) == 0 })
	checkOnce(t, b, opts, 2003)
	if v, _ := b.retained(opts.StatusTopic()); v != Online {
		t.Errorf("status retained %q, want %q", v, Online)
	}
	// The JSON mirror: the estop events only, each with its event_id.
	mirrored := b.messages(opts.base() + "/events_json/")
	if len(mirrored) < 3 {
		t.Fatalf("%d mirrored events, want 3", len(mirrored))
	}
	for _, m := range mirrored {
		var v ledger.EventView
		if err := json.Unmarshal(m.payload, &v); err != nil || v.Type != "estop.tripped" || v.ID == "" || m.topic != opts.MirrorTopic("estop.tripped") {
			t.Errorf("mirror %s %s: %+v %v", m.topic, m.payload, v, err)
		}
	}
	// Fresh events go too, as they are written.
	appendN(t, s, 2000, 10, motion)
	// The acker counts a removal after its commit: wait for both.
	eventually(t, 5*time.Second, "the fresh events go", func() bool { return outboxRows(t, s) == 0 && r.Status().Acked == 2013 })
	checkOnce(t, b, opts, 2013)
	st := r.Status()
	if !st.Connected || st.Sessions != 1 || st.Acked != 2013 {
		t.Errorf("status %+v", st)
	}
	// A clean stop says offline, retained.
	stop()
	if v, _ := b.retained(opts.StatusTopic()); v != Offline {
		t.Errorf("after a clean stop the status is %q, want %q", v, Offline)
	}
}

// One relay is one connection: a Run while another runs is refused at
// once; once a Run returned, the relay runs again and relays what came
// meanwhile.
func TestRunAgainAfterItReturned(t *testing.T) {
	b := startBroker(t)
	s := openStore(t)
	opts := testOptions(b)
	appendN(t, s, 0, 10, motion)
	r, stop := run(t, s, opts)
	eventually(t, 10*time.Second, "the outbox empties", func() bool { return outboxRows(t, s) == 0 })
	second := make(chan error, 1)
	go func() { second <- r.Run(t.Context()) }()
	select {
	case err := <-second:
		if !errors.Is(err, ErrRunning) {
			t.Fatalf("a second Run while the first runs: %v, want ErrRunning", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a second Run while the first runs did not return at once")
	}
	stop()
	appendN(t, s, 10, 10, motion)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	eventually(t, 10*time.Second, "the second Run empties the outbox", func() bool {
		return outboxRows(t, s) == 0 && r.Status().Acked == 20
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("the second Run: %v", err)
	}
	checkOnce(t, b, r.opts, 20)
	if st := r.Status(); st.Sessions != 2 {
		t.Errorf("%d sessions, want 2", st.Sessions)
	}
}

// The e-stop goes ahead of a backlog: with 20,000 telemetry rows waiting,
// a trip written after them is among the first events the broker gets.
func TestUrgentRowsGoAheadOfTheBacklog(t *testing.T) {
	b := startBroker(t)
	s := openStore(t)
	opts := testOptions(b)
	appendN(t, s, 0, 20000, motion)
	appendN(t, s, 0, 2, trip)
	r, _ := run(t, s, opts)
	opts = r.opts
	// 20,000 rows take about 12 s with -race on an idle machine: the
	// bound is for a stuck relay, not a measure.
	eventually(t, time.Minute, "the outbox empties", func() bool { return outboxRows(t, s) == 0 })
	evs, _ := b.events(t, opts.base()+"/events/")
	pos := -1
	for i, e := range evs {
		if e.Type == "estop.tripped" {
			pos = i
			break
		}
	}
	if pos < 0 || pos > opts.Window {
		t.Fatalf("the first trip was event %d of %d to arrive, want it within the first window (%d)", pos, len(evs), opts.Window)
	}
	t.Logf("the trip written after 20,000 rows was event %d to arrive", pos)
	checkOnce(t, b, opts, 20002)
}

// M1: started with no broker, the body keeps its outbox; the broker
// killed and started again in the middle of a stream, twice; at the end
// every event is there, each type in order, and the outbox is empty.
func TestRelayThroughABrokerThatComesAndGoes(t *testing.T) {
	b := startBroker(t)
	b.stop()
	s := openStore(t)
	opts := testOptions(b)
	r, _ := run(t, s, opts)
	opts = r.opts
	appendN(t, s, 0, 1000, motion)
	time.Sleep(200 * time.Millisecond) // a few failed connects
	if n := outboxRows(t, s); n != 1000 {
		t.Fatalf("with no broker the outbox holds %d rows, want 1000", n)
	}
	if st := r.Status(); st.Connected || st.LastError == "" {
		t.Errorf("with no broker the status is %+v", st)
	}
	b.start()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1000; i < 10000; i += 100 {
			appendN(t, s, i, 100, motion)
			if i%3000 == 0 {
				trip := i
				appendN(t, s, trip, 1, func(j int) ledger.Event { ev := motion(j); ev.Type = "estop.tripped"; return ev })
			}
			time.Sleep(time.Millisecond)
		}
	}()
	for i := range 2 {
		acked := r.Status().Acked
		eventually(t, 10*time.Second, "some rows go", func() bool {
			st := r.Status()
			return st.Connected && st.Sessions == uint64(i+1) && st.Acked > acked
		})
		b.stop()
		time.Sleep(50 * time.Millisecond)
		b.start()
	}
	wg.Wait()
	eventually(t, 20*time.Second, "the outbox empties", func() bool { return outboxRows(t, s) == 0 })
	checkOnce(t, b, opts, 10003)
	if st := r.Status(); st.Sessions < 3 {
		t.Errorf("%d sessions, want at least 3", st.Sessions)
	}
}

// A hundred reconnects leave no goroutine behind and no memory held.
func TestReconnectsLeakNothing(t *testing.T) {
	b := startBroker(t)
	s := openStore(t)
	opts := testOptions(b)
	r, stop := run(t, s, opts)
	eventually(t, 5*time.Second, "connected", func() bool { return r.Status().Connected })
	// The heap in use once collected, without what the test broker's
	// subscriber keeps of every message.
	heap := func() uint64 {
		b.mu.Lock()
		b.got = nil
		b.mu.Unlock()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	reconnects := 0
	hundred := func() {
		for range 100 {
			appendN(t, s, reconnects, 1, motion)
			b.stop()
			b.start()
			reconnects++
			eventually(t, 5*time.Second, fmt.Sprintf("reconnect %d", reconnects), func() bool {
				return r.Status().Sessions >= uint64(reconnects+1) && r.Status().Connected
			})
		}
		eventually(t, 5*time.Second, "the outbox empties", func() bool { return outboxRows(t, s) == 0 })
	}
	// The first hundred settle what is made once (pools, the ledger's
	// pages, the first session's paho); the second must add nothing.
	g0, h0 := runtime.NumGoroutine(), heap()
	hundred()
	g1, h1 := runtime.NumGoroutine(), heap()
	hundred()
	g2, h2 := runtime.NumGoroutine(), heap()
	t.Logf("goroutines %d -> %d -> %d, heap %d -> %d -> %d KiB over 0, 100 and 200 reconnects", g0, g1, g2, h0>>10, h1>>10, h2>>10)
	if g1 > g0+2 || g2 > g1 {
		t.Errorf("goroutines grew from %d to %d to %d over 200 reconnects", g0, g1, g2)
	}
	// A leaked paho client per session would keep its store, its
	// channels and their buffers: tens of KiB each, megabytes a hundred.
	if h2 > h1 && h2-h1 > 256<<10 {
		t.Errorf("the heap grew by %d KiB over the second hundred reconnects, more than 256 KiB", (h2-h1)>>10)
	}
	stop()
}

func TestBackoffHasFullJitter(t *testing.T) {
	top := func(n int64) int64 { return n - 1 }
	bottom := func(int64) int64 { return 0 }
	for _, tc := range []struct {
		n        int
		draw     func(int64) int64
		lo, hi   time.Duration
		want     time.Duration
		describe string
	}{
		{1, top, time.Second, time.Minute, time.Second, "the first wait is at most the minimum"},
		{2, top, time.Second, time.Minute, 2 * time.Second, "it doubles"},
		{7, top, time.Second, time.Minute, time.Minute, "up to the maximum"},
		{200, top, time.Second, time.Minute, time.Minute, "and stays there"},
		{3, bottom, time.Second, time.Minute, minWait, "never below the floor"},
	} {
		if got := backoff(tc.lo, tc.hi, tc.n, tc.draw); got != tc.want {
			t.Errorf("%s: failure %d waits %v, want %v", tc.describe, tc.n, got, tc.want)
		}
	}
	// Draws spread over the whole range: a fleet does not come back in step.
	var lowHalf int
	for range 1000 {
		if backoff(time.Second, time.Minute, 5, defaultRelay().opts.rand) < 8*time.Second {
			lowHalf++
		}
	}
	if lowHalf < 350 || lowHalf > 650 {
		t.Errorf("%d of 1000 waits after the 5th failure fell under 8 s of 16: not uniform", lowHalf)
	}
}

// defaultRelay is a relay with default options, for its defaults.
func defaultRelay() *Relay {
	r, _ := New(nil, Options{Broker: "tcp://127.0.0.1:1", AgentID: "a", BodyID: "b"})
	return r
}

// Retained documents: kept before a session, published at its start,
// again when they change, again after the broker lost them in a restart,
// and removed when emptied. A subscription's messages reach its handler.
func TestRetainedStateAndSubscriptions(t *testing.T) {
	b := startBroker(t)
	s := openStore(t)
	r, err := New(s, testOptions(b))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 10)
	r.Subscribe("homeassistant/status", func(topic string, payload []byte) { got <- topic + "=" + string(payload) })
	if err := r.SetState("estop", map[string]any{"latched": false}); err != nil {
		t.Fatal(err)
	}
	r.Retain("homeassistant/device/x/config", []byte(`{"dev":{}}`))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); r.Run(ctx) }()
	defer func() { cancel(); wg.Wait() }()
	topic := r.opts.StateTopic("estop")
	retained := func(topic, want string) {
		t.Helper()
		eventually(t, 5*time.Second, topic+" = "+want, func() bool { v, ok := b.retained(topic); return ok && v == want })
	}
	retained(topic, `{"latched":false}`)
	retained("homeassistant/device/x/config", `{"dev":{}}`)
	r.SetState("estop", map[string]any{"latched": true})
	retained(topic, `{"latched":true}`)
	// The broker retains a message before its subscriber is handed it:
	// count once the subscriber has it too.
	delivered := func(n int) bool {
		ms := b.messages(topic)
		return len(ms) >= n && string(ms[len(ms)-1].payload) == `{"latched":true}`
	}
	eventually(t, 5*time.Second, "the subscriber has the state", func() bool { return delivered(1) })
	before := len(b.messages(topic))
	r.SetState("estop", map[string]any{"latched": true}) // unchanged: not sent again
	// The broker restarts with nothing retained; the next session sends it.
	b.stop()
	b.start()
	retained(topic, `{"latched":true}`)
	eventually(t, 5*time.Second, "the subscriber has the state again", func() bool { return delivered(before + 1) })
	if n := len(b.messages(topic)); n != before+1 {
		t.Errorf("%d publishes of the state, want %d (one more, after the restart)", n, before+1)
	}
	// The birth message reaches the handler.
	eventually(t, 5*time.Second, "subscribed again", func() bool { return r.Status().Connected })
	b.mu.Lock()
	srv := b.srv
	b.mu.Unlock()
	if err := srv.Publish("homeassistant/status", []byte("online"), false, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		if m != "homeassistant/status=online" {
			t.Errorf("handler got %q", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the subscription's message did not reach its handler")
	}
	// Emptied, the retained message goes.
	r.Retain("homeassistant/device/x/config", nil)
	eventually(t, 5*time.Second, "the config is removed", func() bool { _, ok := b.retained("homeassistant/device/x/config"); return !ok })
}

// startEmbedded starts the embedded broker on a free port.
func startEmbedded(t *testing.T) (b *Broker, addr string, port int) {
	t.Helper()
	addr = freeAddr(t)
	_, ps, _ := strings.Cut(addr, ":")
	port, _ = strconv.Atoi(ps)
	b, err := StartBroker(port, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b, addr, port
}

// The embedded broker passes what is published on it to a local
// subscriber, and takes no command from anyone: a client that publishes
// one at QoS 1 is disconnected (MQTT 3.1.1 has no refusing PUBACK) and
// the command reaches no subscriber.
func TestEmbeddedBrokerTakesNoCommands(t *testing.T) {
	b, addr, p := startEmbedded(t)
	defer b.Close()
	if _, err := StartBroker(p, nil); err == nil || !strings.Contains(err.Error(), addr) {
		t.Errorf("a second broker on the same port: %v", err)
	}
	connect := func(id string) mqtt.Client {
		c := mqtt.NewClient(mqtt.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(id).SetAutoReconnect(false))
		if tok := c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
			t.Fatal(tok.Error())
		}
		return c
	}
	sub, pub := connect("sub"), connect("pub")
	defer sub.Disconnect(100)
	defer pub.Disconnect(100)
	got := make(chan string, 4)
	if tok := sub.Subscribe("tobe/#", 1, func(_ mqtt.Client, m mqtt.Message) { got <- m.Topic() }); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	pub.Publish("tobe/a/b/cmd/estop.trip", 1, false, `{"id": "x"}`).WaitTimeout(2 * time.Second)
	eventually(t, 5*time.Second, "the client that sent a command is disconnected", func() bool { return !pub.IsConnectionOpen() })
	if tok := sub.Publish("tobe/a/b/events/x", 1, false, `e`); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	select {
	case topic := <-got:
		if topic != "tobe/a/b/events/x" {
			t.Errorf("the local subscriber got %s first: a command went through", topic)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("nothing passed the embedded broker")
	}
}

// The embedded broker closes while its clients leave, however their
// leaving falls with its closing: mochi's own Close deadlocked when a
// client was removed from its list between the two read locks it takes
// of it (it hung here within some 200 rounds of this), so the broker
// lets its connections end first.
func TestTheEmbeddedBrokerClosesWhileClientsLeave(t *testing.T) {
	for round := range 300 {
		b, addr, _ := startEmbedded(t)
		var clients []mqtt.Client
		for i := range 48 {
			c := mqtt.NewClient(mqtt.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(fmt.Sprint("c", i)).SetAutoReconnect(false))
			if tok := c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
				t.Fatalf("round %d: %v", round, tok.Error())
			}
			clients = append(clients, c)
		}
		var left sync.WaitGroup
		for _, c := range clients {
			left.Go(func() { c.Disconnect(0) })
		}
		closed := make(chan error, 1)
		go func() { closed <- b.Close() }()
		select {
		case err := <-closed:
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("round %d: the broker's Close hangs", round)
		}
		left.Wait()
	}
}
