package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/board/strictjson"
)

const canary = "CANARY-s3cr3t-7f3a"

func write(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCheckRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"unknown key", `{"version": 1, "mqtt": {"pasword": "` + canary + `"}}`, `$.mqtt.pasword: unknown key "pasword"`},
		{"unknown top key", `{"version": 1, "token": "` + canary + `"}`, `$.token: unknown key "token"`},
		{"wrong type", `{"version": 1, "mqtt": {"keepalive_s": "30"}}`, `$.mqtt.keepalive_s: wrong type: got string, want integer`},
		{"wrong type of a secret", `{"version": 1, "mqtt": {"password": 12345}}`, `$.mqtt.password: wrong type: got number, want string`},
		{"out of range", `{"version": 1, "mqtt": {"keepalive_s": 2}}`, `$.mqtt.keepalive_s: out of range: 2 is less than the minimum 5`},
		{"out of range seed", `{"version": 1, "sim": {"seed": -1}}`, `$.sim.seed: out of range: -1 is less than the minimum 0`},
		{"secret in a field not marked sensitive", `{"version": 1, "mqtt": {"client_id": "` + canary + `!"}}`, `$.mqtt.client_id: does not match the pattern`},
		{"secret too long", `{"version": 1, "mqtt": {"password": "` + strings.Repeat(canary, 20) + `"}}`, `$.mqtt.password: too long: 360 characters, want at most 256`},
		{"credentials in the broker URL", `{"version": 1, "mqtt": {"broker": "tcp://me:` + canary + `@broker:1883"}}`, `$.mqtt.broker: does not match the pattern`},
		{"secret as board name", `{"version": 1, "board": "` + canary + `"}`, `$.board: does not match the pattern`},
		{"enum", `{"version": 1, "log": {"level": "` + canary + `"}}`, `$.log.level: not one of the allowed values "debug", "info", "warn", "error"`},
		{"relative data dir", `{"version": 1, "data_dir": "var/lib"}`, `$.data_dir: does not match the pattern`},
		{"wrong version", `{"version": 2}`, `$.version: must be 1`},
		{"no version", `{"board": "pi5"}`, `$: missing required key "version"`},
		{"duplicate key", `{"version": 1, "board": "pi4", "board": "pi5"}`, `$.board: key "board" appears twice`},
		{"not json", `version = 1`, `not valid JSON`},
		{"monitor printing", `{"version": 1, "monitor": {"print": "sometimes"}}`, `$.monitor.print: not one of the allowed values "terminal", "always", "never"`},
		{"zone corner outside the frame", `{"version": 1, "sense": {"cameras": {"front": {"zones": [{"name": "door", "polygon": [[0, 0], [1.5, 0], [1, 1]]}]}}}}`, `$.sense.cameras.front.zones[0].polygon[1][0]: out of range: 1.5 is more than the maximum 1`},
		{"zone of two corners", `{"version": 1, "sense": {"cameras": {"front": {"zones": [{"name": "door", "polygon": [[0, 0], [1, 1]]}]}}}}`, `$.sense.cameras.front.zones[0].polygon: 2 items, want at least 3`},
		{"unknown camera key", `{"version": 1, "sense": {"cameras": {"front": {"zone": []}}}}`, `$.sense.cameras.front.zone: unknown key "zone"`},
		{"camera summary of no time", `{"version": 1, "sense": {"cameras": {"front": {"summary_s": 0}}}}`, `$.sense.cameras.front.summary_s: out of range: 0 is less than the minimum 1`},
		{"camera summary past an hour", `{"version": 1, "sense": {"cameras": {"front": {"summary_s": 3601}}}}`, `$.sense.cameras.front.summary_s: out of range: 3601 is more than the maximum 3600`},
		{"loud at full scale", `{"version": 1, "sense": {"microphones": {"mic": {"loud_dbfs": 0}}}}`, `$.sense.microphones.mic.loud_dbfs: out of range`},
		{"unknown voice detector", `{"version": 1, "sense": {"microphones": {"mic": {"voice_detector": "webrtc"}}}}`, `$.sense.microphones.mic.voice_detector: not one of the allowed values "silero", "periodicity"`},
		{"voice hangover past 5 s", `{"version": 1, "sense": {"microphones": {"mic": {"voice_hangover_ms": 6000}}}}`, `$.sense.microphones.mic.voice_hangover_ms: out of range: 6000 is more than the maximum 5000`},
		{"privacy class", `{"version": 1, "sense": {"cameras": {"front": {"privacy": "` + canary + `"}}}}`, `$.sense.cameras.front.privacy: not one of the allowed values`},
		{"speaker at full scale", `{"version": 1, "act": {"speakers": {"speaker": {"max_level_dbfs": 0}}}}`, `$.act.speakers.speaker.max_level_dbfs: out of range`},
		{"relative clips directory", `{"version": 1, "act": {"speakers": {"speaker": {"clips_dir": "clips"}}}}`, `$.act.speakers.speaker.clips_dir: does not match the pattern`},
		{"unknown speaker key", `{"version": 1, "act": {"speakers": {"speaker": {"volume": 11}}}}`, `$.act.speakers.speaker.volume: unknown key "volume"`},
		{"clip too long", `{"version": 1, "act": {"speakers": {"speaker": {"max_clip_ms": 600000}}}}`, `$.act.speakers.speaker.max_clip_ms: out of range`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := write(t, "config.json", tc.doc)
			err := CheckFile(p)
			if err == nil {
				t.Fatalf("accepted, want %q", tc.want)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, p) {
				t.Errorf("%q does not start with the file name", msg)
			}
			if !strings.Contains(msg, tc.want) {
				t.Errorf("got %q, want %q", msg, tc.want)
			}
			// After the file's name, which is a temporary directory's and
			// may hold any digits.
			if rest := strings.TrimPrefix(msg, p); strings.Contains(rest, canary) || strings.Contains(rest, "12345") {
				t.Errorf("the error repeats a value: %q", msg)
			}
			var es strictjson.Errors
			if !errors.As(err, &es) {
				t.Errorf("got %T, want strictjson.Errors", err)
			}
		})
	}
}

