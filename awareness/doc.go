// Package awareness is the body's boundary with everyone outside it: the
// operation table, and its transports in subpackages.
//
// The table holds every operation the body offers (status, channels,
// self, events, the e-stop's status, trip and reset, capabilities, acting
// and its results, grants, approvals, the ledger's stats, verify and
// backup), each once: a name, a description, Go input and output types
// whose JSON Schemas are derived from them, a kind (observe, interact,
// admin), the least principal it admits (kinds and trust), and a handler
// that takes the principal as an explicit argument. There is no default
// principal and no context fallback: a call without a principal, or below
// the least, is refused with not_authorized naming what was needed, before
// its handler runs. Every refusal is an *Error with a reason (the
// runner's, or not_authorized, invalid_params, not_found, unavailable,
// failed).
//
// An operation may answer with bytes besides its result: the backup's
// output is Streaming (the result, then the snapshot's bytes), and its
// Entry says Streams, so a transport that cannot send bytes after a
// result leaves it out. A long operation reports its progress through
// the function WithProgress puts in its context; the principal never
// comes from a context.
//
// A refusal is one shape for every transport: an *Error (ErrorOf reads
// any error as one), and an action the runner refused is such an error
// too, with the runner's record of it (Error.Record), so no transport
// looks into what an operation returns. Invoke calls an operation with
// its input already read, with the same principal check. An operation
// an agent is offered says so (Op.Tool): its tool's name and hints; which
// agents see it follows from its least principal.
//
// Placement: awareness imports act, body, ledger and sense, never hal or
// cmd, so every transport can import it without a cycle. Below the table
// sits the control plane, awareness/control (work items, wait
// conditions, the gate that decides what wakes the agent, the
// scheduler): a push walks down from the ledger through the gate, which
// matches the rules once, to the observer here, which only says the
// decision in words, to the agent's transport. The transports are
// subpackages: admin (JSON-RPC 2.0 on the admin socket, and its typed
// client), agent (MCP on the agent socket, which `tobe-body stdio`
// bridges to) and mqttcmd (the home server's commands over MQTT); the
// two sockets share one edge (awareness/edge: listening, peer
// credentials, one accept loop with the admission limits, one JSON-RPC
// line codec). The daemon (cmd/tobe-body) binds the table to the
// body's parts (Parts.Table) and hands it to each transport with that
// transport's way of deciding who is calling.
package awareness
