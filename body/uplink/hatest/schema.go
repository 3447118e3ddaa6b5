// Package hatest checks Home Assistant MQTT discovery documents the way
// Home Assistant reads them, for tests: the keys each platform takes,
// with their abbreviations expanded, the keys a platform requires, the
// device classes, units, state classes and entity categories it accepts,
// and the device and origin blocks. The tables are Home Assistant's own
// (its MQTT integration's abbreviations.py, the platforms' discovery
// schemas in schemas.py, config.py and each platform's module, the
// device classes and units of the sensor, binary_sensor, button, switch
// and event integrations), for the platforms the body announces. Home
// Assistant itself ignores a key it does not know; Check does not: a
// key the body means and Home Assistant drops is a defect.
//
// It also renders templates as Home Assistant does, with Jinja2 (one
// python3 for a batch: each takes half a second to start).
package hatest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Abbreviations are the component keys' abbreviations Home Assistant
// expands, for the keys of the platforms below.
var Abbreviations = map[string]string{
	"avty": "availability", "avty_mode": "availability_mode", "avty_t": "availability_topic", "avty_tpl": "availability_template",
	"cmd_off_tpl": "command_off_template", "cmd_on_tpl": "command_on_template", "cmd_t": "command_topic", "cmd_tpl": "command_template",
	"cmps": "components", "cont_type": "content_type", "def_ent_id": "default_entity_id", "dev": "device", "dev_cla": "device_class",
	"dsp_prc": "display_precision", "e": "encoding", "en": "enabled_by_default", "ent_cat": "entity_category", "evt_typ": "event_types",
	"exp_aft": "expire_after", "frc_upd": "force_update", "grp": "group", "ic": "icon", "img_e": "image_encoding", "img_t": "image_topic",
	"json_attr_t": "json_attributes_topic", "json_attr_tpl": "json_attributes_template", "lrst_val_tpl": "last_reset_value_template",
	"name": "name", "o": "origin", "off_dly": "off_delay", "ops": "options", "opt": "optimistic", "p": "platform", "pl_avail": "payload_available",
	"pl_not_avail": "payload_not_available", "pl_off": "payload_off", "pl_on": "payload_on", "pl_prs": "payload_press", "ret": "retain",
	"stat_cla": "state_class", "stat_off": "state_off", "stat_on": "state_on", "stat_t": "state_topic", "stat_tpl": "state_template",
	"sug_dsp_prc": "suggested_display_precision", "uniq_id": "unique_id", "unit_of_meas": "unit_of_measurement", "url_t": "url_topic",
	"url_tpl": "url_template", "val_tpl": "value_template", "bri_tpl": "brightness_template", "r_tpl": "red_template",
	"g_tpl": "green_template", "b_tpl": "blue_template", "clr_temp_tpl": "color_temp_template", "fx_tpl": "effect_template",
	"fx_list": "effect_list", "max_mirs": "max_mireds",
	"min_mirs": "min_mireds", "max_k": "max_kelvin", "min_k": "min_kelvin", "clr_temp_k": "color_temp_kelvin",
}

// DeviceAbbreviations and OriginAbbreviations are those of the device and
// origin blocks.
var (
	DeviceAbbreviations = map[string]string{"cns": "connections", "cu": "configuration_url", "ids": "identifiers", "name": "name",
		"mf": "manufacturer", "mdl": "model", "mdl_id": "model_id", "hw": "hw_version", "sw": "sw_version", "sa": "suggested_area", "sn": "serial_number"}
	OriginAbbreviations = map[string]string{"name": "name", "sw": "sw_version", "url": "support_url"}
)

// deviceKeys are the device block's keys (via_device has no abbreviation).
var deviceKeys = set("identifiers", "connections", "manufacturer", "model", "model_id", "name", "hw_version", "serial_number",
	"sw_version", "via_device", "suggested_area", "configuration_url")

var originKeys = set("name", "sw_version", "support_url")

func set(keys ...string) map[string]bool {
	m := map[string]bool{}
	for _, k := range keys {
		m[k] = true
	}
	return m
}

func union(sets ...map[string]bool) map[string]bool {
	m := map[string]bool{}
	for _, s := range sets {
		maps.Copy(m, s)
	}
	return m
}

