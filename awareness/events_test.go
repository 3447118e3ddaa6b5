package awareness

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/ledger"
)

// fillLarge appends n events with payloads of about size bytes.
func fillLarge(t *testing.T, store *ledger.Store, n, size int) {
	t.Helper()
	for i := 0; i < n; i += 50 {
		var evs []ledger.Event
		for j := i; j < min(i+50, n); j++ {
			p, err := ledger.MarshalPayload(map[string]any{"n": j, "pad": strings.Repeat("x", size)})
			if err != nil {
				t.Fatal(err)
			}
			evs = append(evs, ledger.Event{Type: "camera.motion_started", ChannelID: "camera.front", Provenance: ledger.Observed, Payload: p})
		}
		if _, err := store.Append(t.Context(), evs...); err != nil {
			t.Fatal(err)
		}
	}
}

// Finding 2, the review's attack on replies: events with limit 10000 over
// a ledger of sizeable events was 18.6 MB a reply, and sixteen at once
// took the daemon to 1.48 GB. Now a reply stops at its byte budget and
// says so, and following its cursor reads every event exactly once.
func TestEventsReplyBoundedByBytes(t *testing.T) {
	b := newTestBody(t)
	const n, size = 600, 8 << 10
	fillLarge(t, b.store, n, size)
	seen := map[uint64]int{}
	after := uint64(0)
	for calls := 0; ; calls++ {
		if calls > n {
			t.Fatalf("%d calls: the cursor does not move", calls)
		}
		got, err := b.call(t, maxAdmin, "events", fmt.Sprintf(`{"after":%d,"limit":10000,"types":["camera."]}`, after))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) > MaxReplyBytes+64 {
			t.Errorf("after %d: got a reply of %d bytes, want at most %d and its envelope", after, len(got), MaxReplyBytes)
		}
		var reply Events
		if err := json.Unmarshal([]byte(got), &reply); err != nil {
			t.Fatal(err)
		}
		for _, e := range reply.Events {
			seen[e.Seq]++
		}
		if calls == 0 && (!reply.More || len(reply.Events) >= n) {
			t.Errorf("the first reply: got %d events and more %v, want fewer than %d and more", len(reply.Events), reply.More, n)
		}
		if len(reply.Events) > 0 && reply.LastSeq != reply.Events[len(reply.Events)-1].Seq {
			t.Errorf("got last_seq %d after event %d, want the last event's", reply.LastSeq, reply.Events[len(reply.Events)-1].Seq)
		}
		if !reply.More {
			break
		}
		after = reply.LastSeq
	}
	if len(seen) != n {
		t.Errorf("got %d distinct events, want %d", len(seen), n)
	}
	for seq, k := range seen {
		if k != 1 {
			t.Errorf("event %d read %d times, want once", seq, k)
		}
	}
}

// One event larger than the budget alone is still read, alone.
func TestEventsReplyKeepsOneLargeEvent(t *testing.T) {
	b := newTestBody(t)
	fillLarge(t, b.store, 5, 60<<10)
	in := EventsIn{Types: []string{"camera."}}
	for i := range 5 {
		out, err := b.parts.events(t.Context(), maxAdmin, in)
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Events) < 1 || out.More != (out.LastSeq < 5) {
			t.Fatalf("read %d: got %d events to %d, more %v", i, len(out.Events), out.LastSeq, out.More)
		}
		if !out.More {
			return
		}
		in.After = out.LastSeq
	}
	t.Error("five reads did not reach the end")
}

