package uplink

import (
	"encoding/json"
	"testing"

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

func TestTrackerMakesTheDocuments(t *testing.T) {
	tr := NewTracker(map[string][]string{"camera.front": {"door", "path"}}, []string{"audio.mic"})
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
		{ev(t, "camera.motion_started", "camera.back", map[string]any{"zone": "door"}), "", ""},
		{ev(t, "camera.motion_started", "camera.front", map[string]any{}), "", ""},
		{ev(t, "audio.level", "audio.mic", map[string]any{"rms_dbfs": -33.5, "peak_dbfs": -12.0}), "audio.mic", `{"level_dbfs":-33.5,"peak_dbfs":-12,"voice":false,"loud":false}`},
		{ev(t, "audio.voice_started", "audio.mic", map[string]any{"snr_db": 20.0}), "audio.mic", `{"level_dbfs":-33.5,"peak_dbfs":-12,"voice":true,"loud":false}`},
		{ev(t, "audio.loud", "audio.mic", map[string]any{"peak_dbfs": -3.0}), "audio.mic", `{"level_dbfs":-33.5,"peak_dbfs":-12,"voice":true,"loud":true}`},
		{ev(t, "audio.voice_ended", "audio.mic", nil), "audio.mic", `{"level_dbfs":-33.5,"peak_dbfs":-12,"voice":false,"loud":true}`},
		{ev(t, "audio.level", "audio.mic", map[string]any{"garbage": true}), "", ""},
		{ledger.Event{Type: "audio.level", ChannelID: "audio.mic", Payload: []byte{0xff}}, "", ""},
		{ev(t, "input.pressed", "input.keypad", nil), "", ""},
	} {
		name, doc, changed := tr.Event(tc.e)
		if changed != (tc.name != "") || name != tc.name {
			t.Errorf("%s %s: changed %v %q, want %q", tc.e.Type, tc.e.ChannelID, changed, name, tc.name)
			continue
		}
		if changed {
			b, _ := json.Marshal(doc)
			if string(b) != tc.wantDoc {
				t.Errorf("%s: %s, want %s", tc.e.Type, b, tc.wantDoc)
			}
		}
	}
}
