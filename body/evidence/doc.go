// Package evidence keeps what the body captured for someone to look at: a
// snapshot of a camera, a clip of a microphone. The body senses all day
// and keeps none of it; a piece of evidence is kept only because an
// action through the runner asked for it (camera.snapshot, audio.clip)
// under its own grant, and it lives only as long as its kind's lifetime.
//
// # Files
//
// Each piece is a file directly under the store's directory, named by
// the SHA-256 of its bytes and the extension of its media type
// (<64 hex digits>.jpg, .wav), mode 0640 in a directory of mode 0750. It
// is written to a temporary name, synced, renamed and its directory
// synced before its record is appended, so a record always names bytes
// that are on disk. Two pieces with the same bytes share a file; the
// file goes when the last record that names it ends.
//
// # Records
//
// Every change is an audit record in the ledger (kept, sent, never
// dropped), and the ledger's projection "evidence" is what the store
// knows at startup, never the history:
//
//   - evidence.captured: who kept it (a principal's subject), why, by
//     which action and under which grant, from which source, its hash,
//     size and media type, its privacy class, its lifetime and the
//     ledger's running clock when it was kept;
//   - evidence.viewed: who looked at it and through what; recorded before
//     a byte is handed out, so no view goes unrecorded;
//   - evidence.expired: its lifetime ended; evidence.deleted: someone
//     deleted it, or its grant was revoked, or its file was found gone;
//   - evidence.frozen: its grant was revoked and the config keeps what
//     was captured under it: nobody but a local administrator may look at
//     it, and it still ends at its lifetime.
//
// # Lifetimes
//
// A lifetime runs on the ledger's running clock (ledger.Store.Running),
// never on the wall clock, which a board without a real-time clock has
// stepped by hours or years: a piece kept at running time R with
// lifetime L ends once the running clock passes R+L, whatever the wall
// clock did, across restarts (the running clock stands still while the
// body is off). After a crash the running time since the ledger's last
// checkpoint (a minute at most) is lost, so a piece may outlive its
// lifetime by that much, never end early. The record is appended before
// the file is removed; a file left without a live record by a crash
// between the two, or by one between writing a file and recording it, is
// removed when the store is opened.
//
// # Concurrency
//
// A Store is safe for concurrent use. Keeping, deleting and expiring are
// serialised (each is a file operation and an append), so a file is never
// removed while a record that names it is being written. Reads (List,
// Lookup) read the projection in a read transaction and wait for none of
// them.
package evidence
