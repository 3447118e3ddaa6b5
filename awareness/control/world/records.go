package world

import (
	"encoding/binary"
	"time"

	"github.com/tobe-body/tobe-body/ledger"
)

// The model's event types. They are kept with the audit records (their
// class does not expire), so the projection of them is rebuilt by
// verify long after the sensed events they cite are gone. One step of
// the model (what one sensed event, told assertion or round of the
// keeper made of one entity) is one event: a change of the entity's
// state with the records and ends that made it, or those alone.
const (
	// EventChanged is a change of an entity's state as the model fuses
	// its sources (a Changed), with the new records of its sources and
	// the ends of old ones that made it: what wait conditions and the
	// agent follow.
	EventChanged = "world.changed"
	// EventObserved is a step of an entity's sources that did not change
	// its state (a Step): a source agreeing with another, a revision of
	// the air within its uncertainty of another source, an end while
	// another source still tells.
	EventObserved = "world.observed"
	// EventSeen marks channels' sources as seen again (a Marks): what
	// keeps their states from expiring.
	EventSeen = "world.seen"
	// EventHeld says that an entity's state has held as long as a wait
	// condition asked (a Held).
	EventHeld = "world.held"
)

// Reasons a source's state ended.
const (
	EndNotSeen    = "not_seen"    // not observed again within its expiry
	EndSourceLost = "source_lost" // the source said it stopped observing (a camera gone)
	EndRestarted  = "restarted"   // the body stopped and started: what it sensed before is not known to hold
	EndUnverified = "unverified"  // an output's read-back did not confirm what was asked
	EndWithdrawn  = "withdrawn"   // a told assertion was taken back by its teller
)

// Record is one source's state of an entity from a valid time on, in a
// Step or a Changed. The sequence of the event that holds it is when the
// body recorded it (transaction time), and with its entity and source
// what names it.
type Record struct {
	Entity string `cbor:"entity" json:"entity"`
	Source string `cbor:"source" json:"source"`
	// Channel is the channel whose seen marks keep it ("" for a told
	// assertion, which only its own expiry ends).
	Channel string `cbor:"channel,omitempty" json:"channel,omitempty"`
	// Value is one of the kind's values ("" for air, which has
	// Readings).
	Value      string             `cbor:"value,omitempty" json:"value,omitempty"`
	Readings   map[string]Reading `cbor:"readings,omitempty" json:"readings,omitempty"`
	Confidence float64            `cbor:"confidence" json:"confidence"`
	Provenance string             `cbor:"provenance" json:"provenance"`
	Evidence   []Evidence         `cbor:"evidence" json:"evidence"`
	// ValidFrom is when it became true (the evidence's occurred_at, Unix
	// ns), UncertaintyMS how far that time may be off, Unsynced that the
	// wall clock was not synchronised (the uncertainty is unbounded).
	ValidFrom     int64  `cbor:"valid_from" json:"valid_from_ns"`
	UncertaintyMS uint32 `cbor:"uncertainty_ms,omitempty" json:"uncertainty_ms,omitempty"`
	Unsynced      bool   `cbor:"unsynced,omitempty" json:"unsynced,omitempty"`
	// ExpireMS: not seen again within this on the running clock, it is
	// unknown; 0 never.
	ExpireMS int64 `cbor:"expire_ms,omitempty" json:"expire_ms,omitempty"`
	// RunMS is the ledger's running clock when it was recorded.
	RunMS int64 `cbor:"run_ms" json:"run_ms"`
	// Supersedes is the sequence of the record of this source it
	// replaces (0: none held).
	Supersedes uint64 `cbor:"supersedes,omitempty" json:"supersedes,omitempty"`
	// By is who told it (told assertions).
	By string `cbor:"by,omitempty" json:"by,omitempty"`
}

// Reading is one quantity of the air, with its uncertainty (the
// sensor's accuracy), in Unit.
type Reading struct {
	Value       float64 `cbor:"value" json:"value"`
	Uncertainty float64 `cbor:"uncertainty" json:"uncertainty"`
	Unit        string  `cbor:"unit" json:"unit"`
}

// Evidence is an event a state rests on.
type Evidence struct {
	Seq  uint64 `cbor:"seq" json:"seq"`
	ID   string `cbor:"id" json:"id"`
	Type string `cbor:"type" json:"type"`
}

// Seen is a seen mark (in a world.seen): the channel observed again at
// At (Unix ns) and RunMS on the running clock, by Evidence.
type Seen struct {
	Channel  string   `cbor:"channel" json:"channel"`
	At       int64    `cbor:"at" json:"at_ns"`
	RunMS    int64    `cbor:"run_ms" json:"run_ms"`
	Evidence Evidence `cbor:"evidence" json:"evidence"`
}

// Marks is the payload of world.seen: the channels seen again, each at
// its last sighting.
type Marks struct {
	Seen []Seen `cbor:"seen" json:"seen"`
}

