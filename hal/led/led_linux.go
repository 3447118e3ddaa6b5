package led

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"periph.io/x/conn/v3/gpio"
	"periph.io/x/host/v3/sysfs"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/periphhost"
)

// classDir is where the kernel lists LEDs; periph reads the same.
const classDir = "/sys/class/leds"

// LED is one LED the body took over. Its methods are safe for concurrent
// use.
type LED struct {
	name string
	dir  string
	led  *sysfs.LED
	// trigger is the trigger it had when taken, given back by Close.
	trigger string

	mu     sync.Mutex
	halted bool
	closed bool
}

var _ hal.LED = (*LED)(nil)

// Open takes the LED named name. An LED the machine does not have is
// hal.ErrAbsent, naming those it has; one the body may not write (the
// unit's permissions) fails with the error.
func Open(name string) (hal.LED, error) {
	if _, err := periphhost.Init(); err != nil {
		return nil, fmt.Errorf("LED %q: %w", name, err)
	}
	var found *sysfs.LED
	have := []string{}
	for _, l := range periphhost.LEDs() {
		have = append(have, l.Name())
		if l.Name() == name {
			found = l
		}
	}
	if found == nil {
		return nil, fmt.Errorf("LED %q: not in %s (LEDs here: %s): %w", name, classDir, list(have), hal.ErrAbsent)
	}
	// periph's LEDByName opens the brightness file, read-write if it can.
	l, err := sysfs.LEDByName(name)
	if err != nil {
		return nil, fmt.Errorf("LED %q: %w", name, err)
	}
	d := &LED{name: name, dir: filepath.Join(classDir, name), led: l}
	if d.trigger, err = d.readTrigger(); err != nil {
		return nil, err
	}
	if err := d.writeTrigger("none"); err != nil {
		return nil, err
	}
	if err := d.led.Out(gpio.Low); err != nil {
		d.writeTrigger(d.trigger)
		return nil, fmt.Errorf("LED %s: switching it off: %w", name, err)
	}
	return d, nil
}

func list(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// readTrigger returns the LED's trigger: the one in brackets in the
// trigger file ("none [mmc0] timer").
func (d *LED) readTrigger() (string, error) {
	b, err := os.ReadFile(filepath.Join(d.dir, "trigger"))
	if err != nil {
		return "", fmt.Errorf("LED %s: %w", d.name, err)
	}
	for _, t := range strings.Fields(string(b)) {
		if strings.HasPrefix(t, "[") && strings.HasSuffix(t, "]") {
			return t[1 : len(t)-1], nil
		}
	}
	return "none", nil
}

func (d *LED) writeTrigger(t string) error {
	if err := os.WriteFile(filepath.Join(d.dir, "trigger"), []byte(t), 0); err != nil {
		return fmt.Errorf("LED %s: setting its trigger to %s: %w", d.name, t, err)
	}
	return nil
}

// Name is the LED's name in /sys/class/leds.
func (d *LED) Name() string { return d.name }

// Safe is off.
func (d *LED) Safe() hal.Level { return hal.Low }

// Out switches the LED on (High) or off. After Halt: hal.ErrHalted.
func (d *LED) Out(v hal.Level) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.closed:
		return fmt.Errorf("LED %s: %w", d.name, hal.ErrClosed)
	case d.halted:
		return fmt.Errorf("LED %s: %w", d.name, hal.ErrHalted)
	}
	if err := d.led.Out(v); err != nil {
		return fmt.Errorf("LED %s: %w", d.name, err)
	}
	return nil
}

// ReadBack reads the brightness the kernel holds: High for any but 0.
func (d *LED) ReadBack() (hal.Level, error) {
	b, err := os.ReadFile(filepath.Join(d.dir, "brightness"))
	if err != nil {
		return hal.Low, fmt.Errorf("LED %s: %w", d.name, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return hal.Low, fmt.Errorf("LED %s: brightness %q is not a number", d.name, strings.TrimSpace(string(b)))
	}
	return hal.Level(n != 0), nil
}

// Halt switches the LED off and latches it off until Rearm.
func (d *LED) Halt() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.halted = true
	if d.closed {
		return nil
	}
	if err := d.led.Out(gpio.Low); err != nil {
		return fmt.Errorf("LED %s: halt: %w", d.name, err)
	}
	return nil
}

// Rearm lifts the latch of Halt; the LED stays off until the next Out.
func (d *LED) Rearm() error {
	d.mu.Lock()
	d.halted = false
	d.mu.Unlock()
	return nil
}

// Close switches the LED off and gives it back its trigger.
func (d *LED) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	return errors.Join(d.led.Out(gpio.Low), d.writeTrigger(d.trigger))
}
