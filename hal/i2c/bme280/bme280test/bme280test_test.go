package bme280test_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"periph.io/x/conn/v3/i2c"
	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/hal/i2c/bme280"
	"github.com/tobe-body/tobe-body/hal/i2c/bme280/bme280test"
)

const addr = bme280test.DefaultAddr

// read reads n registers from reg on.
func read(t *testing.T, c *bme280test.Chip, reg byte, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if err := c.Tx(addr, []byte{reg}, b); err != nil {
		t.Fatalf("read 0x%02x: %v", reg, err)
	}
	return b
}

func write(t *testing.T, c *bme280test.Chip, w ...byte) {
	t.Helper()
	if err := c.Tx(addr, w, nil); err != nil {
		t.Fatalf("write % x: %v", w, err)
	}
}

func TestRegisterMap(t *testing.T) {
	cal := bme280test.TypicalCalibration()
	b26, h7 := cal.Bytes()
	noA1 := append(append([]byte{}, b26[:25]...), 0)
	for _, tc := range []struct {
		name     string
		chip     *bme280test.Chip
		id       byte
		b26, h7  []byte
		dataLen  int
		humidity bool
	}{
		{"BME280", bme280test.NewBME280(cal), 0x60, b26, h7, 8, true},
		{"BMP280", bme280test.NewBMP280(cal), 0x58, noA1, make([]byte, 7), 6, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.chip
			if got := read(t, c, 0xD0, 1)[0]; got != tc.id {
				t.Errorf("got id 0x%02x, want 0x%02x", got, tc.id)
			}
			if got := read(t, c, 0x88, 26); !bytes.Equal(got, tc.b26) {
				t.Errorf("got calibration % x, want % x", got, tc.b26)
			}
			if got := read(t, c, 0xE1, 7); !bytes.Equal(got, tc.h7) {
				t.Errorf("got humidity calibration % x, want % x", got, tc.h7)
			}
			// Power-on: data at the skipped values, asleep.
			want := []byte{0x80, 0, 0, 0x80, 0, 0, 0, 0}
			if tc.humidity {
				want[6] = 0x80
			}
			if got := read(t, c, 0xF7, 8); !bytes.Equal(got, want) {
				t.Errorf("got data % x at power-on, want % x", got, want)
			}
			// ctrl_hum exists on a BME280 only.
			write(t, c, 0xF2, 0x05)
			wantHum := byte(0)
			if tc.humidity {
				wantHum = 5
			}
			if got := read(t, c, 0xF2, 1)[0]; got != wantHum {
				t.Errorf("got ctrl_hum 0x%02x, want 0x%02x", got, wantHum)
			}
		})
	}
}

func TestProtocol(t *testing.T) {
	c := bme280test.NewBME280(bme280test.TypicalCalibration())
	// (register, data) pairs in one write.
	write(t, c, 0xF5, 0xA0, 0xF2, 0x03)
	if got := read(t, c, 0xF2, 4); got[0] != 0x03 || got[3] != 0xA0 {
		t.Errorf("got % x from 0xF2, want ctrl_hum 03 and config a0", got)
	}
	// A lone register sets the pointer for a read that follows.
	write(t, c, 0xD0)
	b := make([]byte, 1)
	if err := c.Tx(addr, nil, b); err != nil || b[0] != 0x60 {
		t.Errorf("got 0x%02x, %v after pointing at 0xD0, want 0x60", b[0], err)
	}
	// The pointer moves on with each byte read.
	if err := c.Tx(addr, nil, b); err != nil || b[0] != 0x00 {
		t.Errorf("got 0x%02x, %v from 0xD1, want 0x00", b[0], err)
	}
	want := []bme280test.Write{{Reg: 0xF5, Value: 0xA0}, {Reg: 0xF2, Value: 0x03}}
	if got := c.Writes(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got writes %v, want %v", got, want)
	}
	if got := c.Transactions(); got != 5 {
		t.Errorf("got %d transactions, want 5", got)
	}
	// Read-only registers ignore writes.
	write(t, c, 0xD0, 0x12, 0x88, 0x00, 0xF7, 0x00)
	if got := read(t, c, 0xD0, 1)[0]; got != 0x60 {
		t.Errorf("got id 0x%02x after a write to it, want 0x60", got)
	}
}

