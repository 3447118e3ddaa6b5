package uplink

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Home Assistant's MQTT discovery: the body announces itself as one
// device whose entities read the retained state documents. By default as
// one device-based discovery document (<prefix>/device/<body_id>/config,
// with dev, o and cmps); with PerEntity, one document per entity on
// <prefix>/<component>/<body_id>/<entity>/config, for installations from
// before device-based discovery. Home Assistant takes an area only from
// a device (suggested_area), so the entities of an area (the world
// model's entities whose configuration says where they are) are a device
// of their own for each area, connected through the body's device
// (via_device), on <prefix>/device/<body_id>_<area>/config. Discovery
// documents are not retained (Home Assistant's advice: a retained one
// outlives the device and makes ghosts); they go at the start of every
// session and again, after a short random delay, whenever Home Assistant
// says it is online on its status topic, followed by the state
// documents.

// HomeAssistant configures discovery.
type HomeAssistant struct {
	Prefix    string // default "homeassistant"
	PerEntity bool
	// The device as Home Assistant shows it: its name, model (the board
	// profile's short name: "pi4"), the hardware it runs on ("Raspberry
	// Pi 4 Model B Rev 1.5"), the body's version, the area it is in, and
	// where it is configured (an http, https or homeassistant URL; ""
	// for none: the body has no web page of its own).
	Name, Model, Hardware, Version, Area, ConfigURL string
}

// Entity is one of the device's entities.
type Entity struct {
	// ID names it within the device: [a-z0-9_]+.
	ID       string
	Platform string // binary_sensor, sensor or button
	Name     string
	// StateTopic and ValueTemplate say where its value is read and how
	// (binary sensors render ON or OFF); CommandTopic and PayloadPress
	// where a button sends its press.
	StateTopic, ValueTemplate  string
	CommandTopic, PayloadPress string
	CommandTemplate            string
	DeviceClass, Unit          string
	StateClass, Category       string
	Icon                       string
	// AttributesTopic and AttributesTemplate say where its attributes
	// are read and how (a template rendering a JSON object).
	AttributesTopic, AttributesTemplate string
	// Area, when set, puts it on the area's device (see Discovery).
	Area string
	// ImageTopic and ContentType say where an image entity's picture is
	// published, as raw bytes, and their type.
	ImageTopic, ContentType string
	// EventTypes are an event entity's types.
	EventTypes []string
	// PayloadOn and PayloadOff are what a switch's command template is
	// given as value, and what its state reads as on and off.
	PayloadOn, PayloadOff string
	// Schema is a light's ("template"), with its templates.
	Schema, StateTemplate, CommandOnTemplate, CommandOffTemplate string
	// ExpireAfter: a sensor's value is unavailable when no document came
	// for this many seconds (0: it never expires).
	ExpireAfter int
}

var (
	entityID = regexp.MustCompile(`^[a-z0-9_]+$`)
	notSlug  = regexp.MustCompile(`[^a-z0-9]+`)
)

// HomeAssistantStatus is the topic Home Assistant says online on.
func (h HomeAssistant) StatusTopic() string { return h.prefix() + "/status" }

func (h HomeAssistant) prefix() string {
	if h.Prefix == "" {
		return "homeassistant"
	}
	return h.Prefix
}

