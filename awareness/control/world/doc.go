// Package world is what the body knows of its surroundings: an
// environment model with evidence, and a temporal memory that answers
// what was true at a time and when the body knew it.
//
// Entities (Model) come from the configuration and the board: rooms fed
// by camera zones and microphones (active, quiet), contacts fed by input
// lines (doors and windows open or closed, presence present or absent),
// the air of each environment sensor (readings with their uncertainty),
// each output as the runner read it back (on, off), and the body itself
// (its level of degradation). Anything else is unknown: no source has
// observed it, or what one observed expired.
//
// A sensed event becomes observations of sources; an observation becomes
// a Record of the entity from that source (world.observed) when it says
// something new, or a seen mark of its channel (world.seen) when it only
// confirms what is held; a record ends (world.expired) when its source
// stops observing, the body restarts, or it is not seen again within its
// expiry. Records of different sources of one entity are kept side by
// side, however they disagree; the entity's state fuses them (see fuse),
// and each change of that is recorded (world.changed) for wait
// conditions and the agent. Every record carries its value, confidence,
// provenance (observed, verified, told; inferred when fused from sources
// that disagree), evidence (the events, by sequence and id), valid time
// (the evidence's occurred_at, its clock uncertainty, and whether the
// clock was synchronised), and its transaction time (its sequence in the
// ledger). History is never overwritten: a revision is a new record that
// supersedes the last, an end is a record of its own.
//
// The model's events are derived in the transaction of the event they
// come from (Deriver, a ledger.Deriver), so a power cut takes both or
// neither and the gate never sees a sensed event without what the model
// made of it. They are kept with the audit records, and the projection
// of them (Projection) is rebuilt by verify long after retention deleted
// the sensed events they cite; explain says so of evidence that is gone.
//
// Expiry is judged on the ledger's running clock, never the wall clock:
// a state whose source was not seen again within its expiry is unknown
// to every query at once, whether or not the end is recorded yet (the
// Keeper records it within a round). A channel's sightings are marked
// (world.seen) at most once three quarters of its records' expiry, the
// sightings between kept in memory and marked with the next mark of any
// channel, or by the keeper before the marks would let a state expire:
// a state expires its expiry after it was last seen (only sightings a
// power cut took from memory are lost, and it expires sooner, as soon as
// a quarter of its expiry after). A restart ends what
// the body sensed before it stopped (at the stop, or its expiry if that
// came first); told assertions keep their own expiry.
//
// Queries (Reader) read the projection alone, never history: Now (by the
// running clock), At (a valid time, as known at a ledger sequence),
// History (changes over a range of valid time) and Explain (the state
// with each source's chain of records down to the events).
package world
