package uplink

import (
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/tobe-body/tobe-body/ledger"
)

// broker is mochi in this process on 127.0.0.1, with an inline
// subscriber on everything that keeps what it was sent. It can be stopped
// and started again on the same port; what the subscriber got is kept.
type broker struct {
	t    testing.TB
	addr string

	mu  sync.Mutex
	srv *mochi.Server
	got []message
}

type message struct {
	topic   string
	payload []byte
	retain  bool
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func startBroker(t testing.TB) *broker {
	t.Helper()
	b := &broker{t: t, addr: freeAddr(t)}
	b.start()
	t.Cleanup(b.stop)
	return b
}

func (b *broker) url() string { return "tcp://" + b.addr }

func (b *broker) start() {
	b.t.Helper()
	b.mu.Lock()
	running := b.srv != nil
	b.mu.Unlock()
	if running {
		return
	}
	srv := mochi.New(&mochi.Options{InlineClient: true, Logger: slog.New(slog.DiscardHandler)})
	if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
		b.t.Fatal(err)
	}
	// The subscriber is in place before the listener serves: the relay
	// connects as soon as it can, and a window it published before the
	// subscription would be acknowledged with no one to hand it to (a
	// slow machine once lost 64 events so). The server is new and holds
	// nothing retained, so the handler is not called within Subscribe.
	err := srv.Subscribe("#", 1, func(_ *mochi.Client, _ packets.Subscription, pk packets.Packet) {
		b.mu.Lock()
		b.got = append(b.got, message{pk.TopicName, append([]byte(nil), pk.Payload...), pk.FixedHeader.Retain})
		b.mu.Unlock()
	})
	if err != nil {
		b.t.Fatal(err)
	}
	if err := srv.AddListener(listeners.NewTCP(listeners.Config{ID: "tcp", Address: b.addr})); err != nil {
		b.t.Fatal(err)
	}
	// Serve returns once the listeners serve, which they do at once.
	if err := srv.Serve(); err != nil {
		b.t.Fatal(err)
	}
	b.mu.Lock()
	b.srv = srv
	b.mu.Unlock()
}

func (b *broker) stop() {
	b.mu.Lock()
	srv := b.srv
	b.srv = nil
	b.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// messages returns what the subscriber got on topics with prefix.
func (b *broker) messages(prefix string) []message {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []message
	for _, m := range b.got {
		if strings.HasPrefix(m.topic, prefix) {
			out = append(out, m)
		}
	}
	return out
}

// retained returns the retained payload of topic, if there is one.
func (b *broker) retained(topic string) (string, bool) {
	b.mu.Lock()
	srv := b.srv
	b.mu.Unlock()
	if srv == nil {
		return "", false
	}
	for _, pk := range srv.Topics.Messages(topic) {
		if pk.TopicName == topic {
			return string(pk.Payload), true
		}
	}
	return "", false
}

// events decodes the CBOR events the subscriber got, in the order they
// came, with how many times each event id came.
func (b *broker) events(t testing.TB, prefix string) ([]ledger.Event, map[ledger.UUID]int) {
	t.Helper()
	var evs []ledger.Event
	seen := map[ledger.UUID]int{}
	for _, m := range b.messages(prefix) {
		var e ledger.Event
		if err := ledger.Decode(m.payload, &e); err != nil {
			t.Fatalf("%s: %v", m.topic, err)
		}
		if seen[e.ID]++; seen[e.ID] == 1 {
			evs = append(evs, e)
		}
	}
	return evs, seen
}

// eventually polls cond every 10 ms for up to d.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
