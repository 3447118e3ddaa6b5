package world

import (
	"testing"

	"github.com/fxamacker/cbor/v2"

	"github.com/tobe-body/tobe-body/ledger"
	"github.com/tobe-body/tobe-body/sense"
)

// FuzzProjection: what a damaged or forged ledger could hold as the
// model's events, applied one after the other, never panics; an event
// that does not decode is an error, and what was kept is read back by
// the queries' readers without a panic either.
func FuzzProjection(f *testing.F) {
	good := func(v any) []byte {
		p, err := ledger.MarshalPayload(v)
		if err != nil {
			f.Fatal(err)
		}
		return p
	}
	rec := Record{Entity: "room.a", Source: "camera.front#a", Channel: "camera.front", Value: "active", Confidence: 0.8, Provenance: "observed",
		Evidence: []Evidence{{Seq: 1, ID: "x", Type: "camera.motion_started"}}, ValidFrom: 10, ExpireMS: 600000, RunMS: 5}
	f.Add(uint8(0), good(Changed{Entity: "room.a", Kind: Room, Value: "active", Records: []Record{rec}, Since: 10, At: 10}))
	f.Add(uint8(1), good(Step{Entity: "room.a", Ended: []Ended{{Entity: "room.a", Source: "camera.front#a", Record: 2, Reason: EndNotSeen, At: 20}}}))
	f.Add(uint8(2), good(Marks{Seen: []Seen{{Channel: "camera.front", At: 30, RunMS: 40}, {Channel: "audio.mic", At: 20, RunMS: 30}}}))
	f.Add(uint8(0), []byte{0xa1, 0x66, 'e', 'n', 't', 'i', 't', 'y', 0x40})
	f.Add(uint8(1), []byte{0xff})
	types := []string{EventChanged, EventObserved, EventSeen}
	f.Fuzz(func(t *testing.T, typ uint8, payload []byte) {
		kv := ledger.MemKV{}
		for i := 0; i < 3; i++ {
			e := &ledger.Event{Type: types[(int(typ)+i)%len(types)], Payload: payload}
			_ = Projection{}.Apply(ledger.AtSeq(kv, uint64(i+1)), e)
		}
		eachHeld(kv, func(x entry, r Record, err error) bool {
			if err == nil {
				lastSeen(kv, r, x, 1<<62)
			}
			return true
		})
	})
}

// FuzzObservations: any payload of any type the model follows says what
// it says, or nothing; never a panic.
func FuzzObservations(f *testing.F) {
	m, err := Build(Config{}, simFacts)
	if err != nil {
		f.Fatal(err)
	}
	for i := range Types {
		f.Add(uint8(i), []byte{0xa0})
	}
	f.Add(uint8(0), []byte{0xa1, 0x64, 'z', 'o', 'n', 'e', 0x64, 'l', 'e', 'f', 't'})
	f.Fuzz(func(t *testing.T, typ uint8, payload []byte) {
		e := &ledger.Event{Type: Types[int(typ)%len(Types)], ChannelID: "camera.front", Payload: payload}
		for _, o := range m.observations(e, nil) {
			if o.source == "" || o.channel == "" {
				t.Fatalf("%s: an observation of no source: %+v", e.Type, o)
			}
		}
	})
}

// FuzzStepAsEncoded: a camera summary's calm input and a step are read
// as encoded from any payload without a panic, and the state cut from a
// step is one well-formed item, as the CBOR library reads it.
func FuzzStepAsEncoded(f *testing.F) {
	summary, err := ledger.MarshalPayload(sense.CameraSummary{Zones: []string{"left", "right"}, Moving: []string{"left"}, Frames: 1800, OverS: 60})
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(summary))
	step, err := ledger.MarshalPayload(Changed{Entity: "room.a", Value: "active", Records: []Record{{Entity: "room.a", Source: "s", ValidFrom: -1}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(step))
	f.Add([]byte{0xbf, 0x01, 0xff})                    // a map of indefinite length
	f.Add([]byte{0xa2, 0x61, 'a', 0x01, 0x61, 'a', 2}) // a key twice
	f.Fuzz(func(t *testing.T, b []byte) {
		calmInput(nil, "camera.summary", b)
		if st, err := readStep(b); err == nil {
			if err := cbor.Wellformed(st.state); err != nil {
				t.Fatalf("the state cut from %x is not well formed: %v", b, err)
			}
			for _, r := range st.records {
				recordKeys(r)
			}
		}
	})
}
