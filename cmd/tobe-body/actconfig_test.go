package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/board"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/body/config"
)

func simProfile(t *testing.T) *board.Profile {
	t.Helper()
	set, err := board.LoadSet("")
	if err != nil {
		t.Fatal(err)
	}
	p, err := set.Get("sim")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// actFrom loads an act section as the config does, layered over the
// defaults.
func actFrom(t *testing.T, section string) config.Act {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.json")
	os.WriteFile(p, []byte(`{"version": 1, "act": `+section+`}`), 0o600)
	l, err := config.Load(config.Sources{File: p})
	if err != nil {
		t.Fatal(err)
	}
	return l.Act
}

func simRegistry() *body.Registry {
	reg := body.NewRegistry(time.Now)
	for _, id := range []string{"gpio.relay1", "gpio.relay2", "gpio.led", "gpio.buzzer", "gpio.button", "body.notify"} {
		reg.Register(body.Channel{ID: id, Kind: "gpio-out", State: body.Enabled})
	}
	reg.Register(body.Channel{ID: "camera.front", Kind: "camera", State: body.Error, Health: "broken"})
	reg.Seal()
	return reg
}

// Every act setting that names something on the board is checked against
// it, and each error names its path.
func TestActSettingsAgainstTheBoard(t *testing.T) {
	p := simProfile(t)
	for _, tc := range []struct {
		name, act, want string
	}{
		{"unknown output", `{"outputs": {"relay9": {"max_on_s": 1}}}`, `config: $.act.outputs.relay9: board sim has no output "relay9" (outputs: buzzer, led, relay1, relay2)`},
		{"a relay lowered to R1", `{"outputs": {"relay1": {"risk": "R1"}}}`, `$.act.outputs.relay1.risk: R1 is below the relay's R2; a config may raise a risk, never lower it`},
		{"unknown channel", `{"channel_modes": {"gpio.relay9": "disabled"}}`, `$.act.channel_modes["gpio.relay9"]: this body has no channel gpio.relay9`},
		{"shadow on a failed channel", `{"channel_modes": {"camera.front": "shadow"}}`, `$.act.channel_modes["camera.front"]: body: state change not allowed`},
		{"not a button", `{"human_controls": [{"control": "gpio.relay1-feedback", "resources": ["gpio.relay1"], "release": "release"}]}`, `$.act.human_controls[0].control: gpio.relay1-feedback is not a button of board sim (buttons: gpio.button)`},
		{"not a control device", `{"human_controls": [{"control": "input.keyboard", "key": "KEY_A", "resources": ["gpio.relay1"], "release": "release"}]}`, `$.act.human_controls[0].control: input.keyboard is not an input device of board sim with the control role (input.keypad)`},
		{"resource not an output", `{"human_controls": [{"control": "gpio.button", "resources": ["camera.front"], "release": "release"}]}`, `$.act.human_controls[0].resources[0]: board sim has no output camera.front`},
		{"unknown user", `{"principals": [{"user": "no-such-user-x", "trust": "high"}]}`, `$.act.principals[0].user: no user "no-such-user-x" on this body`},
		{"unknown group", `{"principals": [{"group": "no-such-group-x", "trust": "high"}]}`, `$.act.principals[0].group: no group "no-such-group-x" on this body`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := act.NewSettings(actFrom(t, tc.act), body.FactsOf(p), simRegistry())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v\nwant %q", err, tc.want)
			}
		})
	}

	reg := simRegistry()
	s, err := act.NewSettings(actFrom(t, `{"outputs": {"relay1": {"risk": "R3", "max_on_s": 0.5}, "led": {"min_interval_s": 2}},
		"channel_modes": {"gpio.relay2": "shadow", "gpio.buzzer": "disabled", "gpio.led": "enabled"},
		"capability_modes": {"gpio.pulse": "shadow"},
		"human_controls": [{"control": "input.keypad", "key": "KEY_1", "resources": ["gpio.relay1"], "release": "after", "after_s": 3}]}`), body.FactsOf(p), reg)
	if err != nil {
		t.Fatal(err)
	}
	if o := s.Outputs["relay1"]; o.Risk != act.R3 || !o.Raised || o.Config.MaxOn() != 500*time.Millisecond {
		t.Errorf("relay1 %+v", o)
	}
	if o := s.Outputs["led"]; o.Risk != act.R1 || o.Raised || o.Config.MinInterval() != 2*time.Second {
		t.Errorf("led %+v", o)
	}
	for id, want := range map[string]body.State{"gpio.relay2": body.Shadow, "gpio.buzzer": body.Disabled, "gpio.led": body.Enabled, "gpio.relay1": body.Enabled} {
		if ch, _ := reg.Get(id); ch.State != want {
			t.Errorf("%s is %s, want %s", id, ch.State, want)
		}
	}
	if s.CapModes["gpio.pulse"] != body.Shadow {
		t.Errorf("capability modes %v", s.CapModes)
	}
	if len(s.Controls) != 1 || s.Controls[0].Control != "input.keypad KEY_1" || s.Controls[0].End != act.EndAfter || s.Controls[0].After != 3*time.Second {
		t.Errorf("controls %+v", s.Controls)
	}
	// Capability names are checked against the runner.
	r := act.NewRunner(act.Environment{}, nil)
	set, pulse := act.NewGPIOActions(nil, nil)
	r.Register(set)
	r.Register(pulse)
	if err := s.CheckCapabilities(r); err != nil {
		t.Error(err)
	}
	s, _ = act.NewSettings(actFrom(t, `{"capability_modes": {"door.open": "disabled"}, "rate_limits": {"by_capability": {"gpio.blink": {"burst": 1, "per_second": 1}}}}`), body.FactsOf(p), simRegistry())
	if l := s.Limits.ByCapability["gpio.blink"]; l != (act.RateLimit{Burst: 1, PerSecond: 1}) || s.Limits.Default != (act.RateLimit{Burst: 20, PerSecond: 10}) {
		t.Errorf("rate limits %+v", s.Limits)
	}
	err = s.CheckCapabilities(r)
	for _, want := range []string{`$.act.capability_modes["door.open"]: this body offers no capability door.open (gpio.pulse, gpio.set)`, `$.act.rate_limits.by_capability["gpio.blink"]: this body offers no capability gpio.blink`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q", err, want)
		}
	}
}

