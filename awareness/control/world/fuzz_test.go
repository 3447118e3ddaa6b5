package world

import (
	"bytes"
	"maps"
	"slices"
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
	rec := Record{Entity: "room.a", Source: "camera.front#a", Channel: "camera.front", Value: "active", Confidence: 0.8, Provenance: "observed",
		Evidence: []Evidence{{Seq: 1, ID: "x", Type: "camera.motion_started"}}, ValidFrom: 10, ExpireMS: 600000, RunMS: 5}
	f.Add(uint8(0), payload(f, Changed{Entity: "room.a", Kind: Room, Value: "active", Records: []Record{rec}, Since: 10, At: 10}))
	f.Add(uint8(1), payload(f, Step{Entity: "room.a", Ended: []Ended{{Entity: "room.a", Source: "camera.front#a", Record: 2, Reason: EndNotSeen, At: 20}}}))
	f.Add(uint8(2), payload(f, Marks{Seen: []Seen{{Channel: "camera.front", At: 30, RunMS: 40}, {Channel: "audio.mic", At: 20, RunMS: 30}}}))
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

// FuzzStepAsEncoded: a camera summary's calm input and zones and a step
// are read as encoded from any bytes without a panic; of a payload the
// ledger checked, a summary's zones are the ones the library decodes,
// and the state cut from a step is one well-formed item, as the
// library reads it.
func FuzzStepAsEncoded(f *testing.F) {
	summary, err := ledger.MarshalPayload(sense.CameraSummary{Zones: []string{"left", "right"}, Moving: []string{"left"}, Frames: 1800, OverS: 60})
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(summary))
	for _, sum := range []sense.CameraSummary{{}, {Zones: []string{"a"}}, {Zones: []string{}, Moving: []string{"x", "y"}, Skipped: 3}} {
		p, err := ledger.MarshalPayload(sum)
		if err != nil {
			f.Fatal(err)
		}
		f.Add([]byte(p))
	}
	step, err := ledger.MarshalPayload(Changed{Entity: "room.a", Value: "active", Records: []Record{{Entity: "room.a", Source: "s", ValidFrom: -1}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(step))
	f.Add([]byte{0xbf, 0x01, 0xff})                    // a map of indefinite length
	f.Add([]byte{0xa2, 0x61, 'a', 0x01, 0x61, 'a', 2}) // a key twice
	f.Fuzz(func(t *testing.T, b []byte) {
		calmInput(nil, "camera.summary", b)
		zones, moving, zonesOK := summaryZones(b)
		st, err := readStep(b)
		if ledger.RawFields(b, func(_, _ []byte) error { return nil }) != nil {
			return // not a payload the ledger would give: read without a panic, no more
		}
		if sum := (sense.CameraSummary{}); ledger.UnmarshalPayload(b, &sum) == nil {
			if !zonesOK || !slices.Equal(zones, sum.Zones) || !slices.Equal(moving, sum.Moving) {
				t.Fatalf("%x: a summary's zones read as encoded %q %q (%v), decoded %q %q", b, zones, moving, zonesOK, sum.Zones, sum.Moving)
			}
		}
		if err == nil {
			if err := cbor.Wellformed(st.state); err != nil {
				t.Fatalf("the state cut from %x is not well formed: %v", b, err)
			}
			for _, r := range st.records {
				if e, s, vf, err := recordKeys(r.raw); err != nil || e != r.entity || s != r.source || vf != r.validFrom {
					t.Fatalf("a record of %x read again is %q %q %d (%v), read first %q %q %d", b, e, s, vf, err, r.entity, r.source, r.validFrom)
				}
			}
		}
	})
}

// roomRecord is a record of room.a's camera zone, valid from at.
func roomRecord(value string, at int64) Record {
	return Record{Entity: "room.a", Source: "camera.front#a", Channel: "camera.front", Value: value, Confidence: 0.8, Provenance: "observed",
		Evidence: []Evidence{{Seq: 1, ID: "x", Type: "camera.motion_started"}}, ValidFrom: at, ExpireMS: 600000, RunMS: at}
}

// applyThenForget applies evs to an empty memory, the first at sequence
// 1, then forgets the ones at the indexes forget, in that order.
func applyThenForget(t *testing.T, evs []*ledger.Event, forget ...int) ledger.MemKV {
	t.Helper()
	kv := ledger.MemKV{}
	for i, e := range evs {
		if err := (Projection{}).Apply(ledger.AtSeq(kv, uint64(i+1)), e); err != nil {
			t.Fatal(err)
		}
	}
	for _, i := range forget {
		if err := (Projection{}).Forget(ledger.AtSeq(kv, uint64(i+1)), evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	return kv
}

// Forgetting what the archive took is idempotent (a file kept before the
// memory forgot is caught up once, and may have forgotten already): an
// event forgotten twice leaves what forgetting it once leaves. A last
// stays, its pointer marked, and goes when the next takes its place.
func TestForgettingTwiceIsForgettingOnce(t *testing.T) {
	evs := []*ledger.Event{
		{Type: EventChanged, Payload: payload(t, Changed{Entity: "room.a", Kind: Room, Value: "active", Records: []Record{roomRecord("active", 10)}, Since: 10, At: 10})},
		{Type: EventSeen, Payload: payload(t, Marks{Seen: []Seen{{Channel: "camera.front", At: 15, RunMS: 15}}})},
		{Type: EventChanged, Payload: payload(t, Changed{Entity: "room.a", Kind: Room, Value: "quiet", Records: []Record{roomRecord("quiet", 20)}, Since: 20, At: 20})},
	}
	build := func(forget ...int) ledger.MemKV { return applyThenForget(t, evs, forget...) }
	for _, forget := range [][]int{{0}, {1}, {2}, {0, 1, 2}} {
		once, twice := build(forget...), build(append(forget, forget...)...)
		if !maps.EqualFunc(once, twice, bytes.Equal) {
			t.Errorf("forgetting %v twice: %d keys, once: %d", forget, len(twice), len(once))
		}
	}
	// All three forgotten: the lasts stay, their pointers marked.
	kv := build(0, 1, 2)
	last := kv.Get(lastKey("room.a", "camera.front#a"))
	if x, ok := entryOf(last); !ok || x.seq != 3 || len(last) != tailLen+1 || kv.Get(entryKey("room.a", "camera.front#a", x)) == nil {
		t.Errorf("the source's last: %x (%+v)", last, x)
	}
	if p := kv.Get(entityKey("room.a")); len(p) != 17 {
		t.Errorf("the entity's last change's pointer: %x", p)
	}
	if p := kv.Get(lastMarkKey("camera.front")); len(p) != 9 || getU64(p) != 2 || kv.Get(markKey(2, "camera.front")) == nil {
		t.Errorf("the channel's last mark's pointer: %x", p)
	}
	if kv.Get(entryKey("room.a", "camera.front#a", entry{from: 10, seq: 1})) != nil {
		t.Error("a record superseded before the archive took it is kept")
	}
	// The next takes their place, and the forgotten go.
	next := &ledger.Event{Type: EventChanged, Payload: payload(t, Changed{Entity: "room.a", Kind: Room, Value: "active", Records: []Record{roomRecord("active", 30)}, Since: 30, At: 30})}
	if err := (Projection{}).Apply(ledger.AtSeq(kv, 4), next); err != nil {
		t.Fatal(err)
	}
	if kv.Get(entryKey("room.a", "camera.front#a", entry{from: 20, seq: 3})) != nil || kv.Get(historyKey("room.a", 20, 3)) != nil {
		t.Error("the forgotten last and change stay after the next took their place")
	}
	if x, ok := entryOf(kv.Get(lastKey("room.a", "camera.front#a"))); !ok || x.seq != 4 || len(kv.Get(lastKey("room.a", "camera.front#a"))) != tailLen {
		t.Errorf("the source's last after the next: %+v", x)
	}
}

// The memory keeps an event's FROMs (its r key) only when one is not the
// event's own valid time: after the clock stepped back, a record's
// valid_from before its source's last entry's begins where that one
// did. Forgetting finds the keys either way, once or twice.
func TestAMovedFromIsKept(t *testing.T) {
	evs := []*ledger.Event{
		{Type: EventChanged, Payload: payload(t, Changed{Entity: "room.a", Kind: Room, Value: "active", Records: []Record{roomRecord("active", 20)}, Since: 20, At: 20})},
		// The clock stepped back: valid at 5, recorded after the one at 20.
		{Type: EventChanged, Payload: payload(t, Changed{Entity: "room.a", Kind: Room, Value: "quiet", Records: []Record{roomRecord("quiet", 5)}, Since: 5, At: 5})},
		{Type: EventChanged, Payload: payload(t, Changed{Entity: "room.a", Kind: Room, Value: "active", Records: []Record{roomRecord("active", 30)}, Since: 30, At: 30})},
	}
	build := func(forget ...int) ledger.MemKV { return applyThenForget(t, evs, forget...) }
	kv := build()
	for seq, want := range map[uint64]bool{1: false, 2: true, 3: false} {
		if got := kv.Get(fromsKey(seq)) != nil; got != want {
			t.Errorf("event %d: r key kept %v, want %v", seq, got, want)
		}
	}
	moved := entry{from: 20, seq: 2}
	if kv.Get(entryKey("room.a", "camera.front#a", moved)) == nil || kv.Get(historyKey("room.a", 20, 2)) == nil {
		t.Fatal("the record and the change valid at 5 are not where the ones before them began")
	}
	for _, forget := range [][]int{{1}, {0, 1}, {0, 1, 2}} {
		once, twice := build(forget...), build(append(forget, forget...)...)
		if !maps.EqualFunc(once, twice, bytes.Equal) {
			t.Errorf("forgetting %v twice: %d keys, once: %d", forget, len(twice), len(once))
		}
		if once.Get(entryKey("room.a", "camera.front#a", moved)) != nil || once.Get(historyKey("room.a", 20, 2)) != nil || once.Get(fromsKey(2)) != nil {
			t.Errorf("forgetting %v: the moved record, its change or its r key stays", forget)
		}
	}
	// All forgotten: the lasts stay, marked, and no r key.
	kv = build(0, 1, 2)
	if x, ok := entryOf(kv.Get(lastKey("room.a", "camera.front#a"))); !ok || x.seq != 3 || !forgotten(kLast, kv.Get(lastKey("room.a", "camera.front#a"))) {
		t.Errorf("the source's last: %+v", x)
	}
	for k := range kv {
		if k[0] == kFroms {
			t.Errorf("an r key stays: %x", k)
		}
	}
}
