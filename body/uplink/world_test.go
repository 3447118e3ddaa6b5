package uplink

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/ledger"
)

// worldOf is a body's world model as the uplink is given it: a room and
// a door in the hall, presence in the living room, a window with no
// area, and the air, an output and the body, which are not announced.
func worldOf() []WorldEntity {
	return []WorldEntity{
		{ID: "air.hall", Kind: "air", Name: "hall"},
		{ID: "body", Kind: "body", Name: "body"},
		{ID: "contact.back_window", Kind: "window", Name: "back_window"},
		{ID: "contact.front_door", Kind: "door", Name: "front_door", Area: "Hall"},
		{ID: "contact.sofa", Kind: "presence", Name: "sofa", Area: "Living room"},
		{ID: "output.relay1", Kind: "output", Name: "relay1"},
		{ID: "room.front", Kind: "room", Name: "front", Area: "Hall"},
	}
}

// The world model's rooms, doors, windows and presence are binary
// sensors of their device classes, each reading its entity's document
// for its state and its attributes; the air, outputs and the body are
// not announced. The entities of an area are on a device of the area's
// (Home Assistant takes suggested_area from a device only), through the
// body's device.
func TestWorldDiscovery(t *testing.T) {
	o := haOptions(t)
	es := o.Entities(Board{World: worldOf()})
	byID := map[string]Entity{}
	for _, e := range es {
		byID[e.ID] = e
	}
	for _, tc := range []struct {
		id, entity, class, area, on, off string
	}{
		{"world_room_front", "room.front", "occupancy", "Hall", "active", "quiet"},
		{"world_contact_front_door", "contact.front_door", "door", "Hall", "open", "closed"},
		{"world_contact_back_window", "contact.back_window", "window", "", "open", "closed"},
		{"world_contact_sofa", "contact.sofa", "presence", "Living room", "present", "absent"},
	} {
		e, ok := byID[tc.id]
		if !ok {
			t.Errorf("no entity %s", tc.id)
			continue
		}
		topic := o.base() + "/state/world/" + tc.entity
		if e.Platform != "binary_sensor" || e.DeviceClass != tc.class || e.Area != tc.area {
			t.Errorf("%s: %s, device class %q, area %q; want binary_sensor, %q, %q", tc.id, e.Platform, e.DeviceClass, e.Area, tc.class, tc.area)
		}
		if e.StateTopic != topic || e.AttributesTopic != topic {
			t.Errorf("%s: state %s, attributes %s; want both %s", tc.id, e.StateTopic, e.AttributesTopic, topic)
		}
		if !strings.Contains(e.ValueTemplate, "'"+tc.on+"'") || !strings.Contains(e.ValueTemplate, "'"+tc.off+"'") || e.AttributesTemplate != WorldAttributes {
			t.Errorf("%s: templates %q, %q", tc.id, e.ValueTemplate, e.AttributesTemplate)
		}
	}
	for _, id := range []string{"world_air_hall", "world_output_relay1", "world_body"} {
		if _, ok := byID[id]; ok {
			t.Errorf("%s is announced; the air, outputs and the body are not (yet)", id)
		}
	}

	// Device-based: the body's device, and one for each area.
	docs, err := o.Discovery(HomeAssistant{Name: "hall body", Version: "1.2"}, es)
	if err != nil {
		t.Fatal(err)
	}
	type device struct {
		Dev struct {
			IDs       []string `json:"ids"`
			Name      string   `json:"name"`
			Area      string   `json:"suggested_area"`
			ViaDevice string   `json:"via_device"`
		} `json:"dev"`
		Avail string                    `json:"availability_topic"`
		Cmps  map[string]map[string]any `json:"cmps"`
	}
	body := "tobe-body-" + bodyID.String()
	read := func(topic string) device {
		t.Helper()
		var d device
		if err := json.Unmarshal(docs[topic], &d); err != nil {
			t.Fatalf("%s: %v (topics %v)", topic, err, keys(docs))
		}
		return d
	}
	prefix := "homeassistant/device/" + bodyID.String()
	if len(docs) != 3 {
		t.Errorf("%d discovery documents (%v), want 3: the body's, the hall's and the living room's", len(docs), keys(docs))
	}
	main, hall, living := read(prefix+"/config"), read(prefix+"_hall/config"), read(prefix+"_living_room/config")
	if main.Dev.Area != "" || len(main.Dev.IDs) != 1 || main.Dev.IDs[0] != body || main.Cmps["world_contact_back_window"] == nil {
		t.Errorf("the body's device: %+v, components %v", main.Dev, main.Cmps)
	}
	if hall.Dev.Area != "Hall" || hall.Dev.ViaDevice != body || hall.Dev.IDs[0] != body+"-hall" || hall.Dev.Name != "Hall (hall body)" ||
		hall.Avail != o.StatusTopic() || len(hall.Cmps) != 2 {
		t.Errorf("the hall's device: %+v, availability %q, %d components", hall.Dev, hall.Avail, len(hall.Cmps))
	}
	if living.Dev.Area != "Living room" || len(living.Cmps) != 1 || living.Cmps["world_contact_sofa"]["device_class"] != "presence" {
		t.Errorf("the living room's device: %+v, %v", living.Dev, living.Cmps)
	}
	room := hall.Cmps["world_room_front"]
	for k, want := range map[string]any{"p": "binary_sensor", "device_class": "occupancy", "state_topic": o.StateTopic("world/room.front"),
		"json_attributes_topic": o.StateTopic("world/room.front"), "json_attributes_template": WorldAttributes,
		"unique_id": bodyID.String() + "_world_room_front", "value_template": byID["world_room_front"].ValueTemplate} {
		if room[k] != want {
			t.Errorf("the room's %s: %v, want %v", k, room[k], want)
		}
	}
	if door := hall.Cmps["world_contact_front_door"]; door["device_class"] != "door" || door["state_topic"] != o.StateTopic("world/contact.front_door") {
		t.Errorf("the door: %v", door)
	}

	// Per entity: each document's device is its area's.
	docs, err = o.Discovery(HomeAssistant{Name: "hall body", Version: "1.2", PerEntity: true}, es)
	if err != nil {
		t.Fatal(err)
	}
	var one struct {
		Device struct {
			IDs       []string `json:"identifiers"`
			Area      string   `json:"suggested_area"`
			ViaDevice string   `json:"via_device"`
		} `json:"device"`
		DeviceClass string `json:"device_class"`
		Attributes  string `json:"json_attributes_template"`
	}
	topic := "homeassistant/binary_sensor/" + bodyID.String() + "/world_room_front/config"
	if err := json.Unmarshal(docs[topic], &one); err != nil {
		t.Fatalf("%s: %v", topic, err)
	}
	if one.Device.Area != "Hall" || one.Device.ViaDevice != body || one.DeviceClass != "occupancy" || one.Attributes != WorldAttributes {
		t.Errorf("per entity, the room: %+v", one)
	}
}

