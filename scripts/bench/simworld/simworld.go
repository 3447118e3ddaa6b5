// Package simworld is the sim board's world model with its defaults, as
// the daemon builds it on `tobe-body run --board sim` with no camera
// zones: what the benches fill a ledger with (startupbench) and ask
// questions of (worldbench) must be the same entities.
package simworld

import (
	"time"

	"github.com/tobe-body/tobe-body/awareness/control/world"
	"github.com/tobe-body/tobe-body/sense"
)

// Model is the sim board's model: a room of the front camera's whole
// frame and one of the microphone, the air, four outputs and the body.
func Model() (*world.Model, error) {
	return world.Build(world.Config{}, world.Facts{Cameras: map[string][]string{"camera.front": {"frame"}},
		Microphones: []string{"audio.mic"}, EnvSensors: []string{"env.air"},
		Outputs:       []string{"gpio.relay1", "gpio.relay2", "gpio.led", "gpio.buzzer"},
		CameraSummary: sense.DefaultCameraSummary, MicSummary: 10 * time.Second, EnvSummary: 5 * time.Minute})
}
