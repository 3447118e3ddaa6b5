// Package ledger is the body's fact source and the embedded control plane:
// an event store of CBOR records in one bbolt file, with projections
// updated in the same transaction as the events they follow, inbox dedupe,
// a durable outbox for the uplink, group commit, retention, verification
// and snapshots (consistent copies taken while it is in use, into an
// unnamed file, for backups).
//
// Every change of state is a command: it reads the current projections,
// decides which events to append, and the store appends them, updates the
// projections and the outbox in one transaction, and returns only after
// that transaction is on disk. Concurrent appends share one commit (group
// commit), so durability stays cheap under load.
//
// Opening does not grow with the file's age. A file its last writer closed
// gets a quick check of what bbolt needs to map it, and its counts are
// read from the record Close left; only after an unclean stop (or with
// Options.CheckAtOpen) is every page read before bbolt maps the file. A
// damaged page deeper in a cleanly closed file is an error wrapping
// ErrDamaged for the read or append that meets it, never a panic, and
// Store.CheckAll finds it in the background; either way the next Open
// reads every page and moves the file aside.
//
// This package imports nothing of the body, so everything else can depend
// on it.
package ledger
