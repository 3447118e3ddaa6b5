package ledger

import (
	"errors"
	"fmt"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/google/uuid"
)

// SchemaVersion is the version of the envelope this code writes.
const SchemaVersion = 1

// MaxRecordSize bounds one encoded event, read or written.
const MaxRecordSize = 64 << 10

// UUID is a 16-byte id, encoded as a CBOR byte string.
type UUID [16]byte

// NewID returns a new UUIDv7: time-ordered, unique.
func NewID() UUID {
	u, err := uuid.NewV7()
	if err != nil {
		// crypto/rand does not fail on Linux; a v4 is still unique.
		u = uuid.New()
	}
	return UUID(u)
}

// ParseUUID parses the canonical text form.
func ParseUUID(s string) (UUID, error) {
	u, err := uuid.Parse(s)
	return UUID(u), err
}

// IsZero tells whether u is unset.
func (u UUID) IsZero() bool { return u == UUID{} }

func (u UUID) String() string {
	if u.IsZero() {
		return ""
	}
	return uuid.UUID(u).String()
}

// MarshalText writes the canonical form (for JSON).
func (u UUID) MarshalText() ([]byte, error) { return []byte(u.String()), nil }

// UnmarshalText reads the canonical form.
func (u *UUID) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*u = UUID{}
		return nil
	}
	v, err := uuid.ParseBytes(b)
	*u = UUID(v)
	return err
}

// Provenance says how the body knows what an event says.
type Provenance uint8

// Provenances.
const (
	Observed Provenance = iota + 1 // sensed by the body
	Told                           // said by someone (agent, MQTT, a person)
	Inferred                       // concluded from other events
	Verified                       // checked against the world
)

// Level is a trust level or attention level: off < low < medium < high < max.
type Level uint8

// Levels.
const (
	Off Level = iota + 1
	Low
	Medium
	High
	Max
)

// Privacy is an event's privacy class.
type Privacy uint8

// Privacy classes.
const (
	Public Privacy = iota + 1
	Internal
	Sensitive
	Restricted
)

var (
	provenanceNames = []string{"", "observed", "told", "inferred", "verified"}
	levelNames      = []string{"", "off", "low", "medium", "high", "max"}
	privacyNames    = []string{"", "public", "internal", "sensitive", "restricted"}
)

func enumString(names []string, v uint8) string {
	if int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("unknown(%d)", v)
}

func (p Provenance) String() string { return enumString(provenanceNames, uint8(p)) }
func (l Level) String() string      { return enumString(levelNames, uint8(l)) }
func (p Privacy) String() string    { return enumString(privacyNames, uint8(p)) }

// MarshalText writes the level's name ("high"), for JSON; CBOR keeps the
// number.
func (l Level) MarshalText() ([]byte, error) {
	if l < Off || l > Max {
		return nil, fmt.Errorf("ledger: level %d has no name", uint8(l))
	}
	return []byte(l.String()), nil
}

// UnmarshalText reads a level's name.
func (l *Level) UnmarshalText(b []byte) error {
	v, err := ParseLevel(string(b))
	if err != nil {
		return err
	}
	*l = v
	return nil
}

// ParseLevel reads a level's name: off, low, medium, high or max.
func ParseLevel(s string) (Level, error) {
	for i, n := range levelNames {
		if i > 0 && n == s {
			return Level(i), nil
		}
	}
	return 0, fmt.Errorf("ledger: %q is not a level (off, low, medium, high, max)", s)
}

// Event is the envelope of one meaningful change. Times are UTC
// nanoseconds since the Unix epoch. The CBOR form uses small integer keys
// and Core Deterministic encoding, so the same event always encodes to the
// same bytes.
type Event struct {
	ID                 UUID            `cbor:"1,keyasint,omitzero" json:"event_id"`
	SourceEventID      string          `cbor:"2,keyasint,omitempty" json:"source_event_id,omitempty"`
	Type               string          `cbor:"3,keyasint" json:"event_type"`
	SchemaVersion      uint16          `cbor:"4,keyasint" json:"schema_version"`
	AgentID            UUID            `cbor:"5,keyasint,omitzero" json:"agent_id"`
	BodyID             UUID            `cbor:"6,keyasint,omitzero" json:"body_id"`
	ChannelID          string          `cbor:"7,keyasint,omitempty" json:"channel_id,omitempty"`
	OccurredAt         int64           `cbor:"8,keyasint,omitempty" json:"occurred_at"`
	ObservedAt         int64           `cbor:"9,keyasint,omitempty" json:"observed_at,omitempty"`
	IngestedAt         int64           `cbor:"10,keyasint,omitempty" json:"ingested_at"`
	SourceSequence     uint64          `cbor:"11,keyasint,omitempty" json:"source_sequence,omitempty"`
	MonotonicNS        int64           `cbor:"12,keyasint,omitempty" json:"monotonic_ns,omitempty"`
	ClockDomain        string          `cbor:"13,keyasint,omitempty" json:"clock_domain,omitempty"`
	ClockUncertaintyMS uint32          `cbor:"14,keyasint,omitempty" json:"clock_uncertainty_ms,omitempty"`
	CorrelationID      UUID            `cbor:"15,keyasint,omitzero" json:"correlation_id"`
	CausationID        UUID            `cbor:"16,keyasint,omitzero" json:"causation_id"`
	Provenance         Provenance      `cbor:"17,keyasint,omitempty" json:"provenance"`
	Trust              Level           `cbor:"18,keyasint,omitempty" json:"trust_level"`
	Privacy            Privacy         `cbor:"19,keyasint,omitempty" json:"privacy_class"`
	Payload            cbor.RawMessage `cbor:"20,keyasint,omitempty" json:"payload,omitempty"`
	PayloadRef         string          `cbor:"21,keyasint,omitempty" json:"payload_ref,omitempty"`
	DedupeKey          string          `cbor:"22,keyasint,omitempty" json:"dedupe_key,omitempty"`
	AggregateID        string          `cbor:"23,keyasint,omitempty" json:"aggregate_id,omitempty"`
	AggregateVersion   uint64          `cbor:"24,keyasint,omitempty" json:"aggregate_version,omitempty"`
	// ClockUnsynced: the wall clock was not synchronised when the event
	// was stamped: occurred_at may be off by any amount;
	// clock_uncertainty_ms is then 4294967295, meaning unbounded.
	ClockUnsynced bool `cbor:"25,keyasint,omitempty" json:"clock_unsynced,omitempty"`
}