func TestReset(t *testing.T) {
	c := bme280test.NewBME280(bme280test.TypicalCalibration())
	c.SetRaw(500000, 400000, 30000)
	write(t, c, 0xF5, 0xA0)
	write(t, c, 0xF2, 0x01)
	write(t, c, 0xF4, 0x27) // normal
	if got := read(t, c, 0xF7, 8); got[0] == 0x80 {
		t.Fatalf("got data % x in normal mode, want the raw values", got)
	}
	write(t, c, 0xE0, 0x12) // not the reset command
	if got := c.Reg(0xF4); got != 0x27 {
		t.Errorf("got ctrl_meas 0x%02x after writing 0x12 to reset, want 0x27 unchanged", got)
	}
	c.SetResetBusy(2)
	write(t, c, 0xE0, 0xB6)
	for i, want := range []byte{0x01, 0x01, 0x00} {
		if got := read(t, c, 0xF3, 1)[0]; got != want {
			t.Errorf("status read %d after reset: got 0x%02x, want 0x%02x", i, got, want)
		}
	}
	if got := read(t, c, 0xF2, 4); !bytes.Equal(got, []byte{0, 0, 0, 0}) {
		t.Errorf("got control registers % x after reset, want zeros", got)
	}
	if got := read(t, c, 0xF7, 8); !bytes.Equal(got, []byte{0x80, 0, 0, 0x80, 0, 0, 0x80, 0}) {
		t.Errorf("got data % x after reset, want the skipped values", got)
	}
}

func TestResetSilence(t *testing.T) {
	c := bme280test.NewBME280(bme280test.TypicalCalibration())
	c.SetResetSilence(2)
	write(t, c, 0xE0, 0xB6)
	b := make([]byte, 1)
	for i := range 2 {
		if err := c.Tx(addr, []byte{0xD0}, b); !errors.Is(err, bme280test.ErrNoDevice) {
			t.Errorf("transaction %d after reset: got %v, want ErrNoDevice", i, err)
		}
	}
	if got := read(t, c, 0xD0, 1)[0]; got != 0x60 {
		t.Errorf("got id 0x%02x, want 0x60", got)
	}
}

func TestForced(t *testing.T) {
	c := bme280test.NewBME280(bme280test.TypicalCalibration())
	c.SetRaw(0x7EED0, 0x655AC, 0x6E8F)
	c.SetMeasuring(2)
	write(t, c, 0xF2, 0x01)
	write(t, c, 0xF4, 0x25) // x1, x1, forced
	old := []byte{0x80, 0, 0, 0x80, 0, 0, 0x80, 0}
	if got := read(t, c, 0xF7, 8); !bytes.Equal(got, old) {
		t.Errorf("got data % x while measuring, want the old % x", got, old)
	}
	for i, want := range []byte{0x08, 0x08, 0x00} {
		if got := read(t, c, 0xF3, 1)[0]; got != want {
			t.Errorf("status read %d: got 0x%02x, want 0x%02x", i, got, want)
		}
	}
	want := []byte{0x65, 0x5A, 0xC0, 0x7E, 0xED, 0x00, 0x6E, 0x8F}
	if got := read(t, c, 0xF7, 8); !bytes.Equal(got, want) {
		t.Errorf("got data % x, want % x", got, want)
	}
	if got := c.Reg(0xF4); got != 0x24 {
		t.Errorf("got ctrl_meas 0x%02x after the measurement, want 0x24 (asleep)", got)
	}
}

func TestSkippedLatch(t *testing.T) {
	for _, tc := range []struct {
		name         string
		writes       [][]byte
		wantT, wantP bool // read as values, not skipped
		wantH        bool
	}{
		{"all on", [][]byte{{0xF2, 1}, {0xF4, 0x25}}, true, true, true},
		{"pressure off", [][]byte{{0xF2, 1}, {0xF4, 0x21}}, true, false, true},
		{"temperature off", [][]byte{{0xF2, 1}, {0xF4, 0x05}}, false, true, true},
		{"humidity off", [][]byte{{0xF2, 0}, {0xF4, 0x25}}, true, true, false},
		// ctrl_hum takes effect at the next ctrl_meas write only.
		{"ctrl_hum after ctrl_meas", [][]byte{{0xF4, 0x25}, {0xF2, 1}}, true, true, false},
		{"ctrl_hum then ctrl_meas twice", [][]byte{{0xF4, 0x25}, {0xF2, 1}, {0xF4, 0x25}}, true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := bme280test.NewBME280(bme280test.TypicalCalibration())
			c.SetRaw(0x7EED0, 0x655AC, 0x6E8F)
			for _, w := range tc.writes {
				write(t, c, w...)
			}
			b := read(t, c, 0xF7, 8)
			p := int32(b[0])<<12 | int32(b[1])<<4 | int32(b[2]>>4)
			tt := int32(b[3])<<12 | int32(b[4])<<4 | int32(b[5]>>4)
			h := int32(b[6])<<8 | int32(b[7])
			r := [3]bool{tt != bme280.SkippedTP, p != bme280.SkippedTP, h != bme280.SkippedH}
			if want := [3]bool{tc.wantT, tc.wantP, tc.wantH}; r != want {
				t.Errorf("got measured (T, P, H) %v, want %v", r, want)
			}
		})
	}
}