// The world entities' templates, rendered by Jinja2 over the documents
// the body publishes: ON for the kind's on value, OFF for its off value,
// None (Home Assistant's unknown) for unknown; the attributes a JSON
// object of the confidence, provenance, conflict and since.
func TestWorldTemplatesReadTheDocuments(t *testing.T) {
	if err := exec.Command("python3", "-c", "import jinja2").Run(); err != nil {
		t.Skipf("no python3 with jinja2 here (%v): scripts/deps.sh installs python3-jinja2", err)
	}
	o := haOptions(t)
	byID := map[string]Entity{}
	for _, e := range o.Entities(Board{World: worldOf()}) {
		byID[e.ID] = e
	}
	since := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	doc := func(entity, kind, value string) string {
		st := WorldState{Entity: entity, Kind: kind, Value: value}
		if value != "unknown" {
			st.Confidence, st.Provenance, st.Since = 0.9, "observed", &since
		}
		return jsonOf(t, WorldDoc{WorldState: st, Made: Made{At: since.Add(time.Minute), ClockSynced: true}})
	}
	cases := []struct {
		entity, id, kind, value, want string
	}{
		{"room.front", "world_room_front", "room", "active", "ON"},
		{"room.front", "world_room_front", "room", "quiet", "OFF"},
		{"room.front", "world_room_front", "room", "unknown", "None"},
		{"contact.front_door", "world_contact_front_door", "door", "open", "ON"},
		{"contact.front_door", "world_contact_front_door", "door", "closed", "OFF"},
		{"contact.front_door", "world_contact_front_door", "door", "unknown", "None"},
		{"contact.back_window", "world_contact_back_window", "window", "open", "ON"},
		{"contact.back_window", "world_contact_back_window", "window", "closed", "OFF"},
		{"contact.sofa", "world_contact_sofa", "presence", "present", "ON"},
		{"contact.sofa", "world_contact_sofa", "presence", "absent", "OFF"},
		{"contact.sofa", "world_contact_sofa", "presence", "unknown", "None"},
	}
	// One Jinja2 for them all: a python3 each takes half a second.
	var jobs [][2]string
	for _, tc := range cases {
		e, d := byID[tc.id], doc(tc.entity, tc.kind, tc.value)
		jobs = append(jobs, [2]string{e.ValueTemplate, d}, [2]string{e.AttributesTemplate, d})
	}
	out := renderAll(t, jobs)
	for i, tc := range cases {
		d := jobs[2*i][1]
		if got := out[2*i]; got != tc.want {
			t.Errorf("%s over %s: %q, want %q", tc.id, d, got, tc.want)
		}
		var attrs map[string]any
		if got := out[2*i+1]; json.Unmarshal([]byte(got), &attrs) != nil {
			t.Errorf("%s's attributes over %s: %q is not a JSON object", tc.id, d, got)
			continue
		}
		want := map[string]any{"confidence": 0.9, "provenance": "observed", "conflict": false, "since": "2026-03-01T10:00:00Z"}
		if tc.value == "unknown" {
			want = map[string]any{"confidence": 0.0, "provenance": "", "conflict": false, "since": nil}
		}
		if jsonOf(t, attrs) != jsonOf(t, want) {
			t.Errorf("%s's attributes over %s: %v, want %v", tc.id, d, attrs, want)
		}
	}
}

