package uplink

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/ledger"
)

// The board's document takes the CPU's temperature from the zone the
// board names for it, else the hottest zone's; none without zones.
func TestSelfDocOfTheCPUZone(t *testing.T) {
	for _, tc := range []struct {
		name  string
		temps map[string]float64
		want  float64 // 0: none
	}{
		{"a cpu zone", map[string]float64{"gpu-thermal": 70, "cpu-thermal": 55}, 55},
		{"a package zone", map[string]float64{"acpitz": 40, "x86_pkg_temp": 61}, 61},
		{"the hottest", map[string]float64{"soc": 48, "board": 52}, 52},
		{"no zones", nil, 0},
	} {
		doc := SelfDocOf(body.SelfState{Temps: tc.temps, DiskFree: 3 << 20})
		switch {
		case tc.want == 0 && doc.CPUTempC != nil:
			t.Errorf("%s: %v °C, want none", tc.name, *doc.CPUTempC)
		case tc.want != 0 && (doc.CPUTempC == nil || *doc.CPUTempC != tc.want):
			t.Errorf("%s: %v, want %v °C", tc.name, doc.CPUTempC, tc.want)
		}
		if doc.DiskFreeMB != 3 {
			t.Errorf("%s: disk free %v MB, want 3", tc.name, doc.DiskFreeMB)
		}
	}
}

// States follows the ledger after After: a camera's motion event and a
// microphone's voice appended to it set their documents.
func TestStatesFollowMotionAndSound(t *testing.T) {
	b := startBroker(t)
	s := openStore(t)
	r, _ := run(t, s, testOptions(b))
	var privacy atomic.Value
	privacy.Store(PrivacyDoc{})
	st := &States{Relay: r, Store: s, Board: Board{Cameras: map[string][]string{"camera.front": {"door"}}, Mics: []string{"audio.mic"}, Privacy: true},
		Self: func() (body.SelfState, bool) { return body.SelfState{}, false }, Log: slog.New(slog.DiscardHandler),
		Privacy: func() PrivacyDoc { return privacy.Load().(PrivacyDoc) }}
	if err := st.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); st.Follow(ctx) }()
	defer func() { cancel(); wg.Wait() }()
	retained := func(name, want string) {
		t.Helper()
		eventually(t, 5*time.Second, name+" = "+want, func() bool { v, _ := b.retained(r.opts.StateTopic(name)); return v == want })
	}
	retained("camera.front", `{"motion":false,"zones":{"door":false}}`)
	for _, e := range []ledger.Event{
		ev(t, "camera.motion_started", "camera.front", map[string]any{"zone": "door"}),
		ev(t, "audio.voice_started", "audio.mic", nil),
	} {
		e.Provenance = ledger.Observed
		if _, err := s.Append(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	retained("camera.front", `{"motion":true,"zones":{"door":true}}`)
	retained("audio.mic", `{"level_dbfs":null,"peak_dbfs":null,"voice":true,"loud":false}`)
	// The privacy state, retained at start and again at each change.
	retained(StatePrivacy, `{"paused":false,"switch":false}`)
	privacy.Store(PrivacyDoc{Paused: true, Switch: true, Why: "the privacy switch is on"})
	if _, err := s.Append(context.Background(), ledger.Event{Type: "privacy.changed", Provenance: ledger.Observed}); err != nil {
		t.Fatal(err)
	}
	retained(StatePrivacy, `{"paused":true,"switch":true,"why":"the privacy switch is on"}`)
}
