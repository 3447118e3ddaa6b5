package ledger

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

func sampleEvent() Event {
	payload, _ := MarshalPayload(map[string]any{"zone": "door", "area": 0.12, "bbox": []int{10, 20, 64, 48}})
	return Event{
		ID: NewID(), SourceEventID: "v4l2:front:1234", Type: "camera.motion_started", SchemaVersion: SchemaVersion,
		AgentID: NewID(), BodyID: NewID(), ChannelID: "camera.front",
		OccurredAt:     time.Date(2026, 11, 30, 3, 0, 0, 123456789, time.UTC).UnixNano(),
		ObservedAt:     time.Date(2026, 11, 30, 3, 0, 0, 130000000, time.UTC).UnixNano(),
		IngestedAt:     time.Date(2026, 11, 30, 3, 0, 0, 131000000, time.UTC).UnixNano(),
		SourceSequence: 1234, MonotonicNS: 98765432101, ClockDomain: "5f1c9a3e-1d2b-4c3d-8e4f-0a1b2c3d4e5f",
		ClockUncertaintyMS: 12, CorrelationID: NewID(), Provenance: Observed, Trust: Medium, Privacy: Sensitive,
		Payload: payload, DedupeKey: "camera.front:motion:1234",
	}
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		ev   Event
	}{
		{"full", sampleEvent()},
		{"minimal", Event{ID: NewID(), Type: "body.started", SchemaVersion: 1}},
		{"aggregate", Event{ID: NewID(), Type: "grant.added", SchemaVersion: 1, AggregateID: "grant:1", AggregateVersion: 3, Provenance: Told}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Encode(&buf, &tc.ev); err != nil {
				t.Fatal(err)
			}
			var got Event
			if err := Decode(buf.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.ev) {
				t.Errorf("got %+v\nwant %+v", got, tc.ev)
			}
			// Deterministic: the same event, the same bytes.
			var again bytes.Buffer
			Encode(&again, &got)
			if !bytes.Equal(buf.Bytes(), again.Bytes()) {
				t.Error("re-encoding changed the bytes")
			}
		})
	}
}

// cborHex decodes a hex string of a hand-made CBOR item.
func raw(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestDecodeRefuses(t *testing.T) {
	good := sampleEvent()
	var buf bytes.Buffer
	Encode(&buf, &good)
	valid := buf.Bytes()
	id := append([]byte{0x01, 0x50}, make([]byte, 16)...) // key 1: 16-byte string
	id[2] = 1
	typ := []byte{0x03, 0x64, 'a', '.', 'b', 'c'} // key 3: "a.bc"
	ver := []byte{0x04, 0x01}                     // key 4: 1
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "unexpected end of data"},
		{"truncated", valid[:len(valid)/2], "unexpected end of data"},
		{"trailing garbage", append(append([]byte(nil), valid...), 0x00), "extraneous data"},
		{"duplicate key", raw([]byte{0xa4}, id, typ, ver, typ), "duplicate map key 3"},
		{"indefinite map", raw([]byte{0xbf}, id, typ, ver, []byte{0xff}), "indefinite-length items are not allowed"},
		{"tag", raw([]byte{0xa3}, id, []byte{0x03, 0xc1, 0x64, 'a', '.', 'b', 'c'}, ver), "tags are not allowed"},
		{"bad utf-8", raw([]byte{0xa3}, id, []byte{0x03, 0x62, 0xff, 0xfe}, ver), "UTF-8"},
		{"unknown field", raw([]byte{0xa4}, id, typ, ver, []byte{0x18, 0x63, 0x01}), "unknown field"},
		{"huge length header", []byte{0xa1, 0x03, 0x7b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, ""},
		{"deep nesting", raw([]byte{0xa4}, id, typ, ver, []byte{0x14}, bytes.Repeat([]byte{0x81}, 40), []byte{0x00}), "nested deeper than 16 levels"},
		{"too big", make([]byte, MaxRecordSize+1), "more than"},
		{"no id", raw([]byte{0xa2}, typ, ver), "no event_id"},
		{"bad type", raw([]byte{0xa3}, id, []byte{0x03, 0x63, 'A', '.', 'b'}, ver), "lower-case"},
		{"not a map", []byte{0x80}, "want a map (an event), got major type 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e Event
			err := Decode(tc.data, &e)
			if !errors.Is(err, ErrBadRecord) {
				t.Fatalf("got %v, want ErrBadRecord", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %q, want it to say %q", err, tc.want)
			}
		})
	}
}