func TestEventsParamsBounded(t *testing.T) {
	b := newTestBody(t)
	many := make([]string, MaxTypes+1)
	for i := range many {
		many[i] = fmt.Sprintf("t%d.", i)
	}
	for _, tc := range []struct {
		name string
		in   EventsIn
		want string
	}{
		{"a limit over the bound", EventsIn{Limit: MaxEvents + 1}, "limit 10001: want 0 to 10000"},
		{"too many types", EventsIn{Types: many}, "types: 33 of them, more than 32"},
		{"a type too long", EventsIn{Types: []string{strings.Repeat("a", 200)}}, "types[0]: 200 bytes, want 1 to 96"},
		{"an empty type", EventsIn{Types: []string{""}}, "types[0]: 0 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := b.parts.events(t.Context(), maxAdmin, tc.in)
			if ReasonOf(err) != ReasonInvalidParams || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want invalid_params %q", err, tc.want)
			}
		})
	}
}

// Sixteen of the largest reads at once read the ledger MaxReads at a time
// and each gets its budget's worth.
func TestEventsConcurrentReads(t *testing.T) {
	b := newTestBody(t)
	fillLarge(t, b.store, 300, 8<<10)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			out, err := b.parts.events(t.Context(), maxAdmin, EventsIn{Limit: MaxEvents})
			switch {
			case err != nil:
				errs <- err
			case !out.More || len(out.Events) == 0:
				errs <- fmt.Errorf("got %d events and more %v, want a budget's worth and more", len(out.Events), out.More)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := len(b.parts.reads); n != 0 {
		t.Errorf("got %d turns still taken, want 0", n)
	}
}

// The largest request the bounds admit is far below the admin socket's
// 64 KiB line.
func TestLargestDoRequestFitsALine(t *testing.T) {
	params := map[string]string{}
	for i := range act.MaxParams {
		params[fmt.Sprintf("%0*d", act.MaxParamKeyBytes, i)] = ""
	}
	// The params' bytes in all go to the values, every byte one JSON
	// escapes (\u003c).
	per := (act.MaxParamsBytes - act.MaxParams*act.MaxParamKeyBytes) / act.MaxParams
	for k := range params {
		params[k] = strings.Repeat("<", per)
	}
	in := DoIn{Capability: strings.Repeat("a", act.MaxNameBytes), Target: strings.Repeat("t", act.MaxNameBytes), Params: params,
		IdempotencyKey: strings.Repeat("k", act.MaxNameBytes), Mode: act.Live, TimeoutMS: 1 << 30, Note: strings.Repeat("<", act.MaxNoteBytes),
		CausedBy: ledger.NewID().String()}
	if err := act.CheckInvocation(&act.Invocation{Capability: in.Capability, Target: in.Target, Params: in.Params, IdempotencyKey: in.IdempotencyKey, Note: in.Note}); err != nil {
		t.Fatalf("the largest request is out of bounds: %v", err)
	}
	line, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": OpDo.Name, "params": in})
	if err != nil {
		t.Fatal(err)
	}
	if len(line) > 16<<10 {
		t.Errorf("got a line of %d bytes, want well under 64 KiB (16 KiB)", len(line))
	}
}

// A filter that matches nothing looks at a bounded part of the ledger per
// call, and its cursor still reaches the end.
func TestEventsScanBounded(t *testing.T) {
	b := newTestBody(t)
	const n = 1200 // about 10 MB: a few calls' worth of looking
	fillLarge(t, b.store, n, 8<<10)
	in := EventsIn{Types: []string{"audio."}}
	for calls := 1; ; calls++ {
		if calls > 20 {
			t.Fatal("20 calls did not reach the end")
		}
		out, err := b.parts.events(t.Context(), maxAdmin, in)
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Events) != 0 {
			t.Fatalf("got %d events, want none", len(out.Events))
		}
		if !out.More {
			if out.LastSeq != n || calls < 2 {
				t.Errorf("got to %d in %d calls, want %d in more than one", out.LastSeq, calls, n)
			}
			return
		}
		if looked := (out.LastSeq - in.After) * (8 << 10); looked > MaxScanBytes+(16<<10) {
			t.Errorf("looked at about %d bytes in one call, want at most %d and one event", looked, MaxScanBytes)
		}
		in.After = out.LastSeq
	}
}
