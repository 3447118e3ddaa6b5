package sim

import (
	"fmt"
	"slices"

	"github.com/tobe-body/tobe-body/hal"
)

// The sim board's own LEDs, as a Pi names them.
var LEDNames = []string{"ACT", "PWR"}

// led is one of the sim board's LEDs: a line of the board held as an
// output (off is its safe level), released by Close.
type led struct {
	hal.LineOut
	c *chip
}

func (l *led) Close() error { return l.c.Close() }

func (b *Board) openLED(name string) (hal.LED, error) {
	if !slices.Contains(LEDNames, name) {
		return nil, fmt.Errorf("sim: no LED %q (the sim board has %v): %w", name, LEDNames, hal.ErrAbsent)
	}
	c := &chip{b: b, owned: map[string]owned{}}
	o, err := c.Out("led:"+name, hal.OutConfig{Safe: hal.Low})
	if err != nil {
		return nil, err
	}
	return &led{LineOut: o, c: c}, nil
}
