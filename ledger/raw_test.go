package ledger

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/fxamacker/cbor/v2"
)

// A payload read as encoded gives back each field as the library wrote
// it: cut and put together again, it is the same bytes; what the
// codec's rules refuse is refused.
func TestRawFields(t *testing.T) {
	type inner struct {
		Zones []string `cbor:"zones"`
	}
	p, err := MarshalPayload(struct {
		Entity string  `cbor:"entity"`
		At     int64   `cbor:"at"`
		Inner  inner   `cbor:"inner"`
		F      float64 `cbor:"f"`
		List   []int   `cbor:"list"`
	}{"room.a", -5, inner{[]string{"left", "right"}}, 0.5, []int{1, 2, 300}})
	if err != nil {
		t.Fatal(err)
	}
	var again []byte
	n := 0
	got := map[string][]byte{}
	if err := RawFields(p, func(k, v []byte) error {
		got[string(k)] = v
		again = AppendField(again, k, v)
		n++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if whole := append(AppendMapHead(nil, n), again...); !bytes.Equal(whole, p) {
		t.Errorf("put together again: %x, want %x", whole, []byte(p))
	}
	if s, err := RawText(got["entity"]); err != nil || s != "room.a" {
		t.Errorf("entity: %q, %v", s, err)
	}
	if v, err := RawInt(got["at"]); err != nil || v != -5 {
		t.Errorf("at: %d, %v", v, err)
	}
	var items []string
	if err := RawItems(got["list"], func(it []byte) error { items = append(items, string(it)); return nil }); err != nil || len(items) != 3 {
		t.Errorf("list: %d items, %v", len(items), err)
	}
	for _, bad := range []struct {
		name string
		p    []byte
	}{
		{"indefinite length", []byte{0xbf, 0x61, 'a', 0x01, 0xff}},
		{"a key twice", []byte{0xa2, 0x61, 'a', 0x01, 0x61, 'a', 0x02}},
		{"a key that is a number", []byte{0xa1, 0x01, 0x01}},
		{"a tag", []byte{0xa1, 0x61, 'a', 0xc1, 0x01}},
		{"cut short", []byte{0xa2, 0x61, 'a', 0x01}},
		{"bytes after", []byte{0xa1, 0x61, 'a', 0x01, 0x00}},
		{"not a map", []byte{0x81, 0x01}},
	} {
		if err := RawFields(bad.p, func(_, _ []byte) error { return nil }); !errors.Is(err, ErrBadRecord) {
			t.Errorf("%s: %v, want ErrBadRecord", bad.name, err)
		}
	}
	if _, err := RawInt([]byte{0x1b, 0x80, 0, 0, 0, 0, 0, 0, 0}); err == nil {
		t.Error("an integer past int64 was read")
	}
	if _, err := RawText([]byte{0x62, 'a'}); err == nil {
		t.Error("a text cut short was read")
	}
}

// FuzzRawFields: any bytes are read as a payload without a panic; what
// is read is well formed, and its fields put together again are the
// same payload.
func FuzzRawFields(f *testing.F) {
	p, _ := MarshalPayload(map[string]any{"zones": []string{"a"}, "at": 1, "f": 1.5})
	f.Add([]byte(p))
	f.Add([]byte{0xbf, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		var again []byte
		n := 0
		err := RawFields(b, func(k, v []byte) error {
			again = AppendField(again, k, v)
			n++
			RawText(v)
			RawInt(v)
			RawItems(v, func([]byte) error { return nil })
			return nil
		})
		if err != nil {
			return
		}
		if err := cbor.Wellformed(b); err != nil {
			t.Fatalf("%x read as a payload; the library says %v", b, err)
		}
		// The same as the library reads it (a head not in its shortest
		// form is written shortest).
		whole := append(AppendMapHead(nil, n), again...)
		was, err1 := cbor.Diagnose(b)
		is, err2 := cbor.Diagnose(whole)
		if err1 != nil || err2 != nil || was != is {
			t.Fatalf("%x (%s, %v) put together again is %x (%s, %v)", b, was, err1, whole, is, err2)
		}
	})
}

// FuzzCheckedFields: any bytes are read by the readers that do not check
// again without a panic or a read past them; what the checking readers
// accept, they read the same.
func FuzzCheckedFields(f *testing.F) {
	p, _ := MarshalPayload(map[string]any{"zones": []string{"a"}, "at": 1, "f": 1.5, "m": map[string]any{"x": []any{1, "y"}}})
	f.Add([]byte(p))
	f.Add([]byte{0x81, 0xa1, 0x61, 'a', 0x62, 0xff, 0xfe}) // an array of a map with a text not UTF-8
	f.Fuzz(func(t *testing.T, b []byte) {
		type kv struct{ k, v string }
		var raw, fast []kv
		rawErr := RawFields(b, func(k, v []byte) error { raw = append(raw, kv{string(k), string(v)}); return nil })
		fastErr := CheckedFields(b, func(k, v []byte) error {
			fast = append(fast, kv{string(k), string(v)})
			CheckedItems(v, func([]byte) error { return nil })
			CheckedFields(v, func(_, v []byte) error { CheckedItems(v, func([]byte) error { return nil }); return nil })
			return nil
		})
		CheckedItems(b, func(it []byte) error { CheckedFields(it, func(_, _ []byte) error { return nil }); return nil })
		if rawErr != nil {
			return
		}
		if fastErr != nil || !slices.Equal(raw, fast) {
			t.Fatalf("%x: checked it reads %v; read again, %v (%v)", b, raw, fast, fastErr)
		}
	})
}

// FuzzAppenders: each appender writes what MarshalPayload writes of the
// same value.
func FuzzAppenders(f *testing.F) {
	for _, v := range []float64{0, math.Copysign(0, -1), 0.5, 0.8, 1, 65504, 65520, 1e-8, 5.960464477539063e-08, 3.4028234663852886e+38, 1e300, math.NaN(), math.Inf(1), math.Inf(-1)} {
		f.Add(int64(-25), uint64(24), v, "ünïcode", true)
	}
	f.Add(int64(math.MinInt64), uint64(math.MaxUint64), 1.5, "", false)
	f.Fuzz(func(t *testing.T, i int64, u uint64, x float64, s string, ok bool) {
		for _, c := range []struct {
			name string
			v    any
			got  []byte
		}{
			{"int", i, AppendInt(nil, i)},
			{"uint", u, AppendUint(nil, u)},
			{"float", x, AppendFloat(nil, x)},
			{"float32", float64(float32(x)), AppendFloat(nil, float64(float32(x)))},
			{"bool", ok, AppendBool(nil, ok)},
			{"null", []int(nil), AppendNull(nil)},
			{"array", []int{1, 2}, append(AppendArrayHead(nil, 2), 1, 2)},
		} {
			want, err := MarshalPayload(c.v)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(c.got, want) {
				t.Errorf("%s %v: appended %x, the library writes %x", c.name, c.v, c.got, []byte(want))
			}
		}
		if utf8.ValidString(s) {
			if want, _ := MarshalPayload(s); !bytes.Equal(AppendText(nil, s), want) {
				t.Errorf("text %q: appended %x, the library writes %x", s, AppendText(nil, s), []byte(want))
			}
		}
	})
}
