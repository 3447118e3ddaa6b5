package ledger

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkRetainAndDedupe measures, on a young ledger (10,000 events
// appended over an hour) and on an aged one (1,000,000 events appended
// over a year, half of them action records, a third of those proposals
// with a dedupe key, the other half telemetry with keys of their own;
// retention run as the year ends), a retention pass (with 64 telemetry
// events and a minute of time between passes, outside the timing), an
// append of 64 events with new dedupe keys (one durable request), and an
// append of 64 repeats of stored keys. The aged ledger is built once, into
// a temporary file; building it takes most of the benchmark's time.
func BenchmarkRetainAndDedupe(b *testing.B) {
	base := time.Now()
	var off atomic.Int64
	now := func() time.Time { return base.Add(time.Duration(off.Load())) }
	payload, _ := MarshalPayload(map[string]string{"status": "proposed", "capability": "gpio.set"})
	var key atomic.Int64
	action := func(keyed bool) Event {
		e := Event{Type: "action.proposed", ChannelID: "gpio.set", Provenance: Told, Payload: payload}
		if keyed {
			e.DedupeKey = fmt.Sprintf("action:agent:pi:k-%d", key.Add(1))
		}
		return e
	}
	sensed := func() Event {
		e := motion(int(key.Add(1)))
		e.DedupeKey = fmt.Sprintf("camera.front:%d", key.Load())
		return e
	}
	build := func(b *testing.B, n int, over time.Duration) *Store {
		s, err := Open(Options{Path: filepath.Join(b.TempDir(), "l.db"), AgentID: testAgent, BodyID: testBody, Now: now})
		if err != nil {
			b.Fatal(err)
		}
		const batch = 5000
		steps := n / batch
		for range steps {
			evs := make([]Event, 0, batch)
			for i := range batch / 2 {
				evs = append(evs, action(i%3 == 0), sensed())
			}
			if _, err := s.Append(context.Background(), evs...); err != nil {
				b.Fatal(err)
			}
			off.Add(int64(over / time.Duration(steps)))
		}
		if _, err := s.Retain(context.Background()); err != nil {
			b.Fatal(err)
		}
		return s
	}
	for _, age := range []struct {
		name string
		n    int
		over time.Duration
	}{{"young", 10_000, time.Hour}, {"aged", 1_000_000, 365 * 24 * time.Hour}} {
		start := time.Now()
		s := build(b, age.n, age.over)
		st, _ := s.Stats()
		b.Logf("%s: built in %v: %d events, %d dedupe keys, %d MiB", age.name, time.Since(start).Round(time.Millisecond), st.Events, st.InboxKeys, st.FileBytes>>20)
		var stored []string
		if evs, err := s.Events(Filter{Types: []string{"action."}, Limit: 20000}); err == nil {
			for _, e := range evs {
				if e.DedupeKey != "" && len(stored) < 64 {
					stored = append(stored, e.DedupeKey)
				}
			}
		}
		b.Run(age.name+"/retain", func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				evs := make([]Event, 64)
				for i := range evs {
					evs[i] = sensed()
				}
				s.Append(context.Background(), evs...)
				off.Add(int64(time.Minute))
				b.StartTimer()
				if _, err := s.Retain(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(age.name+"/append-new-keys", func(b *testing.B) {
			for range b.N {
				evs := make([]Event, 64)
				for i := range evs {
					evs[i] = action(true)
				}
				if _, err := s.Append(context.Background(), evs...); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(age.name+"/append-repeats", func(b *testing.B) {
			for range b.N {
				evs := make([]Event, len(stored))
				for i, k := range stored {
					evs[i] = action(false)
					evs[i].DedupeKey = k
				}
				res, err := s.Append(context.Background(), evs...)
				if err != nil {
					b.Fatal(err)
				}
				if len(res) > 0 && !res[0].Duplicate {
					b.Fatalf("a repeat of %q was stored", stored[0])
				}
			}
		})
		s.Close()
	}
}
