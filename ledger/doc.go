// Package ledger is the body's fact source and the embedded control plane:
// an event store of CBOR records in bbolt with projections updated in the
// same transaction, inbox dedupe, a durable outbox for the uplink, group
// commit, retention and verification.
//
// The store arrives with its own issue; this package imports nothing of
// the body, so everything else can depend on it.
package ledger