// The monitor's line goes to a terminal by default, never to a pipe or
// the journal unless asked; quiet keeps it off everywhere.
func TestMonitorPrints(t *testing.T) {
	for _, tc := range []struct {
		m        Monitor
		terminal bool
		want     bool
	}{
		{Default().Monitor, true, true},
		{Default().Monitor, false, false},
		{Monitor{Print: "always"}, false, true},
		{Monitor{Print: "never"}, true, false},
		{Monitor{Print: "always", Quiet: true}, true, false},
		{Monitor{Print: "terminal", Quiet: true}, true, false},
	} {
		if got := tc.m.Prints(tc.terminal); got != tc.want {
			t.Errorf("%+v to a terminal %v: prints %v, want %v", tc.m, tc.terminal, got, tc.want)
		}
	}
}

func TestCheckRefusesSpecialFiles(t *testing.T) {
	if err := CheckFile(t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory: %v", err)
	}
	if err := CheckFile("/dev/null"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("device: %v", err)
	}
	if err := CheckFile(filepath.Join(t.TempDir(), "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
}

func TestLayers(t *testing.T) {
	image := write(t, "image.json", `{"version": 1, "board": "pi4", "log": {"level": "debug"}, "mqtt": {"keepalive_s": 60}}`)
	etc := write(t, "etc.json", `{"version": 1, "board": "pi5", "mqtt": {"username": "me"}}`)
	file := write(t, "mine.json", `{"version": 1, "mqtt": {"password": "`+canary+`", "keepalive_s": 90}}`)
	l, err := Load(Sources{ImageDefault: image, Etc: etc, File: file, Flags: map[string]any{"data_dir": "/tmp/x"}})
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Board = "pi5"
	want.DataDir = "/tmp/x"
	want.Log.Level = "debug"
	want.MQTT.Username = "me"
	want.MQTT.Password = canary
	want.MQTT.KeepaliveS = 90
	if !reflect.DeepEqual(l.Config, want) {
		t.Errorf("got %+v\nwant %+v", l.Config, want)
	}
	if got := strings.Join(l.Layers, " < "); got != "built-in < "+image+" < "+etc+" < "+file+" < flags" {
		t.Errorf("layers %s", got)
	}
	// Missing optional layers are skipped; a missing --config is an error.
	if _, err := Load(Sources{ImageDefault: "/nonexistent/a.json", Etc: "/nonexistent/b.json"}); err != nil {
		t.Errorf("optional layers: %v", err)
	}
	if _, err := Load(Sources{File: "/nonexistent/c.json"}); err == nil {
		t.Error("a missing --config file was accepted")
	}
	// A bad flag is refused like a bad file.
	if _, err := Load(Sources{Flags: map[string]any{"board": "Bad Board"}}); err == nil || !strings.Contains(err.Error(), "flags: $.board") {
		t.Errorf("bad flag: %v", err)
	}
	// A bad lower layer stops the load even if a higher one is fine.
	bad := write(t, "bad.json", `{"version": 1, "mqtt": {"keepalive_s": 1}}`)
	if _, err := Load(Sources{Etc: bad, File: file}); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("bad etc layer: %v", err)
	}
}

func TestSecretsNeverPrint(t *testing.T) {
	c := Default()
	c.MQTT.Password = canary
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	log.Info("config", "config", c, "password", c.MQTT.Password, "mqtt", c.MQTT)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("config", "config", c, "password", c.MQTT.Password)
	j, _ := json.Marshal(c)
	for name, s := range map[string]string{
		"%v":   fmt.Sprintf("%v", c),
		"%+v":  fmt.Sprintf("%+v", c),
		"%#v":  fmt.Sprintf("%#v", c),
		"%s":   fmt.Sprintf("%s", c.MQTT.Password),
		"%q":   fmt.Sprintf("%q", c.MQTT.Password),
		"%x":   fmt.Sprintf("%x", c.MQTT.Password),
		"json": string(j),
		"logs": logs.String(),
	} {
		if strings.Contains(s, canary) || strings.Contains(s, fmt.Sprintf("%x", canary)) {
			t.Errorf("%s shows the secret: %s", name, s)
		}
		if !strings.Contains(s, "[redacted]") {
			t.Errorf("%s does not say [redacted]: %s", name, s)
		}
	}
	if c.MQTT.Password.Reveal() != canary {
		t.Error("Reveal lost the secret")
	}
}

func TestSchemaMarksEverySecretField(t *testing.T) {
	// Every Secret field in Config is x-sensitive in the schema, and the
	// other way round.
	var fromType []string
	var walk func(prefix []string, t reflect.Type)
	walk = func(prefix []string, t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			name := strings.Split(f.Tag.Get("json"), ",")[0]
			path := append(append([]string(nil), prefix...), name)
			switch {
			case f.Type == reflect.TypeOf(Secret("")):
				fromType = append(fromType, "$."+strings.Join(path, "."))
			case f.Type.Kind() == reflect.Struct:
				walk(path, f.Type)
			}
		}
	}
	walk(nil, reflect.TypeOf(Config{}))
	if got, want := strings.Join(Schema().SensitivePaths(), " "), strings.Join(fromType, " "); got != want {
		t.Errorf("schema marks %q sensitive, the Go type %q", got, want)
	}
}

