package main

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/body/uplink/hatest"
	"github.com/tobe-body/tobe-body/body/uplink/mosquittotest"
)

// Home Assistant as it comes: it subscribes to its discovery prefix and
// says online on homeassistant/status; the sim body (commands on, a
// relay, a light and its blink granted to the broker's principal)
// announces one device whose every component has the keys Home
// Assistant's schema takes; every value, state and attributes template,
// rendered by Jinja2 over the body's own retained documents, gives what
// its platform accepts; a press of the relay's switch drives the relay,
// whose state is its line read back; a press of the blink button blinks;
// a control's press is an event of its event entity; and once the
// relay's grant is revoked, the switch is removed and a press of it,
// from a Home Assistant that has not yet heard, is refused: on its
// result topic and as an event of the refusals' entity.
func TestHomeAssistantAsItSubscribes(t *testing.T) {
	hatest.HaveJinja(t)
	m := mosquittotest.Start(t, brokerUsers)
	cfg := strings.Replace(uplinkConfig(m.URL()), `"keepalive_s"`, `"commands": {"enabled": true, "trust": "high"}, "keepalive_s"`, 1) +
		`, "body": {"name": "hall body", "area": "Hall"}, "sim": {"button_period_ms": 1500}`
	d := startDaemon(t, cfg)
	defer d.stop(t)
	id := identity(t, d.data)
	base := "tobe/" + id.AgentID + "/" + id.BodyID
	grant := func(capability, scope string) {
		t.Helper()
		if out, err := runCmd(t, "grant", "add", "--subject", "mqtt:home", "--capability", capability, "--scope", scope,
			"--expires", time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "--data", d.data); err != nil {
			t.Fatalf("grant: %v %s", err, out)
		}
	}
	grant("gpio.set", "gpio.relay1")
	grant("light.*", "light.act")
	ha := m.Subscribe("sub", "sub-pass", "homeassistant/#")
	body := m.Subscribe("sub", "sub-pass", base+"/#")
	eventually(t, 10*time.Second, "connected", func() bool {
		out, _ := runCmd(t, "status", "--data", d.data)
		return strings.Contains(out, "uplink    connected")
	})
	ha.Publish("homeassistant/status", []byte("online"), false)

	topic := "homeassistant/device/" + id.BodyID + "/config"
	var raw []byte
	latest := func() map[string]any {
		msgs := ha.Messages(topic)
		if len(msgs) == 0 {
			return nil
		}
		raw = msgs[len(msgs)-1].Payload
		var doc map[string]any
		json.Unmarshal(raw, &doc)
		return doc
	}
	cmps := func(doc map[string]any) map[string]map[string]any {
		out := map[string]map[string]any{}
		c, _ := doc["cmps"].(map[string]any)
		for k, v := range c {
			out[k], _ = v.(map[string]any)
		}
		return out
	}
	var doc map[string]any
	eventually(t, 10*time.Second, "the device with the relay's switch and the light", func() bool {
		doc = latest()
		c := cmps(doc)
		return c["switch_gpio_relay1"]["command_topic"] != nil && c["light_light_act"]["command_topic"] != nil
	})
	t.Logf("the sim body's discovery document: %s", raw)
	for _, err := range hatest.CheckDeviceDocument(doc) {
		t.Errorf("discovery: %v", err)
	}
	dev, _ := doc["dev"].(map[string]any)
	if dev["mdl"] != "sim" || dev["hw"] != "simulated" || dev["sa"] != "Hall" || dev["name"] != "hall body" {
		t.Errorf("the device: %v", dev)
	}
	c := cmps(doc)
	for _, want := range []string{"estop", "privacy_paused", "motion_camera_front_frame", "voice_audio_mic", "temperature_env_air", "humidity_env_air",
		"pressure_env_air", "control_gpio_button", "control_input_keypad", "switch_gpio_relay1", "light_light_act", "button_blink_light_act",
		"estop_trip", "command_refused"} {
		if c[want] == nil {
			t.Errorf("no %s among %v", want, slices.Sorted(maps.Keys(c)))
		}
	}
	for _, notWanted := range []string{"switch_gpio_relay2", "control_input_keyboard", "notify", "button_chime_audio_speaker"} {
		if c[notWanted] != nil {
			t.Errorf("%s is announced: %v", notWanted, c[notWanted])
		}
	}

	// Every template over the body's own documents, as Home Assistant
	// renders them.
	str := func(c map[string]any, k string) string { s, _ := c[k].(string); return s }
	retained := func(topic string) string {
		t.Helper()
		var p string
		eventually(t, 10*time.Second, "a document on "+topic, func() bool {
			msgs := body.Messages(topic)
			if len(msgs) > 0 {
				p = string(msgs[len(msgs)-1].Payload)
			}
			return len(msgs) > 0
		})
		return p
	}
	type rendered struct{ id, key, platform, unit string }
	var jobs []hatest.Job
	var what []rendered
	for _, cid := range slices.Sorted(maps.Keys(c)) {
		comp := c[cid]
		st := str(comp, "state_topic")
		if st == "" || str(comp, "p") == "event" {
			continue
		}
		v := retained(st)
		for _, k := range []string{"value_template", "state_template", "json_attributes_template"} {
			if tmpl := str(comp, k); tmpl != "" {
				jobs = append(jobs, hatest.Job{Template: tmpl, Value: v})
				what = append(what, rendered{cid, k, str(comp, "p"), str(comp, "unit_of_measurement")})
			}
		}
	}
	for i, out := range hatest.Render(t, jobs) {
		w := what[i]
		ok := true
		switch {
		case w.key == "json_attributes_template":
			var m map[string]any
			ok = json.Unmarshal([]byte(out), &m) == nil
		case w.platform == "binary_sensor":
			ok = out == "ON" || out == "OFF" || out == "None"
		case w.platform == "switch", w.platform == "light":
			ok = out == "on" || out == "off" || out == "None"
		case w.platform == "sensor" && w.unit != "":
			_, err := strconv.ParseFloat(out, 64)
			ok = out == "" || err == nil
		}
		if !ok {
			t.Errorf("%s's %s renders %q over %s", w.id, w.key, out, jobs[i].Value)
		}
	}
	if t.Failed() {
		return
	}

	// Pressing, as Home Assistant does: the command template rendered
	// with the payload as value, published on the command topic.
	press := func(comp map[string]any, tmplKey, value string) string {
		t.Helper()
		cmd := hatest.Render(t, []hatest.Job{{Template: str(comp, tmplKey), Value: value}})[0]
		var parsed struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal([]byte(cmd), &parsed); err != nil || parsed.ID == "" {
			t.Fatalf("%s renders %q: not a command (%v)", tmplKey, cmd, err)
		}
		ha.Publish(str(comp, "command_topic"), []byte(cmd), false)
		return parsed.ID
	}
	result := func(cmdID string) map[string]any {
		t.Helper()
		var r map[string]any
		eventually(t, 10*time.Second, "the result of "+cmdID, func() bool {
			msgs := body.Messages(base + "/cmd_result/" + cmdID)
			return len(msgs) > 0 && json.Unmarshal(msgs[len(msgs)-1].Payload, &r) == nil
		})
		return r
	}
	output := func(channel string) string {
		msgs := body.Messages(base + "/state/output/" + channel)
		if len(msgs) == 0 {
			return ""
		}
		var o struct {
			State string `json:"state"`
		}
		json.Unmarshal(msgs[len(msgs)-1].Payload, &o)
		return o.State
	}
	sw := c["switch_gpio_relay1"]
	for _, v := range []string{str(sw, "payload_on"), str(sw, "payload_off")} {
		if r := result(press(sw, "command_template", v)); r["status"] != "success" {
			t.Fatalf("switching the relay %s: %v", v, r)
		}
		eventually(t, 5*time.Second, "the relay read back "+v, func() bool { return output("gpio.relay1") == v })
		state := hatest.Render(t, []hatest.Job{{Template: str(sw, "value_template"), Value: retained(base + "/state/output/gpio.relay1")}})[0]
		if state != v {
			t.Errorf("the switch reads %q after %s", state, v)
		}
		// The world model's output follows the verified read-back too.
		eventually(t, 5*time.Second, "the world's relay "+v, func() bool {
			var w struct{ Value string }
			json.Unmarshal([]byte(retained(base+"/state/world/output.relay1")), &w)
			return w.Value == v
		})
	}
	if r := result(press(c["light_light_act"], "command_on_template", "")); r["status"] != "success" {
		t.Errorf("the light on: %v", r)
	}
	eventually(t, 5*time.Second, "the light read back on", func() bool { return output("light.act") == "on" })
	if r := result(press(c["button_blink_light_act"], "command_template", "")); r["status"] != "success" {
		t.Errorf("blinking: %v", r)
	}

	// A control's press: an event of its entity, not retained.
	ctl := c["control_gpio_button"]
	var ev struct {
		EventType string `json:"event_type"`
	}
	eventually(t, 10*time.Second, "a press of the sim's button", func() bool {
		msgs := body.Messages(str(ctl, "state_topic"))
		return len(msgs) > 0 && !msgs[0].Retain && json.Unmarshal(msgs[0].Payload, &ev) == nil
	})
	if types, _ := ctl["event_types"].([]any); !slices.Contains(types, any(ev.EventType)) {
		t.Errorf("the button's event %q is not one of %v", ev.EventType, types)
	}

	// The relay's grant revoked: the switch goes, and a press from a Home
	// Assistant that has not heard yet is refused, twice told.
	out, err := runCmd(t, "grant", "list", "--json", "--data", d.data)
	if err != nil {
		t.Fatalf("grant list: %v %s", err, out)
	}
	var grants []struct{ ID, Capability string }
	if err := json.Unmarshal([]byte(out), &grants); err != nil {
		t.Fatalf("grant list: %v %s", err, out)
	}
	for _, g := range grants {
		if g.Capability == "gpio.set" {
			if out, err := runCmd(t, "grant", "revoke", g.ID, "--data", d.data); err != nil {
				t.Fatalf("revoke: %v %s", err, out)
			}
		}
	}
	eventually(t, 10*time.Second, "the switch removed", func() bool {
		s := cmps(latest())["switch_gpio_relay1"]
		return len(s) == 1 && s["p"] == "switch"
	})
	cmdID := press(sw, "command_template", "on")
	if r := result(cmdID); r["status"] != "error" {
		t.Errorf("a press after the revocation: %v", r)
	}
	var refusal struct {
		EventType      string `json:"event_type"`
		ID, Op, Reason string
	}
	refused := c["command_refused"]
	eventually(t, 10*time.Second, "the refusal's event", func() bool {
		msgs := body.Messages(str(refused, "state_topic"))
		return len(msgs) > 0 && json.Unmarshal(msgs[len(msgs)-1].Payload, &refusal) == nil
	})
	if types, _ := refused["event_types"].([]any); refusal.ID != cmdID || refusal.Op != "action.do" || !slices.Contains(types, any(refusal.EventType)) ||
		refusal.Reason != "grant_revoked" && refusal.Reason != "no_grant" {
		t.Errorf("the refusal: %+v", refusal)
	}
	if output("gpio.relay1") != "off" {
		t.Errorf("the relay is %s after a refused press", output("gpio.relay1"))
	}
}
