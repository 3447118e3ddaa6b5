package body

import (
	"strings"

	"github.com/tobe-body/tobe-body/board"
)

// ChannelID names the channel of a device of a kind (the kinds of the
// board's reports: gpio-in, gpio-out, estop, camera, audio-capture,
// audio-playback, input, thermal-zone, throttle), the same whether a
// driver opened it or only a finder found it: "gpio.relay1",
// "audio.mic", "camera.front", "estop.main".
func ChannelID(kind, name string) string {
	switch kind {
	case "gpio-in", "gpio-out":
		return "gpio." + name
	case "audio-capture", "audio-playback":
		return "audio." + name
	case "thermal-zone":
		return "thermal." + name
	case "env-sensor":
		return "env." + name
	case "led":
		return "light." + name
	}
	return kind + "." + name
}

// ChannelName is the device's name in a channel id: what ChannelID was
// given ("relay1" of "gpio.relay1").
func ChannelName(id string) string {
	_, name, ok := strings.Cut(id, ".")
	if !ok {
		return id
	}
	return name
}

// BoardFacts are what a board's names are checked against (the act
// section of the config): the board's name, its outputs' kinds by name,
// its buttons' channels, and the channels of its input devices with the
// control role.
type BoardFacts struct {
	Name     string
	Outputs  map[string]string // name -> kind (relay, led, buzzer)
	Buttons  []string          // gpio.NAME
	Controls []string          // input.NAME
}

// FactsOf are a profile's facts.
func FactsOf(p *board.Profile) *BoardFacts {
	b := &BoardFacts{Name: p.Name, Outputs: map[string]string{}}
	if p.GPIO != nil {
		for _, o := range p.GPIO.Outputs {
			b.Outputs[o.Name] = o.Kind
		}
		for _, in := range p.GPIO.Inputs {
			if in.Role == "button" {
				b.Buttons = append(b.Buttons, ChannelID("gpio-in", in.Name))
			}
		}
	}
	for _, in := range p.Inputs {
		if in.Role == "control" {
			b.Controls = append(b.Controls, ChannelID("input", in.Name))
		}
	}
	return b
}
