// Package bme280 drives the Bosch BME280 (temperature, pressure and
// humidity) and BMP280 (temperature and pressure) over I²C, on periph's
// i2c.Bus.
//
// New identifies the chip, resets it, reads its calibration once and
// configures it; Sense measures and returns physical values; Halt puts the
// chip to sleep. The compensation from raw readings to physical values is
// the datasheets' integer arithmetic, exported as methods of Calibration
// so it can be checked on its own. Package bme280test has a register-level
// fake of the chip for tests and the simulated board.
//
// Every register write is its own transaction of two bytes, register and
// value; every read is a write of the register followed by a read of at
// most 32 bytes, so the driver also runs over adapters that only do SMBus
// block transfers.
package bme280

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"periph.io/x/conn/v3/i2c"
	"periph.io/x/conn/v3/physic"
)

// Registers.
const (
	regCalib    = 0x88 // 26 bytes: T1 … P9, H1 at 0xA1
	regID       = 0xD0
	regReset    = 0xE0
	regCalibH   = 0xE1 // 7 bytes: H2 … H6, BME280 only
	regCtrlHum  = 0xF2 // BME280 only
	regStatus   = 0xF3
	regCtrlMeas = 0xF4
	regConfig   = 0xF5
	regData     = 0xF7 // 8 bytes on a BME280, 6 on a BMP280
)

// Register values.
const (
	resetCommand    = 0xB6
	statusMeasuring = 1 << 3
	statusIMUpdate  = 1 << 0
)

// Chip ids.
const (
	idBME280 = 0x60
	idBMP280 = 0x58
	// 0x56 and 0x57 are BMP280 engineering samples.
	idBMP280Sample1 = 0x56
	idBMP280Sample2 = 0x57
)

// Timing and bounds.
const (
	// maxRead is the largest read in one transaction: an SMBus block read.
	maxRead = 32
	// startupTime is the datasheets' start-up time, waited after a soft
	// reset before the chip is spoken to again.
	startupTime = 2 * time.Millisecond
	// resetPolls bounds the status reads that wait for the chip to copy
	// its calibration after a reset, resetPollInterval apart.
	resetPolls        = 10
	resetPollInterval = time.Millisecond
	// measurePolls bounds the status reads that wait, after the
	// datasheet's maximum measurement time, for a forced measurement to
	// end, measurePollInterval apart.
	measurePolls        = 20
	measurePollInterval = time.Millisecond
)

// Errors a Dev returns, wrapped. Callers branch on them with errors.Is.
var (
	// ErrNoAnswer means the chip id could not be read: nothing answers at
	// the address. The error New returns also wraps the bus's error.
	ErrNoAnswer = errors.New("bme280: no answer")
	// ErrUnknownChip means something answers at the address but its chip
	// id is not a BME280's or a BMP280's.
	ErrUnknownChip = errors.New("bme280: not a BME280 or BMP280")
	// ErrSkipped means a data register held its "skipped" value (0x80000,
	// or 0x8000 for humidity) although the measurement was configured:
	// there is no reading for that field.
	ErrSkipped = errors.New("bme280: measurement skipped")
	// ErrCalibration means the calibration gives no value for a reading
	// (the pressure formula's divisor is zero): the chip's calibration
	// memory is likely corrupt.
	ErrCalibration = errors.New("bme280: calibration gives no value")
)

// Chip is which of the two chips a Dev drives.
type Chip uint8

// Chips.
const (
	BME280 Chip = iota + 1
	BMP280
)

func (c Chip) String() string {
	switch c {
	case BME280:
		return "BME280"
	case BMP280:
		return "BMP280"
	}
	return fmt.Sprintf("Chip(%d)", uint8(c))
}

// Dev is a BME280 or BMP280 on an I²C bus. Its methods are safe for
// concurrent use; Sense and Halt are serialized.
type Dev struct {
	d     i2c.Dev
	where string // bus and address, for errors
	chip  Chip
	cal   Calibration
	opts  Opts // as configured: Humidity Skip on a BMP280, Standby the chip's
	osrs  byte // ctrl_meas without the mode bits
	wait  time.Duration
	sleep func(time.Duration)

	mu sync.Mutex
	// stopped is set while a Normal-mode chip sleeps after Halt: the next
	// Sense restarts it.
	stopped bool
}

// New identifies the chip at d, resets it, reads its calibration and
// configures it with o (DefaultOpts if o is nil). In Normal mode it waits
// for the first measurement before it returns.
//
// Errors name the bus and address. If the chip id cannot be read, the
// error wraps both ErrNoAnswer and the bus's error; if it reads as
// something other than a BME280 (0x60) or BMP280 (0x58, or the
// engineering samples' 0x56 and 0x57), the error wraps ErrUnknownChip and
// names the id. New leaves a chip that fails after the reset in sleep
// mode or unconfigured.
func New(d *i2c.Dev, o *Opts) (*Dev, error) {
	return newDev(d, o, time.Sleep)
}

