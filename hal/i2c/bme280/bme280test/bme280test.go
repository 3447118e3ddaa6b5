// Package bme280test is a register-level fake of the Bosch BME280 and
// BMP280 on an I²C bus, for the driver's tests and the simulated board.
//
// A Chip is an i2c.Bus with one device on it. It holds the chip's register
// file as the datasheets lay it out: the chip id at 0xD0, the calibration
// at 0x88…0xA1 and 0xE1…0xE7, the control registers, the status and the
// data registers. It speaks the chip's I²C protocol: a write is a register
// address followed by data for it, in (address, data) pairs, and a lone
// address sets the read pointer; a read returns registers from the pointer
// on, the pointer moving one register per byte (from 0xFF back to 0x00).
// Writes to read-only registers are recorded and ignored. A soft reset
// (0xB6 to 0xE0) clears the control and data registers; a write of forced
// mode to ctrl_meas starts a measurement that shows in the status for a
// set number of status reads, then puts the results in the data registers
// and returns the chip to sleep; in normal mode the data registers always
// hold the current readings.
//
// What it reads is set either as raw ADC values (SetRaw) or as a physical
// target (SetEnv), which the Chip turns into the raw values the chip's
// calibration compensates to that target. It does not model noise, the
// IIR filter, or the resolution lost to low oversampling: every
// measurement returns the raw values set. A measurement whose oversampling
// is skip reads as skipped (0x80000, or 0x8000 for humidity), and
// ctrl_hum takes effect only at the next ctrl_meas write, as on the chip.
//
// A Chip starts no goroutines, is deterministic, and is safe for
// concurrent use. It counts transactions, records register writes, and
// can be made to fail every transaction.
package bme280test

import (
	"errors"
	"fmt"
	"sync"

	"periph.io/x/conn/v3/i2c"
	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/hal/i2c/bme280"
)

// Chip ids the fake answers with.
const (
	IDBME280 = 0x60
	IDBMP280 = 0x58
)

// Default I²C address: SDO tied to ground. 0x77 is the other.
const DefaultAddr = 0x76

// Registers.
const (
	regCalib    = 0x88
	regID       = 0xD0
	regReset    = 0xE0
	regCalibH   = 0xE1
	regCtrlHum  = 0xF2
	regStatus   = 0xF3
	regCtrlMeas = 0xF4
	regConfig   = 0xF5
	regData     = 0xF7
)

const (
	resetCommand    = 0xB6
	statusMeasuring = 1 << 3
	statusIMUpdate  = 1 << 0
)

// ErrNoDevice is returned by Tx to an address where the Chip is not: the
// bus's answer when no device acknowledges.
var ErrNoDevice = errors.New("bme280test: no device at the address")

// Write is one register write the Chip received.
type Write struct {
	Reg, Value byte
}

func (w Write) String() string { return fmt.Sprintf("0x%02x=0x%02x", w.Reg, w.Value) }

// TypicalCalibration returns the calibration of a typical BME280: the
// values a chip from a common breakout board reads.
func TypicalCalibration() bme280.Calibration {
	return bme280.Calibration{
		T1: 28009, T2: 25654, T3: 50,
		P1: 39145, P2: -10750, P3: 3024, P4: 5667, P5: -120, P6: -7, P7: 15500, P8: -14600, P9: 6000,
		H1: 75, H2: 362, H3: 0, H4: 313, H5: 50, H6: 30,
	}
}

// Chip is a fake BME280 or BMP280 and the bus it sits on. Use New,
// NewBME280 or NewBMP280; the zero value is not usable.
type Chip struct {
	addr     uint16
	id       byte
	humidity bool
	cal      bme280.Calibration

	mu   sync.Mutex
	regs [256]byte
	ptr  byte
	// rawT, rawP, rawH are what the next measurement reads.
	rawT, rawP, rawH int32
	// osrsH is ctrl_hum as of the last ctrl_meas write: the humidity
	// oversampling in effect.
	osrsH byte
	// measuring counts the status reads left that show a forced
	// measurement running; the results land after the last.
	measuring   int
	updating    int // status reads left showing im_update after a reset
	silent      int // transactions left that fail after a reset
	measurePoll int
	resetPoll   int
	resetSilent int
	fail        error
	txs         int
	writes      []Write
}

