package sim

import (
	"fmt"
	"math"
	"sync"
	"time"

	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/i2c/bme280/bme280test"
)

// The sim board's I²C bus and the BME280 on it.
const (
	I2CBus    = "sim-i2c"
	EnvAddr   = bme280test.DefaultAddr // 0x76
	ShowerAt  = 3 * time.Minute        // the first shower in the bathroom the sensor is in
	ShowerGap = 20 * time.Minute       // and one every
)

// air is the scene's air at t: a temperature that drifts around 21 °C,
// pressure around 1013 hPa, and humidity at 45 %RH that a shower lifts
// to about 80 %RH in a minute and that then decays over some minutes.
func (s scene) air(t time.Duration) physic.Env {
	sec := t.Seconds()
	tc := 21 + 1.5*math.Sin(2*math.Pi*sec/1200) + 0.2*s.between(streamNoise, uint64(sec), 9, -1, 1)
	hpa := 1013.25 + 2*math.Sin(2*math.Pi*sec/3600)
	rh := 45.0
	if t >= ShowerAt {
		since := (t - ShowerAt) % ShowerGap
		rise := math.Min(since.Seconds()/60, 1)
		decay := math.Exp(-math.Max(since.Seconds()-180, 0) / 240)
		rh += 35 * rise * decay
	}
	return physic.Env{Temperature: physic.ZeroCelsius + physic.Temperature(tc*float64(physic.Celsius)),
		Pressure: physic.Pressure(hpa * 100 * float64(physic.Pascal)), Humidity: physic.RelativeHumidity(rh * float64(physic.PercentRH))}
}

// simBus is the sim board's I²C bus: a BME280 at EnvAddr whose readings
// follow the scene's air.
type simBus struct {
	b    *Board
	chip *bme280test.Chip

	mu     sync.Mutex
	closed bool
}

func (b *Board) openI2C(name string) (hal.I2CBus, error) {
	if name != I2CBus {
		return nil, fmt.Errorf("sim: no I²C bus %q (the sim board has %q): %w", name, I2CBus, hal.ErrAbsent)
	}
	return &simBus{b: b, chip: bme280test.NewBME280(bme280test.TypicalCalibration())}, nil
}

func (s *simBus) String() string                  { return I2CBus }
func (s *simBus) SetSpeed(physic.Frequency) error { return nil }

func (s *simBus) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}

// Tx sets the chip's readings to the scene's air now, then passes the
// transaction to it.
func (s *simBus) Tx(addr uint16, w, r []byte) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return fmt.Errorf("sim: %s: %w", I2CBus, hal.ErrClosed)
	}
	if err := s.chip.SetEnv(s.b.sc.air(s.b.elapsed())); err != nil {
		return fmt.Errorf("sim: %s: %w", I2CBus, err)
	}
	if err := s.chip.Tx(addr, w, r); err != nil {
		return fmt.Errorf("sim: %s address %#02x: %w", I2CBus, addr, err)
	}
	return nil
}