// Discovery returns the discovery documents: topic → payload. Gone are
// entities announced before that are no more (by ID, Platform and
// Area): device-based, each is a component of its platform alone, which
// Home Assistant takes as its removal; per entity, its topic has an
// empty payload.
func (o Options) Discovery(h HomeAssistant, entities []Entity, gone ...Entity) (map[string][]byte, error) {
	bodyDev := "tobe-body-" + o.BodyID
	dev := map[string]any{"ids": []string{bodyDev}, "name": h.Name, "mf": "tobe-body", "sw": h.Version, "sn": o.BodyID}
	for k, v := range map[string]string{"mdl": h.Model, "hw": h.Hardware, "sa": h.Area, "cu": h.ConfigURL} {
		if v != "" {
			dev[k] = v
		}
	}
	origin := map[string]any{"name": "tobe-body", "sw": h.Version}
	avail := map[string]any{"availability_topic": o.StatusTopic(), "payload_available": Online, "payload_not_available": Offline}
	// The devices: the body's (key ""), and one for each area, by the
	// area's slug (areas whose names differ only in case and punctuation
	// are one).
	devs := map[string]map[string]any{"": dev}
	cmps := map[string]map[string]any{"": {}}
	seen := map[string]bool{}
	out := map[string][]byte{}
	for _, e := range entities {
		if !entityID.MatchString(e.ID) {
			return nil, fmt.Errorf("uplink: entity id %q: want [a-z0-9_]+", e.ID)
		}
		if seen[e.ID] {
			return nil, fmt.Errorf("uplink: entity id %q twice", e.ID)
		}
		seen[e.ID] = true
		area := slugOf(e.Area)
		if devs[area] == nil {
			name := e.Area
			if h.Name != "" {
				name += " (" + h.Name + ")"
			}
			devs[area] = map[string]any{"ids": []string{bodyDev + "-" + area}, "name": name, "mf": "tobe-body", "sw": h.Version,
				"suggested_area": e.Area, "via_device": bodyDev}
			cmps[area] = map[string]any{}
		}
		c := map[string]any{"p": e.Platform, "name": e.Name, "unique_id": o.BodyID + "_" + e.ID, "qos": 1}
		for k, v := range map[string]string{"state_topic": e.StateTopic, "value_template": e.ValueTemplate, "command_topic": e.CommandTopic,
			"payload_press": e.PayloadPress, "command_template": e.CommandTemplate, "device_class": e.DeviceClass, "unit_of_measurement": e.Unit, "state_class": e.StateClass,
			"entity_category": e.Category, "icon": e.Icon, "json_attributes_topic": e.AttributesTopic, "json_attributes_template": e.AttributesTemplate,
			"image_topic": e.ImageTopic, "content_type": e.ContentType, "payload_on": e.PayloadOn, "payload_off": e.PayloadOff,
			"schema": e.Schema, "state_template": e.StateTemplate, "command_on_template": e.CommandOnTemplate, "command_off_template": e.CommandOffTemplate} {
			if v != "" {
				c[k] = v
			}
		}
		if e.ExpireAfter > 0 {
			c["expire_after"] = e.ExpireAfter
		}
		if len(e.EventTypes) > 0 {
			c["event_types"] = e.EventTypes
		}
		cmps[area][e.ID] = c
		if h.PerEntity {
			one := map[string]any{"device": expandDevice(devs[area]), "origin": origin}
			for k, v := range c {
				if k != "p" {
					one[k] = v
				}
			}
			for k, v := range avail {
				one[k] = v
			}
			b, err := json.Marshal(one)
			if err != nil {
				return nil, err
			}
			out[fmt.Sprintf("%s/%s/%s/%s/config", h.prefix(), e.Platform, o.BodyID, e.ID)] = b
		}
	}
	for _, e := range gone {
		if seen[e.ID] || !entityID.MatchString(e.ID) {
			continue
		}
		if h.PerEntity {
			out[fmt.Sprintf("%s/%s/%s/%s/config", h.prefix(), e.Platform, o.BodyID, e.ID)] = nil
			continue
		}
		// A gone entity's area may have no entity left: its device still
		// says the removal.
		area := slugOf(e.Area)
		if devs[area] == nil {
			devs[area] = map[string]any{"ids": []string{bodyDev + "-" + area}, "name": e.Area, "mf": "tobe-body", "sw": h.Version,
				"suggested_area": e.Area, "via_device": bodyDev}
			cmps[area] = map[string]any{}
		}
		cmps[area][e.ID] = map[string]any{"p": e.Platform}
	}
	if h.PerEntity {
		return out, nil
	}
	for area, d := range devs {
		doc := map[string]any{"dev": d, "o": origin, "cmps": cmps[area], "qos": 1}
		for k, v := range avail {
			doc[k] = v
		}
		b, err := json.Marshal(doc)
		if err != nil {
			return nil, err
		}
		id := o.BodyID
		if area != "" {
			id += "_" + area
		}
		out[fmt.Sprintf("%s/device/%s/config", h.prefix(), id)] = b
	}
	return out, nil
}

// slugOf is a name as an id: lower case, [a-z0-9_].
func slugOf(s string) string {
	return strings.Trim(notSlug.ReplaceAllString(strings.ToLower(s), "_"), "_")
}

// expandDevice is the device block with the full key names, as a
// per-entity document spells it.
func expandDevice(dev map[string]any) map[string]any {
	long := map[string]string{"ids": "identifiers", "mf": "manufacturer", "mdl": "model", "sw": "sw_version", "sn": "serial_number",
		"hw": "hw_version", "sa": "suggested_area", "cu": "configuration_url"}
	out := map[string]any{}
	for k, v := range dev {
		if l, ok := long[k]; ok {
			k = l
		}
		out[k] = v
	}
	return out
}

