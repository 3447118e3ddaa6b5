// Package awareness is the agent boundary: it maps events to observations
// in ToBe's Awareness envelope, serves JSON-RPC 2.0 (MCP-compatible) on the
// agent socket, bridges `tobe-body stdio` over SSH to it, and holds the
// ToBe adapter. Who is calling is decided from the socket's peer
// credentials, never from what a client says.
//
// The server arrives with its own issue.
package awareness
