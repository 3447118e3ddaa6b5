package bme280

import (
	"errors"
	"fmt"

	"periph.io/x/conn/v3/i2c"

	"github.com/tobe-body/tobe-body/hal"
)

// Sensor is a Dev on a bus of its own, as the body's hal.EnvSensor:
// Close puts the chip to sleep and releases the bus.
type Sensor struct {
	*Dev
	bus hal.I2CBus
}

var _ hal.EnvSensor = (*Sensor)(nil)

// Open opens the chip at addr on bus, which it then owns (it is closed
// when Open fails, and by Close). Nothing answering at the address is an
// error wrapping hal.ErrAbsent (and ErrNoAnswer): the sensor is not on
// this board, which is not a failure; anything else failing is.
func Open(bus hal.I2CBus, addr uint16, o *Opts) (*Sensor, error) {
	dev, err := New(&i2c.Dev{Bus: bus, Addr: addr}, o)
	if err != nil {
		bus.Close()
		if errors.Is(err, ErrNoAnswer) {
			return nil, fmt.Errorf("nothing answers at %#02x on %s: %w: %w", addr, bus, hal.ErrAbsent, err)
		}
		return nil, err
	}
	return &Sensor{Dev: dev, bus: bus}, nil
}

// Name says what it is and where: "BME280 at 0x76 on I2C1".
func (s *Sensor) Name() string {
	return fmt.Sprintf("%s at %#02x on %s", s.Chip(), s.d.Addr, s.bus)
}

// Has tells what the chip measures: a BMP280 has no humidity.
func (s *Sensor) Has() hal.EnvQuantities {
	return hal.EnvQuantities{Temperature: true, Pressure: true, Humidity: s.HasHumidity()}
}

// Close puts the chip to sleep and releases the bus.
func (s *Sensor) Close() error {
	return errors.Join(s.Halt(), s.bus.Close())
}
