package uplink

import (
	"path/filepath"
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

// M1 against a real Mosquitto: a 10,000-event stream during which the
// broker is killed (SIGKILL) and started again, twice, the second time
// with the body stopped while the broker is down and started again
// (its ledger closed and opened) before the broker is back. A subscriber
// connected before the body is let in (the broker reloads its users)
// has every event once, deduplicated by event_id, each type in order,
// and the outbox ends empty.
func TestM1AgainstMosquitto(t *testing.T) {
	users := map[string]string{"body": "body-pass", "sub": "sub-pass"}
	m := mosquittotest.Start(t, users)
	path := filepath.Join(t.TempDir(), "ledger.db")
	open := func() *ledger.Store {
		s, err := ledger.Open(ledger.Options{Path: path, AgentID: agentID, BodyID: bodyID})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	opts := Options{Broker: m.URL(), Username: "body", Password: "body-pass", AgentID: agentID.String(), BodyID: bodyID.String(),
		Keepalive: 5 * time.Second, ReconnectMin: 100 * time.Millisecond, ReconnectMax: 300 * time.Millisecond,
		AckCommit: 50 * time.Millisecond, WriteTimeout: time.Second}
	sub := m.Subscribe("sub", "sub-pass", "tobe/#")
	r, stop := run(t, s, opts)
	base := r.opts.base() + "/events/"

	// The stream: 10,000 events in batches of 50 with a trip every 2,500,
	// written by one writer, so each type's order is the order written.
	var mu sync.Mutex // the store the writer appends to changes at the restart
	store := func() *ledger.Store { mu.Lock(); defer mu.Unlock(); return s }
	wrote := make(chan int, 1000)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		n := 0
		for i := 0; i < 10000; i += 50 {
			appendN(t, store(), i, 50, motion)
			n += 50
			if i%2500 == 0 {
				appendN(t, store(), i, 1, trip)
				n++
			}
			wrote <- n
			time.Sleep(2 * time.Millisecond)
		}
		close(wrote)
	}()
	waitWritten := func(atLeast int) {
		for n := range wrote {
			if n >= atLeast {
				return
			}
		}
	}

	// Kill the broker while the stream runs; bring it back with only the
	// subscriber let in, then the body.
	waitWritten(2000)
	eventually(t, 20*time.Second, "rows go", func() bool { return r.Status().Acked > 500 })
	m.Kill()
	m.SetUsers(map[string]string{"sub": "sub-pass"})
	m.Restart()
	sub.Connect()
	m.SetUsers(users)
	eventually(t, 20*time.Second, "the body is back", func() bool { return r.Status().Sessions >= 2 && r.Status().Connected })

	// Kill it again, and restart the body while it is down.
	waitWritten(6000)
	m.Kill()
	stop()
	mu.Lock()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open()
	mu.Unlock()
	t.Cleanup(func() { s.Close() })
	r, _ = run(t, store(), opts)
	m.SetUsers(map[string]string{"sub": "sub-pass"})
	m.Restart()
	sub.Connect()
	m.SetUsers(users)

	wg.Wait()
	eventually(t, 60*time.Second, "the outbox empties", func() bool { return outboxRows(t, store()) == 0 })
	dups := checkStream(t, sub.Messages(base), 10004)
	t.Logf("10,004 events through two broker kills and a body restart: each once after dedupe, %d sent twice; the outbox is empty", dups)
}
