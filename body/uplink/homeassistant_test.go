package uplink

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/body/uplink/hatest"
)

func haBoard() Board {
	return Board{Cameras: map[string][]string{"camera.front": {"door", "garden path"}}, Mics: []string{"audio.mic"}, EStop: true, Thermal: true, Throttle: true, Privacy: true,
		Env:      []EnvSensor{{ID: "env.air", Temperature: true, Humidity: true, Pressure: true}},
		Controls: []Control{{ID: "gpio.button"}, {ID: "input.keypad", Keys: true}},
		Every:    map[string]time.Duration{"camera.front": time.Minute, "audio.mic": 10 * time.Second, "env.air": 5 * time.Minute, StateSelf: 5 * time.Second},
		World:    []WorldEntity{{ID: "room.front", Kind: "room", Name: "front"}, {ID: "contact.front_door", Kind: "door", Name: "front_door"}, {ID: "air.hall", Kind: "air", Name: "hall"}}}
}

func haOptions(t *testing.T) Options {
	r, err := New(nil, Options{Broker: "tcp://127.0.0.1:1", AgentID: agentID.String(), BodyID: bodyID.String()})
	if err != nil {
		t.Fatal(err)
	}
	return r.opts
}

// Each component has what Home Assistant requires of it: a unique_id,
// a state topic and a template (sensors) or a command topic (buttons),
// the device (ids) and its availability; device-based discovery has the
// device, the origin and the components at its root.
func TestDiscoveryHasWhatHomeAssistantRequires(t *testing.T) {
	o := haOptions(t)
	entities := o.Entities(haBoard())
	btn, err := o.ButtonEntity(Button{ID: "chime", Name: "Chime", Capability: "audio.tone", Target: "audio.speaker", Params: map[string]string{"freq_hz": "880", "ms": "300"}})
	if err != nil {
		t.Fatal(err)
	}
	entities = append(entities, btn, o.ImageEntity("camera.front"))
	states := map[string]bool{o.StateTopic(StateEStop): true, o.StateTopic(StateSelf): true, o.StateTopic(StateOutbox): true, o.StateTopic(StatePrivacy): true,
		o.StateTopic("camera.front"): true, o.StateTopic("audio.mic"): true, o.StateTopic("env.air"): true, o.StateTopic(StateWorld("room.front")): true, o.StateTopic(StateWorld("contact.front_door")): true}
	check := func(where string, c map[string]any, root map[string]any) {
		t.Helper()
		get := func(k string) string {
			if v, ok := c[k].(string); ok {
				return v
			}
			if v, ok := root[k].(string); ok {
				return v
			}
			return ""
		}
		p := get("p")
		if p == "" {
			p = strings.Split(where, "/")[1] // per-entity: the topic says it
		}
		if get("unique_id") == "" || get("name") == "" {
			t.Errorf("%s: no unique_id or name: %v", where, c)
		}
		if get("availability_topic") != o.StatusTopic() || get("payload_available") != Online || get("payload_not_available") != Offline {
			t.Errorf("%s: availability %q %q %q", where, get("availability_topic"), get("payload_available"), get("payload_not_available"))
		}
		switch p {
		case "binary_sensor", "sensor":
			if !states[get("state_topic")] || get("value_template") == "" {
				t.Errorf("%s: state_topic %q (not one the body keeps) or no value_template", where, get("state_topic"))
			}
			// Every sensor but the world model's expires, after three of
			// its channel's periods and never under MinExpire.
			exp, _ := c["expire_after"].(float64)
			if world := strings.Contains(get("state_topic"), "/world/"); world != (exp == 0) || !world && exp < MinExpire.Seconds() {
				t.Errorf("%s: expire_after %v", where, c["expire_after"])
			}
		case "event":
			if types, _ := c["event_types"].([]any); !strings.HasPrefix(get("state_topic"), o.ControlTopic("")) || len(types) == 0 {
				t.Errorf("%s: state_topic %q, event_types %v", where, get("state_topic"), c["event_types"])
			}
		case "button":
			if get("command_topic") == "" {
				t.Errorf("%s: no command_topic", where)
			}
		case "image":
			if get("image_topic") != o.ImageTopic("camera.front") || get("content_type") != "image/jpeg" {
				t.Errorf("%s: image_topic %q, content_type %q", where, get("image_topic"), get("content_type"))
			}
		default:
			t.Errorf("%s: platform %q", where, p)
		}
	}
	// Device-based.
	ha := HomeAssistant{Name: "hall", Version: "1.2", Model: "pi4", Hardware: "Raspberry Pi 4 Model B Rev 1.5", Area: "Hall", ConfigURL: "https://hall.local:9090/"}
	docs, err := o.Discovery(ha, entities)
	if err != nil {
		t.Fatal(err)
	}
	topic := "homeassistant/device/" + bodyID.String() + "/config"
	if len(docs) != 1 || docs[topic] == nil {
		t.Fatalf("device discovery on %v, want the one topic %s", keys(docs), topic)
	}
	var root map[string]any
	if err := json.Unmarshal(docs[topic], &root); err != nil {
		t.Fatal(err)
	}
	dev, _ := root["dev"].(map[string]any)
	origin, _ := root["o"].(map[string]any)
	cmps, _ := root["cmps"].(map[string]any)
	if ids, _ := dev["ids"].([]any); len(ids) == 0 || origin["name"] == "" || len(cmps) != len(entities) {
		t.Fatalf("root: dev %v, o %v, %d components for %d entities", dev, origin, len(cmps), len(entities))
	}
	if dev["mdl"] != "pi4" || dev["hw"] != ha.Hardware || dev["sw"] != "1.2" || dev["sa"] != "Hall" || dev["cu"] != ha.ConfigURL || dev["name"] != "hall" {
		t.Errorf("device %v", dev)
	}
	seen := map[string]bool{}
	for id, c := range cmps {
		cm := c.(map[string]any)
		check(topic+"#"+id, cm, root)
		u := cm["unique_id"].(string)
		if seen[u] {
			t.Errorf("unique_id %s twice", u)
		}
		seen[u] = true
	}
	// Per entity, for older installations.
	ha.PerEntity = true
	docs, err = o.Discovery(ha, entities)
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != len(entities) {
		t.Fatalf("%d per-entity documents for %d entities", len(docs), len(entities))
	}
	for topic, b := range docs {
		var c map[string]any
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatal(err)
		}
		d, _ := c["device"].(map[string]any)
		if ids, _ := d["identifiers"].([]any); len(ids) == 0 || d["model"] != "pi4" || d["hw_version"] != ha.Hardware || d["suggested_area"] != "Hall" || d["configuration_url"] != ha.ConfigURL {
			t.Errorf("%s: device %v", topic, d)
		}
		check(topic, c, nil)
	}
	// Ids are checked.
	if _, err := o.Discovery(HomeAssistant{}, []Entity{{ID: "Bad id", Platform: "sensor"}}); err == nil {
		t.Error("an entity id with a space and a capital went through")
	}
}

