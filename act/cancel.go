package act

import (
	"context"
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ReasonCallerCancelled cancels a running action whose caller cancelled
// the request that asked for it (MCP's notifications/cancelled for the
// tools/call): Result.CancelledBy says who, and why when the caller said.
const ReasonCallerCancelled Reason = "caller_cancelled"

// MaxCancelReason bounds the reason a caller gives for cancelling, in
// bytes, as it is recorded.
const MaxCancelReason = 200

// CallerCancel is the cause a transport cancels a request's context with
// (context.WithCancelCause) when the caller cancelled that request
// itself. The runner then cancels the action the request runs, with
// caller_cancelled, and records the request's principal as who
// cancelled it. A request's context that ends with any other cause (its
// connection closing, the daemon stopping) leaves the action to what
// stops those (the session's end, the e-stop, the action's own timeout),
// as before: the caller did not ask for it to stop.
type CallerCancel struct {
	// Reason is what the caller said, as it said it; the runner cleans
	// and bounds what it records (MaxCancelReason).
	Reason string
}

func (c *CallerCancel) Error() string {
	if c.Reason == "" {
		return "the caller cancelled the request"
	}
	return "the caller cancelled the request: " + c.Reason
}

// Cancellation is who cancelled an action, in its record: the principal of
// the request that asked for it, and the reason the caller gave
// (cleaned: valid UTF-8 without control characters, at most
// MaxCancelReason bytes; empty when it gave none).
type Cancellation struct {
	Subject string `cbor:"subject" json:"subject"`
	Session string `cbor:"session,omitempty" json:"session,omitempty"`
	Reason  string `cbor:"reason,omitempty" json:"reason,omitempty"`
}

// callerCancelled is who cancelled inv when its caller's ctx ended with a
// CallerCancel, or nil when it has not ended or ended otherwise.
func callerCancelled(ctx context.Context, inv *Invocation) *Cancellation {
	var cc *CallerCancel
	if !errors.As(context.Cause(ctx), &cc) {
		return nil
	}
	return &Cancellation{Subject: inv.Principal.Subject, Session: inv.Principal.Session, Reason: CleanText(cc.Reason, MaxCancelReason, false)}
}

// CleanText is s as valid UTF-8 without control characters (but tabs and
// newlines when multiline; runs of space as one space on one line),
// trimmed, and cut to max bytes at a character with "…": what a caller
// says for the record (a stop's reason, a cancellation's), read leniently.
func CleanText(s string, max int, multiline bool) string {
	var b strings.Builder
	space := false
	for _, r := range strings.ToValidUTF8(s, " ") {
		if r == utf8.RuneError || unicode.IsControl(r) && !(multiline && (r == '\n' || r == '\t')) {
			r = ' '
		}
		if !multiline && unicode.IsSpace(r) {
			if space {
				continue
			}
			r, space = ' ', true
		} else {
			space = false
		}
		b.WriteRune(r)
	}
	t := strings.TrimSpace(b.String())
	if len(t) <= max {
		return t
	}
	const more = "…"
	cut := max - len(more)
	for cut > 0 && !utf8.RuneStart(t[cut]) {
		cut--
	}
	return strings.TrimSpace(t[:cut]) + more
}

// why is the session and the reason for a detail: " (session s1):
// context canceled".
func (c *Cancellation) why() string {
	s := ""
	if c.Session != "" {
		s = " (session " + c.Session + ")"
	}
	if c.Reason != "" {
		s += ": " + c.Reason
	}
	return s
}
