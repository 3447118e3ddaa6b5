package uplink

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
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
	var made Made
	retained := func(name, want string) {
		t.Helper()
		eventually(t, 5*time.Second, name+" = "+want, func() bool {
			v, _ := b.retained(r.opts.StateTopic(name))
			var m Made
			v, m = withoutMade(t, v)
			made = m
			return v == canonical(t, want)
		})
	}
	retained("camera.front", `{"motion":false,"zones":{"door":false}}`)
	if made.At.IsZero() {
		t.Errorf("the camera's first document has no made_at")
	}
	at := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	for _, e := range []ledger.Event{
		ev(t, "camera.motion_started", "camera.front", map[string]any{"zone": "door"}),
		ev(t, "audio.voice_started", "audio.mic", nil),
	} {
		e.Provenance = ledger.Observed
		e.OccurredAt = at.UnixNano()
		if _, err := s.Append(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	retained("camera.front", `{"motion":true,"zones":{"door":true}}`)
	if !made.At.Equal(at) || !made.ClockSynced {
		t.Errorf("the motion document is made %+v, want at its event's time, %v, synced", made, at)
	}
	retained("audio.mic", `{"level_dbfs":null,"peak_dbfs":null,"voice":true,"loud":false}`)
	// The privacy state, retained at start and again at each change.
	retained(StatePrivacy, `{"paused":false,"switch":false}`)
	privacy.Store(PrivacyDoc{Paused: true, Switch: true, Why: "the privacy switch is on"})
	if _, err := s.Append(context.Background(), ledger.Event{Type: "privacy.changed", Provenance: ledger.Observed}); err != nil {
		t.Fatal(err)
	}
	retained(StatePrivacy, `{"paused":true,"switch":true,"why":"the privacy switch is on"}`)
}

// withoutMade is a document (JSON) without its made_at and clock_synced,
// with its keys in order, and its Made.
func withoutMade(t *testing.T, doc string) (string, Made) {
	t.Helper()
	var m map[string]any
	if json.Unmarshal([]byte(doc), &m) != nil {
		return doc, Made{}
	}
	var made Made
	if err := json.Unmarshal([]byte(doc), &made); err != nil {
		t.Fatalf("%s: %v", doc, err)
	}
	delete(m, "made_at")
	delete(m, "clock_synced")
	b, _ := json.Marshal(m)
	return string(b), made
}

// canonical is a JSON document with its keys in order.
func canonical(t *testing.T, doc string) string {
	t.Helper()
	var m any
	if err := json.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatalf("%s: %v", doc, err)
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// A camera the broker's principal may look at gets an image entity, and
// each new snapshot of it is its picture, retained; the picture goes
// with the snapshot's end.
func TestStatesPublishSnapshots(t *testing.T) {
	b := startBroker(t)
	s := openStore(t)
	r, _ := run(t, s, testOptions(b))
	var looked []string
	st := &States{Relay: r, Store: s, Board: Board{Cameras: map[string][]string{"camera.front": {"door"}, "camera.back": {"yard"}}},
		Self: func() (body.SelfState, bool) { return body.SelfState{}, false }, Log: slog.New(slog.DiscardHandler),
		HomeAssistant: &HomeAssistant{},
		MayView:       func(camera string) bool { return camera == "camera.front" },
		Snapshot:      func(id string) ([]byte, error) { looked = append(looked, id); return []byte("jpeg of " + id), nil }}
	if err := st.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); st.Follow(ctx) }()
	defer func() { cancel(); wg.Wait() }()
	// The image entity as discovery says it (discovery is not retained).
	docs, err := r.opts.Discovery(HomeAssistant{}, []Entity{r.opts.ImageEntity("camera.front")})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		if !strings.Contains(string(d), `"image_topic":"`+r.opts.ImageTopic("camera.front")+`"`) || !strings.Contains(string(d), `"content_type":"image/jpeg"`) ||
			!strings.Contains(string(d), `"p":"image"`) {
			t.Errorf("discovery of the image entity: %s", d)
		}
	}
	captured := func(id, source string) ledger.Event {
		return ev(t, "evidence.captured", source, map[string]any{"id": id, "kind": "snapshot", "source": source})
	}
	for _, e := range []ledger.Event{captured("one", "camera.front"), captured("two", "camera.back")} {
		if _, err := s.Append(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	front := r.opts.ImageTopic("camera.front")
	eventually(t, 5*time.Second, "the front's picture", func() bool { v, _ := b.retained(front); return v == "jpeg of one" })
	if _, ok := b.retained(r.opts.ImageTopic("camera.back")); ok {
		t.Error("a camera the principal may not look at was published")
	}
	if _, err := s.Append(context.Background(), ev(t, "evidence.expired", "camera.front", map[string]any{"id": "one"})); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the picture gone with its snapshot", func() bool { _, ok := b.retained(front); return !ok })
	if fmt.Sprint(looked) != "[one]" {
		t.Errorf("looked at %v, want the front's snapshot alone", looked)
	}
}

// An entity gone since the body last announced (a zone taken out of the
// config between runs), or gone in this run (a grant revoked), is
// removed: device-based, as a component of its platform alone, in every
// announcement of the run; per entity, by an empty payload on its topic.
func TestAnnouncementRemovesWhatIsGone(t *testing.T) {
	file := filepath.Join(t.TempDir(), "homeassistant.json")
	announce := func(perEntity bool, zones []string, may bool) map[string][]byte {
		t.Helper()
		r := defaultRelay()
		st := &States{Relay: r, Board: Board{Cameras: map[string][]string{"camera.front": zones},
			Outputs: []Output{{ID: "gpio.relay1", Name: "relay1", ReadBack: func() (bool, error) { return false, nil }}}},
			HomeAssistant: &HomeAssistant{PerEntity: perEntity}, Commands: true, Announced: file,
			MayPress: func(string, string) bool { return may }, Log: slog.New(slog.DiscardHandler)}
		st.tracker = NewTracker(nil, nil, nil)
		if err := st.announce(); err != nil {
			t.Fatal(err)
		}
		if !may {
			return r.docs
		}
		// The grant goes in this run: the switch is removed.
		st.MayPress = func(string, string) bool { return false }
		if err := st.announce(); err != nil {
			t.Fatal(err)
		}
		return r.docs
	}
	device := "homeassistant/device/b/config"
	components := func(docs map[string][]byte) map[string]map[string]any {
		t.Helper()
		var d struct {
			Cmps map[string]map[string]any `json:"cmps"`
		}
		if err := json.Unmarshal(docs[device], &d); err != nil {
			t.Fatalf("%s: %v", docs[device], err)
		}
		return d.Cmps
	}
	// The first run: two zones, and the switch, until its grant goes.
	c := components(announce(false, []string{"door", "garden"}, true))
	if len(c["switch_gpio_relay1"]) != 1 || c["switch_gpio_relay1"]["p"] != "switch" {
		t.Errorf("the switch whose grant went: %v, want {p: switch} alone", c["switch_gpio_relay1"])
	}
	if c["motion_camera_front_garden"]["state_topic"] == nil {
		t.Errorf("the garden zone: %v", c["motion_camera_front_garden"])
	}
	// The next run: the garden zone is gone from the config.
	c = components(announce(false, []string{"door"}, false))
	if len(c["motion_camera_front_garden"]) != 1 || c["motion_camera_front_garden"]["p"] != "binary_sensor" {
		t.Errorf("the zone gone since the last run: %v, want {p: binary_sensor} alone", c["motion_camera_front_garden"])
	}
	if c["motion_camera_front_door"]["state_topic"] == nil {
		t.Errorf("the door zone: %v", c["motion_camera_front_door"])
	}
	// The switch was removed last run and not announced since: not said
	// again.
	if _, ok := c["switch_gpio_relay1"]; ok {
		t.Errorf("the switch removed in the run before is said again: %v", c["switch_gpio_relay1"])
	}
	// Per entity: the garden zone comes back, then goes again.
	announce(true, []string{"door", "garden"}, false)
	docs := announce(true, []string{"door"}, false)
	topic := "homeassistant/binary_sensor/b/motion_camera_front_garden/config"
	if p, ok := docs[topic]; !ok || len(p) != 0 {
		t.Errorf("per entity, the zone gone: %q (there: %v), want an empty payload", p, ok)
	}
}
