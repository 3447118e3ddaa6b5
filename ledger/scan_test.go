package ledger

import (
	"strings"
	"testing"
)

// big is a motion event with a payload of about n bytes.
func big(t *testing.T, i, n int) Event {
	t.Helper()
	e := motion(i)
	p, err := MarshalPayload(map[string]string{"pad": strings.Repeat("x", n)})
	if err != nil {
		t.Fatal(err)
	}
	e.Payload = p
	return e
}

// A read bounded by bytes holds no more than its budget and one event,
// says there is more, and the cursor it gives reads every event exactly
// once.
func TestScanByteBudget(t *testing.T) {
	s := openTest(t, tempPath(t))
	const n = 40
	for i := range n {
		// One small event between large ones, and one larger than the
		// budget alone.
		size := 10 << 10
		switch {
		case i%7 == 3:
			size = 10
		case i == 20:
			size = 40 << 10
		}
		if _, err := s.Append(t.Context(), big(t, i, size)); err != nil {
			t.Fatal(err)
		}
	}
	const budget = 25 << 10
	seen := map[uint64]int{}
	after := uint64(0)
	for calls := 0; ; calls++ {
		if calls > n {
			t.Fatalf("%d calls for %d events: the cursor does not move", calls, n)
		}
		evs, next, more, err := s.Scan(Filter{After: after, Limit: 10000, MaxBytes: budget})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 && more {
			t.Fatalf("after %d: no event and more", after)
		}
		held := 0
		for i, e := range evs {
			seen[e.Seq]++
			if i < len(evs)-1 {
				held += len(e.Payload)
			}
		}
		// Every event but the last was taken below the budget.
		if held >= budget {
			t.Errorf("after %d: %d events holding %d bytes before the last, want under %d", after, len(evs), held, budget)
		}
		if !more {
			if next != n {
				t.Errorf("the end: next %d, want %d", next, n)
			}
			break
		}
		after = next
	}
	for seq := uint64(1); seq <= n; seq++ {
		if seen[seq] != 1 {
			t.Errorf("event %d read %d times, want 1", seq, seen[seq])
		}
	}
	if len(seen) != n {
		t.Errorf("read %d distinct events, want %d", len(seen), n)
	}
}

// more is false when a read ends at the last event, true when it stops at
// its limit with events left, whatever the outbox rows after them.
func TestScanMore(t *testing.T) {
	s := openTest(t, tempPath(t))
	if _, err := s.Append(t.Context(), motion(1), motion(2), motion(3)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		f        Filter
		wantN    int
		wantNext uint64
		wantMore bool
	}{
		{"all", Filter{}, 3, 3, false},
		{"limit short of the end", Filter{Limit: 2}, 2, 2, true},
		{"limit at the end", Filter{Limit: 3}, 3, 3, false},
		{"a budget of one event", Filter{MaxBytes: 1}, 1, 1, true},
		{"nothing matches", Filter{Types: []string{"audio."}}, 0, 3, false},
		{"nothing matches within what it may look at", Filter{Types: []string{"audio."}, MaxScan: 1}, 0, 1, true},
		{"what it may look at ends at the end", Filter{MaxScan: 1, After: 2}, 1, 3, false},
		{"after the end", Filter{After: 3}, 0, 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs, next, more, err := s.Scan(tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != tc.wantN || next != tc.wantNext || more != tc.wantMore {
				t.Errorf("got %d events, next %d, more %v; want %d, %d, %v", len(evs), next, more, tc.wantN, tc.wantNext, tc.wantMore)
			}
		})
	}
}