func TestRawFor(t *testing.T) {
	datasheet := bme280.Calibration{T1: 27504, T2: 26435, T3: -1000, P1: 36477, P2: -10685, P3: 3024, P4: 2855, P5: 140, P6: -7, P7: 15500, P8: -14600, P9: 6000}
	typical := bme280test.TypicalCalibration()
	env := func(c, pa, rh float64) physic.Env {
		return physic.Env{
			Temperature: physic.ZeroCelsius + physic.Temperature(c*float64(physic.Celsius)),
			Pressure:    physic.Pressure(pa * float64(physic.Pascal)),
			Humidity:    physic.RelativeHumidity(rh * float64(physic.PercentRH)),
		}
	}
	for _, tc := range []struct {
		name     string
		cal      bme280.Calibration
		env      physic.Env
		humidity bool
		wantErr  string
	}{
		{"room", typical, env(21.5, 101325, 45), true, ""},
		{"cold", typical, env(-40, 30000, 0), true, ""},
		{"hot", typical, env(85, 110000, 100), true, ""},
		{"odd values", typical, env(-3.27, 87654.3, 12.345), true, ""},
		{"datasheet example", datasheet, env(25.08, 100653.25, 0), false, ""},
		{"BMP280 ignores humidity", datasheet, env(25.08, 100653.25, 250), false, ""},
		{"too hot", typical, env(1000, 101325, 45), true, "bme280test: temperature 1k°C: beyond the calibration's range -13694 … 18383 × 0.01 °C"},
		{"humidity over 100", typical, env(20, 101325, 101), true, "bme280test: humidity 101%rH: beyond the calibration's range 0 … 102400 × 1/1024 %RH"},
		{"no pressure calibration", bme280.Calibration{T1: 27504, T2: 26435}, env(20, 101325, 0), false, "bme280test: pressure 101.325kPa: beyond the calibration's range 0 … 0 × 1/256 Pa"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := bme280test.RawFor(&tc.cal, tc.env, tc.humidity)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("got %v, want no error", err)
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if raw[0] == bme280.SkippedTP || raw[1] == bme280.SkippedTP || tc.humidity && raw[2] == bme280.SkippedH {
				t.Errorf("got raw %v, want no skipped value", raw)
			}
			temp, tFine := tc.cal.Temperature(raw[0])
			wantT := (tc.env.Temperature - physic.ZeroCelsius) / (10 * physic.MilliCelsius)
			if d := physic.Temperature(temp) - wantT; d < -1 || d > 1 {
				t.Errorf("got %d (0.01 °C), want %d within 1", temp, wantT)
			}
			p := float64(tc.cal.Pressure64(raw[1], tFine)) / 256
			if d := p - float64(tc.env.Pressure)/float64(physic.Pascal); d < -0.5 || d > 0.5 {
				t.Errorf("got %.3f Pa, want %v within 0.5 Pa", p, tc.env.Pressure)
			}
			if !tc.humidity {
				if raw[2] != 0 {
					t.Errorf("got raw humidity %d, want 0", raw[2])
				}
				return
			}
			h := float64(tc.cal.Humidity(raw[2], tFine)) / 1024
			if d := h - float64(tc.env.Humidity)/float64(physic.PercentRH); d < -0.01 || d > 0.01 {
				t.Errorf("got %.4f %%RH, want %v within 0.01 %%RH", h, tc.env.Humidity)
			}
		})
	}
}

func TestSetEnvKeepsRawOnError(t *testing.T) {
	c := bme280test.NewBME280(bme280test.TypicalCalibration())
	c.SetRaw(1, 2, 3)
	if err := c.SetEnv(physic.Env{Temperature: physic.ZeroCelsius, Humidity: 200 * physic.PercentRH}); err == nil {
		t.Fatal("got no error for 200 %RH, want one")
	}
	if t1, p, h := c.Raw(); t1 != 1 || p != 2 || h != 3 {
		t.Errorf("got raw %d %d %d, want 1 2 3 unchanged", t1, p, h)
	}
}