// On the sim board, the config's act section reaches the runner: relay1
// may stay on at most 100 ms, relay2 is disabled, gpio.set on the buzzer
// is forbidden; a longer pulse is refused and a shorter one runs.
func TestDaemonActConfig(t *testing.T) {
	d := startDaemon(t, `, "act": {"outputs": {"relay1": {"max_on_s": 0.1}}, "channel_modes": {"gpio.relay2": "disabled"},
		"safety": {"forbidden": [{"capability": "gpio.set", "scope": "gpio.buzzer"}]}}`)
	defer d.stop(t)
	for _, tc := range []struct {
		args []string
		want string
		ok   bool
	}{
		{[]string{"gpio.pulse", "gpio.relay1", "duration_ms=500"}, "refused (invalid_request): params.duration_ms 500: relay1 may stay on at most 100ms", false},
		{[]string{"gpio.set", "gpio.relay1", "state=on"}, "refused (invalid_request): relay1 may stay on at most 100ms: use gpio.pulse", false},
		{[]string{"gpio.pulse", "gpio.relay1", "duration_ms=50"}, " succeeded", true},
		{[]string{"gpio.set", "gpio.relay2", "state=on"}, "refused (channel_disabled): the channel is disabled", false},
		{[]string{"gpio.set", "gpio.buzzer", "state=on"}, "refused (safety_rule): forbidden by rule 0 (gpio.set on gpio.buzzer)", false},
		{[]string{"gpio.pulse", "gpio.buzzer", "duration_ms=10"}, " succeeded", true},
		{[]string{"gpio.pulse", "gpio.buzzer", "duration_ms=999999999"}, "refused (invalid_request): params.duration_ms 999999999: lasts 277h46m39.999s, which does not fit in the action's timeout of 30s", false},
	} {
		out, err := runCmd(t, append([]string{"do", "--data", d.data}, tc.args...)...)
		if (err == nil) != tc.ok || !strings.Contains(out, tc.want) {
			t.Errorf("do %v: %v\n%s\nwant %q", tc.args, err, out, tc.want)
		}
	}
	out, _ := runCmd(t, "status", "--data", d.data)
	if !strings.Contains(out, "gpio.relay2") || !strings.Contains(out, "disabled") {
		t.Errorf("status does not show relay2 disabled:\n%s", out)
	}
}

