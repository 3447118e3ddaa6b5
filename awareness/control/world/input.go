package world

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/tobe-body/tobe-body/ledger"
)

// calmInput is what the model reads of an event whose observations only
// hold what its sources hold when nothing changed since (see cache.calm):
// nothing of a sound level summary, the zones and the moving zones of a
// camera summary (their keys and values as encoded), appended to dst.
// ok is false for any other event, and for a payload this cannot read,
// which is derived every time.
func calmInput(dst []byte, typ string, payload []byte) (in []byte, ok bool) {
	switch typ {
	case "audio.level":
		return dst, true
	case "camera.summary":
		return mapFields(dst, payload, "zones", "moving")
	}
	return dst, false
}

// mapFields appends to out the fields of a CBOR map (definite length,
// text keys) named by keys, each key with its value as encoded, in the
// map's order: what is equal wherever those fields are. ok is false
// when p is not such a map, or holds anything of indefinite length.
func mapFields(out, p []byte, keys ...string) ([]byte, bool) {
	n, hl, ok := cborHead(p, 5)
	if !ok {
		return out, false
	}
	p = p[hl:]
	for range n {
		kl, ok := cborItem(p, 0)
		if !ok {
			return out, false
		}
		vl, ok := cborItem(p[kl:], 0)
		if !ok {
			return out, false
		}
		for _, k := range keys {
			if keyIs(p[:kl], k) {
				out = append(out, p[:kl+vl]...)
			}
		}
		p = p[kl+vl:]
	}
	return out, len(p) == 0
}

// keyIs tells whether an encoded item is the text string k.
func keyIs(item []byte, k string) bool {
	n, hl, ok := cborHead(item, 3)
	return ok && n == uint64(len(k)) && hl+len(k) == len(item) && string(item[hl:]) == k
}

// cborHead reads the head of an item of major type major: its argument
// and the head's length. Indefinite lengths are not read.
func cborHead(b []byte, major byte) (arg uint64, n int, ok bool) {
	if len(b) == 0 || b[0]>>5 != major {
		return 0, 0, false
	}
	return cborArg(b)
}

// cborArg reads an item's head: its argument and the head's length.
func cborArg(b []byte) (arg uint64, n int, ok bool) {
	if len(b) == 0 {
		return 0, 0, false
	}
	switch ai := b[0] & 0x1f; {
	case ai < 24:
		return uint64(ai), 1, true
	case ai == 24 && len(b) >= 2:
		return uint64(b[1]), 2, true
	case ai == 25 && len(b) >= 3:
		return uint64(binary.BigEndian.Uint16(b[1:])), 3, true
	case ai == 26 && len(b) >= 5:
		return uint64(binary.BigEndian.Uint32(b[1:])), 5, true
	case ai == 27 && len(b) >= 9:
		return binary.BigEndian.Uint64(b[1:]), 9, true
	}
	return 0, 0, false // reserved, indefinite, or cut short
}

// maxDepth bounds how deep cborItem reads nested items.
const maxDepth = 16

// cborItem is the length of the CBOR item that b begins with, when it is
// well formed and of definite lengths throughout.
func cborItem(b []byte, depth int) (int, bool) {
	if depth > maxDepth {
		return 0, false
	}
	arg, n, ok := cborArg(b)
	if !ok {
		return 0, false
	}
	switch major := b[0] >> 5; major {
	case 0, 1: // integers
		return n, true
	case 2, 3: // byte and text strings
		if arg > uint64(len(b)-n) {
			return 0, false
		}
		return n + int(arg), true
	case 4, 5: // arrays and maps
		items := arg
		if major == 5 {
			if items > uint64(len(b)) {
				return 0, false
			}
			items *= 2
		}
		if items > uint64(len(b)-n) { // every item is a byte at least
			return 0, false
		}
		for range items {
			l, ok := cborItem(b[n:], depth+1)
			if !ok {
				return 0, false
			}
			n += l
		}
		return n, true
	case 6: // a tag and its item
		l, ok := cborItem(b[n:], depth+1)
		return n + l, ok
	default: // simple values and floats
		if b[0]&0x1f == 24 && arg < 32 {
			return 0, false // a simple value of two bytes is 32 or more
		}
		return n, true
	}
}

// stepFields is what the projection reads of a step's payload (a
// Changed or a Step), as encoded.
type stepFields struct {
	entity  string
	at      int64
	records [][]byte // each record as encoded
	ended   []Ended
	// state is the payload without its records and ends: a Changed's
	// state, as it would be encoded without them.
	state []byte
}