func TestFail(t *testing.T) {
	c := bme280test.NewBME280(bme280test.TypicalCalibration())
	b := make([]byte, 1)
	if err := c.Tx(0x77, []byte{0xD0}, b); !errors.Is(err, bme280test.ErrNoDevice) {
		t.Errorf("got %v at 0x77, want ErrNoDevice", err)
	}
	fail := errors.New("bus gone")
	c.SetFail(fail)
	if err := c.Tx(addr, []byte{0xF4, 0x25}, nil); !errors.Is(err, fail) {
		t.Errorf("got %v, want %v", err, fail)
	}
	if got := c.Reg(0xF4); got != 0 {
		t.Errorf("got ctrl_meas 0x%02x after a failed write, want 0", got)
	}
	c.SetFail(nil)
	if got := read(t, c, 0xD0, 1)[0]; got != 0x60 {
		t.Errorf("got id 0x%02x after SetFail(nil), want 0x60", got)
	}
	if got := c.Transactions(); got != 3 {
		t.Errorf("got %d transactions, want 3", got)
	}
	var _ i2c.Bus = c
}

func TestConcurrent(t *testing.T) {
	c := bme280test.NewBME280(bme280test.TypicalCalibration())
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 50 {
				b := make([]byte, 8)
				_ = c.Tx(addr, []byte{0xF4, 0x25}, nil)
				_ = c.Tx(addr, []byte{0xF7}, b)
				c.SetRaw(int32(i*j), int32(j), int32(i))
				_ = c.Writes()
			}
		})
	}
	wg.Wait()
	if got := c.Transactions(); got != 8*50*2 {
		t.Errorf("got %d transactions, want %d", got, 8*50*2)
	}
}

// Example shows the fake under the driver, as the simulated board uses
// it.
func Example() {
	chip := bme280test.NewBME280(bme280test.TypicalCalibration())
	_ = chip.SetEnv(physic.Env{
		Temperature: physic.ZeroCelsius + 21500*physic.MilliCelsius,
		Pressure:    101325 * physic.Pascal,
		Humidity:    45 * physic.PercentRH,
	})
	dev, err := bme280.New(&i2c.Dev{Bus: chip, Addr: bme280test.DefaultAddr}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer dev.Halt()
	var e physic.Env
	if err := dev.Sense(&e); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s %.2f °C %.0f Pa %.1f %%RH\n", dev.Chip(), e.Temperature.Celsius(),
		float64(e.Pressure)/float64(physic.Pascal), float64(e.Humidity)/float64(physic.PercentRH))
	// Output: BME280 21.50 °C 101325 Pa 45.0 %RH
}

// regFile is a bus of plain registers at one address, as the kernel's
// i2c-stub is: a write sets the pointer and writes on from it, a read
// reads on from it, and nothing else happens (no reset, no measurement).
type regFile struct {
	addr uint16
	regs [256]byte
}

func (f *regFile) String() string                  { return "regfile" }
func (f *regFile) SetSpeed(physic.Frequency) error { return nil }
func (f *regFile) Tx(addr uint16, w, r []byte) error {
	if addr != f.addr {
		return errors.New("no acknowledge")
	}
	if len(w) > 0 {
		copy(f.regs[w[0]:], w[1:])
		if len(r) > 0 {
			copy(r, f.regs[w[0]:])
		}
	}
	return nil
}

// TestProgramAPlainRegisterFile: a chip Program wrote onto plain
// registers reads, through the driver, the BMP280 datasheet's example
// as the datasheet computes it, with a typical BME280's humidity.
func TestProgramAPlainRegisterFile(t *testing.T) {
	cal := bme280test.TypicalCalibration()
	cal.T1, cal.T2, cal.T3 = 27504, 26435, -1000
	cal.P1, cal.P2, cal.P3, cal.P4, cal.P5, cal.P6, cal.P7, cal.P8, cal.P9 = 36477, -10685, 3024, 2855, 140, -7, 15500, -14600, 6000
	f := &regFile{addr: 0x76}
	if err := bme280test.Program(f, 0x76, bme280test.IDBME280, cal); err != nil {
		t.Fatal(err)
	}
	if err := bme280test.SetRawOn(f, 0x76, 519888, 415148, 30000); err != nil {
		t.Fatal(err)
	}
	d, err := bme280.New(&i2c.Dev{Bus: f, Addr: 0x76}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var e physic.Env
	if err := d.Sense(&e); err != nil {
		t.Fatal(err)
	}
	_, tFine := cal.Temperature(519888)
	wantH := physic.RelativeHumidity(int64(cal.Humidity(30000, tFine)) * int64(physic.PercentRH) / 1024)
	if e.Temperature != physic.ZeroCelsius+25080*physic.MilliCelsius || e.Pressure/physic.Pascal != 100653 || e.Humidity != wantH {
		t.Errorf("read %v, %v, %v; want 25.08°C, 100653 Pa, %v", e.Temperature, e.Pressure, e.Humidity, wantH)
	}
}