// renderAll renders templates over documents (each a pair) as render
// does, in one Jinja2.
func renderAll(t *testing.T, jobs [][2]string) []string {
	t.Helper()
	const script = `import json, sys, jinja2
env = jinja2.Environment()
print(json.dumps([env.from_string(t).render(value_json=json.loads(v), value=v).strip() for t, v in json.load(sys.stdin)]), end="")`
	in, _ := json.Marshal(jobs)
	cmd := exec.Command("python3", "-c", script)
	cmd.Stdin = bytes.NewReader(in)
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("jinja2: %v", err)
	}
	var out []string
	if err := json.Unmarshal(b, &out); err != nil || len(out) != len(jobs) {
		t.Fatalf("jinja2 gave %s (%v)", b, err)
	}
	return out
}

// worldChangedPayload is a world.changed payload as the world model
// writes it, by its field names, with the fields the documents do not
// read.
func worldChangedPayload(t testing.TB, entity, kind, value string, since time.Time) []byte {
	t.Helper()
	p, err := ledger.MarshalPayload(map[string]any{"entity": entity, "kind": kind, "value": value, "was": "quiet", "confidence": 0.8,
		"provenance": "observed", "observed": true, "sources": []string{"camera.front#frame"}, "records": []uint64{7},
		"since": since.UnixNano(), "at": since.UnixNano()})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDecodeWorldChanged(t *testing.T) {
	since := time.Date(2026, 3, 1, 10, 0, 0, 5, time.UTC)
	air, err := ledger.MarshalPayload(map[string]any{"entity": "air.hall", "kind": "air", "value": "", "confidence": 0.7, "provenance": "observed",
		"readings": map[string]any{"temperature": map[string]any{"value": 21.5, "uncertainty": 0.5, "unit": "°C"}}, "since": since.UnixNano(), "at": since.UnixNano()})
	if err != nil {
		t.Fatal(err)
	}
	noSince, _ := ledger.MarshalPayload(map[string]any{"entity": "body", "kind": "body", "value": "unknown", "conflict": true})
	noEntity, _ := ledger.MarshalPayload(map[string]any{"kind": "room", "value": "active"})
	wrongType, _ := ledger.MarshalPayload(map[string]any{"entity": 5})
	for _, tc := range []struct {
		name    string
		payload []byte
		want    string // the document's state as JSON; "" an error
	}{
		{"a room", worldChangedPayload(t, "room.front", "room", "active", since),
			`{"entity":"room.front","kind":"room","value":"active","confidence":0.8,"provenance":"observed","conflict":false,"since":"2026-03-01T10:00:00.000000005Z"}`},
		{"the air", air,
			`{"entity":"air.hall","kind":"air","value":"","readings":{"temperature":{"value":21.5,"uncertainty":0.5,"unit":"°C"}},"confidence":0.7,"provenance":"observed","conflict":false,"since":"2026-03-01T10:00:00.000000005Z"}`},
		{"no since", noSince, `{"entity":"body","kind":"body","value":"unknown","confidence":0,"provenance":"","conflict":true,"since":null}`},
		{"no entity", noEntity, ""},
		{"an entity not a string", wrongType, ""},
		{"not CBOR", []byte{0xff}, ""},
		{"empty", nil, ""},
	} {
		st, err := DecodeWorldChanged(tc.payload)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("%s: %+v, want an error", tc.name, st)
		case tc.want != "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "":
			if got := jsonOf(t, st); got != tc.want {
				t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
			}
		}
	}
}