// Occurred returns OccurredAt as a time.
func (e *Event) Occurred() time.Time { return time.Unix(0, e.OccurredAt).UTC() }

// Errors of records.
var (
	// ErrBadRecord is wrapped by every error about an encoded event that
	// cannot be read: malformed, too big, too deep, duplicate keys,
	// indefinite lengths, tags, invalid UTF-8, unknown fields.
	ErrBadRecord = errors.New("ledger: bad record")
	// ErrInvalid is wrapped by errors about an event that must not be
	// written (no type, bad sizes).
	ErrInvalid = errors.New("ledger: invalid event")
)

var (
	encMode cbor.UserBufferEncMode
	decMode cbor.DecMode
)

func init() {
	var err error
	if encMode, err = cbor.CoreDetEncOptions().UserBufferEncMode(); err != nil {
		panic(err)
	}
	decMode, err = cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		IndefLength:       cbor.IndefLengthForbidden,
		TagsMd:            cbor.TagsForbidden,
		UTF8:              cbor.UTF8RejectInvalid,
		MaxNestedLevels:   maxDepth,
		MaxArrayElements:  maxArrayLen,
		MaxMapPairs:       maxMapPairs,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
	}.DecMode()
	if err != nil {
		panic(err)
	}
}

// Limits of an event's fields.
const (
	maxTypeLen = 96
	maxIDLen   = 256 // channel, source event, dedupe, aggregate ids
	maxRefLen  = 512
	maxPayload = MaxRecordSize - 1024
)

// check says what is wrong with e, or nil.
func (e *Event) check() error {
	switch {
	case e.ID.IsZero():
		return errors.New("no event_id")
	case e.Type == "" || len(e.Type) > maxTypeLen:
		return fmt.Errorf("event_type must be 1..%d bytes", maxTypeLen)
	case !validType(e.Type):
		return errors.New("event_type must be lower-case words joined by dots (camera.motion_started)")
	case e.SchemaVersion == 0:
		return errors.New("no schema_version")
	case len(e.ChannelID) > maxIDLen, len(e.SourceEventID) > maxIDLen, len(e.DedupeKey) > maxIDLen, len(e.AggregateID) > maxIDLen:
		return fmt.Errorf("an id is longer than %d bytes", maxIDLen)
	case len(e.PayloadRef) > maxRefLen:
		return fmt.Errorf("payload_ref is longer than %d bytes", maxRefLen)
	case len(e.Payload) > maxPayload:
		return fmt.Errorf("payload is %d bytes, more than %d", len(e.Payload), maxPayload)
	case e.Provenance > Verified, e.Trust > Max, e.Privacy > Restricted:
		return errors.New("provenance, trust_level or privacy_class out of range")
	}
	return nil
}

func validType(t string) bool {
	prevDot := true
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case c == '.':
			if prevDot {
				return false
			}
			prevDot = true
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_':
			prevDot = false
		default:
			return false
		}
	}
	return !prevDot
}

// MarshalPayload encodes a typed payload the same deterministic way.
func MarshalPayload(v any) (cbor.RawMessage, error) {
	b, err := encMode.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: payload: %v", ErrInvalid, err)
	}
	return b, nil
}

// UnmarshalPayload decodes a payload strictly into v.
func UnmarshalPayload(p cbor.RawMessage, v any) error {
	if err := decMode.Unmarshal(p, v); err != nil {
		return fmt.Errorf("%w: payload: %v", ErrBadRecord, err)
	}
	return nil
}
