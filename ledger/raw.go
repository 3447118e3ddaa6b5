package ledger

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/x448/float16"
)

// A payload can be read as encoded, without decoding it into a value:
// what a projection or deriver on the hot path reads of a few fields, or
// keeps as it is. These readers hold it to the envelope codec's rules
// (definite lengths, no tags, UTF-8 text, no duplicate keys, bounded
// nesting); what breaks them is ErrBadRecord.

// RawFields calls fn with each key and value of the payload p, a map
// with text keys: the key's text, and the value as encoded. An error of
// fn stops the walk and is returned as it is.
func RawFields(p []byte, fn func(key, value []byte) error) error { return fields(p, true, fn) }

// RawItems calls fn with each item of v, an array as encoded (a value
// RawFields gave), as encoded.
func RawItems(v []byte, fn func(item []byte) error) error { return items(v, true, fn) }

// A payload the ledger checked (what a projection or a deriver is
// given: see Projection.Apply), and any value RawFields or RawItems gave
// (they check what they hand on), need not be checked again:
// CheckedFields and CheckedItems read one without the checks that cost
// (that its texts are UTF-8, its keys unique), only that it is the shape
// asked for, within its bounds. What they are given that was not checked
// they may misread, but never read past; what is not the shape asked for
// is ErrBadRecord.

// CheckedFields is RawFields of a map already checked.
func CheckedFields(v []byte, fn func(key, value []byte) error) error { return fields(v, false, fn) }

// CheckedItems is RawItems of an array already checked.
func CheckedItems(v []byte, fn func(item []byte) error) error { return items(v, false, fn) }

// RawText reads v, a text string as encoded (a value RawFields gave).
func RawText(v []byte) (string, error) {
	major, l, n, err := head(v)
	if err != nil || major != majText || uint64(len(v)-n) != l {
		return "", fmt.Errorf("%w: not a text", ErrBadRecord)
	}
	return string(v[n:]), nil
}

// RawInt reads v, an integer as encoded that fits an int64.
func RawInt(v []byte) (int64, error) {
	major, arg, n, err := head(v)
	if err != nil || major > majNeg || n != len(v) || arg > math.MaxInt64 {
		return 0, fmt.Errorf("%w: not an integer of 64 bits", ErrBadRecord)
	}
	if major == majNeg {
		return -1 - int64(arg), nil
	}
	return int64(arg), nil
}

// AppendMapHead appends the head of a map of pairs pairs, as the codec
// writes it: with fields after it (AppendField), a payload cut from
// another.
func AppendMapHead(b []byte, pairs int) []byte { return appendHead(b, majMap, uint64(pairs)) }

// AppendField appends a map's field: key as a text, and value as encoded
// (a value RawFields gave).
func AppendField(b []byte, key, value []byte) []byte {
	return append(append(appendHead(b, majText, uint64(len(key))), key...), value...)
}

// fields walks the map p: each key and value checked as it goes when
// check says so, else only their heads and bounds read.
func fields(p []byte, check bool, fn func(key, value []byte) error) error {
	major, pairs, n, err := head(p)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %v", ErrBadRecord, err)
	case major != majMap:
		return fmt.Errorf("%w: not a map", ErrBadRecord)
	case pairs > maxMapPairs:
		return fmt.Errorf("%w: a map of %d pairs, more than %d", ErrBadRecord, pairs, maxMapPairs)
	}
	var small [16][]byte // the keys so far: most maps are small
	keys := small[:0]
	for range pairs {
		kl, err := walkItem(p[n:], 1, check)
		if err != nil {
			return fmt.Errorf("%w: a key: %v", ErrBadRecord, err)
		}
		km, tl, hn, _ := head(p[n:])
		if km != majText {
			return fmt.Errorf("%w: a key that is not a text", ErrBadRecord)
		}
		key := p[n+hn : n+hn+int(tl)]
		if check {
			for _, prev := range keys {
				if string(prev) == string(key) {
					return fmt.Errorf("%w: duplicate map key %q", ErrBadRecord, key)
				}
			}
			keys = append(keys, key)
		}
		vl, err := walkItem(p[n+kl:], 1, check)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrBadRecord, key, err)
		}
		if err := fn(key, p[n+kl:n+kl+vl]); err != nil {
			return err
		}
		n += kl + vl
	}
	if n != len(p) {
		return fmt.Errorf("%w: bytes after the map", ErrBadRecord)
	}
	return nil
}

// items walks the array v, each item checked as it goes when check says
// so, else only its heads and bounds read.
func items(v []byte, check bool, fn func(item []byte) error) error {
	major, count, n, err := head(v)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %v", ErrBadRecord, err)
	case major != majArray:
		return fmt.Errorf("%w: not an array", ErrBadRecord)
	case count > maxArrayLen:
		return fmt.Errorf("%w: an array of %d items, more than %d", ErrBadRecord, count, maxArrayLen)
	}
	for range count {
		l, err := walkItem(v[n:], 1, check)
		if err != nil {
			return fmt.Errorf("%w: an item: %v", ErrBadRecord, err)
		}
		if err := fn(v[n : n+l]); err != nil {
			return err
		}
		n += l
	}
	if n != len(v) {
		return fmt.Errorf("%w: bytes after the array", ErrBadRecord)
	}
	return nil
}

// A payload can be written as encoded too, as MarshalPayload writes it
// (Core Deterministic Encoding: every head in its shortest form, a float
// in the shortest of half, single and double precision that holds it
// exactly, NaN and the infinities in half precision), without
// reflection, on a hot path: each appender writes one item. A map's
// fields (AppendMapHead, then a key's text and its value, each pair) go
// in the order of their keys' encodings: shorter keys first, then
// bytewise.

// AppendText appends s as a text.
func AppendText(b []byte, s string) []byte { return appendText(b, s) }

// AppendInt appends v as an integer.
func AppendInt(b []byte, v int64) []byte { return appendInt(b, v) }

// AppendUint appends v as an unsigned integer.
func AppendUint(b []byte, v uint64) []byte { return appendHead(b, majUint, v) }

// AppendBool appends v.
func AppendBool(b []byte, v bool) []byte {
	if v {
		return append(b, majSimple<<5|21)
	}
	return append(b, majSimple<<5|20)
}

// AppendNull appends null (what a nil slice or map is written as).
func AppendNull(b []byte) []byte { return append(b, majSimple<<5|22) }

// AppendArrayHead appends the head of an array of n items.
func AppendArrayHead(b []byte, n int) []byte { return appendHead(b, majArray, uint64(n)) }

// AppendFloat appends f in the shortest precision that holds it.
func AppendFloat(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, majSimple<<5|25, 0x7e, 0x00)
	case math.IsInf(f, 1):
		return append(b, majSimple<<5|25, 0x7c, 0x00)
	case math.IsInf(f, -1):
		return append(b, majSimple<<5|25, 0xfc, 0x00)
	case float64(float32(f)) != f:
		return binary.BigEndian.AppendUint64(append(b, majSimple<<5|27), math.Float64bits(f))
	}
	f32 := float32(f)
	if h := float16.Fromfloat32(f32); h.Float32() == f32 {
		return binary.BigEndian.AppendUint16(append(b, majSimple<<5|25), h.Bits())
	}
	return binary.BigEndian.AppendUint32(append(b, majSimple<<5|26), math.Float32bits(f32))
}
