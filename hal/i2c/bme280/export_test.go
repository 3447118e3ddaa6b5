package bme280

import (
	"time"

	"periph.io/x/conn/v3/i2c"
)

// NewWithSleep is New with the waits going to sleep instead of
// time.Sleep, for the tests in package bme280_test.
func NewWithSleep(d *i2c.Dev, o *Opts, sleep func(time.Duration)) (*Dev, error) {
	return newDev(d, o, sleep)
}