// Board is what the entities are made from: the body's cameras and their
// zones, its microphones and environment sensors, whether it has an
// e-stop and thermal zones, and the entities of its world model.
type Board struct {
	Cameras map[string][]string
	Mics    []string
	Env     []EnvSensor
	// Every is each channel's summary period, by channel id, the
	// board's own sample's under StateSelf: how often its document is
	// made even when nothing changed. A sensor reading a channel with a
	// period expires (expire_after) when three periods pass without one,
	// and never sooner than MinExpire.
	Every map[string]time.Duration
	EStop bool
	// Privacy: the body has a privacy state (cameras or microphones it
	// pauses).
	Privacy bool
	// Controls are the channels of the controls people press.
	Controls []Control
	// Outputs are the outputs Home Assistant may see (and, granted,
	// switch); Speakers the speakers' channels, for their chimes.
	Outputs  []Output
	Speakers []string
	Thermal  bool
	Throttle bool
	World    []WorldEntity
}

// EnvSensor is an environment sensor's channel and what it measures.
type EnvSensor struct {
	ID                              string
	Temperature, Humidity, Pressure bool
}

// MinExpire is the least expire_after a sensor is given: a broker's or a
// network's hiccup of a few seconds does not make a value unavailable.
const MinExpire = 30 * time.Second

// expireAfter is the expire_after of a sensor reading channel's
// document: three of its periods, at least MinExpire; 0 (none) for a
// channel without a period.
func (b Board) expireAfter(channel string) int {
	every := b.Every[channel]
	if every <= 0 {
		return 0
	}
	return int(max(3*every, MinExpire).Round(time.Second) / time.Second)
}

