package bme280

import (
	"fmt"
	"time"
)

// Oversampling is how many samples the chip averages into one reading:
// Skip (the measurement is not made), X1, X2, X4, X8 or X16. More samples
// mean less noise and a longer measurement.
type Oversampling uint8

// Oversampling settings. The value is the number of samples.
const (
	Skip Oversampling = 0
	X1   Oversampling = 1
	X2   Oversampling = 2
	X4   Oversampling = 4
	X8   Oversampling = 8
	X16  Oversampling = 16
)

// bits returns the osrs_x field for o, and false if o is not a setting.
func (o Oversampling) bits() (byte, bool) {
	switch o {
	case Skip:
		return 0, true
	case X1:
		return 1, true
	case X2:
		return 2, true
	case X4:
		return 3, true
	case X8:
		return 4, true
	case X16:
		return 5, true
	}
	return 0, false
}

func (o Oversampling) String() string {
	if o == Skip {
		return "skip"
	}
	return fmt.Sprintf("x%d", uint8(o))
}

// Filter is the coefficient of the chip's IIR filter on temperature and
// pressure: FilterOff, Filter2, Filter4, Filter8 or Filter16. A filtered
// reading settles to a step change in about as many readings as the
// coefficient.
type Filter uint8

// Filter coefficients.
const (
	FilterOff Filter = 0
	Filter2   Filter = 2
	Filter4   Filter = 4
	Filter8   Filter = 8
	Filter16  Filter = 16
)

// bits returns the filter field for f, and false if f is not a setting.
func (f Filter) bits() (byte, bool) {
	switch f {
	case FilterOff:
		return 0, true
	case Filter2:
		return 1, true
	case Filter4:
		return 2, true
	case Filter8:
		return 3, true
	case Filter16:
		return 4, true
	}
	return 0, false
}

// Mode is when the chip measures.
type Mode uint8

const (
	// Forced makes one measurement per Sense; the chip sleeps in between.
	// This is the low-power mode for readings a second or more apart.
	Forced Mode = iota
	// Normal measures continuously, Standby apart; Sense reads the latest
	// result without waiting.
	Normal
)

func (m Mode) String() string {
	switch m {
	case Forced:
		return "forced"
	case Normal:
		return "normal"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// Register values of the mode field in ctrl_meas.
const (
	modeSleep  = 0x00
	modeForced = 0x01
	modeNormal = 0x03
)

// Opts configures the chip.
type Opts struct {
	// Temperature, Pressure and Humidity oversampling. Temperature cannot
	// be Skip: the pressure and humidity compensation need it. Humidity is
	// ignored on a BMP280, which has no humidity sensor.
	Temperature, Pressure, Humidity Oversampling
	Filter                          Filter
	Mode                            Mode
	// Standby is the pause between measurements in Normal mode; the chip
	// uses the nearest of its standby times (0.5 ms to 1 s on a BME280,
	// 0.5 ms to 4 s on a BMP280). Ignored in Forced mode.
	Standby time.Duration
}

// DefaultOpts measures everything once per Sense, unfiltered, in Forced
// mode: the datasheet's setting for weather monitoring. New uses these
// options when given none; it uses its own copy, so changing DefaultOpts
// changes nothing in this package.
var DefaultOpts = defaultOpts()

func defaultOpts() Opts {
	return Opts{Temperature: X1, Pressure: X1, Humidity: X1, Filter: FilterOff, Mode: Forced}
}

// Check returns nil if o is a valid configuration, otherwise an error that
// names the first bad field.
func (o *Opts) Check() error {
	for _, f := range []struct {
		name string
		v    Oversampling
	}{{"Temperature", o.Temperature}, {"Pressure", o.Pressure}, {"Humidity", o.Humidity}} {
		if _, ok := f.v.bits(); !ok {
			return fmt.Errorf("bme280: Opts.%s: oversampling %d is not one of 0 (skip), 1, 2, 4, 8, 16", f.name, uint8(f.v))
		}
	}
	if o.Temperature == Skip {
		return fmt.Errorf("bme280: Opts.Temperature: cannot be skip: pressure and humidity are compensated with the temperature")
	}
	if _, ok := o.Filter.bits(); !ok {
		return fmt.Errorf("bme280: Opts.Filter: coefficient %d is not one of 0 (off), 2, 4, 8, 16", uint8(o.Filter))
	}
	if o.Mode != Forced && o.Mode != Normal {
		return fmt.Errorf("bme280: Opts.Mode: %v is neither Forced nor Normal", o.Mode)
	}
	if o.Standby < 0 {
		return fmt.Errorf("bme280: Opts.Standby: %v is negative", o.Standby)
	}
	return nil
}

// Standby times by t_sb field value. The two chips differ in the last two.
var (
	standbyBME280 = [8]time.Duration{500 * time.Microsecond, 62500 * time.Microsecond, 125 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond, time.Second, 10 * time.Millisecond, 20 * time.Millisecond}
	standbyBMP280 = [8]time.Duration{500 * time.Microsecond, 62500 * time.Microsecond, 125 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second}
)

// standbyBits returns the t_sb field whose time is nearest d on chip c,
// the shorter one on a tie, and that time.
func standbyBits(c Chip, d time.Duration) (byte, time.Duration) {
	table := &standbyBME280
	if c == BMP280 {
		table = &standbyBMP280
	}
	best := 0
	for i, t := range table {
		if diff, bestDiff := absDur(t-d), absDur(table[best]-d); diff < bestDiff || diff == bestDiff && t < table[best] {
			best = i
		}
	}
	return byte(best), table[best]
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// MeasureTime returns the datasheet's maximum time of one measurement
// with oversampling t, p and h: 1.25 ms, plus 2.3 ms per temperature
// sample, plus 2.3 ms per pressure sample and 0.575 ms if pressure is
// measured, plus the same for humidity.
func MeasureTime(t, p, h Oversampling) time.Duration {
	us := 1250
	if t != Skip {
		us += 2300 * int(t)
	}
	if p != Skip {
		us += 2300*int(p) + 575
	}
	if h != Skip {
		us += 2300*int(h) + 575
	}
	return time.Duration(us) * time.Microsecond
}