// The schemas' building blocks: every entity's keys, a read-only one's
// and a read-write one's.
var (
	base   = set("platform", "qos", "encoding", "group")
	common = set("availability_topic", "availability_template", "payload_available", "payload_not_available", "availability_mode",
		"availability", "device", "origin", "enabled_by_default", "entity_category", "icon", "json_attributes_topic",
		"json_attributes_template", "object_id", "default_entity_id", "unique_id")
	ro = set("state_topic", "value_template")
	rw = set("command_topic", "optimistic", "retain", "state_topic")
)

// Platforms are the keys each platform takes.
var Platforms = map[string]map[string]bool{
	"sensor": union(base, common, ro, set("device_class", "expire_after", "force_update", "last_reset_value_template", "name", "options",
		"suggested_display_precision", "state_class", "unit_of_measurement")),
	"binary_sensor": union(base, common, ro, set("device_class", "expire_after", "force_update", "name", "off_delay", "payload_off", "payload_on")),
	"button":        union(base, common, set("command_template", "command_topic", "device_class", "name", "payload_press", "retain")),
	"switch":        union(base, common, rw, set("command_template", "name", "payload_off", "payload_on", "state_off", "state_on", "value_template", "device_class")),
	// The light of the template schema (light/schema_template.py).
	"light": union(base, common, rw, set("schema", "command_on_template", "command_off_template", "state_template", "brightness_template",
		"red_template", "green_template", "blue_template", "color_temp_template", "effect_template", "effect_list",
		"max_mireds", "min_mireds", "max_kelvin", "min_kelvin", "color_temp_kelvin", "name")),
	"event":  union(base, common, ro, set("device_class", "name", "event_types")),
	"image":  union(base, common, set("content_type", "name", "url_topic", "image_topic", "image_encoding", "url_template")),
	"notify": union(base, common, set("command_template", "command_topic", "name", "retain")),
}

// required are the keys a platform cannot do without (unique_id: every
// component of a device's document).
var required = map[string][]string{
	"sensor": {"state_topic"}, "binary_sensor": {"state_topic"}, "event": {"state_topic", "event_types"},
	"button": {"command_topic"}, "switch": {"command_topic"}, "notify": {"command_topic"},
	"light": {"command_topic", "schema", "command_on_template", "command_off_template"},
}

// Device classes each platform accepts, and a sensor's units by device
// class (the ones the body could use; a class not here is refused).
var (
	deviceClasses = map[string]map[string]bool{
		"binary_sensor": set("battery", "battery_charging", "carbon_monoxide", "cold", "connectivity", "door", "garage_door", "gas", "heat",
			"light", "lock", "moisture", "motion", "moving", "occupancy", "opening", "plug", "power", "presence", "problem", "running",
			"safety", "smoke", "sound", "tamper", "update", "vibration", "window"),
		"button": set("identify", "restart", "update"),
		"switch": set("outlet", "switch"),
		"event":  set("doorbell", "button", "motion"),
	}
	sensorUnits = map[string]map[string]bool{
		"temperature":          set("°C", "°F", "K"),
		"humidity":             set("%"),
		"atmospheric_pressure": set("cbar", "bar", "hPa", "mmHg", "inHg", "kPa", "mbar", "Pa", "psi"),
		"data_size": set("bit", "kbit", "Mbit", "Gbit", "B", "kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB", "KiB", "MiB", "GiB", "TiB",
			"PiB", "EiB", "ZiB", "YiB"),
	}
	stateClasses     = set("measurement", "measurement_angle", "total", "total_increasing")
	entityCategories = set("config", "diagnostic")
)

// Expand is m with its abbreviated keys written out by abbr: an
// abbreviated key written out overwrites its long form, as Home
// Assistant does.
func Expand(m map[string]any, abbr map[string]string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		if long, ok := abbr[k]; ok {
			k = long
		}
		out[k] = v
	}
	return out
}