func TestDefaultsMatchSchema(t *testing.T) {
	// Build the schema's defaults into a document and load it as a layer:
	// it must equal Default().
	doc := map[string]any{}
	var walk func(dst map[string]any, node map[string]any)
	walk = func(dst map[string]any, node map[string]any) {
		for k, v := range node["properties"].(map[string]any) {
			p := v.(map[string]any)
			if _, ok := p["properties"]; ok {
				sub := map[string]any{}
				walk(sub, p)
				dst[k] = sub
			} else if d, ok := p["default"]; ok {
				dst[k] = d
			} else {
				t.Errorf("schema key %s has no default", k)
			}
		}
	}
	walk(doc, Schema().Doc())
	data, _ := json.Marshal(doc)
	l, err := Load(Sources{File: write(t, "defaults.json", string(data))})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(l.Config, Default()) {
		t.Errorf("schema defaults %+v\nDefault() %+v", l.Config, Default())
	}
}

func TestREADMEReferenceIsCurrent(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- config-reference:begin -->\n", "<!-- config-reference:end -->"
	s := string(readme)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatal("README.md has no config reference markers")
	}
	if got := s[i+len(begin) : j]; got != Reference() {
		t.Errorf("README.md's config reference is stale; run `make docs`")
	}
}

func FuzzCheck(f *testing.F) {
	f.Add([]byte(`{"version": 1, "mqtt": {"keepalive_s": 30}}`))
	f.Add([]byte(`{"version": 1, "board": "pi5", "log": {"level": "warn"}}`))
	f.Add([]byte(`{"version": 1, "mqtt": {"password": "x", "password": "y"}}`))
	f.Add([]byte(`{"version": 1, "act": {"outputs": {"relay1": {"risk": "R3", "max_on_s": 2}}, "principals": [{"uid": 0, "trust": "high"}], "human_controls": [{"control": "gpio.button", "resources": ["gpio.relay1"], "release": "after", "after_s": 5}]}}`))
	// Held for the whole run, so the schema is compiled once, not after
	// every collection.
	held := Schema()
	defer runtime.KeepAlive(held)
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := Check("f.json", data)
		if err != nil {
			if strings.Contains(err.Error(), canary) {
				t.Fatal("error repeats the canary")
			}
			return
		}
		var c Config
		if err := strictjson.Into(doc, &c); err != nil {
			t.Fatalf("a valid layer does not decode: %v", err)
		}
	})
}

