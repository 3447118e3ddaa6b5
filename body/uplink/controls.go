package uplink

import (
	"fmt"
	"strings"

	"github.com/fxamacker/cbor/v2"

	"github.com/tobe-body/tobe-body/ledger"
)

// Controls as Home Assistant's event entities: what people press on the
// body (a GPIO button, a keypad or a rotary encoder the configuration
// dedicates to it) goes, as it happens, on .../control/<channel>, not
// retained (a press told again at the next connection would be a press
// that did not happen), as {"event_type": ..., ...}: press and release,
// long_press and double_press of a button, and a control device's press,
// release and rotate, the key or the line named. The events are those of
// the ledger, in its order; a press that comes while the body is not
// connected is not told late. Never an activity device's: a keyboard's
// keys are counted in the body, never named (see sense).

// Control is a control's channel. Keys: an input device of the control
// role (input.pressed, input.released, input.rotated); else a GPIO
// button (gpio.changed, gpio.long_press, gpio.double_press).
type Control struct {
	ID   string
	Keys bool
}

// ControlTypes are the event types a control's channel says, as a
// ledger.Filter selects them.
var ControlTypes = []string{"gpio.changed", "gpio.long_press", "gpio.double_press", "input.pressed", "input.released", "input.rotated"}

// Event types of a control, as Home Assistant's event entity lists them.
var (
	buttonEvents = []string{"press", "release", "long_press", "double_press"}
	keysEvents   = []string{"press", "release", "rotate"}
)

// ControlTopic is where a control's events go: .../control/<channel>.
func (o Options) ControlTopic(channel string) string { return o.base() + "/control/" + channel }

// ControlEvent is a control's event as Home Assistant's event entity
// takes it: event_type, and the rest its attributes.
type ControlEvent struct {
	Made
	EventType string `json:"event_type"`
	// Line is a button's GPIO line; Key a control device's key
	// ("KEY_1"), Axis and Delta its rotation.
	Line   string `json:"line,omitempty"`
	Key    string `json:"key,omitempty"`
	Axis   string `json:"axis,omitempty"`
	Delta  int64  `json:"delta,omitempty"`
	HeldMS int64  `json:"held_ms,omitempty"`
}

// controlFields are the fields of the payloads a control's events carry.
type controlFields struct {
	Line   string `cbor:"line"`
	Active bool   `cbor:"active"`
	HeldMS int64  `cbor:"held_ms"`
	Key    string `cbor:"key"`
	Axis   string `cbor:"axis"`
	Delta  int64  `cbor:"delta"`
}

// ControlEventOf is e as its control's event, if it is one of a control
// of controls: false for an event of any other channel or type, and for
// a payload that is not one.
func ControlEventOf(e ledger.Event, controls []Control) (ControlEvent, bool) {
	var c *Control
	for i := range controls {
		if controls[i].ID == e.ChannelID {
			c = &controls[i]
		}
	}
	if c == nil || c.Keys != strings.HasPrefix(e.Type, "input.") {
		return ControlEvent{}, false
	}
	var f controlFields
	if cbor.Unmarshal(e.Payload, &f) != nil {
		return ControlEvent{}, false
	}
	ce := ControlEvent{Made: MadeOf(&e), Line: f.Line}
	switch e.Type {
	case "gpio.changed":
		ce.EventType = "release"
		if f.Active {
			ce.EventType = "press"
		}
	case "gpio.long_press", "gpio.double_press":
		ce.EventType, ce.HeldMS = strings.TrimPrefix(e.Type, "gpio."), f.HeldMS
	case "input.pressed", "input.released":
		ce.EventType, ce.Key = "press", f.Key
		if e.Type == "input.released" {
			ce.EventType = "release"
		}
		if ce.Key == "" {
			return ControlEvent{}, false
		}
	case "input.rotated":
		ce.EventType, ce.Axis, ce.Delta = "rotate", f.Axis, f.Delta
	default:
		return ControlEvent{}, false
	}
	return ce, true
}

// controlEntities are the controls' event entities.
func (o Options) controlEntities(cs []Control) []Entity {
	var es []Entity
	for _, c := range cs {
		name := c.ID[strings.IndexByte(c.ID, '.')+1:]
		e := Entity{ID: "control_" + slugOf(c.ID), Platform: "event", StateTopic: o.ControlTopic(c.ID), DeviceClass: "button",
			Name: name, EventTypes: buttonEvents}
		if !strings.Contains(strings.ToLower(name), "button") {
			e.Name = fmt.Sprintf("Button %s", name)
		}
		if c.Keys {
			e.Name, e.EventTypes, e.Icon, e.DeviceClass = "Keys "+name, keysEvents, "mdi:keyboard-outline", ""
		}
		es = append(es, e)
	}
	return es
}
