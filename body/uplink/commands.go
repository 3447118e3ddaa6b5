package uplink

import (
	"encoding/json"
	"fmt"
)

// What Home Assistant may do, with mqtt.commands on: every entity below
// commands an operation on .../cmd/<operation>, which the body runs as
// the broker's principal through the operation table and its policy, as
// any other caller (mqttcmd); nothing administrative is among them.
//
//   - A GPIO output is a switch (gpio.set), a board LED a light (light.on,
//     light.off); each is announced only while the principal's grants
//     offer it, and its state is the line read back (.../state/output/
//     <channel>), never what was asked.
//   - Signals are buttons: a chime on each speaker (audio.tone), a blink
//     of each light (light.blink), and the configured buttons, each
//     announced only while offered; body.notify is a notify entity.
//   - The e-stop's trip is a button, always (any principal may trip it;
//     none but a person at the device resets it).
//   - A command the body refuses, or whose action fails, is an event of
//     the "Command refused" event entity (.../cmd_refused: refused or
//     failed, with the operation, the command's id, the reason and the
//     detail), besides its result on .../cmd_result/<id>: Home
//     Assistant has no way for a device to answer a command, so an
//     automation on this event is how a person hears of it.
//
// Each press, switch or message is one command with an id of its own
// (the entity's and the moment's, in milliseconds), the action's
// idempotency key: a redelivery of the same message acts once.

// Output is an output Home Assistant may see and switch: a GPIO output
// (Light false) or a board LED.
type Output struct {
	// ID is its channel (gpio.relay1, light.act); Name the profile's.
	ID, Name string
	Light    bool
	// ReadBack reads the line: true when it is away from its safe level.
	ReadBack func() (on bool, err error)
}

// StateOutput is the state name of an output's document.
func StateOutput(channel string) string { return "output/" + channel }

// OutputDoc is an output's state read back from its line
// (state/output/<channel>): on, off, or unknown when it could not be
// read (Error says why).
type OutputDoc struct {
	Made
	State string `json:"state"`
	Error string `json:"error,omitempty"`
}

// OutputDocOf reads o back.
func OutputDocOf(o Output) OutputDoc {
	on, err := o.ReadBack()
	switch {
	case err != nil:
		return OutputDoc{State: "unknown", Error: err.Error()}
	case on:
		return OutputDoc{State: "on"}
	}
	return OutputDoc{State: "off"}
}

// RefusedTopic is where a refused or failed command is told, not
// retained.
func (o Options) RefusedTopic() string { return o.base() + "/cmd_refused" }

// CommandTopic is where the body takes an operation's commands.
func (o Options) CommandTopic(op string) string { return o.base() + "/cmd/" + op }

// Refusal is a refused or failed command, as the refusal's event entity
// takes it.
type Refusal struct {
	EventType string `json:"event_type"` // refused or failed
	ID        string `json:"id"`
	Op        string `json:"op"`
	Reason    string `json:"reason"`
	Detail    string `json:"detail,omitempty"`
}

// stamp is a command's id made by Home Assistant as it sends it: the
// entity's and the moment's, in milliseconds.
func stamp(entity string) string {
	return `ha-` + entity + `-{{ (now().timestamp() * 1000) | int }}`
}

// actionTemplate is the command template of an action.do of capability
// on target with params; a param whose value is a template expression
// ("{{ value }}") is rendered into the string.
func actionTemplate(entity, capability, target string, params map[string]string) (string, error) {
	args, err := json.Marshal(map[string]any{"capability": capability, "target": target, "params": params})
	if err != nil {
		return "", err
	}
	return `{"id": "` + stamp(entity) + `", "args": ` + string(args) + `}`, nil
}

// onOff reads an output's document as on, off or None (unknown).
const onOffTemplate = "{{ value_json.state if value_json.state in ('on', 'off') else 'None' }}"

// commandEntities are the entities that command: the switches and lights
// of the outputs may says may be driven, the e-stop's trip, the notify
// entity when may offers body.notify, and the refusals' event entity.
func (o Options) commandEntities(b Board, may func(capability, target string) bool) ([]Entity, error) {
	if may == nil {
		may = func(string, string) bool { return false }
	}
	action := o.CommandTopic("action.do")
	var es []Entity
	for _, out := range b.Outputs {
		id := slugOf(out.ID)
		state := o.StateTopic(StateOutput(out.ID))
		if !out.Light {
			if !may("gpio.set", out.ID) {
				continue
			}
			tmpl, err := actionTemplate("switch-"+id, "gpio.set", out.ID, map[string]string{"state": "{{ value }}"})
			if err != nil {
				return nil, err
			}
			es = append(es, Entity{ID: "switch_" + id, Platform: "switch", Name: out.Name, StateTopic: state, ValueTemplate: onOffTemplate,
				CommandTopic: action, CommandTemplate: tmpl, PayloadOn: "on", PayloadOff: "off", AttributesTopic: state,
				AttributesTemplate: "{{ {'error': value_json.error | default('')} | tojson }}"})
			continue
		}
		if !may("light.on", out.ID) || !may("light.off", out.ID) {
			continue
		}
		on, err := actionTemplate("light-"+id, "light.on", out.ID, map[string]string{})
		if err != nil {
			return nil, err
		}
		off, err := actionTemplate("light-"+id, "light.off", out.ID, map[string]string{})
		if err != nil {
			return nil, err
		}
		es = append(es, Entity{ID: "light_" + id, Platform: "light", Schema: "template", Name: "Light " + out.Name, StateTopic: state,
			StateTemplate: onOffTemplate, CommandTopic: action, CommandOnTemplate: on, CommandOffTemplate: off})
	}
	if may("body.notify", "home") {
		es = append(es, Entity{ID: "notify", Platform: "notify", Name: "Notify", CommandTopic: action,
			CommandTemplate: `{"id": "` + stamp("notify") + `", "args": {"capability": "body.notify", "target": "home", "params": {"message": {{ value | tojson }}}}}`})
	}
	es = append(es,
		Entity{ID: "estop_trip", Platform: "button", Name: "E-stop trip", Icon: "mdi:alert-octagon", CommandTopic: o.CommandTopic("estop.trip"),
			CommandTemplate: `{"id": "` + stamp("estop") + `", "args": {"reason": "pressed in Home Assistant"}}`},
		Entity{ID: "command_refused", Platform: "event", Name: "Command refused", Icon: "mdi:alert-circle-outline", StateTopic: o.RefusedTopic(),
			EventTypes: []string{"refused", "failed"}, Category: "diagnostic"})
	return es, nil
}

// Signals are the buttons of the body's signals: a chime on each
// speaker and a blink of each light.
func (b Board) Signals() []Button {
	var out []Button
	for _, s := range b.Speakers {
		out = append(out, Button{ID: "chime_" + slugOf(s), Name: fmt.Sprintf("Chime (%s)", s), Capability: "audio.tone", Target: s,
			Params: map[string]string{"freq_hz": "880", "ms": "300"}})
	}
	for _, l := range b.Outputs {
		if l.Light {
			out = append(out, Button{ID: "blink_" + slugOf(l.ID), Name: "Blink " + l.Name, Capability: "light.blink", Target: l.ID,
				Params: map[string]string{"period_ms": "500", "count": "3"}})
		}
	}
	return out
}