func TestEncodeRefusesOversize(t *testing.T) {
	e := Event{ID: NewID(), Type: "x.y", SchemaVersion: 1, Payload: append([]byte{0x5a, 0, 1, 0, 0}, make([]byte, 65536)...)}
	var buf bytes.Buffer
	buf.WriteString("keep")
	if err := Encode(&buf, &e); !errors.Is(err, ErrInvalid) {
		t.Errorf("got %v, want ErrInvalid", err)
	}
	if buf.String() != "keep" {
		t.Error("a refused encode left bytes in the buffer")
	}
}

func TestValidType(t *testing.T) {
	for s, want := range map[string]bool{"camera.motion_started": true, "a": true, "a.b.c": true, "": false, ".a": false, "a.": false, "a..b": false, "Camera.x": false, "a-b": false} {
		if got := validType(s); got != want {
			t.Errorf("validType(%q) = %v, want %v", s, got, want)
		}
	}
}

// TestCodecMatchesLibrary holds the hand-written codec to the reference:
// fxamacker/cbor with Core Deterministic options, on the same struct.
func TestCodecMatchesLibrary(t *testing.T) {
	events := []Event{sampleEvent(), {ID: NewID(), Type: "a", SchemaVersion: 1},
		{Type: "b.c", SchemaVersion: 65535, OccurredAt: -1, ObservedAt: math.MinInt64, IngestedAt: math.MaxInt64, MonotonicNS: -24,
			SourceSequence: math.MaxUint64, ClockUncertaintyMS: math.MaxUint32, AggregateVersion: 1 << 40, AggregateID: strings.Repeat("x", 300), ClockUnsynced: true}}
	for i, e := range events {
		var mine bytes.Buffer
		if err := Encode(&mine, &e); err != nil {
			t.Fatal(err)
		}
		ref, err := encMode.Marshal(&e)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(mine.Bytes(), ref) {
			t.Errorf("event %d: codec\n%x\nlibrary\n%x", i, mine.Bytes(), ref)
		}
		var back Event
		if err := decMode.Unmarshal(mine.Bytes(), &back); err != nil || !reflect.DeepEqual(back, e) {
			t.Errorf("event %d: the library reads the codec's bytes as %+v, %v", i, back, err)
		}
	}
}

func FuzzDecodeEvent(f *testing.F) {
	good := sampleEvent()
	var buf bytes.Buffer
	Encode(&buf, &good)
	f.Add(buf.Bytes())
	f.Add([]byte{0xa0})
	f.Add([]byte{0xbf, 0xff})
	f.Add([]byte{0x9f, 0x9f, 0x9f, 0xff, 0xff, 0xff})
	f.Add([]byte{0xa1, 0x03, 0x7b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		var e Event
		if err := Decode(data, &e); err != nil {
			if !errors.Is(err, ErrBadRecord) {
				t.Fatalf("error %v does not wrap ErrBadRecord", err)
			}
			return
		}
		// The reference library, as strict, reads the same event.
		var ref Event
		if err := decMode.Unmarshal(data, &ref); err != nil || !reflect.DeepEqual(ref, e) {
			t.Fatalf("codec accepted what the library reads as %+v, %v", ref, err)
		}
		// What is accepted round-trips to an equal event.
		var out bytes.Buffer
		if err := Encode(&out, &e); err != nil {
			t.Fatalf("accepted event does not encode: %v", err)
		}
		var back Event
		if err := Decode(out.Bytes(), &back); err != nil || !reflect.DeepEqual(back, e) {
			t.Fatalf("round trip: %v\n%+v\n%+v", err, back, e)
		}
	})
}

// The envelope in CBOR against encoding/json, same struct, same values.
func BenchmarkEnvelope(b *testing.B) {
	e := sampleEvent()
	var cb bytes.Buffer
	Encode(&cb, &e)
	js, _ := json.Marshal(&e)
	b.Run("encode/cbor", func(b *testing.B) {
		var buf bytes.Buffer
		b.ReportAllocs()
		for b.Loop() {
			buf.Reset()
			if err := Encode(&buf, &e); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(buf.Len()), "bytes")
	})
	b.Run("encode/json", func(b *testing.B) {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		b.ReportAllocs()
		for b.Loop() {
			buf.Reset()
			if err := enc.Encode(&e); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(buf.Len()), "bytes")
	})
	b.Run("decode/cbor", func(b *testing.B) {
		var out Event
		b.ReportAllocs()
		for b.Loop() {
			if err := Decode(cb.Bytes(), &out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/json", func(b *testing.B) {
		var out Event
		b.ReportAllocs()
		for b.Loop() {
			out = Event{}
			if err := json.Unmarshal(js, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
}
