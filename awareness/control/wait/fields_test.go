package wait

import (
	"math"
	"testing"

	"github.com/fxamacker/cbor/v2"

	"github.com/tobe-body/tobe-body/ledger"
)

func TestFieldsRead(t *testing.T) {
	p, _ := ledger.MarshalPayload(map[string]any{"zone": "door", "n": 3, "neg": -7, "half": 1.5, "f32": float32(0.1), "f64": 0.1,
		"yes": true, "no": false, "box": []float64{0.1, 0.2, 0.4, 0.6}, "temps": map[string]any{"cpu": 71.5, "deep": map[string]any{"x": "y"}}, "nil": nil})
	f := DecodeFields(p)
	for _, c := range []struct {
		path string
		want any
		ok   bool
	}{
		{"zone", "door", true}, {"n", float64(3), true}, {"neg", float64(-7), true}, {"half", 1.5, true},
		{"f32", float64(float32(0.1)), true}, {"f64", 0.1, true}, {"yes", true, true}, {"no", false, true},
		{"temps.cpu", 71.5, true}, {"temps.deep.x", "y", true}, {"temps.none", nil, false}, {"zone.x", nil, false},
		{"none", nil, false}, {"nil", nil, false}, {"", nil, false},
	} {
		got, ok := f.Get(c.path)
		if ok != c.ok || got != c.want {
			t.Errorf("%q: %v %v, want %v %v", c.path, got, ok, c.want, c.ok)
		}
	}
	if box, ok := f.Get("box"); !ok || len(box.([]any)) != 4 {
		t.Errorf("box: %v %v", box, ok)
	}
	// Indefinite lengths, a text key made of chunks is not a key.
	indef := []byte{0xbf, 0x64, 'z', 'o', 'n', 'e', 0x7f, 0x62, 'd', 'o', 0x62, 'o', 'r', 0xff, 0x61, 'n', 0x9f, 0x01, 0xff, 0xff}
	f = DecodeFields(indef)
	if v, ok := f.Get("n"); !ok || len(v.([]any)) != 1 {
		t.Errorf("indefinite: n %v %v", v, ok)
	}
	for _, bad := range [][]byte{nil, {0x01}, {0xa1}, {0xa1, 0x61}, {0xa1, 0x61, 'a'}, {0xa1, 0x01, 0x01}, {0xbf, 0x61, 'a', 0x01}, {0xa1, 0x61, 'a', 0x5b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}} {
		if v, ok := DecodeFields(bad).Get("a"); ok {
			t.Errorf("% x: a field %v", bad, v)
		}
	}
	for h, want := range map[uint16]float64{0x3c00: 1, 0xc000: -2, 0x7bff: 65504, 0x0001: math.Ldexp(1, -24), 0x0000: 0, 0x7c00: math.Inf(1)} {
		if got := half(h); got != want {
			t.Errorf("half %#04x: %v, want %v", h, got, want)
		}
	}
}

// FuzzFields: what the CBOR library decodes as a map of text keys, the
// fields read the same for every scalar of the top level (a string, a
// number, a boolean); nothing panics on any input.
func FuzzFields(fz *testing.F) {
	for _, v := range []any{
		map[string]any{"zone": "door", "box": []float64{0.1, 0.2, 0.4, 0.6}, "n": -3, "big": uint64(1) << 60},
		map[string]any{"temps": map[string]any{"cpu": 71.5}, "ok": true},
		[]int{1, 2},
	} {
		p, _ := ledger.MarshalPayload(v)
		fz.Add([]byte(p))
	}
	fz.Add([]byte{0xbf, 0x61, 'a', 0xf9, 0x3c, 0x00, 0xff})
	dm, _ := cbor.DecOptions{DupMapKey: cbor.DupMapKeyEnforcedAPF, MaxNestedLevels: maxDepth}.DecMode()
	fz.Fuzz(func(t *testing.T, p []byte) {
		f := DecodeFields(p)
		f.Get("a")
		f.Get("a.b.c")
		var m map[string]any
		if dm.Unmarshal(p, &m) != nil {
			return
		}
		for k, want := range m {
			var w any
			switch x := want.(type) {
			case string, bool:
				w = x
			case uint64:
				w = float64(x)
			case int64:
				w = float64(x)
			case float64:
				if math.IsNaN(x) {
					continue
				}
				w = x
			default:
				continue
			}
			got, ok := f.Get(k)
			if k == "" || containsDot(k) {
				continue // a path, not a key
			}
			if !ok || got != w {
				t.Fatalf("%q: %v %v, the library %v (%T)", k, got, ok, want, want)
			}
		}
	})
}

func containsDot(s string) bool {
	for i := range len(s) {
		if s[i] == '.' {
			return true
		}
	}
	return false
}
