package wait

import (
	"encoding/binary"
	"math"

	"github.com/fxamacker/cbor/v2"
)

// Fields is an event's payload as the clauses read it: a CBOR map whose
// fields are found by name without decoding the rest. The top level is
// walked once, at the first Get, into the places of its fields; a field
// is decoded when a clause reads it: strings, numbers (as float64) and
// booleans by hand, arrays and maps by the CBOR library. The payload is
// the ledger's, already checked when it was appended; what is malformed
// here anyway reads as no field, never as a panic.
type Fields struct {
	raw    []byte
	walked bool
	fields []span // key and value of each top-level field
}

// span is a field's key (b[k0:k1], or chunked: key) and value (b[v0:v1]).
type span struct {
	k0, k1, v0, v1 int
	chunked        bool
	key            string
	// The value, once decoded (a top-level field is read by many
	// clauses of one event).
	decoded, ok bool
	val         any
}

func (s *span) is(b []byte, key string) bool {
	if s.chunked {
		return s.key == key
	}
	return string(b[s.k0:s.k1]) == key
}

// DecodeFields returns a payload's fields; a payload that is not a map
// has none.
func DecodeFields(p []byte) *Fields { return &Fields{raw: p} }

// Reset makes f the fields of another payload, keeping its memory.
func (f *Fields) Reset(p []byte) { f.raw, f.walked, f.fields = p, false, f.fields[:0] }

// maxDepth bounds the nesting a payload is walked through.
const maxDepth = 16

// Get reads a field by its dotted path ("temps.cpu").
func (f *Fields) Get(path string) (any, bool) {
	if f == nil {
		return nil, false
	}
	if !f.walked {
		f.walked = true
		f.fields = walkMap(f.raw, 0, f.fields[:0])
	}
	var v0, v1 int
	found := false
	key := path
	rest := ""
	for i := 0; i < len(path); i++ {
		if path[i] == '.' {
			key, rest = path[:i], path[i+1:]
			break
		}
	}
	for i := range f.fields {
		s := &f.fields[i]
		if !s.is(f.raw, key) {
			continue
		}
		if rest == "" {
			if !s.decoded {
				s.val, s.ok = value(f.raw[s.v0:s.v1])
				s.decoded = true
			}
			return s.val, s.ok
		}
		v0, v1, found = s.v0, s.v1, true
		break
	}
	for found && rest != "" {
		key, rest = rest, ""
		for i := 0; i < len(key); i++ {
			if key[i] == '.' {
				key, rest = key[:i], key[i+1:]
				break
			}
		}
		var inner []span
		inner = walkMap(f.raw[:v1], v0, inner)
		found = false
		for _, s := range inner {
			if s.is(f.raw, key) {
				v0, v1, found = s.v0, s.v1, true
				break
			}
		}
	}
	if !found {
		return nil, false
	}
	return value(f.raw[v0:v1])
}

// walkMap appends the spans of the fields of the map at b[at:], when it
// is a map whose keys are text; nothing otherwise.
func walkMap(b []byte, at int, out []span) []span {
	major, arg, n, ok := head(b, at)
	for ok && major == 6 { // a tag on the map: read what it tags
		at += n
		major, arg, n, ok = head(b, at)
	}
	if !ok || major != 5 {
		return out
	}
	at += n
	indefinite := arg == indefiniteArg
	for i := uint64(0); indefinite || i < arg; i++ {
		if indefinite && at < len(b) && b[at] == 0xff {
			break
		}
		kmajor, klen, kn, ok := head(b, at)
		for ok && kmajor == 6 { // a tag on the key: its text is the key
			at += kn
			kmajor, klen, kn, ok = head(b, at)
		}
		if !ok || kmajor != 3 {
			return out[:0] // a key that is not a text string
		}
		sp := span{k0: at + kn}
		if klen == indefiniteArg {
			// A key in chunks, each a definite text string.
			var key []byte
			c := at + 1
			for {
				if c >= len(b) {
					return out[:0]
				}
				if b[c] == 0xff {
					c++
					break
				}
				m, l, cn, ok := head(b, c)
				if !ok || m != 3 || l == indefiniteArg || uint64(len(b)-c-cn) < l {
					return out[:0]
				}
				key = append(key, b[c+cn:c+cn+int(l)]...)
				c += cn + int(l)
			}
			sp.chunked, sp.key, sp.k1 = true, string(key), c
		} else {
			if uint64(len(b)-at-kn) < klen {
				return out[:0]
			}
			sp.k1 = sp.k0 + int(klen)
		}
		v1, ok := skip(b, sp.k1, 0)
		if !ok {
			return out[:0]
		}
		sp.v0, sp.v1 = sp.k1, v1
		out = append(out, sp)
		at = v1
	}
	return out
}

