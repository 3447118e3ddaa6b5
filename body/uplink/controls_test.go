package uplink

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/ledger"
)

// A control's events are Home Assistant's event types, named by line or
// key; other channels' events, an activity device's above all, and
// payloads that are not a control's are none.
func TestControlEventOf(t *testing.T) {
	controls := []Control{{ID: "gpio.button"}, {ID: "input.keypad", Keys: true}}
	for _, tc := range []struct {
		e    ledger.Event
		want string // JSON without Made; "" none
	}{
		{ev(t, "gpio.changed", "gpio.button", map[string]any{"line": "GPIO17", "level": "low", "active": true}), `{"event_type":"press","line":"GPIO17"}`},
		{ev(t, "gpio.changed", "gpio.button", map[string]any{"line": "GPIO17", "level": "high", "active": false}), `{"event_type":"release","line":"GPIO17"}`},
		{ev(t, "gpio.long_press", "gpio.button", map[string]any{"line": "GPIO17", "held_ms": 1000}), `{"event_type":"long_press","line":"GPIO17","held_ms":1000}`},
		{ev(t, "gpio.double_press", "gpio.button", map[string]any{"line": "GPIO17", "held_ms": 250}), `{"event_type":"double_press","line":"GPIO17","held_ms":250}`},
		{ev(t, "input.pressed", "input.keypad", map[string]any{"device": "keypad", "key": "KEY_1"}), `{"event_type":"press","key":"KEY_1"}`},
		{ev(t, "input.released", "input.keypad", map[string]any{"device": "keypad", "key": "KEY_1"}), `{"event_type":"release","key":"KEY_1"}`},
		{ev(t, "input.rotated", "input.keypad", map[string]any{"device": "keypad", "axis": "REL_DIAL", "delta": -3}), `{"event_type":"rotate","axis":"REL_DIAL","delta":-3}`},
		// Not a control's.
		{ev(t, "gpio.changed", "gpio.door", map[string]any{"line": "GPIO5", "active": true}), ""},
		{ev(t, "input.pressed", "input.keyboard", map[string]any{"device": "keyboard", "key": "KEY_A"}), ""},
		{ev(t, "input.activity", "input.keypad", map[string]any{"events": 3}), ""},
		{ev(t, "gpio.level", "gpio.button", map[string]any{"line": "GPIO17", "active": true}), ""},
		// A button's channel saying a key, a key device's saying a line.
		{ev(t, "input.pressed", "gpio.button", map[string]any{"key": "KEY_1"}), ""},
		{ev(t, "gpio.changed", "input.keypad", map[string]any{"line": "GPIO17", "active": true}), ""},
		{ev(t, "input.pressed", "input.keypad", map[string]any{"device": "keypad"}), ""},
		{ledger.Event{Type: "gpio.changed", ChannelID: "gpio.button", Payload: []byte{0xff}}, ""},
	} {
		tc.e.OccurredAt = time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC).UnixNano()
		ce, ok := ControlEventOf(tc.e, controls)
		if ok != (tc.want != "") {
			t.Errorf("%s on %s: %v, want %q", tc.e.Type, tc.e.ChannelID, ok, tc.want)
			continue
		}
		if !ok {
			continue
		}
		if !ce.At.Equal(tc.e.Occurred()) || !ce.ClockSynced {
			t.Errorf("%s: made %+v", tc.e.Type, ce.Made)
		}
		ce.Made = Made{}
		b, _ := json.Marshal(ce)
		if got, _ := withoutMade(t, string(b)); got != canonical(t, tc.want) {
			t.Errorf("%s: %s, want %s", tc.e.Type, got, tc.want)
		}
	}
}

// A button's press goes on its control topic as it happens, not
// retained; a line that is not a control's says nothing there.
func TestStatesTellControls(t *testing.T) {
	b := startBroker(t)
	s := openStore(t)
	r, _ := run(t, s, testOptions(b))
	st := &States{Relay: r, Store: s, Board: Board{Controls: []Control{{ID: "gpio.button"}}},
		Self: func() (body.SelfState, bool) { return body.SelfState{}, false }, Log: slog.New(slog.DiscardHandler)}
	if err := st.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); st.Follow(ctx) }()
	defer func() { cancel(); wg.Wait() }()
	eventually(t, 5*time.Second, "connected", func() bool { return r.Status().Connected })
	for _, e := range []ledger.Event{
		ev(t, "gpio.changed", "gpio.door", map[string]any{"line": "GPIO5", "active": true}),
		ev(t, "gpio.changed", "gpio.button", map[string]any{"line": "GPIO17", "active": true}),
		ev(t, "gpio.long_press", "gpio.button", map[string]any{"line": "GPIO17", "held_ms": 1000}),
	} {
		e.Provenance = ledger.Observed
		if _, err := s.Append(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	topic := r.opts.ControlTopic("gpio.button")
	eventually(t, 5*time.Second, "two events of the button", func() bool { return len(b.messages(topic)) == 2 })
	var types []string
	for _, m := range b.messages(topic) {
		var ce ControlEvent
		if err := json.Unmarshal(m.payload, &ce); err != nil {
			t.Fatal(err)
		}
		types = append(types, ce.EventType)
	}
	if len(types) != 2 || types[0] != "press" || types[1] != "long_press" {
		t.Errorf("the button's events: %v, want press, long_press", types)
	}
	if _, ok := b.retained(topic); ok {
		t.Error("a control's event was retained")
	}
	if n := len(b.messages(r.opts.ControlTopic("gpio.door"))); n != 0 {
		t.Errorf("%d messages for a line that is not a control", n)
	}
}
