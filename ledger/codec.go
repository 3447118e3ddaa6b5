package ledger

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"
)

// The envelope has its own CBOR codec: the hot path of every append and
// every read. It writes exactly what fxamacker/cbor writes for Event with
// Core Deterministic options (a test holds the two byte for byte) and reads
// strictly: definite lengths only, no tags, UTF-8 text, no duplicate or
// unknown keys, bounded nesting, sizes and counts. It is about four times
// faster than the reflection-based library on this struct, and encodes
// into a reused buffer without allocating. The library stays the reference,
// and codes payloads.

// CBOR major types.
const (
	majUint   = 0
	majNeg    = 1
	majBytes  = 2
	majText   = 3
	majArray  = 4
	majMap    = 5
	majTag    = 6
	majSimple = 7
)

// Bounds of anything decoded.
const (
	maxDepth     = 16
	maxArrayLen  = 4096
	maxMapPairs  = 512
	envelopeKeys = 25
)

func appendHead(b []byte, major byte, n uint64) []byte {
	m := major << 5
	switch {
	case n < 24:
		return append(b, m|byte(n))
	case n <= math.MaxUint8:
		return append(b, m|24, byte(n))
	case n <= math.MaxUint16:
		return append(b, m|25, byte(n>>8), byte(n))
	case n <= math.MaxUint32:
		return append(b, m|26, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, m|27, byte(n>>56), byte(n>>48), byte(n>>40), byte(n>>32), byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

func appendInt(b []byte, v int64) []byte {
	if v < 0 {
		return appendHead(b, majNeg, uint64(-1-v))
	}
	return appendHead(b, majUint, uint64(v))
}

func appendText(b []byte, s string) []byte {
	return append(appendHead(b, majText, uint64(len(s))), s...)
}

// The put helpers write key and value when the value is set (omitempty,
// omitzero). Keys are 1..24: one byte, or 0x18 0x18 for 24.
func putKey(b []byte, key byte) []byte { return appendHead(b, majUint, uint64(key)) }

func putUUID(b []byte, key byte, u *UUID) []byte {
	if u.IsZero() {
		return b
	}
	b = append(putKey(b, key), majBytes<<5|16)
	return append(b, u[:]...)
}

func putText(b []byte, key byte, s string) []byte {
	if s == "" {
		return b
	}
	return appendText(putKey(b, key), s)
}

func putUint(b []byte, key byte, v uint64) []byte {
	if v == 0 {
		return b
	}
	return appendHead(putKey(b, key), majUint, v)
}

func putInt(b []byte, key byte, v int64) []byte {
	if v == 0 {
		return b
	}
	return appendInt(putKey(b, key), v)
}

// appendEvent appends e's CBOR form: a map of the fields that are set, in
// key order.
func appendEvent(b []byte, e *Event) []byte {
	n := 2 // event_type and schema_version are always written
	count := func(set bool) {
		if set {
			n++
		}
	}
	count(!e.ID.IsZero())
	count(e.SourceEventID != "")
	count(!e.AgentID.IsZero())
	count(!e.BodyID.IsZero())
	count(e.ChannelID != "")
	count(e.OccurredAt != 0)
	count(e.ObservedAt != 0)
	count(e.IngestedAt != 0)
	count(e.SourceSequence != 0)
	count(e.MonotonicNS != 0)
	count(e.ClockDomain != "")
	count(e.ClockUncertaintyMS != 0)
	count(!e.CorrelationID.IsZero())
	count(!e.CausationID.IsZero())
	count(e.Provenance != 0)
	count(e.Trust != 0)
	count(e.Privacy != 0)
	count(len(e.Payload) != 0)
	count(e.PayloadRef != "")
	count(e.DedupeKey != "")
	count(e.AggregateID != "")
	count(e.AggregateVersion != 0)
	count(e.ClockUnsynced)

	b = appendHead(b, majMap, uint64(n))
	b = putUUID(b, 1, &e.ID)
	b = putText(b, 2, e.SourceEventID)
	b = appendText(append(b, 3), e.Type)
	b = appendHead(append(b, 4), majUint, uint64(e.SchemaVersion))
	b = putUUID(b, 5, &e.AgentID)
	b = putUUID(b, 6, &e.BodyID)
	b = putText(b, 7, e.ChannelID)
	b = putInt(b, 8, e.OccurredAt)
	b = putInt(b, 9, e.ObservedAt)
	b = putInt(b, 10, e.IngestedAt)
	b = putUint(b, 11, e.SourceSequence)
	b = putInt(b, 12, e.MonotonicNS)
	b = putText(b, 13, e.ClockDomain)
	b = putUint(b, 14, uint64(e.ClockUncertaintyMS))
	b = putUUID(b, 15, &e.CorrelationID)
	b = putUUID(b, 16, &e.CausationID)
	b = putUint(b, 17, uint64(e.Provenance))
	b = putUint(b, 18, uint64(e.Trust))
	b = putUint(b, 19, uint64(e.Privacy))
	if len(e.Payload) != 0 {
		b = append(append(b, 20), e.Payload...)
	}
	b = putText(b, 21, e.PayloadRef)
	b = putText(b, 22, e.DedupeKey)
	b = putText(b, 23, e.AggregateID)
	b = putUint(b, 24, e.AggregateVersion)
	if e.ClockUnsynced {
		b = append(putKey(b, 25), majSimple<<5|21) // true
	}
	return b
}

// Encode appends the CBOR form of e to buf. The payload must be one
// well-formed CBOR item within the bounds Decode enforces.
func Encode(buf *bytes.Buffer, e *Event) error {
	if len(e.Payload) > 0 {
		if n, err := skipItem(e.Payload, 0); err != nil || n != len(e.Payload) {
			if err == nil {
				err = errors.New("more than one item")
			}
			return fmt.Errorf("%w: %s: payload: %v", ErrInvalid, e.Type, err)
		}
	}
	buf.Grow(256 + len(e.Payload))
	b := appendEvent(buf.AvailableBuffer(), e)
	if len(b) > MaxRecordSize {
		return fmt.Errorf("%w: %s encodes to %d bytes, more than %d", ErrInvalid, e.Type, len(b), MaxRecordSize)
	}
	buf.Write(b)
	return nil
}

// Decode reads one event. Anything read from disk or the network goes
// through here: it never panics, and every failure wraps ErrBadRecord.
func Decode(data []byte, e *Event) error {
	if err := decodeEvent(data, e); err != nil {
		return fmt.Errorf("%w: %v", ErrBadRecord, err)
	}
	if err := e.check(); err != nil {
		return fmt.Errorf("%w: %v", ErrBadRecord, err)
	}
	return nil
}

// head reads an item's head: major type, argument, head length.
func head(d []byte) (major byte, arg uint64, n int, err error) {
	if len(d) == 0 {
		return 0, 0, 0, errors.New("unexpected end of data")
	}
	major, ai := d[0]>>5, d[0]&0x1f
	switch {
	case ai < 24:
		return major, uint64(ai), 1, nil
	case ai == 24 && len(d) >= 2:
		return major, uint64(d[1]), 2, nil
	case ai == 25 && len(d) >= 3:
		return major, uint64(binary.BigEndian.Uint16(d[1:])), 3, nil
	case ai == 26 && len(d) >= 5:
		return major, uint64(binary.BigEndian.Uint32(d[1:])), 5, nil
	case ai == 27 && len(d) >= 9:
		return major, binary.BigEndian.Uint64(d[1:]), 9, nil
	case ai == 31:
		return 0, 0, 0, errors.New("indefinite-length items are not allowed")
	case ai >= 28:
		return 0, 0, 0, fmt.Errorf("reserved additional information %d", ai)
	}
	return 0, 0, 0, errors.New("unexpected end of data")
}

// skipItem checks the one well-formed item at the start of d within the
// bounds and returns its length. Map keys must not repeat.
func skipItem(d []byte, depth int) (int, error) { return walkItem(d, depth, true) }

// walkItem returns the length of the item at the start of d within the
// bounds: checked (skipItem), or, without check, taken as checked
// already, its texts' UTF-8, its keys' uniqueness and its simple values
// not looked at (see CheckedFields).
func walkItem(d []byte, depth int, check bool) (int, error) {
	if depth > maxDepth {
		return 0, fmt.Errorf("nested deeper than %d levels", maxDepth)
	}
	major, arg, n, err := head(d)
	if err != nil {
		return 0, err
	}
	switch major {
	case majUint, majNeg:
		return n, nil
	case majBytes, majText:
		if arg > uint64(len(d)-n) {
			return 0, errors.New("string longer than the data")
		}
		end := n + int(arg)
		if check && major == majText && !utf8.Valid(d[n:end]) {
			return 0, errors.New("text is not valid UTF-8")
		}
		return end, nil
	case majArray:
		if arg > maxArrayLen {
			return 0, fmt.Errorf("array of %d items, more than %d", arg, maxArrayLen)
		}
		for range arg {
			k, err := walkItem(d[n:], depth+1, check)
			if err != nil {
				return 0, err
			}
			n += k
		}
		return n, nil
	case majMap:
		if arg > maxMapPairs {
			return 0, fmt.Errorf("map of %d pairs, more than %d", arg, maxMapPairs)
		}
		var small [16][]byte // most maps are small: no allocation for them
		keys := small[:0]
		for range arg {
			k, err := walkItem(d[n:], depth+1, check)
			if err != nil {
				return 0, err
			}
			if check {
				key := d[n : n+k]
				for _, prev := range keys {
					if bytes.Equal(prev, key) {
						return 0, errors.New("duplicate map key")
					}
				}
				keys = append(keys, key)
			}
			n += k
			v, err := walkItem(d[n:], depth+1, check)
			if err != nil {
				return 0, err
			}
			n += v
		}
		return n, nil
	case majTag:
		return 0, errors.New("tags are not allowed")
	}
	// Simple values and floats.
	switch d[0] & 0x1f {
	case 20, 21, 22, 23, 25, 26, 27: // false, true, null, undefined, floats
		return n, nil
	}
	if !check {
		return n, nil
	}
	return 0, fmt.Errorf("simple value %d is not allowed", arg)
}

func decodeEvent(d []byte, e *Event) error {
	if len(d) > MaxRecordSize {
		return fmt.Errorf("%d bytes, more than %d", len(d), MaxRecordSize)
	}
	*e = Event{}
	major, pairs, n, err := head(d)
	if err != nil {
		return err
	}
	if major != majMap {
		return wrongType(major, "a map (an event)")
	}
	if pairs > envelopeKeys {
		return fmt.Errorf("map of %d pairs; an event has at most %d fields", pairs, envelopeKeys)
	}
	var seen uint32
	p := n
	for range pairs {
		kmaj, key, kn, err := head(d[p:])
		if err != nil {
			return err
		}
		if kmaj != majUint || key < 1 || key > envelopeKeys {
			return errors.New("unknown field")
		}
		if seen&(1<<key) != 0 {
			return fmt.Errorf("duplicate map key %d", key)
		}
		seen |= 1 << key
		p += kn
		v := d[p:]
		var used int
		if u := e.uuidField(key); u != nil {
			used, err = readUUID(v, u)
		} else if t := e.textField(key); t != nil {
			used, err = readText(v, t)
		} else if i := e.intField(key); i != nil {
			used, err = readInt(v, i)
		} else if key == 25 {
			used, err = readBool(v, &e.ClockUnsynced)
		} else if key == 20 {
			if used, err = skipItem(v, 1); err == nil {
				e.Payload = append([]byte(nil), v[:used]...)
			}
		} else {
			used, err = e.readUintField(key, v)
		}
		if err != nil {
			return fmt.Errorf("field %d: %v", key, err)
		}
		p += used
	}
	if p != len(d) {
		return fmt.Errorf("%d bytes of extraneous data after the event", len(d)-p)
	}
	return nil
}

// wrongType says what was found instead of want.
func wrongType(major byte, want string) error {
	if major == majTag {
		return errors.New("tags are not allowed")
	}
	return fmt.Errorf("want %s, got major type %d", want, major)
}

// The envelope's fields by key, for decoding: one place that knows which
// key is which field and of what type.

func (e *Event) uuidField(key uint64) *UUID {
	switch key {
	case 1:
		return &e.ID
	case 5:
		return &e.AgentID
	case 6:
		return &e.BodyID
	case 15:
		return &e.CorrelationID
	case 16:
		return &e.CausationID
	}
	return nil
}

func (e *Event) textField(key uint64) *string {
	switch key {
	case 2:
		return &e.SourceEventID
	case 3:
		return &e.Type
	case 7:
		return &e.ChannelID
	case 13:
		return &e.ClockDomain
	case 21:
		return &e.PayloadRef
	case 22:
		return &e.DedupeKey
	case 23:
		return &e.AggregateID
	}
	return nil
}

func (e *Event) intField(key uint64) *int64 {
	switch key {
	case 8:
		return &e.OccurredAt
	case 9:
		return &e.ObservedAt
	case 10:
		return &e.IngestedAt
	case 12:
		return &e.MonotonicNS
	}
	return nil
}

// readUintField reads the unsigned fields, each within its type's range.
func (e *Event) readUintField(key uint64, v []byte) (int, error) {
	var limit uint64 = math.MaxUint64
	switch key {
	case 4:
		limit = math.MaxUint16
	case 14:
		limit = math.MaxUint32
	case 17, 18, 19:
		limit = math.MaxUint8
	}
	x, used, err := readUint(v, limit)
	if err != nil {
		return 0, err
	}
	switch key {
	case 4:
		e.SchemaVersion = uint16(x)
	case 11:
		e.SourceSequence = x
	case 14:
		e.ClockUncertaintyMS = uint32(x)
	case 17:
		e.Provenance = Provenance(x)
	case 18:
		e.Trust = Level(x)
	case 19:
		e.Privacy = Privacy(x)
	case 24:
		e.AggregateVersion = x
	}
	return used, nil
}

func readUUID(d []byte, u *UUID) (int, error) {
	major, l, n, err := head(d)
	if err != nil {
		return 0, err
	}
	if major != majBytes {
		return 0, wrongType(major, "a 16-byte id")
	}
	if l != 16 || len(d) < n+16 {
		return 0, errors.New("an id is a 16-byte string")
	}
	copy(u[:], d[n:n+16])
	return n + 16, nil
}

func readText(d []byte, out *string) (int, error) {
	major, l, n, err := head(d)
	if err != nil {
		return 0, err
	}
	if major != majText {
		return 0, wrongType(major, "text")
	}
	if l > uint64(len(d)-n) {
		return 0, errors.New("text longer than the data")
	}
	s := d[n : n+int(l)]
	if !utf8.Valid(s) {
		return 0, errors.New("text is not valid UTF-8")
	}
	*out = string(s)
	return n + int(l), nil
}

// readBool reads a CBOR false or true.
func readBool(d []byte, out *bool) (int, error) {
	switch {
	case len(d) == 0:
		return 0, errors.New("unexpected end of data")
	case d[0] == majSimple<<5|20:
		*out = false
	case d[0] == majSimple<<5|21:
		*out = true
	default:
		return 0, errors.New("want false or true")
	}
	return 1, nil
}

func readUint(d []byte, limit uint64) (uint64, int, error) {
	major, x, n, err := head(d)
	if err != nil {
		return 0, 0, err
	}
	if major != majUint {
		return 0, 0, wrongType(major, "an unsigned integer")
	}
	if x > limit {
		return 0, 0, fmt.Errorf("%d overflows the field", x)
	}
	return x, n, nil
}

func readInt(d []byte, out *int64) (int, error) {
	major, x, n, err := head(d)
	if err != nil {
		return 0, err
	}
	switch {
	case major == majUint && x <= math.MaxInt64:
		*out = int64(x)
		return n, nil
	case major == majNeg && x <= math.MaxInt64:
		*out = -1 - int64(x)
		return n, nil
	case major == majUint || major == majNeg:
		return 0, fmt.Errorf("%d overflows int64", x)
	}
	return 0, wrongType(major, "an integer")
}