// New returns a chip at address addr whose chip id reads id and whose
// calibration memory holds cal. It has humidity registers (ctrl_hum, the
// 0xE1 calibration block, hum_msb and hum_lsb) if id is IDBME280. Any id
// can be given, to test a driver's refusal of other chips. The chip starts
// as after power-on: asleep, data registers at their skipped values, raw
// readings zero.
func New(addr uint16, id byte, cal bme280.Calibration) *Chip {
	c := &Chip{addr: addr, id: id, humidity: id == IDBME280, cal: cal}
	c.powerOn()
	return c
}

// NewBME280 returns a BME280 at DefaultAddr with calibration cal.
func NewBME280(cal bme280.Calibration) *Chip { return New(DefaultAddr, IDBME280, cal) }

// NewBMP280 returns a BMP280 at DefaultAddr with calibration cal; its H
// parameters are not on the chip.
func NewBMP280(cal bme280.Calibration) *Chip { return New(DefaultAddr, IDBMP280, cal) }

// powerOn sets the registers to their reset values. Called with mu held
// or before the Chip is shared.
func (c *Chip) powerOn() {
	c.regs = [256]byte{}
	c.regs[regID] = c.id
	b26, h7 := c.cal.Bytes()
	if !c.humidity {
		b26[25] = 0 // 0xA1 is not calibration on a BMP280
	}
	copy(c.regs[regCalib:], b26)
	if c.humidity {
		copy(c.regs[regCalibH:], h7)
	}
	c.regs[regData] = 0x80   // press_msb
	c.regs[regData+3] = 0x80 // temp_msb
	if c.humidity {
		c.regs[regData+6] = 0x80 // hum_msb
	}
	c.osrsH = 0
	c.measuring = 0
}

// String returns the bus's name, "bme280test".
func (c *Chip) String() string { return "bme280test" }

// SetSpeed accepts any speed.
func (c *Chip) SetSpeed(physic.Frequency) error { return nil }

// Tx does a transaction: the write w, then the read into r. It returns
// the error set with SetFail if there is one, ErrNoDevice if addr is not
// the chip's, and an error for the transactions just after a soft reset
// that SetResetSilence asks to fail. Every call counts as a transaction.
func (c *Chip) Tx(addr uint16, w, r []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.txs++
	if c.fail != nil {
		return c.fail
	}
	if addr != c.addr {
		return fmt.Errorf("bme280test: tx to 0x%02x: %w", addr, ErrNoDevice)
	}
	if c.silent > 0 {
		c.silent--
		return fmt.Errorf("bme280test: tx to 0x%02x during start-up: %w", addr, ErrNoDevice)
	}
	if c.regs[regCtrlMeas]&3 == 3 {
		c.latch()
	}
	for i := 0; i < len(w); i += 2 {
		c.ptr = w[i]
		if i+1 < len(w) {
			c.write(w[i], w[i+1])
		}
	}
	for i := range r {
		r[i] = c.readByte(c.ptr)
		c.ptr++
	}
	return nil
}

// write stores one register write and does what the chip does on it.
func (c *Chip) write(reg, v byte) {
	c.writes = append(c.writes, Write{reg, v})
	switch reg {
	case regReset:
		if v == resetCommand {
			c.powerOn()
			c.updating = c.resetPoll
			c.silent = c.resetSilent
		}
	case regCtrlHum:
		if c.humidity {
			c.regs[reg] = v & 0x07
		}
	case regConfig:
		c.regs[reg] = v
	case regCtrlMeas:
		c.regs[reg] = v
		c.osrsH = c.regs[regCtrlHum] & 0x07
		switch v & 3 {
		case 1, 2: // forced
			c.measuring = c.measurePoll
			if c.measuring == 0 {
				c.finish()
			}
		case 3: // normal
			c.measuring = 0
			c.latch()
		default:
			c.measuring = 0
		}
	}
}

// readByte returns register reg, with the side effects of reading status.
func (c *Chip) readByte(reg byte) byte {
	if reg != regStatus {
		return c.regs[reg]
	}
	var s byte
	if c.measuring > 0 {
		s |= statusMeasuring
		c.measuring--
		if c.measuring == 0 {
			c.finish()
		}
	}
	if c.updating > 0 {
		s |= statusIMUpdate
		c.updating--
	}
	return s
}

