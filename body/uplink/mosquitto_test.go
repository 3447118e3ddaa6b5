package uplink

import (
	"context"
	"crypto/tls"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/body/uplink/mosquittotest"
	"github.com/tobe-body/tobe-body/ledger"
)

// checkStream fails unless msgs hold every one of want events (decoded
// from their CBOR), each type in order; it returns how many came twice.
func checkStream(t *testing.T, msgs []mosquittotest.Message, want int) int {
	t.Helper()
	seen := map[ledger.UUID]bool{}
	last := map[string]uint64{}
	dups := 0
	for _, m := range msgs {
		var e ledger.Event
		if err := ledger.Decode(m.Payload, &e); err != nil {
			t.Fatalf("%s: %v", m.Topic, err)
		}
		if seen[e.ID] {
			dups++
			continue
		}
		seen[e.ID] = true
		if e.SourceSequence < last[e.Type] {
			t.Fatalf("%s %d came after %d", e.Type, e.SourceSequence, last[e.Type])
		}
		last[e.Type] = e.SourceSequence
	}
	if len(seen) != want {
		t.Fatalf("the subscriber has %d distinct events, want %d", len(seen), want)
	}
	return dups
}

// streamer writes a stream of events into a store the test may swap:
// batches of 50 motion events with a trip every 2,500, from one writer,
// so each type's order is the order written.
type streamer struct {
	mu    sync.Mutex
	s     *ledger.Store
	wrote chan int
	done  chan struct{}
}

func stream(t *testing.T, s *ledger.Store, n int) *streamer {
	st := &streamer{s: s, wrote: make(chan int, n), done: make(chan struct{})}
	go func() {
		defer close(st.done)
		defer close(st.wrote)
		k := 0
		for i := 0; i < n; i += 50 {
			evs := make([]ledger.Event, 0, 51)
			for j := i; j < i+50; j++ {
				evs = append(evs, motion(j))
			}
			if i%2500 == 0 {
				evs = append(evs, trip(i))
			}
			// Under the lock: the test swaps the store between appends.
			st.mu.Lock()
			_, err := st.s.Append(context.Background(), evs...)
			st.mu.Unlock()
			if err != nil {
				t.Errorf("append: %v", err)
				return
			}
			k += len(evs)
			st.wrote <- k
			time.Sleep(2 * time.Millisecond)
		}
	}()
	return st
}

func (st *streamer) store() *ledger.Store { st.mu.Lock(); defer st.mu.Unlock(); return st.s }

// until waits until at least n events are written.
func (st *streamer) until(n int) {
	for k := range st.wrote {
		if k >= n {
			return
		}
	}
}

// mosquittoOptions are a relay's against a Mosquitto of mosquittotest's
// as the user body, with short waits.
func mosquittoOptions(url string) Options {
	return Options{Broker: url, Username: "body", Password: "body-pass", AgentID: agentID.String(), BodyID: bodyID.String(),
		Keepalive: 5 * time.Second, ReconnectMin: 100 * time.Millisecond, ReconnectMax: 300 * time.Millisecond,
		AckCommit: 50 * time.Millisecond, WriteTimeout: time.Second}
}