// Ended says that the record of a source (recorded at the sequence
// Record) ended at At (valid time, Unix ns) for Reason; LastSeen is when
// it was last seen, as far as the ledger knows.
type Ended struct {
	Entity   string `cbor:"entity" json:"entity"`
	Source   string `cbor:"source" json:"source"`
	Record   uint64 `cbor:"record" json:"record"`
	Reason   string `cbor:"reason" json:"reason"`
	At       int64  `cbor:"at" json:"at_ns"`
	LastSeen int64  `cbor:"last_seen,omitempty" json:"last_seen_ns,omitempty"`
	// Evidence is the event that ended it, when one did.
	Evidence *Evidence `cbor:"evidence,omitempty" json:"evidence,omitempty"`
}

// Changed is the payload of world.changed: an entity's state as the
// model fuses its sources, from Since (valid time, Unix ns: when the
// value became this).
type Changed struct {
	Entity     string             `cbor:"entity" json:"entity"`
	Kind       Kind               `cbor:"kind" json:"kind"`
	Value      string             `cbor:"value" json:"value"`
	Readings   map[string]Reading `cbor:"readings,omitempty" json:"readings,omitempty"`
	Was        string             `cbor:"was,omitempty" json:"was,omitempty"`
	Confidence float64            `cbor:"confidence" json:"confidence"`
	Provenance string             `cbor:"provenance" json:"provenance"`
	// Conflict: its sources disagree; Value is the one the model
	// believes (see fuse), Provenance inferred.
	Conflict bool `cbor:"conflict,omitempty" json:"conflict,omitempty"`
	// Observed: a record that says Value was observed or verified by the
	// body itself; false when only told or inferred states say it (an
	// action it causes is refused at R2 and above when its provenance is
	// inferred too).
	Observed bool `cbor:"observed,omitempty" json:"observed,omitempty"`
	// Sources are the sources that say Value.
	Sources []string `cbor:"sources,omitempty" json:"sources,omitempty"`
	Since   int64    `cbor:"since" json:"since_ns"`
	// SinceRunMS is Since on the ledger's running clock: how long the
	// value has held is judged by it (see Held), never by the wall
	// clock.
	SinceRunMS int64 `cbor:"since_run_ms" json:"since_run_ms"`
	// At is the valid time of the change (Since, unless only the
	// provenance or confidence changed).
	At int64 `cbor:"at" json:"at_ns"`
	// Records and Ended are the step of the entity's sources that made
	// the change.
	Records []Record `cbor:"records,omitempty" json:"records,omitempty"`
	Ended   []Ended  `cbor:"ended,omitempty" json:"ended,omitempty"`
}

// Step is the payload of world.observed: new records of an entity's
// sources, and ends of old ones, that left its state as it was.
type Step struct {
	Entity  string   `cbor:"entity" json:"entity"`
	Records []Record `cbor:"records,omitempty" json:"records,omitempty"`
	Ended   []Ended  `cbor:"ended,omitempty" json:"ended,omitempty"`
}

// Held is the payload of world.held: Entity has been Value since Since
// (Unix ns), HeldS seconds on the running clock when it was recorded,
// longer than a wait condition asked (its clause on held_s: above).
type Held struct {
	Entity string `cbor:"entity" json:"entity"`
	Value  string `cbor:"value" json:"value"`
	Since  int64  `cbor:"since" json:"since_ns"`
	HeldS  int64  `cbor:"held_s" json:"held_s"`
	// Condition is the wait condition that asked.
	Condition string `cbor:"condition" json:"condition"`
}