func newDev(d *i2c.Dev, o *Opts, sleep func(time.Duration)) (*Dev, error) {
	if d == nil || d.Bus == nil {
		return nil, errors.New("bme280: new: no I²C device given")
	}
	opts := defaultOpts()
	if o != nil {
		opts = *o
	}
	if err := opts.Check(); err != nil {
		return nil, err
	}
	dev := &Dev{
		d:     *d,
		where: fmt.Sprintf("%s 0x%02x", d.Bus.String(), d.Addr),
		sleep: sleep,
	}
	if err := dev.identify(); err != nil {
		return nil, err
	}
	if err := dev.reset(); err != nil {
		return nil, err
	}
	if err := dev.readCalibration(); err != nil {
		return nil, err
	}
	if err := dev.configure(opts); err != nil {
		return nil, err
	}
	return dev, nil
}

func (d *Dev) errorf(op string, err error) error {
	return fmt.Errorf("bme280 %s: %s: %w", d.where, op, err)
}

// read reads len(b) bytes from reg on, in transactions of at most
// maxRead bytes.
func (d *Dev) read(reg byte, b []byte) error {
	for len(b) > 0 {
		n := min(len(b), maxRead)
		if err := d.d.Tx([]byte{reg}, b[:n]); err != nil {
			return err
		}
		reg += byte(n)
		b = b[n:]
	}
	return nil
}

// write writes one register in one transaction.
func (d *Dev) write(reg, v byte) error {
	return d.d.Tx([]byte{reg, v}, nil)
}

func (d *Dev) identify() error {
	var id [1]byte
	if err := d.read(regID, id[:]); err != nil {
		return fmt.Errorf("bme280 %s: read chip id: %w: %w", d.where, ErrNoAnswer, err)
	}
	switch id[0] {
	case idBME280:
		d.chip = BME280
	case idBMP280, idBMP280Sample1, idBMP280Sample2:
		d.chip = BMP280
	default:
		return fmt.Errorf("bme280 %s: chip id 0x%02x, want 0x60 (BME280) or 0x56, 0x57, 0x58 (BMP280): %w", d.where, id[0], ErrUnknownChip)
	}
	return nil
}

// reset soft-resets the chip and waits until it has copied its
// calibration to the registers. The chip may not answer during its
// start-up, so a failed status read is retried within the bound.
func (d *Dev) reset() error {
	if err := d.write(regReset, resetCommand); err != nil {
		return d.errorf("soft reset", err)
	}
	d.sleep(startupTime)
	var lastErr error
	for i := range resetPolls {
		if i > 0 {
			d.sleep(resetPollInterval)
		}
		var s [1]byte
		if err := d.read(regStatus, s[:]); err != nil {
			lastErr = err
			continue
		}
		if s[0]&statusIMUpdate == 0 {
			return nil
		}
		lastErr = nil
	}
	if lastErr != nil {
		return d.errorf("soft reset: read status", lastErr)
	}
	return d.errorf("soft reset", fmt.Errorf("calibration copy (status im_update) still running after %d polls", resetPolls))
}

func (d *Dev) readCalibration() error {
	var b26 [CalibrationLen]byte
	if err := d.read(regCalib, b26[:]); err != nil {
		return d.errorf("read calibration", err)
	}
	var h7 []byte
	if d.chip == BME280 {
		h7 = make([]byte, HumidityCalibrationLen)
		if err := d.read(regCalibH, h7); err != nil {
			return d.errorf("read humidity calibration", err)
		}
	}
	c, err := ParseCalibration(b26[:], h7)
	if err != nil {
		return d.errorf("read calibration", err)
	}
	d.cal = c
	return nil
}

// configure writes config while the chip sleeps after the reset, then
// ctrl_hum, then ctrl_meas: a ctrl_hum write takes effect only at the
// next ctrl_meas write.
func (d *Dev) configure(o Opts) error {
	if d.chip == BMP280 {
		o.Humidity = Skip
	}
	tsb, standby := standbyBits(d.chip, o.Standby)
	if o.Mode == Normal {
		o.Standby = standby
	} else {
		o.Standby = 0
	}
	ot, _ := o.Temperature.bits()
	op, _ := o.Pressure.bits()
	oh, _ := o.Humidity.bits()
	f, _ := o.Filter.bits()
	d.opts = o
	d.osrs = ot<<5 | op<<2
	d.wait = MeasureTime(o.Temperature, o.Pressure, o.Humidity)

	if err := d.write(regConfig, tsb<<5|f<<2); err != nil {
		return d.errorf("configure: write config", err)
	}
	if d.chip == BME280 {
		if err := d.write(regCtrlHum, oh); err != nil {
			return d.errorf("configure: write ctrl_hum", err)
		}
	}
	if o.Mode == Normal {
		return d.start()
	}
	if err := d.write(regCtrlMeas, d.osrs|modeSleep); err != nil {
		return d.errorf("configure: write ctrl_meas", err)
	}
	return nil
}

