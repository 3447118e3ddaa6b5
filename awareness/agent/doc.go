// Package agent is the body's transport to its agent: the MCP server the
// daemon serves on agent.sock, and the bridge `tobe-body stdio` that
// carries the same protocol over SSH. For now it holds the framing: a
// Transport that reads and writes newline-delimited JSON-RPC 2.0 over one
// byte stream for the official MCP SDK, answers bad input itself with the
// JSON-RPC error it deserves and goes on at the next line, and pushes the
// body's own notifications (notifications/tobe/observation); and an
// ObservingTransport for clients that need to see those notifications.
package agent