// The templates, rendered by Jinja2 (Home Assistant's template engine)
// over the state documents the body publishes, give what each platform
// accepts: ON or OFF for binary sensors, a number (or nothing, which Home
// Assistant ignores) for sensors with a unit, and the right one.
func TestDiscoveryTemplatesReadTheStateDocuments(t *testing.T) {
	if err := exec.Command("python3", "-c", "import jinja2").Run(); err != nil {
		t.Skipf("no python3 with jinja2 here (%v): scripts/deps.sh installs python3-jinja2", err)
	}
	o := haOptions(t)
	byID := map[string]Entity{}
	for _, e := range o.Entities(haBoard()) {
		byID[e.ID] = e
	}
	tr := NewTracker(haBoard().Cameras, haBoard().Mics, []string{"env.air"})
	_, motionDoor, _ := tr.Event(ev(t, "camera.motion_started", "camera.front", map[string]any{"zone": "door"}))
	motionDoorJSON := jsonOf(t, motionDoor)
	silence := jsonOf(t, tr.Docs()["audio.mic"])
	_, level, _ := tr.Event(ev(t, "audio.level", "audio.mic", map[string]any{"rms_dbfs": -33.5, "peak_dbfs": -10.0}))
	levelJSON := jsonOf(t, level)
	_, voice, _ := tr.Event(ev(t, "audio.voice_started", "audio.mic", nil))
	_, airDoc, _ := tr.Event(ev(t, "env.reading", "env.air", map[string]any{"temperature_c": 21.5, "humidity_pct": 40.25, "pressure_hpa": 1013.2}))
	air := jsonOf(t, airDoc)
	temp := 61.5
	hot := jsonOf(t, SelfDoc{Level: "constrained", CPU: 0.5, Load1: 1.234, CPUTempC: &temp, DiskFreeMB: 2048.4, Throttled: true})
	cool := jsonOf(t, SelfDoc{Level: "normal", Load1: 0.1, DiskFreeMB: 10})
	for _, tc := range []struct {
		entity, doc, want string
	}{
		{"estop", jsonOf(t, EStopState{State: "latched", Latched: true, Why: "line open"}), "ON"},
		{"estop", jsonOf(t, EStopState{State: "armed"}), "OFF"},
		{"motion_camera_front_door", motionDoorJSON, "ON"},
		{"motion_camera_front_garden_path", motionDoorJSON, "OFF"},
		{"voice_audio_mic", silence, "OFF"},
		{"voice_audio_mic", jsonOf(t, voice), "ON"},
		{"sound_level_audio_mic", silence, ""}, // no summary yet: nothing, which Home Assistant ignores
		{"sound_level_audio_mic", levelJSON, "-33.5"},
		{"cpu_temperature", hot, "61.5"},
		{"cpu_temperature", cool, ""},
		{"load", hot, "1.23"},
		{"disk_free", hot, "2048.0"},
		{"outbox", jsonOf(t, OutboxState{Rows: 12, Bytes: 3000}), "12"},
		{"self_level", hot, "constrained"},
		{"throttled", hot, "ON"},
		{"throttled", cool, "OFF"},
		{"privacy_paused", jsonOf(t, PrivacyDoc{Paused: true, Switch: true, Why: "the privacy switch is on"}), "ON"},
		{"privacy_paused", jsonOf(t, PrivacyDoc{}), "OFF"},
		{"temperature_env_air", air, "21.5"},
		{"humidity_env_air", air, "40.25"},
		{"pressure_env_air", air, "1013.2"},
		{"temperature_env_air", jsonOf(t, EnvDoc{}), ""}, // no reading yet
	} {
		e, ok := byID[tc.entity]
		if !ok {
			t.Fatalf("no entity %s", tc.entity)
		}
		got := render(t, e.ValueTemplate, tc.doc)
		if e.AttributesTemplate != "" {
			var attrs map[string]any
			if a := render(t, e.AttributesTemplate, tc.doc); json.Unmarshal([]byte(a), &attrs) != nil {
				t.Errorf("%s's attributes over %s: %q, want a JSON object", tc.entity, tc.doc, a)
			}
		}
		if got != tc.want {
			t.Errorf("%s over %s: %q, want %q", tc.entity, tc.doc, got, tc.want)
		}
		switch {
		case e.Platform == "binary_sensor" && got != "ON" && got != "OFF":
			t.Errorf("%s renders %q: a binary sensor wants ON or OFF", tc.entity, got)
		case e.Platform == "sensor" && (e.Unit != "" || e.StateClass != "") && got != "":
			if _, err := strconv.ParseFloat(got, 64); err != nil {
				t.Errorf("%s renders %q: a sensor with a unit wants a number", tc.entity, got)
			}
		}
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// render renders a template as Home Assistant does for a value: with
// value_json the message's JSON.
func render(t *testing.T, tmpl, doc string) string {
	t.Helper()
	const script = `import json, sys, jinja2
a = json.load(sys.stdin)
print(jinja2.Environment().from_string(a["t"]).render(value_json=json.loads(a["v"]), value=a["v"]), end="")`
	in, _ := json.Marshal(map[string]string{"t": tmpl, "v": doc})
	cmd := exec.Command("python3", "-c", script)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("jinja2 on %q: %v\n%s", tmpl, err, out)
	}
	return strings.TrimSpace(string(out))
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Every component of every document, device-based and per entity, with
// commands on and everything granted, has the keys its platform takes
// (abbreviations written out), what it requires, and device classes,
// units and categories Home Assistant accepts; so do the devices and the
// origin.
func TestDiscoveryFollowsHomeAssistantsSchema(t *testing.T) {
	o := haOptions(t)
	b := haBoard()
	b.Outputs = []Output{{ID: "gpio.relay1", Name: "relay1"}, {ID: "light.act", Name: "act", Light: true}}
	b.Speakers = []string{"audio.speaker"}
	b.World = append(b.World, WorldEntity{ID: "room.kitchen", Kind: "room", Name: "kitchen", Area: "Kitchen"})
	es := o.Entities(b)
	cs, err := o.commandEntities(b, func(string, string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	es = append(es, cs...)
	for _, s := range b.Signals() {
		e, err := o.ButtonEntity(s)
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}
	es = append(es, o.ImageEntity("camera.front"))
	platforms := map[string]bool{}
	for _, e := range es {
		platforms[e.Platform] = true
	}
	for _, p := range []string{"sensor", "binary_sensor", "button", "switch", "light", "event", "image", "notify"} {
		if !platforms[p] {
			t.Errorf("no %s among the entities: the check would not see one", p)
		}
	}
	ha := HomeAssistant{Name: "hall", Version: "1.2", Model: "sim", Hardware: "simulated", Area: "Hall", ConfigURL: "homeassistant://config"}
	gone := []Entity{{ID: "motion_camera_back_yard", Platform: "binary_sensor"}}
	docs, err := o.Discovery(ha, es, gone...)
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 {
		t.Errorf("%d device documents, want the body's and the kitchen's", len(docs))
	}
	for topic, d := range docs {
		var doc map[string]any
		if err := json.Unmarshal(d, &doc); err != nil {
			t.Fatal(err)
		}
		for _, err := range hatest.CheckDeviceDocument(doc) {
			t.Errorf("%s: %v", topic, err)
		}
	}
	ha.PerEntity = true
	docs, err = o.Discovery(ha, es, gone...)
	if err != nil {
		t.Fatal(err)
	}
	for topic, d := range docs {
		if len(d) == 0 {
			continue // a removal
		}
		var c map[string]any
		if err := json.Unmarshal(d, &c); err != nil {
			t.Fatal(err)
		}
		dev, _ := c["device"].(map[string]any)
		origin, _ := c["origin"].(map[string]any)
		errs := append(hatest.CheckDevice(dev), hatest.CheckOrigin(origin)...)
		delete(c, "device")
		delete(c, "origin")
		errs = append(errs, hatest.Check(c, strings.Split(topic, "/")[1])...)
		for _, err := range errs {
			t.Errorf("%s: %v", topic, err)
		}
	}
	// The checker itself: a key a platform does not take, a unit of
	// another class, a missing requirement.
	for _, c := range []map[string]any{
		{"p": "sensor", "uniq_id": "x", "stat_t": "a/b", "dev_cla": "temperature", "unit_of_meas": "hPa"},
		{"p": "binary_sensor", "unique_id": "x", "state_topic": "a/b", "command_topic": "a/c"},
		{"p": "switch", "unique_id": "x"},
		{"p": "event", "unique_id": "x", "state_topic": "a/b", "event_types": []any{}},
	} {
		if errs := hatest.Check(c, ""); len(errs) == 0 {
			t.Errorf("the checker passed %v", c)
		}
	}
}

// Every command template, rendered as Home Assistant renders it (value
// the switch's payload or the message, now() the time), is a command the
// body takes: an id of [A-Za-z0-9._:-], and the operation's input.
func TestCommandTemplatesRenderCommands(t *testing.T) {
	hatest.HaveJinja(t)
	o := haOptions(t)
	b := haBoard()
	b.Outputs = []Output{{ID: "gpio.relay1", Name: "relay1"}, {ID: "light.act", Name: "act", Light: true}}
	b.Speakers = []string{"audio.speaker"}
	es, err := o.commandEntities(b, func(string, string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range b.Signals() {
		e, err := o.ButtonEntity(s)
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}
	type want struct {
		entity, value, capability, param string
	}
	var jobs []hatest.Job
	var wants []want
	for _, e := range es {
		switch {
		case e.Platform == "switch":
			for _, v := range []string{e.PayloadOn, e.PayloadOff} {
				jobs = append(jobs, hatest.Job{Template: e.CommandTemplate, Value: v})
				wants = append(wants, want{e.ID, v, "gpio.set", v})
			}
		case e.Platform == "light":
			jobs = append(jobs, hatest.Job{Template: e.CommandOnTemplate}, hatest.Job{Template: e.CommandOffTemplate})
			wants = append(wants, want{e.ID, "", "light.on", ""}, want{e.ID, "", "light.off", ""})
		case e.Platform == "notify":
			msg := `dinner "now", \ and 🍲` + "\n" + `{{ not a template }}`
			jobs = append(jobs, hatest.Job{Template: e.CommandTemplate, Value: msg})
			wants = append(wants, want{e.ID, msg, "body.notify", msg})
		case e.CommandTemplate != "":
			jobs = append(jobs, hatest.Job{Template: e.CommandTemplate})
			wants = append(wants, want{e.ID, "", "", ""})
		}
	}
	for i, out := range hatest.Render(t, jobs) {
		w := wants[i]
		var cmd struct {
			ID   string `json:"id"`
			Args struct {
				Capability string            `json:"capability"`
				Params     map[string]string `json:"params"`
				Reason     string            `json:"reason"`
			} `json:"args"`
		}
		if err := json.Unmarshal([]byte(out), &cmd); err != nil {
			t.Errorf("%s over %q: %q is not JSON: %v", w.entity, w.value, out, err)
			continue
		}
		okID := len(cmd.ID) > 0 && len(cmd.ID) <= 64 && strings.Trim(cmd.ID, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-") == ""
		if !okID {
			t.Errorf("%s: id %q: not a command's", w.entity, cmd.ID)
		}
		if w.capability != "" && cmd.Args.Capability != w.capability {
			t.Errorf("%s: capability %q, want %s", w.entity, cmd.Args.Capability, w.capability)
		}
		if got := cmd.Args.Params["state"] + cmd.Args.Params["message"]; got != w.param {
			t.Errorf("%s over %q: params %v", w.entity, w.value, cmd.Args.Params)
		}
	}
}
