package act

import (
	"fmt"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/sim"
)

// registerSimulatedGPIO gives the runner a simulated twin of every GPIO
// output, so that a request in simulation mode runs through the same
// policy, records and verification against a simulated line of the same
// name and never reaches the hardware. The twins have no feedback
// contact; they are verified by read-back.
func registerSimulatedGPIO(r *Runner, outs []*GPIOOutput) error {
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
		name := "twin/" + o.Name
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
	set, pulse := NewGPIOActions(twins, nil)
	if err := r.RegisterSimulated(set); err != nil {
		return err
	}
	return r.RegisterSimulated(pulse)
}