// readStep reads a step's payload without decoding its records: the
// projection keeps them as they were encoded.
func readStep(p []byte) (stepFields, error) {
	var st stepFields
	n, hl, ok := cborHead(p, 5)
	if !ok {
		return st, errors.New("not a map of definite length")
	}
	rest := p[hl:]
	kept := 0
	var fields []byte // the state's fields, as encoded
	for range n {
		kl, ok := cborItem(rest, 0)
		if !ok {
			return st, errors.New("a key cut short")
		}
		vl, ok := cborItem(rest[kl:], 0)
		if !ok {
			return st, errors.New("a value cut short")
		}
		k, v := rest[:kl], rest[kl:kl+vl]
		switch {
		case keyIs(k, "records"):
			if st.records, ok = arrayItems(v); !ok {
				return st, errors.New("records: not an array")
			}
		case keyIs(k, "ended"):
			if err := ledger.UnmarshalPayload(v, &st.ended); err != nil {
				return st, fmt.Errorf("ended: %w", err)
			}
		default:
			switch {
			case keyIs(k, "entity"):
				if st.entity, ok = cborText(v); !ok {
					return st, errors.New("entity: not a text")
				}
			case keyIs(k, "at"):
				if st.at, ok = cborInt(v); !ok {
					return st, errors.New("at: not an integer")
				}
			}
			fields = append(fields, rest[:kl+vl]...)
			kept++
		}
		rest = rest[kl+vl:]
	}
	if len(rest) != 0 {
		return st, errors.New("bytes after the map")
	}
	st.state = append(cborHeadOf(5, uint64(kept)), fields...)
	return st, nil
}

// recordKeys reads what names a record as encoded: its entity, its
// source and its valid_from.
func recordKeys(p []byte) (entity, source string, validFrom int64, err error) {
	n, hl, ok := cborHead(p, 5)
	if !ok {
		return "", "", 0, errors.New("not a map of definite length")
	}
	p = p[hl:]
	for range n {
		kl, ok := cborItem(p, 0)
		if !ok {
			return "", "", 0, errors.New("a key cut short")
		}
		vl, ok := cborItem(p[kl:], 0)
		if !ok {
			return "", "", 0, errors.New("a value cut short")
		}
		k, v := p[:kl], p[kl:kl+vl]
		switch {
		case keyIs(k, "entity"):
			ok = readText(v, &entity)
		case keyIs(k, "source"):
			ok = readText(v, &source)
		case keyIs(k, "valid_from"):
			validFrom, ok = cborInt(v)
		}
		if !ok {
			return "", "", 0, fmt.Errorf("%x: not of its type", k)
		}
		p = p[kl+vl:]
	}
	return entity, source, validFrom, nil
}

func readText(v []byte, to *string) (ok bool) {
	*to, ok = cborText(v)
	return ok
}

// arrayItems splits an array of definite length into its items.
func arrayItems(v []byte) ([][]byte, bool) {
	n, hl, ok := cborHead(v, 4)
	if !ok || n > uint64(len(v)) {
		return nil, false
	}
	items := make([][]byte, 0, n)
	v = v[hl:]
	for range n {
		l, ok := cborItem(v, 0)
		if !ok {
			return nil, false
		}
		items = append(items, v[:l])
		v = v[l:]
	}
	return items, len(v) == 0
}

// cborText reads a text string of definite length (and nothing after).
func cborText(v []byte) (string, bool) {
	n, hl, ok := cborHead(v, 3)
	if !ok || uint64(len(v)-hl) != n {
		return "", false
	}
	return string(v[hl:]), true
}

// cborInt reads an integer that fits an int64 (and nothing after).
func cborInt(v []byte) (int64, bool) {
	if len(v) == 0 {
		return 0, false
	}
	major := v[0] >> 5
	arg, hl, ok := cborArg(v)
	if !ok || hl != len(v) || major > 1 || arg > math.MaxInt64 {
		return 0, false
	}
	if major == 1 {
		return -1 - int64(arg), true
	}
	return int64(arg), true
}

// cborHeadOf is the head of an item of major type major with argument
// arg, in its shortest form.
func cborHeadOf(major byte, arg uint64) []byte {
	m := major << 5
	switch {
	case arg < 24:
		return []byte{m | byte(arg)}
	case arg <= math.MaxUint8:
		return []byte{m | 24, byte(arg)}
	case arg <= math.MaxUint16:
		return binary.BigEndian.AppendUint16([]byte{m | 25}, uint16(arg))
	case arg <= math.MaxUint32:
		return binary.BigEndian.AppendUint32([]byte{m | 26}, uint32(arg))
	}
	return binary.BigEndian.AppendUint64([]byte{m | 27}, arg)
}
