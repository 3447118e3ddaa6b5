// Package act is the only path from the body to the world.
//
// The Runner takes every invocation through the policy (Decide: default
// deny, the strictest of the e-stop, safety rules, the capability's risk
// class, the principal's grants, the channel's mode, the body's health,
// the ledger, and the lowest trust of the session and the observation
// that caused the request, which refuses R2 and above when it is an
// inferred state with no observed evidence), a lease with a fencing check on shared
// resources (LeaseTable), a record that is durable before the side effect,
// the action under a context that the e-stop, a timeout, the owning
// session's end and its caller's own cancellation of the request
// (CallerCancel) cancel (a request of a Timed action that could not finish
// within its timeout is refused before it runs), and an independent
// verification. Every step is a
// ledger event (action.proposed, action.running, action.succeeded, ...); a
// repeated idempotency key returns the recorded result and acts once.
// Before any of that, a request is checked against the bounds of a
// request (CheckInvocation: sizes, UTF-8, no control characters) and
// takes a token of its principal's admission limit (Environment.Admission,
// refused requests included): what fails either is refused at once and
// not recorded one by one, only counted in one action.refusals summary
// per principal a minute (refusals.go), so no caller can grow the ledger
// faster than its admission limit lets it.
// An R3 invocation that lacks nothing but its approval waits
// (action.waiting_approval) until a local administrator approves it
// (Approve: action.approved, bound to that one invocation, then run with
// the policy asked again) or denies it (Deny), or it expires; see
// approval.go. Grants are ledger events too (grant.added, grant.expired,
// grant.revoked; Grants), and are judged by the body's Clock: an expiry
// is kept on the wall clock and on the monotonic clock of the boot it was
// given in, and the earlier ends it, so a step of the wall clock can end
// a grant early, never late. While the wall clock is not synchronised
// the policy refuses what act.safety.unsynced_clock_refuse_from names
// (R3 by default).
//
// What must survive a restart is restored from ledger projections kept in
// the transaction of their events (Projections; every opener of the
// body's ledger registers them), never from the history: the e-stop's
// latch (LatchedAtStop), the people's holds (HeldAtStop), what was left
// running (Runner.Recover), the answer to a repeated idempotency key, and
// the grants (LoadGrants).
//
// A Takeover gives a person the resources of a control the config marks
// as theirs: a press moves them to HUMAN in the LeaseTable and cancels the
// agent actions running on them.
//
// The EStop watches a normally-closed e-stop line and latches; see its
// comment for the trip path and the reset rules. The action channels so
// far drive GPIO outputs (gpio.set, gpio.pulse), play sound on a speaker
// (audio.tone, audio.play: a tone, or a WAV clip from an allowed
// directory), verified by what the microphone hears against the room just
// before, and tell the home server and the agent something (body.notify).
package act