// start starts a measurement (Forced) or the measurement cycle (Normal)
// and waits until a result is in the data registers: the datasheet's
// maximum measurement time, then, in Forced mode, until the status shows
// the measurement over. In Normal mode the chip starts its next
// measurement after Standby, so the status is not polled; the data
// registers always hold the last complete result.
func (d *Dev) start() error {
	mode := byte(modeForced)
	if d.opts.Mode == Normal {
		mode = modeNormal
	}
	if err := d.write(regCtrlMeas, d.osrs|mode); err != nil {
		return d.errorf("start measurement: write ctrl_meas", err)
	}
	d.sleep(d.wait)
	if d.opts.Mode == Normal {
		return nil
	}
	for i := range measurePolls {
		if i > 0 {
			d.sleep(measurePollInterval)
		}
		var s [1]byte
		if err := d.read(regStatus, s[:]); err != nil {
			return d.errorf("wait for measurement: read status", err)
		}
		if s[0]&statusMeasuring == 0 {
			return nil
		}
	}
	return d.errorf("wait for measurement", fmt.Errorf("status still measuring %v after the datasheet's %v", measurePolls*measurePollInterval, d.wait))
}

// String returns the chip and where it is, as "BME280 I2C1 0x76".
func (d *Dev) String() string { return d.chip.String() + " " + d.where }

// Chip returns which chip New found.
func (d *Dev) Chip() Chip { return d.chip }

// HasHumidity reports whether the chip measures humidity: true for a
// BME280, false for a BMP280.
func (d *Dev) HasHumidity() bool { return d.chip == BME280 }

// Calibration returns the calibration New read from the chip.
func (d *Dev) Calibration() Calibration { return d.cal }

// Opts returns the configuration in effect: Humidity is Skip on a BMP280,
// and Standby is the chip's standby time nearest the one asked for (zero
// in Forced mode).
func (d *Dev) Opts() Opts { return d.opts }

// MeasureTime returns the datasheet's maximum time of one measurement
// with the configured oversampling: how long Sense waits in Forced mode
// before it polls the status.
func (d *Dev) MeasureTime() time.Duration { return d.wait }

// Sense reads the chip and stores the temperature, pressure and humidity
// in e. In Forced mode it starts a measurement and waits for it (see
// MeasureTime); in Normal mode it reads the latest result at once, except
// after Halt, when it restarts the cycle and waits for one measurement.
//
// A field that is not measured (oversampling Skip, or humidity on a
// BMP280) is set to zero. If the chip reports a configured measurement as
// skipped, or the calibration gives no pressure, Sense stores the fields
// it has, zeroes the rest, and returns an error that names each missing
// field and wraps ErrSkipped or ErrCalibration; a skipped temperature
// leaves no field. On a bus error e is not changed.
//
// Sense is safe for concurrent use; concurrent calls take turns.
func (d *Dev) Sense(e *physic.Env) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.opts.Mode == Forced || d.stopped {
		if err := d.start(); err != nil {
			return err
		}
		d.stopped = false
	}
	b := make([]byte, 6, 8)
	if d.chip == BME280 {
		b = b[:8]
	}
	if err := d.read(regData, b); err != nil {
		return d.errorf("read data", err)
	}
	r, err := parseRaw(b)
	if err != nil {
		return d.errorf("read data", err)
	}
	env, err := d.compensate(r)
	*e = env
	if err != nil {
		return d.errorf("sense", err)
	}
	return nil
}

// compensate turns raw readings into physical values, as Sense documents.
func (d *Dev) compensate(r raw) (physic.Env, error) {
	var e physic.Env
	if r.t == SkippedTP {
		return e, fmt.Errorf("temperature read as skipped (0x%05x), and pressure and humidity need it: %w", r.t, ErrSkipped)
	}
	t, tFine := d.cal.Temperature(r.t)
	e.Temperature = physic.Temperature(t)*10*physic.MilliCelsius + physic.ZeroCelsius
	var errs []error
	if d.opts.Pressure != Skip {
		switch p := d.cal.Pressure64(r.p, tFine); {
		case r.p == SkippedTP:
			errs = append(errs, fmt.Errorf("pressure read as skipped (0x%05x): %w", r.p, ErrSkipped))
		case p == 0:
			errs = append(errs, fmt.Errorf("pressure: %w", ErrCalibration))
		default:
			e.Pressure = physic.Pressure(p) * (physic.Pascal / 256)
		}
	}
	if d.opts.Humidity != Skip && r.hasH {
		if r.h == SkippedH {
			errs = append(errs, fmt.Errorf("humidity read as skipped (0x%04x): %w", r.h, ErrSkipped))
		} else {
			h := d.cal.Humidity(r.h, tFine)
			// Q22.10 %RH to 1e-5 %RH, rounded: ×100000/1024 = ×3125/32.
			e.Humidity = physic.RelativeHumidity((int64(h)*3125 + 16) / 32)
		}
	}
	return e, errors.Join(errs...)
}

// Halt puts the chip to sleep. A Sense after Halt wakes it: in Forced
// mode for one measurement, as always; in Normal mode by restarting the
// measurement cycle. Halt is safe for concurrent use; it waits for a
// Sense in progress to end.
func (d *Dev) Halt() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.write(regCtrlMeas, d.osrs|modeSleep); err != nil {
		return d.errorf("halt: write ctrl_meas", err)
	}
	d.stopped = d.opts.Mode == Normal
	return nil
}