// A local administrator the config puts at medium trust acts on an LED
// (R1) but not a relay (R2), and may not grant or reset.
func TestDaemonAdminTrust(t *testing.T) {
	d := startDaemon(t, `, "act": {"principals": [{"user": "@daemon", "trust": "medium"}, {"uid": 0, "trust": "medium"}]}`)
	defer d.stop(t)
	out, err := runCmd(t, "do", "--data", d.data, "gpio.set", "gpio.led", "state=on")
	if err != nil || !strings.Contains(out, " succeeded") {
		t.Errorf("LED at medium trust: %v\n%s", err, out)
	}
	out, _ = runCmd(t, "do", "--data", d.data, "gpio.pulse", "gpio.relay1", "duration_ms=10")
	if !strings.Contains(out, "refused (risk_exceeds_trust): R2 needs high trust") {
		t.Errorf("relay at medium trust:\n%s", out)
	}
	out, err = runCmd(t, "grant", "add", "--data", d.data, "--subject", "agent:pi", "--capability", "gpio.*", "--scope", "gpio.led", "--expires", "1h")
	if err == nil || !strings.Contains(err.Error(), "grant.add needs a local administrator at high trust or above; the caller is admin:uid=") {
		t.Errorf("grant at medium trust: %v\n%s", err, out)
	}
	if _, err := runCmd(t, "status", "--data", d.data); err != nil {
		t.Errorf("status at medium trust: %v", err)
	}
}

// A peer no rule names is not a local administrator.
func TestDaemonRefusesAPeerNoRuleNames(t *testing.T) {
	if os.Getuid() == 4242 {
		t.Skip("runs as the uid the rule names")
	}
	d := startDaemon(t, `, "act": {"principals": [{"uid": 4242, "trust": "high"}]}`)
	defer d.stop(t)
	out, err := runCmd(t, "status", "--data", d.data)
	if err == nil || !strings.Contains(err.Error(), "is not a local administrator (no rule of act.principals names it)") {
		t.Errorf("status from a peer no rule names: %v\n%s", err, out)
	}
}

// A config naming an output the board does not have stops the start, and
// says where.
func TestDaemonRefusesAnUnknownOutput(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.json")
	os.WriteFile(cfg, []byte(`{"version": 1, "act": {"outputs": {"relay9": {"max_on_s": 1}}}}`), 0o600)
	var out, errOut strings.Builder
	err := run(t.Context(), []string{"run", "--board", "sim", "--data", filepath.Join(dir, "data"), "--config", cfg}, nil, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), `$.act.outputs.relay9: board sim has no output "relay9"`) {
		t.Errorf("got %v", err)
	}
}

// config check --board checks the names too, without a daemon.
func TestConfigCheckAgainstABoard(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.json")
	os.WriteFile(p, []byte(`{"version": 1, "act": {"outputs": {"relay9": {"max_on_s": 1}, "relay1": {"risk": "R1"}}}}`), 0o600)
	if out, err := runCmd(t, "config", "check", p); err != nil {
		t.Errorf("without a board: %v\n%s", err, out)
	}
	_, err := runCmd(t, "config", "check", "--board", "sim", p)
	for _, want := range []string{`$.act.outputs.relay9: board sim has no output "relay9"`, `$.act.outputs.relay1.risk: R1 is below the relay's R2`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q", err, want)
		}
	}
	if out, err := runCmd(t, "config", "check", p, "--board", "pi5"); err == nil || !strings.Contains(err.Error(), "board pi5 has no output") {
		t.Errorf("pi5: %v\n%s", err, out)
	}
}