// finish ends a forced measurement: results in, back to sleep.
func (c *Chip) finish() {
	c.latch()
	c.regs[regCtrlMeas] &^= 3
}

// latch puts the raw readings in the data registers, or the skipped value
// for a measurement whose oversampling is skip.
func (c *Chip) latch() {
	t, p, h := c.rawT, c.rawP, c.rawH
	if c.regs[regCtrlMeas]>>5 == 0 {
		t = bme280.SkippedTP
	}
	if c.regs[regCtrlMeas]>>2&7 == 0 {
		p = bme280.SkippedTP
	}
	if c.osrsH == 0 {
		h = bme280.SkippedH
	}
	d := DataRegisters(t, p, h)
	n := 6
	if c.humidity {
		n = 8
	}
	copy(c.regs[regData:regData+n], d[:n])
}

// DataRegisters are the data registers 0xF7 to 0xFE as a chip shows the
// raw readings t and p (20 bits each) and h (16 bits): pressure,
// temperature, humidity, most significant byte first, the last four bits
// of the 20-bit values in the high half of their third byte.
func DataRegisters(t, p, h int32) [8]byte {
	return [8]byte{byte(p >> 12), byte(p >> 4), byte(p<<4) & 0xF0, byte(t >> 12), byte(t >> 4), byte(t<<4) & 0xF0, byte(h >> 8), byte(h)}
}

// Program writes the registers of a chip of chip id id with calibration
// cal, at rest (status 0: no measurement running, the calibration
// copied), at addr on a bus of plain registers (the kernel's i2c-stub,
// which keeps what is written): what the driver then reads there, through
// a real adapter, is such a chip. Writes of a register and its bytes go
// 32 at most at a time.
func Program(bus i2c.Bus, addr uint16, id byte, cal bme280.Calibration) error {
	b26, h7 := cal.Bytes()
	writes := [][]byte{{regID, id}, {regStatus, 0}, append([]byte{regCalib}, b26...)}
	if id == IDBME280 {
		writes = append(writes, append([]byte{regCalibH}, h7...))
	}
	for _, w := range writes {
		if err := bus.Tx(addr, w, nil); err != nil {
			return fmt.Errorf("bme280test: programming register %#02x: %w", w[0], err)
		}
	}
	return nil
}

// SetRawOn writes raw readings into the data registers of a chip that
// Program wrote at addr on bus.
func SetRawOn(bus i2c.Bus, addr uint16, t, p, h int32) error {
	d := DataRegisters(t, p, h)
	if err := bus.Tx(addr, append([]byte{regData}, d[:]...), nil); err != nil {
		return fmt.Errorf("bme280test: writing the data registers: %w", err)
	}
	return nil
}

// SetRaw sets the raw readings the next measurements return: 20-bit
// temperature and pressure, 16-bit humidity (ignored on a BMP280). Only
// the low 20 (16) bits are used. SkippedTP and SkippedH make a reading
// that looks skipped.
func (c *Chip) SetRaw(t, p, h int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rawT, c.rawP, c.rawH = t&0xFFFFF, p&0xFFFFF, h&0xFFFF
}

// Raw returns the raw readings the next measurements return.
func (c *Chip) Raw() (t, p, h int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rawT, c.rawP, c.rawH
}

// SetEnv sets the raw readings to those the chip's calibration
// compensates nearest e, so that a driver reads back e to within the
// chip's resolution (0.01 °C, 1/256 Pa and 1/1024 %RH at best). It finds
// the temperature first, for t_fine, then pressure and humidity at that
// t_fine, by binary search: the compensation is monotonic in each raw
// value for a real chip's calibration. Humidity is ignored on a BMP280.
// It returns an error, and changes nothing, if a target is beyond what
// the calibration can give from any raw value.
func (c *Chip) SetEnv(e physic.Env) error {
	raw, err := RawFor(&c.cal, e, c.humidity)
	if err != nil {
		return err
	}
	c.SetRaw(raw[0], raw[1], raw[2])
	return nil
}