func FuzzDecodeWorldChanged(f *testing.F) {
	f.Add(worldChangedPayload(f, "room.front", "room", "active", time.Unix(1, 0)))
	f.Add([]byte{0xff})
	f.Add([]byte{0xa0})
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := DecodeWorldChanged(b)
		if err == nil && st.Entity == "" {
			t.Fatalf("%x: no error and no entity", b)
		}
		if err == nil {
			if _, err := json.Marshal(WorldDoc{WorldState: st}); err != nil && !strings.Contains(err.Error(), "unsupported value") {
				t.Fatalf("%x: the document does not marshal: %v", b, err)
			}
		}
	})
}

// stampClock is a body clock for the documents' stamps that the test
// moves and synchronises.
type stampClock struct {
	mu     sync.Mutex
	now    time.Time
	synced bool
}

func (c *stampClock) set(now time.Time, synced bool) {
	c.mu.Lock()
	c.now, c.synced = now, synced
	c.mu.Unlock()
}

func (c *stampClock) stamp() body.Stamp {
	c.mu.Lock()
	defer c.mu.Unlock()
	return body.Stamp{UTC: c.now, Unsynced: !c.synced}
}

// The world's documents against a broker and a real ledger: Start sets
// one for every entity of the model from its state now (WorldNow, never
// the ledger's history), stamped by the body's clock; an entity the
// model does not have gets none. A world.changed appended to the ledger
// sets its entity's document again (value, since, made_at and the
// clock's sync as they are then), and so does the expiry that makes it
// unknown.
func TestWorldDocumentsStartAndFollow(t *testing.T) {
	b := startBroker(t)
	s := openStore(t)
	r, _ := run(t, s, testOptions(b))
	// History the documents must not read: a change before After.
	old := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	if _, err := s.Append(context.Background(), ledger.Event{Type: EventWorldChanged, ChannelID: "room.front", Provenance: ledger.Observed,
		Payload: worldChangedPayload(t, "room.front", "room", "quiet", old)}); err != nil {
		t.Fatal(err)
	}
	started := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	clock := &stampClock{now: started}
	doorSince := started.Add(-time.Hour)
	now := func() ([]WorldState, error) {
		var out []WorldState
		for _, w := range worldOf() {
			st := WorldState{Entity: w.ID, Kind: w.Kind, Value: "unknown"}
			if w.ID == "contact.front_door" {
				st.Value, st.Confidence, st.Provenance, st.Since = "closed", 1, "observed", &doorSince
			}
			out = append(out, st)
		}
		return append(out, WorldState{Entity: "room.gone", Kind: "room", Value: "active"}), nil
	}
	st := &States{Relay: r, Store: s, After: lastSeq(t, s), Board: Board{World: worldOf()}, WorldNow: now, Clock: clock.stamp,
		Self: func() (body.SelfState, bool) { return body.SelfState{}, false }, Log: slog.New(slog.DiscardHandler)}
	if err := st.Start(); err != nil {
		t.Fatal(err)
	}
	docOf := func(entity string) (WorldDoc, bool) {
		v, ok := b.retained(r.opts.StateTopic("world/" + entity))
		var d WorldDoc
		return d, ok && json.Unmarshal([]byte(v), &d) == nil
	}
	for _, w := range worldOf() {
		eventually(t, 5*time.Second, w.ID+"'s document", func() bool { _, ok := docOf(w.ID); return ok })
		d, _ := docOf(w.ID)
		want := "unknown"
		if w.ID == "contact.front_door" {
			want = "closed"
		}
		if d.Entity != w.ID || d.Kind != w.Kind || d.Value != want || !d.At.Equal(started) || d.ClockSynced {
			t.Errorf("%s at the start: %+v, want %s made at %v, the clock not synchronised", w.ID, d, want, started)
		}
	}
	if d, _ := docOf("contact.front_door"); d.Since == nil || !d.Since.Equal(doorSince) || d.Provenance != "observed" || d.Confidence != 1 {
		t.Errorf("the door at the start: %+v, since %v", d, d.Since)
	}
	if d, _ := docOf("room.front"); d.Since != nil {
		t.Errorf("the room at the start: since %v; its state now is unknown, whatever history said", d.Since)
	}
	if _, ok := docOf("room.gone"); ok {
		t.Error("an entity the model does not have has a document")
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); st.Follow(ctx) }()
	defer func() { cancel(); wg.Wait() }()
	for i, tc := range []struct {
		value  string
		synced bool
	}{
		{"active", true},
		{"unknown", false}, // its source not seen within its expiry
	} {
		since := started.Add(time.Duration(i+1) * time.Minute)
		made := since.Add(time.Second)
		clock.set(made, tc.synced)
		if _, err := s.Append(context.Background(), ledger.Event{Type: EventWorldChanged, ChannelID: "room.front", Provenance: ledger.Observed,
			Payload: worldChangedPayload(t, "room.front", "room", tc.value, since)}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 5*time.Second, "the room "+tc.value, func() bool { d, _ := docOf("room.front"); return d.Value == tc.value })
		d, _ := docOf("room.front")
		if d.Since == nil || !d.Since.Equal(since) || !d.At.Equal(made) || d.ClockSynced != tc.synced || d.Confidence != 0.8 || d.Provenance != "observed" {
			t.Errorf("the room %s: %+v, since %v; want since %v, made at %v, clock synced %v", tc.value, d, d.Since, since, made, tc.synced)
		}
	}
	if d, _ := docOf("contact.front_door"); d.Value != "closed" || !d.At.Equal(started) {
		t.Errorf("the door, which did not change: %+v", d)
	}
}
