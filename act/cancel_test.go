package act

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/hal"
)

// A caller that cancels its own request (its context ends with
// CallerCancel) cancels the action it asked for: the LED goes to its
// safe level (off, high) and the record says caller_cancelled and who. A caller's
// context that ends any other way leaves the action running, as the end
// of a connection always did (its session's end stops it, not this).
func TestCallerCancelStopsItsAction(t *testing.T) {
	long := strings.Repeat("é", 150) // 300 bytes
	for _, tc := range []struct {
		name      string
		cause     error
		before    bool // the request is cancelled before it is submitted
		status    Status
		reason    Reason
		by        *Cancellation
		records   string
		detailHas string
	}{
		{name: "the caller cancels", cause: &CallerCancel{Reason: "context canceled"}, status: Cancelled, reason: ReasonCallerCancelled,
			by:      &Cancellation{Subject: "agent:pi", Session: "s1", Reason: "context canceled"},
			records: "action.proposed action.running action.cancelled", detailHas: "cancelled: caller_cancelled by agent:pi (session s1): context canceled"},
		{name: "a reason cleaned and cut", cause: &CallerCancel{Reason: "user\x00pressed\n\n stop " + long}, status: Cancelled, reason: ReasonCallerCancelled,
			by:      &Cancellation{Subject: "agent:pi", Session: "s1", Reason: CleanText("user pressed stop "+long, MaxCancelReason, false)},
			records: "action.proposed action.running action.cancelled", detailHas: "user pressed stop éé"},
		{name: "no reason given", cause: &CallerCancel{}, status: Cancelled, reason: ReasonCallerCancelled,
			by:      &Cancellation{Subject: "agent:pi", Session: "s1"},
			records: "action.proposed action.running action.cancelled", detailHas: "by agent:pi (session s1)"},
		{name: "cancelled before it ran", cause: &CallerCancel{Reason: "gone"}, before: true, status: Cancelled, reason: ReasonCallerCancelled,
			by:      &Cancellation{Subject: "agent:pi", Session: "s1", Reason: "gone"},
			records: "action.proposed action.cancelled", detailHas: "before the action started"},
		{name: "the connection ends, not the caller", cause: errors.New("EOF"), status: Succeeded,
			records: "action.proposed action.running action.succeeded"},
		{name: "a plain cancel", cause: nil, status: Succeeded,
			records: "action.proposed action.running action.succeeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBench(t)
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			pulse := "20000"
			if tc.status == Succeeded {
				pulse = "300" // it runs to its end after its caller's context ended
			}
			if tc.before {
				cancel(tc.cause)
			}
			done := make(chan Result, 1)
			go func() {
				done <- b.r.Submit(ctx, Invocation{Principal: b.agent, Capability: "gpio.pulse", Target: "gpio.led", Params: map[string]string{"duration_ms": pulse}})
			}()
			if !tc.before {
				for b.led.Level() != hal.Low {
					time.Sleep(time.Millisecond) // the runner's goroutine lighting the LED
				}
				cancel(tc.cause)
			}
			var res Result
			select {
			case res = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the pulse did not end")
			}
			if res.Status != tc.status || res.Reason != tc.reason || b.led.Level() != hal.High {
				t.Errorf("got %s %s, LED %v; want %s %s, LED high (off) (%+v)", res.Status, res.Reason, b.led.Level(), tc.status, tc.reason, res)
			}
			if (res.CancelledBy == nil) != (tc.by == nil) || res.CancelledBy != nil && *res.CancelledBy != *tc.by {
				t.Errorf("cancelled by %+v, want %+v", res.CancelledBy, tc.by)
			}
			if !strings.Contains(res.Detail, tc.detailHas) {
				t.Errorf("detail %q lacks %q", res.Detail, tc.detailHas)
			}
			if got := strings.Join(b.types(t, res.ActionID), " "); got != tc.records {
				t.Errorf("recorded %s, want %s", got, tc.records)
			}
			// The record says who, as the result does.
			rec, err := b.r.Lookup(res.ActionID)
			if err != nil {
				t.Fatal(err)
			}
			if (rec.CancelledBy == nil) != (tc.by == nil) || rec.CancelledBy != nil && *rec.CancelledBy != *tc.by {
				t.Errorf("the record's cancelled_by %+v, want %+v", rec.CancelledBy, tc.by)
			}
		})
	}
}

func TestCleanReason(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"context canceled", "context canceled"},
		{"  a\tb\r\nc\x00\x1b[31m ", "a b c [31m"},
		{"bad \xff utf-8", "bad utf-8"},
		{strings.Repeat("x", 201), strings.Repeat("x", 197) + "…"},
		{strings.Repeat("é", 101), strings.Repeat("é", 98) + "…"},
	} {
		if got := CleanText(tc.in, MaxCancelReason, false); got != tc.want || len(got) > MaxCancelReason {
			t.Errorf("CleanText(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