func TestLoadRefusesLimitsOutOfOrder(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"version": 1, "sense": {"self": {"hot_c": 90, "critical_c": 85}}}`, `$.sense.self.critical_c: 85 °C is below hot_c (90 °C)`},
		{`{"version": 1, "sense": {"self": {"disk_low_mb": 10, "disk_critical_mb": 32}}}`, `$.sense.self.disk_critical_mb: 32 MiB is above disk_low_mb (10 MiB)`},
		{`{"version": 1, "sense": {"env": {"thresholds": [{"quantity": "humidity_pct", "hysteresis": 5}]}}}`, `$.sense.env.thresholds[0]: a threshold is above or below a value: one of them`},
		{`{"version": 1, "sense": {"env": {"thresholds": [{"quantity": "humidity_pct", "above": 70, "below": 20, "hysteresis": 5}]}}}`, `$.sense.env.thresholds[0]: a threshold is above or below a value`},
		{`{"version": 1, "sense": {"env": {"thresholds": [{"quantity": "lux", "above": 70, "hysteresis": 5}]}}}`, `$.sense.env.thresholds[0].quantity`},
		{`{"version": 1, "sense": {"cameras": {"front": {"zones": [{"name": "a", "polygon": [[0,0],[1,0],[1,1]]}, {"name": "a", "polygon": [[0,0],[1,0],[0,1]]}]}}}}`, `$.sense.cameras.front.zones[1].name: zone name "a" is used twice`},
		{`{"version": 1, "mqtt": {"reconnect": {"min_ms": 5000, "max_ms": 2000}}}`, `$.mqtt.reconnect.min_ms: 5000 ms is above max_ms (2000 ms)`},
		{`{"version": 1, "mqtt": {"broker": "ssl://hub:8883", "tls": {"cert_file": "/etc/c.pem"}}}`, `$.mqtt.tls: cert_file and key_file go together`},
		{`{"version": 1, "mqtt": {"tls": {"ca_file": "/etc/ca.pem"}}}`, `$.mqtt.tls: set for tcp://127.0.0.1:1883, which is not a TLS broker URL`},
		{`{"version": 1, "mqtt": {"topic_prefix": "tobe/#"}}`, `$.mqtt.topic_prefix`},
		{`{"version": 1, "mqtt": {"json_mirror": ["loud"]}}`, `$.mqtt.json_mirror[0]`},
	} {
		_, err := Load(Sources{File: write(t, "config.json", tc.doc)})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.doc, err, tc.want)
		}
	}
	l, err := Load(Sources{File: write(t, "config.json", `{"version": 1, "sense": {"cameras": {"front": {"zones": [{"name": "door", "polygon": [[0,0],[0.5,0],[0.5,1]]}], "sensitivity": 0.8, "snapshots": {"enabled": true}, "summary_s": 30}}}}`)})
	if err != nil {
		t.Fatal(err)
	}
	cam := l.Sense.Cameras["front"]
	if len(cam.Zones) != 1 || cam.Zones[0].Polygon[1] != [2]float64{0.5, 0} || *cam.Sensitivity != 0.8 || !cam.Snapshots.Enabled || cam.MinArea != nil || cam.SummaryS != 30 {
		t.Errorf("camera config %+v", cam)
	}
}

