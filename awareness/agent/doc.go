// Package agent is the body's boundary with its agent: an MCP server
// (the official Go SDK) on the agent socket, DIR/agent.sock, which
// `tobe-body stdio` bridges to for an SSH forced command.
//
// Each connection's principal comes from the kernel's peer credentials
// through the config's agent.principals (Rules); a peer no rule names is
// refused at accept and recorded, and a connection may begin with one
// preface line that narrows it to one named principal the peer may use,
// never widening it. Connections are admitted as the admin socket's are
// (package edge, with the caps of Server): places kept for high trust,
// per-uid caps, and a brief session, whose one tool is estop_trip, for a
// principal without a place. Each connection is a session of the runner's
// Sessions: every message is a heartbeat, and the body pings a session
// silent for half the window (keepAlive). One that answers stays, idle as
// long as it likes; one that does not answer is lost; one silent for the
// whole window with an action running has it stopped; a closed one ends
// at once, and the actions it started stop. A peer that ends its side
// only (stdin closed behind `tobe-body stdio`) is answered what it asked
// before, within the window and a second: what still runs then is
// stopped by the deadman and answered cancelled. A peer that cancels a
// tools/call of its own (notifications/cancelled) cancels the action it
// runs (act.CallerCancel, recorded caller_cancelled); its session goes
// on.
//
// The tools are operations of the awareness table, called with the
// connection's principal through the same policy as every other caller:
// every operation whose least admits that principal, under the name and
// with the annotations its Tool declares (awareness.Table.Tools), and
// for action.do one tool per action capability (gpio_set, audio_tone,
// ...) whose schema names the targets of this body; drain is the
// session's own. No tool resets the e-stop, grants or approves: those
// operations admit no agent.
//
// The body's state is offered as MCP resources too (resources.go): the
// table's operations that declare a Resource, read as their tools are,
// and the session's observations; a session hears that one changed
// (notifications/resources/updated, through resources/subscribe or, at
// 2026-07-28, subscriptions/listen) when the ledger commits an event that
// changes it or a channel changes, and reads what the gate told after a
// ledger sequence from its records (ObservationsAfter), so that an agent
// that was away misses nothing. Every protocol version the SDK speaks is
// negotiated; a session at 2026-07-28 (Stateless), which has no ping, is
// pinged only while it runs something, and otherwise ends with its link.
//
// The framing is the package's own Transport: newline-delimited JSON-RPC
// 2.0 over one byte stream (edge's line codec) for the SDK, which answers bad input itself
// with the JSON-RPC error it deserves and goes on at the next line, and
// pushes the body's own notifications (notifications/tobe/observation);
// ObservingTransport lets a client see those notifications.
package agent
