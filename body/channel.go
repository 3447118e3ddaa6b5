package body

import "strings"

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
