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
// Placement: awareness imports act, body, ledger and sense, never hal or
// cmd, so every transport can import it without a cycle. The transports
// live in its subpackages (admin: the admin socket and its typed client;
// the agent's MCP socket and `tobe-body stdio` come next); the MQTT
// connection lives in body/uplink and reaches the table through an
// interface the daemon wires. The daemon (cmd/tobe-body) binds the table
// to the body's parts (Parts.Table) and hands it to each transport with
// that transport's way of deciding who is calling.
package awareness
