package awareness

import (
	"strings"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness/control/gate"
	"github.com/tobe-body/tobe-body/ledger"
)

func stored(t *testing.T, typ, channel string, trust ledger.Level, payload any) ledger.Stored {
	t.Helper()
	p, err := ledger.MarshalPayload(payload)
	if err != nil {
		t.Fatal(err)
	}
	return ledger.Stored{Seq: 7, Event: ledger.Event{ID: ledger.NewID(), Type: typ, ChannelID: channel, Trust: trust, Payload: p,
		OccurredAt: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC).UnixNano()}}
}

// observe is what the agent is told of e by o's rules: the gate's
// decision with them as its default rules (no condition, budget or
// novelty), said in o's words; false when the gate does not wake for it.
func observe(o *Observer, e ledger.Stored) (Observation, bool) {
	s := gate.NewSalience(gate.Rules{Defaults: o.Defaults()})
	d := s.Decide(&e, nil, nil, e.Event.Occurred())
	if d.Outcome != gate.Wake && d.Outcome != gate.Ask {
		return Observation{}, false
	}
	if d.Words == 0 {
		d.Words = s.Words(&e) // as the gate does before it pushes
	}
	return o.Woken(d, e), true
}

// The built-in rules, and a config rule before them: the gate matches
// them, the observer says what it decided in the rule's words.
func TestObservationRules(t *testing.T) {
	o, err := NewObserver(append([]ObservationRule{{Type: "gpio.changed", Channel: "gpio.door*", Actor: "signal", Attention: "high", Trust: "high", Text: "The door {edge}"}},
		DefaultObservationRules...))
	if err == nil {
		t.Fatal("a channel pattern without its dot was taken")
	}
	o, err = NewObserver(append([]ObservationRule{{Type: "gpio.changed", Channel: "gpio.door", Actor: "signal", Attention: "high", Trust: "high", Text: "The door: {edge}"}},
		DefaultObservationRules...))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		ev        ledger.Stored
		observed  bool
		attention ledger.Level
		trust     ledger.Level
		content   string
	}{
		{"the e-stop", stored(t, "estop.tripped", "estop.main", 0, map[string]any{"cause": "line_open"}), true, ledger.Max, ledger.High, "E-stop tripped (line_open)"},
		{"critical", stored(t, "body.degradation", "body.self", ledger.High, map[string]any{"level": "critical", "why": []string{"disk"}}), true, ledger.High, ledger.High, "The body is critical ([disk])"},
		{"normal again: the gate's hard rule wakes, in the rule's words", stored(t, "body.degradation", "body.self", ledger.High, map[string]any{"level": "normal"}), true, ledger.High, ledger.High, "The body is back to normal."},
		{"motion, at the camera's trust", stored(t, "camera.motion_started", "camera.front", ledger.Low, map[string]any{"zone": "door"}), true, ledger.Medium, ledger.Low, "Motion in door seen by camera.front."},
		{"a long press", stored(t, "gpio.long_press", "gpio.button", 0, map[string]any{"line": "BUTTON", "held_ms": 1200}), true, ledger.High, ledger.Medium, "BUTTON was held down (1200 ms)."},
		{"the door's line, by the config", stored(t, "gpio.changed", "gpio.door", ledger.High, map[string]any{"edge": "rising"}), true, ledger.High, ledger.High, "The door: rising"},
		{"another line is off", stored(t, "gpio.changed", "gpio.button", ledger.High, map[string]any{"edge": "rising"}), false, 0, 0, ""},
		{"levels are off", stored(t, "audio.level", "audio.mic", 0, map[string]any{}), false, 0, 0, ""},
		{"a camera's summary is off", stored(t, "camera.summary", "camera.front", ledger.Low, map[string]any{"zones": []string{"frame"}, "frames": 900, "over_s": 60}), false, 0, 0, ""},
		{"a line's level at start is off", stored(t, "gpio.level", "gpio.door", ledger.High, map[string]any{"line": "DOOR", "level": "high", "active": true}), false, 0, 0, ""},
		{"no rule, nothing", stored(t, "action.proposed", "gpio.set", 0, map[string]any{}), false, 0, 0, ""},
		{"a field it lacks", stored(t, "input.pressed", "input.keypad", 0, map[string]any{"key": "KEY_1"}), true, ledger.Medium, ledger.Medium, "KEY_1 pressed on ?."},
		{"long text is cut", stored(t, "input.pressed", "input.keypad", 0, map[string]any{"key": strings.Repeat("x", 500), "device": "d"}), true, ledger.Medium, ledger.Medium, strings.Repeat("x", 200) + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := observe(o, tc.ev)
			if ok != tc.observed {
				t.Fatalf("observed %v, want %v (%+v)", ok, tc.observed, got)
			}
			if !ok {
				return
			}
			if got.Attention != tc.attention || got.Trust != tc.trust || !strings.HasPrefix(got.Content, tc.content) {
				t.Errorf("got %s/%s %q; want %s/%s %q", got.Attention, got.Trust, got.Content, tc.attention, tc.trust, tc.content)
			}
			if got.ID != tc.ev.Event.ID.String() || got.Seq != 7 || got.Source != tc.ev.Event.ChannelID || got.Timestamp.IsZero() || got.Permissions != PermissionsOf(got.Trust) {
				t.Errorf("envelope %+v", got)
			}
		})
	}
}

func TestObserverRefusesBadRules(t *testing.T) {
	for _, r := range []ObservationRule{
		{Type: "x.y", Actor: "robot", Attention: "high", Trust: "high"},
		{Type: "x.y", Actor: "signal", Attention: "loud", Trust: "high"},
		{Type: "", Actor: "signal", Attention: "high", Trust: "high"},
	} {
		if _, err := NewObserver([]ObservationRule{r}); err == nil {
			t.Errorf("rule %+v taken", r)
		}
	}
}

// Who may be shown what: a local administrator anything; an agent
// nothing restricted, and sensitive only at medium trust or above.
func TestMaySee(t *testing.T) {
	admin := act.Principal{Kind: act.LocalAdmin, Subject: "admin:uid=0", Trust: ledger.Low}
	low := act.Principal{Kind: act.AgentSession, Subject: "agent:pi", Trust: ledger.Low}
	medium := act.Principal{Kind: act.AgentSession, Subject: "agent:pi", Trust: ledger.Medium}
	for _, tc := range []struct {
		p    act.Principal
		c    ledger.Privacy
		want bool
	}{
		{admin, ledger.Restricted, true}, {low, ledger.Public, true}, {low, ledger.Internal, true}, {low, 0, true},
		{low, ledger.Sensitive, false}, {medium, ledger.Sensitive, true}, {medium, ledger.Restricted, false},
	} {
		if got := MaySee(tc.p, tc.c); got != tc.want {
			t.Errorf("%s at %s, %s: %v, want %v", tc.p.Kind, tc.p.Trust, tc.c, got, tc.want)
		}
	}
}
