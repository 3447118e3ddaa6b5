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
	"strings"
	"testing"

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
		{"zone corner outside the frame", `{"version": 1, "sense": {"cameras": {"front": {"zones": [{"name": "door", "polygon": [[0, 0], [1.5, 0], [1, 1]]}]}}}}`, `$.sense.cameras.front.zones[0].polygon[1][0]: out of range: 1.5 is more than the maximum 1`},
		{"zone of two corners", `{"version": 1, "sense": {"cameras": {"front": {"zones": [{"name": "door", "polygon": [[0, 0], [1, 1]]}]}}}}`, `$.sense.cameras.front.zones[0].polygon: 2 items, want at least 3`},
		{"unknown camera key", `{"version": 1, "sense": {"cameras": {"front": {"zone": []}}}}`, `$.sense.cameras.front.zone: unknown key "zone"`},
		{"loud at full scale", `{"version": 1, "sense": {"microphones": {"mic": {"loud_dbfs": 0}}}}`, `$.sense.microphones.mic.loud_dbfs: out of range`},
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
			if strings.Contains(msg, canary) || strings.Contains(msg, "12345") {
				t.Errorf("the error repeats a value: %q", msg)
			}
			var es strictjson.Errors
			if !errors.As(err, &es) {
				t.Errorf("got %T, want strictjson.Errors", err)
			}
		})
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
		{`{"version": 1, "sense": {"cameras": {"front": {"zones": [{"name": "a", "polygon": [[0,0],[1,0],[1,1]]}, {"name": "a", "polygon": [[0,0],[1,0],[0,1]]}]}}}}`, `$.sense.cameras.front.zones[1].name: zone name "a" is used twice`},
	} {
		_, err := Load(Sources{File: write(t, "config.json", tc.doc)})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.doc, err, tc.want)
		}
	}
	l, err := Load(Sources{File: write(t, "config.json", `{"version": 1, "sense": {"cameras": {"front": {"zones": [{"name": "door", "polygon": [[0,0],[0.5,0],[0.5,1]]}], "sensitivity": 0.8, "snapshots": {"enabled": true}}}}}`)})
	if err != nil {
		t.Fatal(err)
	}
	cam := l.Sense.Cameras["front"]
	if len(cam.Zones) != 1 || cam.Zones[0].Polygon[1] != [2]float64{0.5, 0} || *cam.Sensitivity != 0.8 || !cam.Snapshots.Enabled || cam.MinArea != nil {
		t.Errorf("camera config %+v", cam)
	}
}
