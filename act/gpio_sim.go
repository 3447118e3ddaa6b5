package act

import (
	"fmt"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/sim"
)

// registerSimulated gives the runner a simulated twin of every output,
// so that a request in simulation mode runs through the same policy,
// records and verification against a simulated line of the same name and
// never reaches the hardware: actions makes the capabilities over the
// twins (gpio.set and gpio.pulse, or the light channel's). The twins have
// no feedback contact; they are verified by read-back.
func registerSimulated(r *Runner, outs []*GPIOOutput, actions func(twins []*GPIOOutput) []Action) error {
	if len(outs) == 0 {
		return nil
	}
	b := sim.New(1)
	chip, err := b.Drivers().OpenChip(sim.ChipLabel)
	if err != nil {
		return err
	}
	twins := make([]*GPIOOutput, 0, len(outs))
	for _, o := range outs {
		name := "twin/" + o.Channel
		if err := b.AddLine(name, o.Line.Safe()); err != nil {
			return err
		}
		l, err := chip.Out(name, hal.OutConfig{Safe: o.Line.Safe()})
		if err != nil {
			return fmt.Errorf("the simulated twin of %s: %w", o.Name, err)
		}
		tw := *o
		tw.Line, tw.Feedback = l, nil
		twins = append(twins, &tw)
	}
	for _, a := range actions(twins) {
		if err := r.RegisterSimulated(a); err != nil {
			return err
		}
	}
	return nil
}

// gpioActions are gpio.set and gpio.pulse over outs.
func gpioActions(outs []*GPIOOutput) []Action {
	set, pulse := NewGPIOActions(outs, nil)
	return []Action{set, pulse}
}

// lightActions are light.on, light.off and light.blink over lights.
func lightActions(lights []*GPIOOutput) []Action {
	on, off, blink := NewLightActions(lights, nil)
	return []Action{on, off, blink}
}
