// Package ledger is the body's fact source: an event store of CBOR
// records in one bbolt file, with projections
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
// A Deriver appends, in the transaction of an event it follows, what the
// body concludes from it (the world model's records of what it sensed):
// events of a class that lasts, which projections may follow even when
// the events they were concluded from expire, so verify rebuilds those
// projections long after retention deleted what they cite.
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
// Nothing that decides idempotency or deletes data trusts the wall clock,
// which a board without a real-time clock has stepped by NTP hours or
// years after boot. The ledger keeps a running clock of its own (see
// Store.Running): the time the file has been open, summed over every open,
// measured on the monotonic reading of Options.Now. It is persisted as
// checkpoints, rows of (sequence S, running time R) saying that every
// event below S was ingested at running time R or before, written inside
// commits that happen anyway, at most one a minute of running time, and
// by Close. After a crash the running time since the last checkpoint is
// lost: events then count as younger than they are, never older. The
// running clock stands still while the body is off, so the events of a
// body that is often off live longer than their TTL in calendar time,
// never shorter. Retention deletes an event once a checkpoint shows it
// older than its class's TTL on the running clock; its outbox row and
// its dedupe key go with it.
//
// A dedupe key lives as long as the event that set it: for ever for the
// classes without a TTL (audit records, the control plane's), until
// retention deletes the event for the others. An event with the key of a
// stored one is a duplicate of it, whatever the clocks did meanwhile.
//
// Events that carry no time of their own are stamped from Options.Stamp:
// the monotonic reading, its clock domain (the boot id), the uncertainty,
// and whether the wall clock was synchronised.
//
// This package imports nothing of the body, so everything else can depend
// on it.
package ledger
