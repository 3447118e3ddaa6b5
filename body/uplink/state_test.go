package uplink

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/ledger"
)

func ev(t *testing.T, typ, channel string, payload map[string]any) ledger.Event {
	t.Helper()
	p, err := ledger.MarshalPayload(payload)
	if err != nil {
		t.Fatal(err)
	}
	return ledger.Event{Type: typ, ChannelID: channel, Payload: p}
}

// Each document is made at its event: made_at is the event's time, and
// clock_synced what the event's stamp says; a channel's summary makes its
// document again though nothing in it changed.
func TestTrackerMakesTheDocuments(t *testing.T) {
	tr := NewTracker(map[string][]string{"camera.front": {"door", "path"}}, []string{"audio.mic"}, []string{"env.air"})
	t0 := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	i := 0
	for _, tc := range []struct {
		e       ledger.Event
		name    string // "" nothing changed
		wantDoc string
	}{
		{ev(t, "camera.motion_started", "camera.front", map[string]any{"zone": "door", "area": 0.1}), "camera.front", `{"motion":true,"zones":{"door":true,"path":false}}`},
		{ev(t, "camera.motion_started", "camera.front", map[string]any{"zone": "door"}), "", ""},
		{ev(t, "camera.motion_started", "camera.front", map[string]any{"zone": "path"}), "camera.front", `{"motion":true,"zones":{"door":true,"path":true}}`},
		{ev(t, "camera.motion_ended", "camera.front", map[string]any{"zone": "door"}), "camera.front", `{"motion":true,"zones":{"door":false,"path":true}}`},
		{ev(t, "camera.motion_ended", "camera.front", map[string]any{"zone": "path"}), "camera.front", `{"motion":false,"zones":{"door":false,"path":false}}`},
		{ev(t, "camera.summary", "camera.front", map[string]any{"frames": 300}), "camera.front", `{"motion":false,"zones":{"door":false,"path":false}}`},
		{ev(t, "camera.summary", "camera.back", map[string]any{"frames": 300}), "", ""},
		{ev(t, "camera.motion_started", "camera.back", map[string]any{"zone": "door"}), "", ""},
		{ev(t, "camera.motion_started", "camera.front", map[string]any{}), "", ""},
		{ev(t, "audio.level", "audio.mic", map[string]any{"rms_dbfs": -33.5, "peak_dbfs": -12.0}), "audio.mic", `{"level_dbfs":-33.5,"peak_dbfs":-12,"voice":false,"loud":false}`},
		{ev(t, "audio.voice_started", "audio.mic", map[string]any{"snr_db": 20.0}), "audio.mic", `{"level_dbfs":-33.5,"peak_dbfs":-12,"voice":true,"loud":false}`},
		{ev(t, "audio.loud", "audio.mic", map[string]any{"peak_dbfs": -3.0}), "audio.mic", `{"level_dbfs":-33.5,"peak_dbfs":-12,"voice":true,"loud":true}`},
		{ev(t, "audio.voice_ended", "audio.mic", nil), "audio.mic", `{"level_dbfs":-33.5,"peak_dbfs":-12,"voice":false,"loud":true}`},
		{ev(t, "audio.level", "audio.mic", map[string]any{"garbage": true}), "", ""},
		{ledger.Event{Type: "audio.level", ChannelID: "audio.mic", Payload: []byte{0xff}}, "", ""},
		{ev(t, "input.pressed", "input.keypad", nil), "", ""},
		{ev(t, "env.reading", "env.air", map[string]any{"sensor": "BME280", "temperature_c": 21.5, "humidity_pct": 40.25, "pressure_hpa": 1013.2}), "env.air",
			`{"temperature_c":21.5,"humidity_pct":40.25,"pressure_hpa":1013.2}`},
		// A reading without humidity (the BMP280 has none, or its read
		// failed): null, not the last one made new.
		{ev(t, "env.reading", "env.air", map[string]any{"sensor": "BME280", "temperature_c": 21.75, "pressure_hpa": 1013.0}), "env.air",
			`{"temperature_c":21.75,"humidity_pct":null,"pressure_hpa":1013}`},
		{ev(t, "env.reading", "env.other", map[string]any{"temperature_c": 1.0}), "", ""},
	} {
		i++
		tc.e.OccurredAt = t0.Add(time.Duration(i) * time.Second).UnixNano()
		tc.e.ClockUnsynced = i%3 == 0
		name, doc, changed := tr.Event(tc.e)
		if changed != (tc.name != "") || name != tc.name {
			t.Errorf("%s %s: changed %v %q, want %q", tc.e.Type, tc.e.ChannelID, changed, name, tc.name)
			continue
		}
		if changed {
			if m := *doc.made(); !m.At.Equal(tc.e.Occurred()) || m.ClockSynced == tc.e.ClockUnsynced {
				t.Errorf("%s: made %+v, want at %v synced %v", tc.e.Type, m, tc.e.Occurred(), !tc.e.ClockUnsynced)
			}
			m := *doc.made()
			*doc.made() = Made{}
			b, _ := json.Marshal(doc)
			*doc.made() = m
			b = []byte(strings.Replace(string(b), `"made_at":"0001-01-01T00:00:00Z","clock_synced":false,`, "", 1))
			if string(b) != tc.wantDoc {
				t.Errorf("%s: %s, want %s", tc.e.Type, b, tc.wantDoc)
			}
		}
	}
}
