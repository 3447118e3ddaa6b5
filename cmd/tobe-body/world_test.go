package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/control/world"
	"github.com/tobe-body/tobe-body/body/uplink"
	"github.com/tobe-body/tobe-body/ledger"
)

// The uplink reads world.changed by its field names (body may not
// import the world model): a change as the model writes it, every field
// set, reads as the model meant it; and the values the uplink's Home
// Assistant entities turn on and off are the kinds' values.
func TestUplinkReadsTheWorldModelsChanges(t *testing.T) {
	if uplink.EventWorldChanged != world.EventChanged {
		t.Fatalf("the uplink follows %q, the model writes %q", uplink.EventWorldChanged, world.EventChanged)
	}
	since := time.Date(2026, 3, 1, 10, 0, 0, 7, time.UTC)
	for _, c := range []world.Changed{
		{Entity: "room.front", Kind: world.Room, Value: "active", Was: "quiet", Confidence: 0.6, Provenance: "inferred", Conflict: true, Observed: true,
			Sources: []string{"camera.front#frame", "audio.mic"}, Records: []world.Record{{Entity: "room.front", Source: "audio.mic", Value: "active", Evidence: []world.Evidence{{Seq: 3, ID: "x", Type: "audio.voice_started"}}}},
			Ended: []world.Ended{{Entity: "room.front", Source: "camera.front#frame", Record: 2, Reason: world.EndNotSeen}}, SinceRunMS: 5, Since: since.UnixNano(), At: since.Add(time.Second).UnixNano()},
		{Entity: "air.hall", Kind: world.Air, Readings: map[string]world.Reading{"temperature": {Value: 21.5, Uncertainty: 0.5, Unit: "°C"},
			"humidity": {Value: 40, Uncertainty: 3, Unit: "%"}}, Confidence: 0.9, Provenance: "observed", Since: since.UnixNano(), At: since.UnixNano()},
		{Entity: "contact.front_door", Kind: world.Door, Value: world.Unknown, Was: "open", Since: since.UnixNano(), At: since.UnixNano()},
	} {
		p, err := ledger.MarshalPayload(c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := uplink.DecodeWorldChanged(p)
		if err != nil {
			t.Fatalf("%s: %v", c.Entity, err)
		}
		want := uplink.WorldState{Entity: c.Entity, Kind: string(c.Kind), Value: c.Value, Confidence: c.Confidence, Provenance: c.Provenance, Conflict: c.Conflict, Since: &since}
		for q, r := range c.Readings {
			if want.Readings == nil {
				want.Readings = map[string]uplink.WorldReading{}
			}
			want.Readings[q] = uplink.WorldReading{Value: r.Value, Uncertainty: r.Uncertainty, Unit: r.Unit}
		}
		if g, w := jsonString(t, got), jsonString(t, want); g != w {
			t.Errorf("%s: the uplink reads %s, want %s", c.Entity, g, w)
		}
	}
	o := uplink.Options{AgentID: "a", BodyID: "b"}
	for _, k := range []world.Kind{world.Room, world.Door, world.Window, world.Presence} {
		es := o.Entities(uplink.Board{World: []uplink.WorldEntity{{ID: "x.y", Kind: string(k), Name: "y"}}})
		i := slices.IndexFunc(es, func(e uplink.Entity) bool { return e.ID == "world_x_y" })
		if i < 0 {
			t.Errorf("%s: not announced", k)
			continue
		}
		for _, v := range k.Values() {
			if !strings.Contains(es[i].ValueTemplate, "'"+v+"'") {
				t.Errorf("%s: the template %s does not read the value %s", k, es[i].ValueTemplate, v)
			}
		}
	}
}

// worldNow reads the model's projection: a told door is open since it
// was told, every other entity unknown since no time known.
func TestWorldNowForTheUplink(t *testing.T) {
	m, err := world.Build(world.Config{Entities: map[string]world.EntityConfig{"front_door": {Kind: "door", Sources: []world.Source{{Channel: "gpio-in.door"}}, Area: "Hall"}}},
		world.Facts{Cameras: map[string][]string{"camera.front": {"frame"}}, Lines: []string{"gpio-in.door"}, CameraSummary: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	s, err := ledger.Open(ledger.Options{Path: filepath.Join(t.TempDir(), "ledger.db"), Projections: world.Projections(),
		Derivers: []ledger.Deriver{&world.Deriver{Model: m}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	told := time.Now().UTC().Truncate(time.Millisecond)
	if _, err := world.Tell(context.Background(), s, m, world.Assertion{Entity: "contact.front_door", Value: "open", By: "admin:test"}, told); err != nil {
		t.Fatal(err)
	}
	es := worldEntities(m)
	if got := jsonString(t, es); got != `[{"ID":"body","Kind":"body","Name":"body","Area":""},{"ID":"contact.front_door","Kind":"door","Name":"front_door","Area":"Hall"},{"ID":"room.front","Kind":"room","Name":"front","Area":""}]` {
		t.Errorf("the entities: %s", got)
	}
	sts, err := worldNow(world.Reader{Store: s, Model: m})()
	if err != nil {
		t.Fatal(err)
	}
	if len(sts) != len(es) {
		t.Fatalf("%d states for %d entities", len(sts), len(es))
	}
	for _, st := range sts {
		switch st.Entity {
		case "contact.front_door":
			if st.Value != "open" || st.Provenance != "told" || st.Since == nil || !st.Since.Equal(told) {
				t.Errorf("the door: %s", jsonString(t, st))
			}
		default:
			if st.Value != world.Unknown || st.Since != nil {
				t.Errorf("%s: %s, want unknown since no time known", st.Entity, jsonString(t, st))
			}
		}
	}
}

func jsonString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAnAgentWaitsForTheWorld: on the sim board, an agent (the official
// MCP client over `tobe-body stdio`) waits for the room at the door to
// become active; the sim's moving object makes it so and the gate wakes
// the agent with the world.changed, whose state the agent then reads
// with world_now and explains down to the motion event.
func TestAnAgentWaitsForTheWorld(t *testing.T) {
	d := startDaemon(t, agentConfig()+zones)
	defer d.stop(t)
	b := startBridge(t, "--data", d.data, "--principal", "pi-high")
	defer b.stdin.Close()
	if c := b.content(t, "work_create", map[string]any{"id": "door-room", "goal": "know when the room at the door is busy",
		"done_when": []string{"told the room is active"}}); c.Status != "success" {
		t.Fatalf("work_create: %+v", c)
	}
	if c := b.content(t, "wait_add", map[string]any{"id": "busy", "owner": "door-room", "event_types": []string{"world.changed"},
		"match":    []any{map[string]any{"field": "entity", "equals": "room.front-door"}, map[string]any{"field": "value", "equals": "active"}},
		"priority": "high", "cooldown_ms": 3_600_000, "expires_in": "10m"}); c.Status != "success" {
		t.Fatalf("wait_add: %+v", c)
	}
	pushed := gatePushes(t, b, "busy", time.Now().Add(2*time.Minute), 1)
	if len(pushed) != 1 {
		t.Fatalf("no wake for the room in two minutes; the body's log:\n%s", d.stderr)
	}
	if o := pushed[0]; o.Type != "world.changed" || o.Attention != ledger.High {
		t.Fatalf("the wake: %+v", o)
	}
	c := b.content(t, "world_now", map[string]any{})
	raw, _ := json.Marshal(c.Data)
	var now awareness.WorldStates
	if err := json.Unmarshal(raw, &now); err != nil || len(now.States) == 0 {
		t.Fatalf("world_now: %+v %v", c, err)
	}
	c = b.content(t, "world_explain", map[string]any{"entity": "room.front-door"})
	raw, _ = json.Marshal(c.Data)
	var x world.Explanation
	if err := json.Unmarshal(raw, &x); err != nil || len(x.Chains) != 1 || len(x.Chains[0].Records) == 0 {
		t.Fatalf("world_explain: %+v %v", c, err)
	}
	var cited []string
	for _, r := range x.Chains[0].Records {
		for _, e := range r.Evidence {
			if e.Event == nil || e.Event.ID != e.ID || !strings.HasPrefix(e.Event.Type, "camera.") {
				t.Errorf("evidence %+v does not resolve to its camera event", e)
			}
			cited = append(cited, e.Type)
		}
	}
	t.Logf("the room's evidence: %v", cited)

	// The same through the CLI, as a local administrator.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"world", "now", "room.front-door"}, "room.front-door"},
		{[]string{"world", "explain", "room.front-door"}, "evidence camera.motion_"},
		{[]string{"world", "at", "room.front-door", "-1s"}, "camera.front#door="},
		{[]string{"world", "history", "room.front-door", "--from", "-10m"}, "active"},
		{[]string{"world", "tell", "room.front-door", "quiet", "--for", "1m"}, "told:"},
		{[]string{"world", "withdraw", "room.front-door"}, "room.front-door"},
		{[]string{"world", "now", "--json"}, `"entity": "body"`},
	} {
		out, err := runCmd(t, append(tc.args, "--data", d.data)...)
		if err != nil || !strings.Contains(out, tc.want) {
			t.Errorf("tobe-body %s: %v\n%s\nwant it to say %q", strings.Join(tc.args, " "), err, out, tc.want)
		}
	}
	if out, err := runCmd(t, "world", "at", "room.front-door", "yesterday", "--data", d.data); err == nil || !strings.Contains(out+err.Error(), "RFC 3339") {
		t.Errorf("a time that is not: %v %s", err, out)
	}
}