// M1 against a real Mosquitto: during a 10,000-event stream the broker
// becomes unreachable twice (every connection to it cut, new ones
// refused, while it runs on), the second time with the body stopped and
// its ledger closed and opened again before the broker is back. A
// subscriber of the broker has every event once after dedupe by
// event_id, each type in order, and the outbox ends empty.
func TestM1AgainstMosquitto(t *testing.T) {
	m := mosquittotest.Start(t, map[string]string{"body": "body-pass", "sub": "sub-pass"})
	cut := mosquittotest.NewCut(t, m.Addr)
	path := filepath.Join(t.TempDir(), "ledger.db")
	open := func() *ledger.Store {
		s, err := ledger.Open(ledger.Options{Path: path, AgentID: agentID, BodyID: bodyID})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	opts := mosquittoOptions(cut.URL())
	sub := m.Subscribe("sub", "sub-pass", "tobe/#")
	r, stop := run(t, s, opts)
	base := r.opts.base() + "/events/"
	st := stream(t, s, 10000)

	st.until(2000)
	eventually(t, 20*time.Second, "rows go", func() bool { return r.Status().Acked > 500 })
	cut.Cut()
	time.Sleep(100 * time.Millisecond)
	cut.Mend()
	eventually(t, 20*time.Second, "the body is back", func() bool { return r.Status().Sessions >= 2 && r.Status().Connected })

	st.until(6000)
	cut.Cut()
	stop()
	st.mu.Lock()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open()
	st.s = s
	st.mu.Unlock()
	t.Cleanup(func() { s.Close() })
	run(t, s, opts)
	time.Sleep(100 * time.Millisecond)
	cut.Mend()

	<-st.done
	eventually(t, 60*time.Second, "the outbox empties", func() bool { return outboxRows(t, st.store()) == 0 })
	dups := checkStream(t, sub.Messages(base), 10004)
	t.Logf("10,004 events through two cuts and a body restart: each once after dedupe, %d sent twice; the outbox is empty", dups)
}

// M1's broker restarted against a real Mosquitto set up as a home
// server's (persistence on, a consumer with a persistent session): the
// broker stopped (SIGTERM, as systemctl restart does) and started again
// during a 10,000-event stream while the body goes on writing. The
// subscriber, which deduplicates by event_id, has every event once, each
// type in order, and the outbox ends empty. (A broker killed with
// SIGKILL loses what it had acknowledged and not yet passed on or saved:
// TestBrokerKilledDuringAStream.)
func TestM1BrokerRestartedDuringAStream(t *testing.T) {
	m := mosquittotest.StartPersistent(t, map[string]string{"body": "body-pass", "sub": "sub-pass"})
	s := openStore(t)
	sub := m.SubscribeSession("sub", "sub-pass", "tobe/#")
	r, _ := run(t, s, mosquittoOptions(m.URL()))
	base := r.opts.base() + "/events/"
	st := stream(t, s, 10000)
	for i, at := range []int{2000, 6000} {
		st.until(at)
		eventually(t, 20*time.Second, "rows go", func() bool { return r.Status().Acked > uint64(at/4) })
		m.Stop()
		time.Sleep(300 * time.Millisecond) // the body writes on, and tries to connect
		m.Restart()
		sub.Connect()
		eventually(t, 20*time.Second, "the body is back", func() bool { return r.Status().Sessions >= uint64(i+2) && r.Status().Connected })
	}
	<-st.done
	eventually(t, 60*time.Second, "the outbox empties", func() bool { return outboxRows(t, s) == 0 })
	// The broker passes on what it acknowledged a moment later.
	distinct := func() int {
		ids := map[string]bool{}
		for _, m := range sub.Messages(base) {
			var e ledger.Event
			if ledger.Decode(m.Payload, &e) == nil {
				ids[e.ID.String()] = true
			}
		}
		return len(ids)
	}
	for deadline := time.Now().Add(10 * time.Second); distinct() < 10004 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	dups := checkStream(t, sub.Messages(base), 10004)
	if st := r.Status(); st.Sessions < 3 {
		t.Errorf("%d sessions, want 3: the broker went twice", st.Sessions)
	}
	t.Logf("10,004 events through two restarts of the broker: each once after dedupe, %d sent twice; the outbox is empty", dups)
}

// The broker killed (SIGKILL) during a stream and started again: the
// body connects again by itself and the outbox empties. What the broker
// had acknowledged and not yet passed on when it died died with it (a
// broker without persistence); everything written after it came back
// reaches the subscriber, each type in order.
func TestBrokerKilledDuringAStream(t *testing.T) {
	users := map[string]string{"body": "body-pass", "sub": "sub-pass"}
	m := mosquittotest.Start(t, users)
	s := openStore(t)
	opts := mosquittoOptions(m.URL())
	sub := m.Subscribe("sub", "sub-pass", "tobe/#")
	r, _ := run(t, s, opts)
	base := r.opts.base() + "/events/"
	st := stream(t, s, 5000)
	st.until(2000)
	eventually(t, 20*time.Second, "rows go", func() bool { return r.Status().Acked > 500 })
	m.Kill()
	st.mu.Lock() // no event is written while the broker is down and the subscriber away
	before := lastSeq(t, s)
	// Back with only the subscriber let in, then the body.
	m.SetUsers(map[string]string{"sub": "sub-pass"})
	m.Restart()
	sub.Connect()
	m.SetUsers(users)
	st.mu.Unlock()
	<-st.done
	eventually(t, 30*time.Second, "the outbox empties", func() bool { return outboxRows(t, s) == 0 })
	if st := r.Status(); st.Sessions < 2 {
		t.Errorf("%d sessions, want 2", st.Sessions)
	}
	// The broker passes on what it acknowledged a moment later: count
	// what the subscriber has until nothing written after the restart is
	// missing, or 10 s.
	var evs []ledger.Stored
	for after := uint64(0); ; {
		page, err := s.Events(ledger.Filter{After: after, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		evs = append(evs, page...)
		after = page[len(page)-1].Seq
	}
	var lostBefore, lostAfter int
	count := func() bool {
		got := map[ledger.UUID]bool{}
		for _, m := range sub.Messages(base) {
			var e ledger.Event
			if err := ledger.Decode(m.Payload, &e); err != nil {
				t.Fatal(err)
			}
			got[e.ID] = true
		}
		lostBefore, lostAfter = 0, 0
		for _, e := range evs {
			if !got[e.ID] {
				if e.Seq <= before {
					lostBefore++
				} else {
					lostAfter++
				}
			}
		}
		return lostAfter == 0
	}
	for deadline := time.Now().Add(10 * time.Second); !count() && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if lostAfter > 0 {
		t.Errorf("%d events written after the broker came back never reached it", lostAfter)
	}
	t.Logf("%d events; of those written before the kill, %d died with the broker; none written after it was lost", len(evs), lostBefore)
}

func lastSeq(t *testing.T, s *ledger.Store) uint64 {
	t.Helper()
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return st.LastSeq
}

// TLS against a real Mosquitto that asks for a client certificate: with
// the CA, the body's certificate and key from files (LoadTLS), the relay
// connects, authenticates with its password too, and delivers; without
// its certificate, or trusting another CA, it does not connect.
func TestTLSAgainstMosquitto(t *testing.T) {
	certs := mosquittotest.MakeCerts(t)
	m := mosquittotest.StartTLS(t, map[string]string{"body": "body-pass"},
		mosquittotest.TLS{CAFile: certs.CA, CertFile: certs.ServerCert, KeyFile: certs.ServerKey, RequireCert: true})
	opts := func(tlsCfg func() (*tls.Config, error)) Options {
		c, err := tlsCfg()
		if err != nil {
			t.Fatal(err)
		}
		return Options{Broker: m.URL(), Username: "body", Password: "body-pass", TLS: c, AgentID: agentID.String(), BodyID: bodyID.String(),
			ReconnectMin: 100 * time.Millisecond, ReconnectMax: 200 * time.Millisecond, AckCommit: 20 * time.Millisecond}
	}
	// Without a client certificate: refused.
	s := openStore(t)
	appendN(t, s, 0, 10, motion)
	r, stop := run(t, s, opts(func() (*tls.Config, error) { return LoadTLS(certs.CA, "", "", "") }))
	eventually(t, 10*time.Second, "a refused connection", func() bool { return r.Status().LastError != "" })
	if st := r.Status(); st.Connected || st.Sessions != 0 {
		t.Errorf("without a client certificate: %+v", st)
	}
	stop()
	// Trusting another CA: refused (the broker's certificate is not signed by it).
	other := mosquittotest.MakeCerts(t)
	r, stop = run(t, s, opts(func() (*tls.Config, error) { return LoadTLS(other.CA, certs.ClientCert, certs.ClientKey, "") }))
	eventually(t, 10*time.Second, "a refused connection", func() bool { return strings.Contains(r.Status().LastError, "certificate") })
	stop()
	// With everything: delivered.
	r, _ = run(t, s, opts(func() (*tls.Config, error) { return LoadTLS(certs.CA, certs.ClientCert, certs.ClientKey, "") }))
	// The acker counts a removal after its commit: wait for both.
	eventually(t, 10*time.Second, "the outbox empties over TLS", func() bool { return outboxRows(t, s) == 0 && r.Status().Acked == 10 })
	if st := r.Status(); !st.Connected || st.Acked != 10 {
		t.Errorf("over TLS: %+v", st)
	}
	// Bad files are errors that name them.
	for _, tc := range []struct{ ca, cert, key, want string }{
		{"/nonexistent/ca.pem", "", "", "mqtt.tls.ca_file"},
		{certs.ClientKey, "", "", "no PEM certificate"},
		{"", certs.ClientCert, certs.ServerKey, "mqtt.tls"},
		{"", "/dev/null", certs.ClientKey, "not a regular file"},
	} {
		if _, err := LoadTLS(tc.ca, tc.cert, tc.key, ""); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("LoadTLS(%s, %s, %s): %v, want %q", tc.ca, tc.cert, tc.key, err, tc.want)
		}
	}
}

func TestInClear(t *testing.T) {
	for _, tc := range []struct {
		url   string
		clear bool
	}{
		{"tcp://127.0.0.1:1883", false}, {"tcp://localhost:1883", false}, {"tcp://[::1]:1883", false},
		{"ssl://hub.lan:8883", false}, {"wss://hub.lan:443", false},
		{"tcp://hub.lan:1883", true}, {"ws://192.168.1.5:9001", true}, {"tcp://10.0.0.2:1883", true},
	} {
		if got := InClear(tc.url) != ""; got != tc.clear {
			t.Errorf("InClear(%s) = %q", tc.url, InClear(tc.url))
		}
	}
}