// The projection's keys, in its bucket (ProjectionName):
//
//	c ENTITY 0 SOURCE              the TAIL of the source's last entry
//	v ENTITY 0 SOURCE 0 TAIL       an entry of the source: 'o' and its Record, or 'x' and why its record ended
//	d CHANNEL                      the SEQ of the channel's last seen mark
//	m SEQ CHANNEL                  the Seen of CHANNEL at SEQ
//	e ENTITY                       the FROM SEQ of the entity's latest change (its h key)
//	h ENTITY 0 FROM SEQ            the Changed at SEQ (without its step), from FROM on
//	r SEQ                          the FROM of each v key (ends, then records) and of the h key the event at SEQ added, when one is not its own valid time
//
// An entity's changes sort likewise: FROM is a change's at, but never
// before the change before it.
//
// TAIL is FROM SEQ K, an entry recorded at SEQ from FROM on: K is 0 for
// an end and 1 for a record (an event that ends a source's record and
// begins its next has both, the end first). FROM is the entry's valid
// time, but never before the source's entry before it: a source's
// entries sort in the order they were recorded whatever the wall clock
// did, so its last entry is what it holds now, and the one after a
// record is what ended or superseded it. (A record that begins before
// the one it supersedes, after the clock stepped back, keeps its own
// valid_from; in the index it begins where the other did.)
//
// Seen marks sort by sequence, so the marks of a commit (of every
// channel seen: see observe) share a page; a channel's last is found by
// d, one before a sequence by walking back from it (a channel whose
// records expire is marked before they do, or they are ended).
//
// When the archive takes an event, what it added to the index goes, but
// for what is still a source's, entity's or channel's last (what holds
// now): it stays, and its pointer (the c, e or d value) is marked
// forgotten, so that it goes when the next takes its place. A marked
// pointer is one byte longer: 'f' before a c or e value (whose readers
// read its end), after a d value (whose readers read its start).
//
// SEQ is big-endian; VALID and FROM a Unix ns time, big-endian with its
// sign bit flipped, so that keys sort by time. Every key of a step of
// a source is written in the pages of that source (v) or entity (h), and
// the small c, d and e keys of every source, channel and entity share a
// page or two: a commit touches few pages however long the history.
const (
	kLast    = 'c'
	kEntry   = 'v'
	kMark    = 'm'
	kMarked  = 'd'
	kEntity  = 'e'
	kHistory = 'h'
	kFroms   = 'r'
)

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
func getU64(b []byte) uint64 {
	if len(b) < 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

// ordTime is a time's part of a key.
func ordTime(ns int64) []byte { return appendTime(nil, ns) }

func appendTime(b []byte, ns int64) []byte {
	return binary.BigEndian.AppendUint64(b, uint64(ns)^1<<63)
}

func timeOf(b []byte) int64 { return int64(getU64(b) ^ 1<<63) }

func key(kind byte, parts ...string) []byte { return keyWith(0, kind, parts...) }

// keyWith is key with room for more bytes after it: a key is made in
// one allocation.
func keyWith(more int, kind byte, parts ...string) []byte {
	n := 1 + more + len(parts)
	for _, p := range parts {
		n += len(p)
	}
	b := append(make([]byte, 0, n), kind)
	for i, p := range parts {
		if i > 0 {
			b = append(b, 0)
		}
		b = append(b, p...)
	}
	return b
}

// entry names an entry of a source: from when in the index (see the
// keys), recorded at seq, an end or a record.
type entry struct {
	from int64
	seq  uint64
	end  bool
}

const tailLen = 17

// tail is the entry's part of its key.
func (x entry) tail() []byte { return x.appendTail(make([]byte, 0, tailLen)) }

func (x entry) appendTail(b []byte) []byte {
	b = binary.BigEndian.AppendUint64(appendTime(b, x.from), x.seq)
	if x.end {
		return append(b, 0)
	}
	return append(b, 1)
}

// entryOf reads an entry from a TAIL (or a key that ends with one).
func entryOf(b []byte) (entry, bool) {
	if len(b) < tailLen {
		return entry{}, false
	}
	b = b[len(b)-tailLen:]
	return entry{from: timeOf(b), seq: getU64(b[8:]), end: b[16] == 0}, true
}

func lastKey(entity, source string) []byte { return key(kLast, entity, source) }
func lastPrefix(entity string) []byte      { return append(keyWith(1, kLast, entity), 0) }
func entryPrefix(entity, source string) []byte {
	return append(keyWith(1, kEntry, entity, source), 0)
}
func entryKey(entity, source string, x entry) []byte {
	return x.appendTail(append(keyWith(1+tailLen, kEntry, entity, source), 0))
}
func markKey(seq uint64, channel string) []byte {
	return append(binary.BigEndian.AppendUint64(append(make([]byte, 0, 9+len(channel)), kMark), seq), channel...)
}
func lastMarkKey(channel string) []byte { return key(kMarked, channel) }

// markOf reads the SEQ and CHANNEL of an m key.
func markOf(k []byte) (seq uint64, channel string, ok bool) {
	if len(k) < 9 || k[0] != kMark {
		return 0, "", false
	}
	return getU64(k[1:]), string(k[9:]), true
}
func entityKey(entity string) []byte { return key(kEntity, entity) }
func fromsKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64(append(make([]byte, 0, 9), kFroms), seq)
}
func historyPrefix(entity string) []byte { return append(keyWith(1, kHistory, entity), 0) }
func historyKey(entity string, at int64, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(appendTime(append(keyWith(17, kHistory, entity), 0), at), seq)
}

// tail reads the VALID and SEQ at the end of an h key, or of an e
// value.
func tail(k []byte) (at int64, seq uint64) {
	if len(k) < 16 {
		return 0, 0
	}
	return timeOf(k[len(k)-16:]), getU64(k[len(k)-8:])
}

// msOf is a duration in whole milliseconds.
func msOf(d time.Duration) int64 { return d.Milliseconds() }

// provenanceRank orders provenances by how much a state rests on the
// world: verified over observed over told over inferred.
func provenanceRank(p string) int {
	switch p {
	case ledger.Verified.String():
		return 4
	case ledger.Observed.String():
		return 3
	case ledger.Told.String():
		return 2
	case ledger.Inferred.String():
		return 1
	}
	return 0
}

// forgotten tells whether p, the value of a c, e or d key (kind), is
// marked forgotten (see the keys): one byte longer than a pointer.
func forgotten(kind byte, p []byte) bool {
	switch kind {
	case kLast:
		return len(p) > tailLen
	case kEntity:
		return len(p) > 16
	}
	return len(p) > 8
}

// forgottenPointer is the pointer p (the value of a c, e or d key: kind)
// marked forgotten (see the keys).
func forgottenPointer(kind byte, p []byte) []byte {
	if kind == kMarked {
		return append(append([]byte(nil), p...), 'f')
	}
	return append([]byte{'f'}, p...)
}
