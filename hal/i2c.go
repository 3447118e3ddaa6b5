package hal

import (
	"periph.io/x/conn/v3/i2c"
	"periph.io/x/conn/v3/physic"
)

// I2CBus is an I²C bus the body opened: periph.io's own bus type, so
// periph's i2c.Dev, and any device driver written for it, works on it
// unchanged. Tx is safe for concurrent use. A bus that is not on this
// machine is ErrAbsent when it is opened; a device that does not answer
// fails its Tx with an error that names the bus and the address.
type I2CBus = i2c.BusCloser

// Env is one reading of an environment sensor, in periph.io's units:
// temperature, pressure and relative humidity (zero where the sensor has
// none).
type Env = physic.Env

// EnvSensor is an environment sensor on a bus (a BME280, a BMP280).
// Sense takes one reading and is safe for concurrent use; Halt puts the
// sensor to sleep (a later Sense wakes it); Close releases its bus.
type EnvSensor interface {
	Halter
	// Name says what it is and where: "BME280 at 0x76 on I2C1".
	Name() string
	// Has tells which quantities it measures.
	Has() EnvQuantities
	Sense(*Env) error
	Close() error
}

// EnvQuantities are what an environment sensor measures.
type EnvQuantities struct {
	Temperature, Pressure, Humidity bool
}