// RawFor returns the raw temperature, pressure and humidity readings that
// cal compensates nearest e, as SetEnv does; humidity is 0 if humidity is
// false. It never returns a skipped value.
func RawFor(cal *bme280.Calibration, e physic.Env, humidity bool) ([3]int32, error) {
	var out [3]int32
	// Temperature in 0.01 °C.
	wantT := divRound(int64(e.Temperature-physic.ZeroCelsius), int64(10*physic.MilliCelsius))
	temp := func(x int32) int64 { t, _ := cal.Temperature(x); return int64(t) }
	t, err := nearest(0, 0xFFFFF, bme280.SkippedTP, wantT, "× 0.01 °C", temp)
	if err != nil {
		return out, fmt.Errorf("bme280test: temperature %v: %w", e.Temperature, err)
	}
	_, tFine := cal.Temperature(t)
	// Pressure in Q24.8 Pa: 1/256 Pa is 3906250 nPa.
	wantP := divRound(int64(e.Pressure), int64(physic.Pascal/256))
	// Read as signed: at the ends of the raw range the formula's result is
	// negative, and unsigned it would wrap and break the monotony.
	p, err := nearest(0, 0xFFFFF, bme280.SkippedTP, wantP, "× 1/256 Pa", func(x int32) int64 { return int64(int32(cal.Pressure64(x, tFine))) })
	if err != nil {
		return out, fmt.Errorf("bme280test: pressure %v: %w", e.Pressure, err)
	}
	out[0], out[1] = t, p
	if !humidity {
		return out, nil
	}
	// Humidity in Q22.10 %RH.
	wantH := divRound(int64(e.Humidity)*1024, int64(physic.PercentRH))
	h, err := nearest(0, 0xFFFF, bme280.SkippedH, wantH, "× 1/1024 %RH", func(x int32) int64 { return int64(cal.Humidity(x, tFine)) })
	if err != nil {
		return out, fmt.Errorf("bme280test: humidity %v: %w", e.Humidity, err)
	}
	out[2] = h
	return out, nil
}

// nearest returns the x in [lo, hi], other than skip, whose f(x) is
// nearest want, for f monotonic in either direction. It returns an error
// if want lies outside f's range.
func nearest(lo, hi, skip int32, want int64, unit string, f func(int32) int64) (int32, error) {
	flo, fhi := f(lo), f(hi)
	inc := flo <= fhi
	if min(flo, fhi) > want || max(flo, fhi) < want {
		return 0, fmt.Errorf("beyond the calibration's range %d … %d %s", min(flo, fhi), max(flo, fhi), unit)
	}
	// The first x whose f(x) is at or past want.
	a, b := lo, hi
	for a < b {
		m := a + (b-a)/2
		if v := f(m); inc && v >= want || !inc && v <= want {
			b = m
		} else {
			a = m + 1
		}
	}
	dist := func(x int32) int64 {
		if x < lo || x > hi || x == skip {
			return -1
		}
		d := f(x) - want
		if d < 0 {
			d = -d
		}
		return d
	}
	best := int32(-1)
	var bestD int64
	for _, x := range []int32{a, a - 1, a + 1, a - 2, a + 2} {
		if d := dist(x); d >= 0 && (best < 0 || d < bestD) {
			best, bestD = x, d
		}
	}
	return best, nil
}

// divRound returns a/b rounded to the nearest integer, halves away from
// zero; b > 0.
func divRound(a, b int64) int64 {
	if a < 0 {
		return -((-a + b/2) / b)
	}
	return (a + b/2) / b
}

// SetMeasuring sets how many status reads show a forced measurement as
// running (0, the default, ends it at once). The results land in the data
// registers as the last of them is read.
func (c *Chip) SetMeasuring(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.measurePoll = n
}

// SetResetBusy sets how many status reads after a soft reset show the
// calibration copy (im_update) as running. The default is 0.
func (c *Chip) SetResetBusy(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.resetPoll = n
}

// SetResetSilence sets how many transactions after a soft reset fail, as
// on a chip that does not acknowledge during its start-up. The default is
// 0.
func (c *Chip) SetResetSilence(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.resetSilent = n
}

// SetFail makes every transaction return err, counted but with no effect
// on the chip; nil makes the chip answer again.
func (c *Chip) SetFail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fail = err
}

// Transactions returns how many times Tx has been called.
func (c *Chip) Transactions() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.txs
}

// Writes returns a copy of the register writes received, in order.
func (c *Chip) Writes() []Write {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Write(nil), c.writes...)
}

// Reg returns register reg as it stands, without the side effects a read
// over the bus has.
func (c *Chip) Reg(reg byte) byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.regs[reg]
}