const indefiniteArg = math.MaxUint64

// head reads the item head at b[at:]: its major type, its argument (a
// length, a count, a value; indefiniteArg for an indefinite length) and
// the head's size.
func head(b []byte, at int) (major byte, arg uint64, n int, ok bool) {
	if at >= len(b) {
		return 0, 0, 0, false
	}
	major, info := b[at]>>5, b[at]&0x1f
	switch {
	case info < 24:
		return major, uint64(info), 1, true
	case info == 31:
		if major == 0 || major == 1 || major == 6 {
			return 0, 0, 0, false
		}
		return major, indefiniteArg, 1, true
	case info > 27:
		return 0, 0, 0, false
	}
	size := 1 << (info - 24)
	if len(b)-at-1 < size {
		return 0, 0, 0, false
	}
	p := b[at+1 : at+1+size]
	switch size {
	case 1:
		arg = uint64(p[0])
	case 2:
		arg = uint64(binary.BigEndian.Uint16(p))
	case 4:
		arg = uint64(binary.BigEndian.Uint32(p))
	default:
		arg = binary.BigEndian.Uint64(p)
	}
	return major, arg, 1 + size, true
}

// skip returns where the item at b[at:] ends.
func skip(b []byte, at, depth int) (int, bool) {
	if depth > maxDepth {
		return 0, false
	}
	major, arg, n, ok := head(b, at)
	if !ok {
		return 0, false
	}
	at += n
	switch major {
	case 0, 1:
		return at, true
	case 2, 3:
		if arg == indefiniteArg {
			for {
				if at >= len(b) {
					return 0, false
				}
				if b[at] == 0xff {
					return at + 1, true
				}
				m, l, cn, ok := head(b, at)
				if !ok || m != major || l == indefiniteArg || uint64(len(b)-at-cn) < l {
					return 0, false
				}
				at += cn + int(l)
			}
		}
		if uint64(len(b)-at) < arg {
			return 0, false
		}
		return at + int(arg), true
	case 4, 5:
		items := arg
		if major == 5 && arg != indefiniteArg {
			if arg > uint64(len(b)) {
				return 0, false
			}
			items = 2 * arg
		}
		for i := uint64(0); arg == indefiniteArg || i < items; i++ {
			if arg == indefiniteArg {
				if at >= len(b) {
					return 0, false
				}
				if b[at] == 0xff {
					return at + 1, true
				}
			}
			if at >= len(b) {
				return 0, false
			}
			if at, ok = skip(b, at, depth+1); !ok {
				return 0, false
			}
		}
		return at, true
	case 6:
		return skip(b, at, depth+1)
	default: // 7: simple values and floats; the argument was their content
		if arg == indefiniteArg {
			return 0, false // a break out of place
		}
		return at, true
	}
}

// value decodes one item: a string, a number as float64, a boolean;
// arrays and maps by the CBOR library; anything else is no value.
func value(b []byte) (any, bool) {
	major, arg, n, ok := head(b, 0)
	if !ok {
		return nil, false
	}
	info := b[0] & 0x1f
	switch major {
	case 0:
		return float64(arg), true
	case 1:
		return -1 - float64(arg), true
	case 3:
		if arg != indefiniteArg {
			if uint64(len(b)-n) < arg {
				return nil, false
			}
			return string(b[n : n+int(arg)]), true
		}
	case 7:
		switch info {
		case 20:
			return false, true
		case 21:
			return true, true
		case 25:
			return half(uint16(arg)), true
		case 26:
			return float64(math.Float32frombits(uint32(arg))), true
		case 27:
			return math.Float64frombits(arg), true
		}
		return nil, false
	}
	var v any
	if cbor.Unmarshal(b, &v) != nil {
		return nil, false
	}
	return v, true
}

// half is an IEEE 754 half-precision float as a float64.
func half(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 0x1f
	frac := float64(h & 0x3ff)
	switch exp {
	case 0:
		return sign * math.Ldexp(frac, -24)
	case 31:
		if frac == 0 {
			return math.Inf(int(sign))
		}
		return math.NaN()
	}
	return sign * math.Ldexp(1+frac/1024, exp-15)
}