// Entities are the body's entities, reading the state documents. Every
// sensor whose document is made at a period expires after three of them
// (Board.Every); the world model's entities do not: the model itself
// says unknown when what it heard is too old.
func (o Options) Entities(b Board) []Entity {
	onOff := func(cond string) string { return "{{ 'ON' if " + cond + " else 'OFF' }}" }
	orNothing := func(field string) string {
		return "{{ value_json." + field + " if value_json." + field + " is not none else '' }}"
	}
	refreshed := int(max(3*RefreshEvery, MinExpire) / time.Second)
	var es []Entity
	if b.EStop {
		es = append(es, Entity{ID: "estop", Platform: "binary_sensor", Name: "E-stop latched", DeviceClass: "safety",
			StateTopic: o.StateTopic(StateEStop), ValueTemplate: onOff("value_json.latched"), ExpireAfter: refreshed})
	}
	if b.Privacy {
		es = append(es, Entity{ID: "privacy_paused", Platform: "binary_sensor", Name: "Sensing paused", Icon: "mdi:eye-off",
			StateTopic: o.StateTopic(StatePrivacy), ValueTemplate: onOff("value_json.paused"), ExpireAfter: refreshed,
			AttributesTopic: o.StateTopic(StatePrivacy), AttributesTemplate: "{{ {'switch': value_json.switch, 'why': value_json.why | default('')} | tojson }}"})
	}
	for _, cam := range slices.Sorted(maps.Keys(b.Cameras)) {
		for _, z := range b.Cameras[cam] {
			es = append(es, Entity{ID: "motion_" + slugOf(cam) + "_" + slugOf(z), Platform: "binary_sensor", Name: "Motion " + z + " (" + cam + ")",
				DeviceClass: "motion", StateTopic: o.StateTopic(cam), ValueTemplate: onOff(fmt.Sprintf("value_json.zones[%q]", z)), ExpireAfter: b.expireAfter(cam)})
		}
	}
	for _, mic := range b.Mics {
		es = append(es,
			Entity{ID: "voice_" + slugOf(mic), Platform: "binary_sensor", Name: "Voice (" + mic + ")", DeviceClass: "sound",
				StateTopic: o.StateTopic(mic), ValueTemplate: onOff("value_json.voice"), ExpireAfter: b.expireAfter(mic)},
			// dBFS, relative to the microphone's full scale: not a sound
			// pressure (dB SPL), so no device class says it is one.
			Entity{ID: "sound_level_" + slugOf(mic), Platform: "sensor", Name: "Sound level (" + mic + ")", Unit: "dBFS", StateClass: "measurement",
				Icon: "mdi:volume-high", StateTopic: o.StateTopic(mic), ValueTemplate: orNothing("level_dbfs"), ExpireAfter: b.expireAfter(mic)})
	}
	for _, env := range b.Env {
		// The sensor's name as people read it: env.air is "air".
		name := strings.TrimPrefix(env.ID, "env.")
		for _, q := range []struct {
			has                   bool
			id, word, class, unit string
			field                 string
		}{
			{env.Temperature, "temperature", "Temperature", "temperature", "°C", "temperature_c"},
			{env.Humidity, "humidity", "Humidity", "humidity", "%", "humidity_pct"},
			{env.Pressure, "pressure", "Pressure", "atmospheric_pressure", "hPa", "pressure_hpa"},
		} {
			if !q.has {
				continue
			}
			es = append(es, Entity{ID: q.id + "_" + slugOf(env.ID), Platform: "sensor", Name: q.word + " (" + name + ")", DeviceClass: q.class,
				Unit: q.unit, StateClass: "measurement", StateTopic: o.StateTopic(env.ID), ValueTemplate: orNothing(q.field), ExpireAfter: b.expireAfter(env.ID)})
		}
	}
	self := o.StateTopic(StateSelf)
	selfExpire := b.expireAfter(StateSelf)
	if b.Thermal {
		es = append(es, Entity{ID: "cpu_temperature", Platform: "sensor", Name: "CPU temperature", DeviceClass: "temperature", Unit: "°C",
			StateClass: "measurement", StateTopic: self, ValueTemplate: orNothing("cpu_temp_c"), ExpireAfter: selfExpire})
	}
	es = append(es,
		Entity{ID: "load", Platform: "sensor", Name: "Load (1 min, per CPU)", StateClass: "measurement", Category: "diagnostic",
			Icon: "mdi:cpu-64-bit", StateTopic: self, ValueTemplate: "{{ value_json.load1 | round(2) }}", ExpireAfter: selfExpire},
		Entity{ID: "disk_free", Platform: "sensor", Name: "Data disk free", DeviceClass: "data_size", Unit: "MiB", StateClass: "measurement",
			Category: "diagnostic", StateTopic: self, ValueTemplate: "{{ value_json.disk_free_mb | round(0) }}", ExpireAfter: selfExpire},
		Entity{ID: "outbox", Platform: "sensor", Name: "Events waiting to be sent", Unit: "events", StateClass: "measurement",
			Category: "diagnostic", Icon: "mdi:tray-full", StateTopic: o.StateTopic(StateOutbox), ValueTemplate: "{{ value_json.rows }}", ExpireAfter: refreshed},
		Entity{ID: "self_level", Platform: "sensor", Name: "Self-state", Category: "diagnostic", Icon: "mdi:heart-pulse",
			StateTopic: self, ValueTemplate: "{{ value_json.level }}", ExpireAfter: selfExpire},
	)
	if b.Throttle {
		es = append(es, Entity{ID: "throttled", Platform: "binary_sensor", Name: "Throttled", DeviceClass: "problem", Category: "diagnostic",
			StateTopic: self, ValueTemplate: onOff("value_json.throttled"), ExpireAfter: selfExpire})
	}
	es = append(es, o.controlEntities(b.Controls)...)
	return append(es, o.worldEntities(b.World, es)...)
}

// worldBinary are the kinds of the world model Home Assistant is shown,
// as binary sensors: the device class, the name's word, and the values
// that are on and off. Air and outputs are not announced (yet); their
// documents are published all the same.
var worldBinary = map[string]struct{ class, word, on, off string }{
	"room":     {"occupancy", "Room", "active", "quiet"},
	"door":     {"door", "Door", "open", "closed"},
	"window":   {"window", "Window", "open", "closed"},
	"presence": {"presence", "Presence", "present", "absent"},
}

// WorldAttributes is the attributes' template of a world entity: its
// confidence, provenance, whether its sources disagree, and since when
// its value holds (null: not known).
const WorldAttributes = "{{ {'confidence': value_json.confidence, 'provenance': value_json.provenance, " +
	"'conflict': value_json.conflict, 'since': value_json.since} | tojson }}"