func TestActSection(t *testing.T) {
	for _, tc := range []struct {
		name, act, want string
	}{
		{"max_on zero", `{"outputs": {"relay1": {"max_on_s": 0}}}`, `$.act.outputs.relay1.max_on_s: out of range: 0 must be more than 0`},
		{"max_on negative", `{"outputs": {"relay1": {"max_on_s": -1}}}`, `$.act.outputs.relay1.max_on_s: out of range`},
		{"min_interval negative", `{"outputs": {"led": {"min_interval_s": -0.5}}}`, `$.act.outputs.led.min_interval_s: out of range: -0.5 is less than the minimum 0`},
		{"risk R0", `{"outputs": {"led": {"risk": "R0"}}}`, `$.act.outputs.led.risk: not one of the allowed values "R1", "R2", "R3"`},
		{"unknown output key", `{"outputs": {"led": {"max_on": 3}}}`, `$.act.outputs.led.max_on: unknown key "max_on"`},
		{"bad output name", `{"outputs": {"Relay 1": {}}}`, `does not match the pattern ^[a-z0-9][a-z0-9-]{0,31}$`},
		{"forbidden pattern", `{"safety": {"forbidden": [{"capability": "gpio*", "scope": "*"}]}}`, `$.act.safety.forbidden[0].capability: does not match the pattern`},
		{"forbidden without scope", `{"safety": {"forbidden": [{"capability": "gpio.*"}]}}`, `$.act.safety.forbidden[0]: missing required key "scope"`},
		{"burst zero", `{"rate_limits": {"default": {"burst": 0}}}`, `$.act.rate_limits.default.burst: out of range: 0 is less than the minimum 1`},
		{"rate zero", `{"rate_limits": {"by_capability": {"gpio.pulse": {"burst": 1, "per_second": 0}}}}`, `$.act.rate_limits.by_capability["gpio.pulse"].per_second: out of range: 0 must be more than 0`},
		{"rate without burst", `{"rate_limits": {"by_capability": {"gpio.pulse": {"per_second": 1}}}}`, `missing required key "burst"`},
		{"admission burst zero", `{"rate_limits": {"per_principal": {"burst": 0}}}`, `$.act.rate_limits.per_principal.burst: out of range: 0 is less than the minimum 1`},
		{"mode", `{"channel_modes": {"gpio.relay1": "off"}}`, `$.act.channel_modes["gpio.relay1"]: not one of the allowed values "disabled", "shadow", "enabled"`},
		{"capability mode", `{"capability_modes": {"gpio.pulse": "degraded"}}`, `$.act.capability_modes["gpio.pulse"]: not one of the allowed values`},
		{"trust", `{"principals": [{"uid": 1000, "trust": "root"}]}`, `$.act.principals[0].trust: not one of the allowed values "off", "low", "medium", "high", "max"`},
		{"principal without trust", `{"principals": [{"uid": 1000}]}`, `$.act.principals[0]: missing required key "trust"`},
		{"negative uid", `{"principals": [{"uid": -1, "trust": "low"}]}`, `$.act.principals[0].uid: out of range: -1 is less than the minimum 0`},
		{"release", `{"human_controls": [{"control": "gpio.button", "resources": ["gpio.relay1"], "release": "never"}]}`, `$.act.human_controls[0].release: not one of the allowed values "release", "press_again", "after"`},
		{"no resources", `{"human_controls": [{"control": "gpio.button", "resources": [], "release": "release"}]}`, `$.act.human_controls[0].resources: 0 items, want at least 1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := write(t, "config.json", `{"version": 1, "act": `+tc.act+`}`)
			err := CheckFile(p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestActSectionSemantics(t *testing.T) {
	for _, tc := range []struct {
		name, act, want string
	}{
		{"two identities", `{"principals": [{"uid": 0, "group": "wheel", "trust": "high"}]}`, `$.act.principals[0]: names 2 identities; want exactly one of uid, user, gid or group`},
		{"no identity", `{"principals": [{"trust": "high"}]}`, `$.act.principals[0]: names 0 identities`},
		{"after without after_s", `{"human_controls": [{"control": "gpio.button", "resources": ["gpio.relay1"], "release": "after"}]}`, `$.act.human_controls[0].after_s: must be > 0 with release "after"`},
		{"after_s with press_again", `{"human_controls": [{"control": "gpio.button", "resources": ["gpio.relay1"], "release": "press_again", "after_s": 5}]}`, `$.act.human_controls[0].after_s: only with release "after"`},
		{"input without key", `{"human_controls": [{"control": "input.keypad", "resources": ["gpio.relay1"], "release": "release"}]}`, `$.act.human_controls[0].key: an input device's control needs the key`},
		{"gpio with key", `{"human_controls": [{"control": "gpio.button", "key": "KEY_A", "resources": ["gpio.relay1"], "release": "release"}]}`, `$.act.human_controls[0].key: only for an input device's control`},
		{"camera as control", `{"human_controls": [{"control": "camera.front", "resources": ["gpio.relay1"], "release": "release"}]}`, `$.act.human_controls[0].control: want a GPIO button (gpio.NAME) or an input device (input.NAME)`},
		{"clock rule R0", `{"safety": {"unsynced_clock_refuse_from": "R0"}}`, `$.act.safety.unsynced_clock_refuse_from`},
		{"clock rule lower case", `{"safety": {"unsynced_clock_refuse_from": "r3"}}`, `$.act.safety.unsynced_clock_refuse_from`},
		{"resource twice", `{"human_controls": [{"control": "gpio.button", "resources": ["gpio.relay1"], "release": "release"}, {"control": "input.keypad", "key": "KEY_1", "resources": ["gpio.relay1"], "release": "press_again"}]}`, `$.act.human_controls[1].resources[0]: gpio.relay1 already belongs to human_controls[0]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(Sources{File: write(t, "config.json", `{"version": 1, "act": `+tc.act+`}`)})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
	l, err := Load(Sources{File: write(t, "config.json", `{"version": 1, "act": {
		"safety": {"forbid_r3": true, "forbidden": [{"capability": "gpio.*", "scope": "gpio.relay2"}], "unsynced_clock_refuse_from": "R2"},
		"rate_limits": {"per_principal": {"per_second": 0.5}, "default": {"burst": 5}, "by_capability": {"gpio.pulse": {"burst": 2, "per_second": 0.5}}},
		"outputs": {"relay1": {"risk": "R3", "max_on_s": 2.5, "min_interval_s": 1}},
		"channel_modes": {"gpio.relay2": "shadow"},
		"principals": [{"user": "pi", "trust": "medium"}],
		"human_controls": [{"control": "gpio.button", "resources": ["gpio.relay1"], "release": "after", "after_s": 30}]}}`)})
	if err != nil {
		t.Fatal(err)
	}
	a := l.Act
	if !a.Safety.ForbidR3 || len(a.Safety.Forbidden) != 1 || a.Safety.Forbidden[0].Scope != "gpio.relay2" || a.Safety.UnsyncedClockRefuseFrom != "R2" {
		t.Errorf("safety %+v", a.Safety)
	}
	if a.RateLimits.Default != (RateLimit{Burst: 5, PerSecond: 10}) || a.RateLimits.ByCapability["gpio.pulse"] != (RateLimit{Burst: 2, PerSecond: 0.5}) {
		t.Errorf("rate limits %+v: the default's per_second must stay from below", a.RateLimits)
	}
	if a.RateLimits.PerPrincipal != (RateLimit{Burst: 30, PerSecond: 0.5}) {
		t.Errorf("got the admission limit %+v, want burst 30 from below and per_second 0.5", a.RateLimits.PerPrincipal)
	}
	if o := a.Outputs["relay1"]; o.Risk != "R3" || o.MaxOn() != 2500*time.Millisecond || o.MinInterval() != time.Second {
		t.Errorf("output %+v", o)
	}
	if len(a.Principals) != 1 || a.Principals[0].User != "pi" {
		t.Errorf("principals %+v: a list in a higher layer replaces the defaults", a.Principals)
	}
	if h := a.HumanControls[0]; h.After() != 30*time.Second || h.Release != ReleaseAfter {
		t.Errorf("human control %+v", h)
	}
}

// TestGateSection: the gate's settings, each wrong one named by its path;
// a layer's bands add to the built-in ones, its quiet periods replace
// theirs.
func TestGateSection(t *testing.T) {
	for _, tc := range []struct {
		name, gate, want string
	}{
		{"quiet time", `{"quiet": [{"from": "22:00", "to": "7:00"}]}`, `$.gate.quiet[0].to: does not match the pattern`},
		{"quiet without to", `{"quiet": [{"from": "22:00"}]}`, `$.gate.quiet[0]: missing required key "to"`},
		{"an empty quiet period", `{"quiet": [{"from": "22:00", "to": "22:00"}]}`, `$.gate.quiet[0]: from and to are both 22:00: the period is empty`},
		{"band", `{"bands": {"camera.": "urgent"}}`, `$.gate.bands["camera."]: not one of the allowed values "low", "medium", "high", "critical"`},
		{"band selector", `{"bands": {"Camera": "high"}}`, `does not match the pattern`},
		{"budget", `{"item_budget": {"max": -1}}`, `$.gate.item_budget.max: out of range: -1 is less than the minimum 0`},
		{"budget key", `{"global_budget": {"per_hour": 3}}`, `$.gate.global_budget.per_hour: unknown key "per_hour"`},
		{"trust", `{"min_trust": "some"}`, `$.gate.min_trust: not one of the allowed values`},
		{"tick", `{"tick_s": 0}`, `$.gate.tick_s: out of range: 0 is less than the minimum 1`},
		{"pool", `{"noise_pool": {"per": 0}}`, `$.gate.noise_pool.per: out of range: 0 is less than the minimum 1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(Sources{File: write(t, "config.json", `{"version": 1, "gate": `+tc.gate+`}`)})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
	l, err := Load(Sources{File: write(t, "config.json", `{"version": 1, "gate": {"bands": {"camera.": "high"}, "quiet": [{"from": "22:00", "to": "07:00"}], "global_budget": {"max": 10}}}`)})
	if err != nil {
		t.Fatal(err)
	}
	g := l.Config.Gate
	if len(g.Bands) != 4 || g.Bands["camera."] != "high" || g.Bands["body.disk_low"] != "high" {
		t.Errorf("bands %v: want the built-in three and camera.", g.Bands)
	}
	if len(g.Quiet) != 1 || g.GlobalBudget != (Budget{Max: 10, WindowS: 3600}) || g.ItemBudget.Max != 6 {
		t.Errorf("quiet %v, budgets %+v %+v", g.Quiet, g.GlobalBudget, g.ItemBudget)
	}
}
