// Package periphhost loads periph.io/x/host/v3's sysfs drivers once per
// process: its I²C buses (i2c-dev), the LEDs of /sys/class/leds and the
// thermal sensors, each in periph's registries (i2creg, sysfs.LEDs,
// sysfs.ThermalSensors).
//
// The body drives GPIO lines through its own uAPI code (hal/gpio), so
// periph's GPIO drivers are not loaded: a driver named "ioctl-gpio" is
// registered here that declines to load, and periph's sysfs GPIO driver,
// which needs it, is skipped with it. Otherwise periph would open every
// GPIO chip of the board, the e-stop's among them, for the life of the
// process.
//
// periph's drivers look at the machine once, when Init first runs: a bus
// or LED that appears later is not seen until the body restarts.
package periphhost

import (
	"errors"
	"fmt"
	"sync"

	"periph.io/x/conn/v3/driver/driverreg"
	"periph.io/x/host/v3/sysfs"
)

var (
	once  sync.Once
	state *driverreg.State
	err   error
)

// Init loads the drivers, the first time it is called, and returns what
// periph reported: the drivers loaded, skipped (with why) and failed. It
// is safe for concurrent use; every call returns the first call's result.
func Init() (*driverreg.State, error) {
	once.Do(func() {
		if err = driverreg.Register(ownGPIO{}); err != nil {
			err = fmt.Errorf("periph: %w", err)
			return
		}
		state, err = driverreg.Init()
		if err != nil {
			err = fmt.Errorf("periph: %w", err)
		}
	})
	return state, err
}

// Skipped says why periph skipped the driver named name ("sysfs-i2c",
// "sysfs-led", "sysfs-thermal"), or "" when it did not.
func Skipped(name string) string {
	st, err := Init()
	if err != nil {
		return err.Error()
	}
	for _, f := range st.Skipped {
		if f.D.String() == name {
			return f.Err.Error()
		}
	}
	return ""
}

// LEDs are the LEDs periph found.
func LEDs() []*sysfs.LED {
	if _, err := Init(); err != nil {
		return nil
	}
	return sysfs.LEDs
}

// ownGPIO takes periph's GPIO driver's name and declines to load.
type ownGPIO struct{}

func (ownGPIO) String() string          { return "ioctl-gpio" }
func (ownGPIO) Prerequisites() []string { return nil }
func (ownGPIO) After() []string         { return nil }
func (ownGPIO) Init() (bool, error) {
	return false, errors.New("the body drives GPIO lines through its own uAPI code (hal/gpio)")
}