// worldEntities are the binary sensors of the world model's rooms,
// doors, windows and presence, each reading its document: ON for the
// kind's on value, OFF for its off value, and None (which Home Assistant
// shows as unknown) for unknown or anything else. An id another entity
// has already is made unique with a number.
func (o Options) worldEntities(ws []WorldEntity, before []Entity) []Entity {
	taken := map[string]bool{}
	for _, e := range before {
		taken[e.ID] = true
	}
	var es []Entity
	for _, w := range ws {
		k, ok := worldBinary[w.Kind]
		if !ok {
			continue
		}
		id := "world_" + slugOf(w.ID)
		for n := 2; taken[id]; n++ {
			id = fmt.Sprintf("world_%s_%d", slugOf(w.ID), n)
		}
		taken[id] = true
		topic := o.StateTopic(StateWorld(w.ID))
		es = append(es, Entity{ID: id, Platform: "binary_sensor", Name: k.word + " " + strings.NewReplacer("_", " ", "-", " ").Replace(w.Name),
			DeviceClass: k.class, StateTopic: topic,
			ValueTemplate:   fmt.Sprintf("{{ 'ON' if value_json.value == '%s' else ('OFF' if value_json.value == '%s' else 'None') }}", k.on, k.off),
			AttributesTopic: topic, AttributesTemplate: WorldAttributes, Area: w.Area})
	}
	return es
}

// Announce has every session publish the discovery documents of
// entities (not retained), gone removed (see Discovery), and publish
// them again, then every state document, a moment after Home Assistant
// says online. Called again, it replaces the entities (a per-entity
// document no entity has any more is removed). Call it first before Run.
func (r *Relay) Announce(h HomeAssistant, entities []Entity, gone ...Entity) error {
	docs, err := r.opts.Discovery(h, entities, gone...)
	if err != nil {
		return err
	}
	r.docMu.Lock()
	first := r.announced == nil
	for t := range r.announced {
		if _, still := docs[t]; !still {
			r.docs[t] = nil // removed: an empty document, once
			r.dirty[t] = true
		}
	}
	r.announced = map[string]bool{}
	for t, p := range docs {
		if len(p) == 0 {
			// A removal: said once, unless it is already.
			if _, had := r.docs[t]; !had || len(r.docs[t]) > 0 {
				r.docs[t] = nil
				r.dirty[t] = true
			}
			continue
		}
		if string(r.docs[t]) != string(p) {
			r.dirty[t] = true
		}
		r.docs[t] = p
		r.notRetained[t] = true
		r.announced[t] = true
	}
	r.docMu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	if !first {
		return nil
	}
	r.Subscribe(h.StatusTopic(), func(_ string, payload []byte) {
		if string(payload) != Online {
			return
		}
		// A random moment in the next 2 s: a house of bodies does not
		// answer Home Assistant's start all at once.
		time.Sleep(time.Duration(rand.Int64N(int64(2 * time.Second))))
		r.Redo("")
	})
	return nil
}

// Button is an action Home Assistant may press: a button entity whose
// press commands action.do with these arguments, each press with an id
// of its own (the time of the press), so a press is one action and a
// duplicate of it is not another.
type Button struct {
	ID, Name, Capability, Target string
	Params                       map[string]string
}

// ImageTopic is where a camera's last snapshot is published, when the
// broker's principal may look at it: .../image/<camera channel>.
func (o Options) ImageTopic(camera string) string { return o.base() + "/image/" + camera }

// ImageEntity is the image entity of a camera's last snapshot.
func (o Options) ImageEntity(camera string) Entity {
	return Entity{ID: "snapshot_" + slugOf(camera), Platform: "image", Name: "Last snapshot (" + camera + ")", ImageTopic: o.ImageTopic(camera), ContentType: "image/jpeg"}
}

// ButtonEntity is b's entity, pressing through the command topics.
func (o Options) ButtonEntity(b Button) (Entity, error) {
	args, err := json.Marshal(map[string]any{"capability": b.Capability, "target": b.Target, "params": b.Params})
	if err != nil {
		return Entity{}, err
	}
	// The id: the button's and the moment of the press, which a
	// redelivery of the same press repeats.
	tmpl := `{"id": "ha-` + b.ID + `-{{ (now().timestamp() * 1000) | int }}", "args": ` + string(args) + `}`
	return Entity{ID: "button_" + b.ID, Platform: "button", Name: b.Name, CommandTopic: o.base() + "/cmd/action.do",
		CommandTemplate: tmpl}, nil
}
