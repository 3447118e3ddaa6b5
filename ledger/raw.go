package ledger

import (
	"fmt"
	"math"
)

// A payload can be read as encoded, without decoding it into a value:
// what a projection or deriver on the hot path reads of a few fields, or
// keeps as it is. These readers hold it to the envelope codec's rules
// (definite lengths, no tags, UTF-8 text, no duplicate keys, bounded
// nesting); what breaks them is ErrBadRecord.

// RawFields calls fn with each key and value of the payload p, a map
// with text keys: the key's text, and the value as encoded. An error of
// fn stops the walk and is returned as it is.
func RawFields(p []byte, fn func(key, value []byte) error) error {
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
		kl, err := skipItem(p[n:], 1)
		if err != nil {
			return fmt.Errorf("%w: a key: %v", ErrBadRecord, err)
		}
		km, tl, hn, _ := head(p[n:])
		if km != majText {
			return fmt.Errorf("%w: a key that is not a text", ErrBadRecord)
		}
		key := p[n+hn : n+hn+int(tl)]
		for _, prev := range keys {
			if string(prev) == string(key) {
				return fmt.Errorf("%w: duplicate map key %q", ErrBadRecord, key)
			}
		}
		keys = append(keys, key)
		vl, err := skipItem(p[n+kl:], 1)
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

// RawItems calls fn with each item of v, an array as encoded (a value
// RawFields gave), as encoded.
func RawItems(v []byte, fn func(item []byte) error) error {
	major, items, n, err := head(v)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %v", ErrBadRecord, err)
	case major != majArray:
		return fmt.Errorf("%w: not an array", ErrBadRecord)
	case items > maxArrayLen:
		return fmt.Errorf("%w: an array of %d items, more than %d", ErrBadRecord, items, maxArrayLen)
	}
	for range items {
		l, err := skipItem(v[n:], 1)
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
