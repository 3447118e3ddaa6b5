package body

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestIdentityMadeOnceAndKept(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 30, 1, 2, 3, 0, time.UTC)
	a, created, err := LoadIdentity(dir, now)
	if err != nil || !created {
		t.Fatalf("first start: %+v created=%v err=%v", a, created, err)
	}
	if a.AgentID == a.BodyID || !a.CreatedAt.Equal(now) {
		t.Errorf("identity %+v", a)
	}
	b, created, err := LoadIdentity(dir, now.Add(time.Hour))
	if err != nil || created || b != a {
		t.Errorf("second start: %+v created=%v err=%v, want %+v", b, created, err, a)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".identity*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestIdentityDamagedIsNotReplaced(t *testing.T) {
	for name, body := range map[string]string{
		"truncated":  `{"agent_id": "0193`,
		"not a uuid": `{"agent_id": "x", "body_id": "0193a1b2-0000-7000-8000-000000000000"}`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, IdentityFile)
			os.WriteFile(p, []byte(body), 0o644)
			_, _, err := LoadIdentity(dir, time.Now())
			if !errors.Is(err, ErrIdentity) || !strings.Contains(err.Error(), p) {
				t.Errorf("got %v, want ErrIdentity naming the file", err)
			}
			if got, _ := os.ReadFile(p); string(got) != body {
				t.Error("the damaged file was changed")
			}
		})
	}
}

func TestRegistry(t *testing.T) {
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := NewRegistry(func() time.Time { return clock })
	if err := r.Register(Channel{ID: "camera.front", Kind: "camera", State: Enabled}); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(Channel{ID: "camera.front", State: Enabled}); !errors.Is(err, ErrDuplicate) {
		t.Errorf("duplicate: %v", err)
	}
	if err := r.Register(Channel{ID: "x", State: "sleepy"}); err == nil {
		t.Error("unknown state accepted")
	}
	r.Register(Channel{ID: "gpio.relay1", State: Discovered})
	r.Seal()
	if err := r.Register(Channel{ID: "late", State: Enabled}); !errors.Is(err, ErrSealed) {
		t.Errorf("late: %v", err)
	}
	for _, tc := range []struct {
		id    string
		to    State
		ok    bool
		state State
	}{
		{"camera.front", Degraded, true, Degraded},
		{"camera.front", Offline, true, Offline},
		{"camera.front", Enabled, true, Enabled},
		{"camera.front", Revoked, true, Revoked},
		{"camera.front", Enabled, false, Revoked},
		{"camera.front", Disabled, true, Disabled},
		{"gpio.relay1", Degraded, false, Discovered},
		{"gpio.relay1", Shadow, true, Shadow},
		{"nope", Enabled, false, ""},
	} {
		clock = clock.Add(time.Second)
		err := r.Set(tc.id, tc.to, "")
		if (err == nil) != tc.ok {
			t.Errorf("%s -> %s: err %v, want ok=%v", tc.id, tc.to, err, tc.ok)
		}
		if !tc.ok && tc.state != "" && !errors.Is(err, ErrTransition) {
			t.Errorf("%s -> %s: %v, want ErrTransition", tc.id, tc.to, err)
		}
		if c, _ := r.Get(tc.id); c.State != tc.state {
			t.Errorf("%s: state %s, want %s", tc.id, c.State, tc.state)
		}
	}
	r.Set("gpio.relay1", Shadow, "read-back mismatch")
	snap := r.Snapshot()
	if len(snap) != 2 || snap[0].ID != "camera.front" || snap[1].Health != "read-back mismatch" {
		t.Errorf("snapshot %+v", snap)
	}
	if !snap[1].Since.Equal(time.Date(2026, 1, 1, 0, 0, 8, 0, time.UTC)) {
		t.Errorf("since %v: a health change must not move it", snap[1].Since)
	}
}

func TestLogger(t *testing.T) {
	env := func(k string) string { return map[string]string{"JOURNAL_STREAM": "8:1234"}[k] }
	noEnv := func(string) string { return "" }
	var j, txt bytes.Buffer
	NewLogger(&j, "auto", slog.LevelInfo, env).Info("started", "board", "sim")
	var rec map[string]any
	if err := json.Unmarshal(j.Bytes(), &rec); err != nil || rec["board"] != "sim" {
		t.Errorf("under systemd: %q (%v), want JSON", j.String(), err)
	}
	log := NewLogger(&txt, "auto", slog.LevelInfo, noEnv)
	log.Debug("hidden")
	log.With("channel", "camera.front").WithGroup("frame").Info("dropped", "count", 3, "why", "slow reader")
	got := txt.String()
	if strings.Contains(got, "hidden") {
		t.Error("debug logged at info level")
	}
	if !strings.Contains(got, `INFO  dropped channel=camera.front frame.count=3 frame.why="slow reader"`) {
		t.Errorf("text line %q", got)
	}
	if LogFormat("text", env) != "text" {
		t.Error("an explicit format must win over the environment")
	}
}