// Check checks one component (c, a device document's cmps entry, or a
// per-entity document) as Home Assistant reads it; platform is its p
// when c has none. A component of its platform alone is a removal, and
// is right. Its errors, each naming the key.
func Check(c map[string]any, platform string) []error {
	x := Expand(c, Abbreviations)
	if p, ok := x["platform"].(string); ok {
		platform = p
	}
	keys, ok := Platforms[platform]
	if !ok {
		return []error{fmt.Errorf("platform %q: not one the body announces", platform)}
	}
	if len(x) == 1 && x["platform"] != nil {
		return nil // a removal
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(platform+": "+format, args...)) }
	for _, k := range slices.Sorted(maps.Keys(x)) {
		if !keys[k] {
			bad("key %q is not one a %s takes", k, platform)
		}
	}
	for _, k := range append([]string{"unique_id"}, required[platform]...) {
		if x[k] == nil {
			bad("no %s", k)
		}
	}
	str := func(k string) string { s, _ := x[k].(string); return s }
	if dc := str("device_class"); dc != "" {
		switch platform {
		case "sensor":
			units, known := sensorUnits[dc]
			if !known {
				bad("device_class %q is not one checked here", dc)
			} else if !units[str("unit_of_measurement")] {
				bad("unit %q is not one of device class %s", str("unit_of_measurement"), dc)
			}
		default:
			if !deviceClasses[platform][dc] {
				bad("device_class %q is not a %s's", dc, platform)
			}
		}
	}
	if sc := str("state_class"); sc != "" && !stateClasses[sc] {
		bad("state_class %q", sc)
	}
	if ec := str("entity_category"); ec != "" && !entityCategories[ec] {
		bad("entity_category %q", ec)
	}
	if v, ok := x["expire_after"]; ok {
		if f, isNum := v.(float64); !isNum || f <= 0 || f != float64(int64(f)) {
			bad("expire_after %v: want a whole number of seconds", v)
		}
	}
	if v, ok := x["event_types"]; ok {
		ts, _ := v.([]any)
		if len(ts) == 0 {
			bad("event_types %v: want a list of types", v)
		}
	}
	if platform == "light" && str("schema") != "template" {
		bad("schema %q: the body's lights are the template schema's", str("schema"))
	}
	for k, v := range x {
		if strings.HasSuffix(k, "_topic") {
			if s, ok := v.(string); !ok || s == "" || strings.ContainsAny(s, "+#") {
				bad("%s %v: want a topic to publish on", k, v)
			}
		}
	}
	return errs
}

// CheckDevice checks a device block (dev, device): its keys, written out,
// and that it is identified.
func CheckDevice(d map[string]any) []error {
	x := Expand(d, DeviceAbbreviations)
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(x)) {
		if !deviceKeys[k] {
			errs = append(errs, fmt.Errorf("device: key %q", k))
		}
	}
	if ids, _ := x["identifiers"].([]any); len(ids) == 0 && x["connections"] == nil {
		errs = append(errs, fmt.Errorf("device: no identifiers or connections"))
	}
	if u, ok := x["configuration_url"].(string); ok && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "homeassistant://") {
		errs = append(errs, fmt.Errorf("device: configuration_url %q: want http, https or homeassistant", u))
	}
	return errs
}

// CheckOrigin checks an origin block.
func CheckOrigin(o map[string]any) []error {
	x := Expand(o, OriginAbbreviations)
	var errs []error
	for k := range x {
		if !originKeys[k] {
			errs = append(errs, fmt.Errorf("origin: key %q", k))
		}
	}
	if s, _ := x["name"].(string); s == "" {
		errs = append(errs, fmt.Errorf("origin: no name"))
	}
	return errs
}

// rootKeys are the keys of a device's document besides dev, o and cmps:
// the options its components share.
var rootKeys = set("availability", "availability_mode", "availability_template", "availability_topic", "payload_available",
	"payload_not_available", "command_topic", "state_topic", "qos", "encoding", "device", "origin", "components")

// CheckDeviceDocument checks a device-based discovery document whole:
// its root, its device and origin, and each component (with the options
// the root shares written into it, as Home Assistant does).
func CheckDeviceDocument(doc map[string]any) []error {
	x := Expand(doc, Abbreviations)
	var errs []error
	for k := range x {
		if !rootKeys[k] {
			errs = append(errs, fmt.Errorf("root: key %q", k))
		}
	}
	d, _ := x["device"].(map[string]any)
	o, _ := x["origin"].(map[string]any)
	cmps, _ := x["components"].(map[string]any)
	if d == nil || o == nil || cmps == nil {
		return append(errs, fmt.Errorf("root: device %v, origin %v, components %v: all three are required", d != nil, o != nil, cmps != nil))
	}
	errs = append(errs, CheckDevice(d)...)
	errs = append(errs, CheckOrigin(o)...)
	for _, id := range slices.Sorted(maps.Keys(cmps)) {
		c, _ := cmps[id].(map[string]any)
		if c == nil {
			errs = append(errs, fmt.Errorf("component %s: not an object", id))
			continue
		}
		for _, err := range Check(c, "") {
			errs = append(errs, fmt.Errorf("component %s: %w", id, err))
		}
	}
	return errs
}
