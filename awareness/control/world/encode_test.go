package world

import (
	"bytes"
	"math"
	"testing"
	"unicode/utf8"

	"github.com/tobe-body/tobe-body/ledger"
)

// FuzzPayloadsAsTheLibraryWrites: the model's payloads, written without
// reflection, are the bytes ledger.MarshalPayload writes of them, with
// every field set or empty, slices nil or empty, and readings of any
// names.
func FuzzPayloadsAsTheLibraryWrites(f *testing.F) {
	f.Add("room.kitchen", "camera.front#left", "active", 0.8, int64(1_700_000_000_000_000_000), uint64(42), uint8(0xff), "temperature_c")
	f.Add("", "", "", math.NaN(), int64(-1), uint64(0), uint8(0), "")
	f.Add("air.hall", "env.air", "", 1.0, int64(math.MinInt64), uint64(math.MaxUint64), uint8(0x5a), "a name longer than twenty-four bytes")
	f.Fuzz(func(t *testing.T, entity, source, value string, x float64, at int64, seq uint64, set uint8, quantity string) {
		if !utf8.ValidString(entity) || !utf8.ValidString(source) || !utf8.ValidString(value) || !utf8.ValidString(quantity) {
			return // the library refuses them; the model writes none
		}
		on := func(bit uint) bool { return set&(1<<bit) != 0 }
		ev := Evidence{Seq: seq, ID: source + "-id", Type: value}
		var readings map[string]Reading
		if on(0) {
			readings = map[string]Reading{quantity: {Value: x, Uncertainty: 1, Unit: "°C"}, quantity + "x": {Value: -x, Unit: value}, "p": {Value: 1013.25}}
		}
		rec := Record{Entity: entity, Source: source, Value: value, Readings: readings, Confidence: x, Provenance: "observed", ValidFrom: at, RunMS: at / 3}
		if on(1) {
			rec.Channel, rec.By, rec.ExpireMS, rec.Supersedes, rec.UncertaintyMS, rec.Unsynced = source, entity, at/7, seq/2, uint32(seq), true
		}
		if on(2) {
			rec.Evidence = []Evidence{ev, {}}
		} else if on(3) {
			rec.Evidence = []Evidence{}
		}
		end := Ended{Entity: entity, Source: source, Record: seq, Reason: value, At: at, LastSeen: -at}
		if on(4) {
			end.Evidence = &ev
		}
		c := Changed{Entity: entity, Kind: Kind(value), Value: value, Readings: readings, Confidence: x, Provenance: source, Since: at, SinceRunMS: at + 1, At: -at}
		if on(5) {
			c.Was, c.Conflict, c.Observed, c.Sources = value+"!", true, true, []string{source, entity}
			c.Records, c.Ended = []Record{rec, {}}, []Ended{end, {}}
		} else if on(6) {
			c.Records, c.Sources = []Record{}, []string{}
		}
		step := Step{Entity: entity, Records: c.Records, Ended: c.Ended}
		marks := Marks{Seen: []Seen{{Channel: source, At: at, RunMS: -at, Evidence: ev}, {}}}
		if on(7) {
			marks.Seen = nil
		}
		for _, p := range []struct {
			name string
			v    any
			got  []byte
		}{
			{"changed", c, appendChanged(nil, &c)},
			{"step", step, appendStep(nil, &step)},
			{"marks", marks, appendMarks(nil, &marks)},
			{"marks after other bytes", marks, appendMarks([]byte{1, 2, 3}, &marks)[3:]},
		} {
			want, err := ledger.MarshalPayload(p.v)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(p.got, want) {
				t.Fatalf("%s %+v: written %x, the library writes %x", p.name, p.v, p.got, []byte(want))
			}
		}
	})
}
