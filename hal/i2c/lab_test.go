//go:build lab

package i2c

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"periph.io/x/conn/v3/i2c/i2creg"
	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/hal/i2c/bme280"
	"github.com/tobe-body/tobe-body/hal/i2c/bme280/bme280test"
)

// Against the kernel's i2c-stub in the lab VM (scripts/lab/run.sh loads
// it with a chip at 0x76): an SMBus adapter of plain registers.

const stubName = "SMBus stub driver"

// TestLabI2CStub: the stub's bus is found by its adapter's name through
// periph's registry; periph's own Tx (I2C_RDWR) is refused by the kernel
// for an adapter without plain I²C, which is why an SMBus adapter's Tx is
// mapped onto SMBus transfers; those write and read the stub's registers,
// a block of 40 bytes across the 32-byte limit included; an address with
// nothing at it fails naming the bus and the address.
func TestLabI2CStub(t *testing.T) {
	bus, err := Open(stubName)
	if err != nil {
		t.Fatal(err)
	}
	defer bus.Close()
	if _, ok := bus.(*smbus); !ok || !strings.Contains(bus.String(), stubName) {
		t.Fatalf("the stub's bus is %T %s, want the SMBus mapping", bus, bus)
	}
	for _, r := range i2creg.All() {
		if adapterName(r.Number) != stubName {
			continue
		}
		pb, err := r.Open()
		if err != nil {
			t.Fatal(err)
		}
		err = pb.Tx(0x76, []byte{0x10}, make([]byte, 2))
		pb.Close()
		if err == nil || !strings.Contains(err.Error(), "operation not supported") {
			t.Errorf("periph's I2C_RDWR on the stub: %v, want the kernel's EOPNOTSUPP", err)
		} else {
			t.Logf("periph's Tx on an SMBus-only adapter: %v", err)
		}
	}
	want := make([]byte, 40)
	for i := range want {
		want[i] = byte(0xA0 + i)
	}
	if err := bus.Tx(0x76, append([]byte{0x10}, want[:32]...), nil); err != nil {
		t.Fatal(err)
	}
	if err := bus.Tx(0x76, append([]byte{0x30}, want[32:]...), nil); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 40)
	if err := bus.Tx(0x76, []byte{0x10}, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("read back % x, want % x", got, want)
	}
	if err := bus.Tx(0x76, []byte{0x55, 0x7e}, nil); err != nil {
		t.Fatal(err)
	}
	one := make([]byte, 1)
	if err := bus.Tx(0x76, []byte{0x55}, one); err != nil || one[0] != 0x7e {
		t.Errorf("a byte written and read back: %#x, %v", one[0], err)
	}
	err = bus.Tx(0x50, []byte{0x00}, make([]byte, 1))
	if err == nil || !strings.Contains(err.Error(), "address 0x50") || !strings.Contains(err.Error(), stubName) {
		t.Errorf("nothing at 0x50: %v, want an error naming the bus and the address", err)
	}
	t.Logf("nothing at 0x50: %v", err)
}

// TestLabBME280OnTheStub: a BME280 programmed onto the stub at 0x76
// with the BMP280 datasheet's calibration words (and a typical BME280's
// humidity words) and the datasheet's raw readings is read through the
// SMBus mapping, the driver and its compensation: 25.08 °C and
// 100,653 Pa, and the humidity the formula gives; then other raw
// readings, written as a test would, read as they should.
func TestLabBME280OnTheStub(t *testing.T) {
	cal := bme280test.TypicalCalibration()
	cal.T1, cal.T2, cal.T3 = 27504, 26435, -1000
	cal.P1, cal.P2, cal.P3, cal.P4, cal.P5, cal.P6, cal.P7, cal.P8, cal.P9 = 36477, -10685, 3024, 2855, 140, -7, 15500, -14600, 6000
	prog, err := Open(stubName)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	if err := bme280test.Program(prog, 0x76, bme280test.IDBME280, cal); err != nil {
		t.Fatal(err)
	}
	if err := bme280test.SetRawOn(prog, 0x76, 519888, 415148, 30000); err != nil {
		t.Fatal(err)
	}
	bus, err := Open(stubName)
	if err != nil {
		t.Fatal(err)
	}
	s, err := bme280.Open(bus, 0x76, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.HasPrefix(s.Name(), "BME280 at 0x76 on I2C") || !s.Has().Humidity {
		t.Errorf("the sensor: %s %+v", s.Name(), s.Has())
	}
	var e physic.Env
	if err := s.Sense(&e); err != nil {
		t.Fatal(err)
	}
	_, tFine := cal.Temperature(519888)
	wantH := physic.RelativeHumidity(int64(cal.Humidity(30000, tFine)) * int64(physic.PercentRH) / 1024)
	if e.Temperature != physic.ZeroCelsius+25080*physic.MilliCelsius || e.Pressure/physic.Pascal != 100653 || e.Humidity != wantH {
		t.Errorf("read %v, %v, %v; want 25.08°C, 100653 Pa, %v", e.Temperature, e.Pressure, e.Humidity, wantH)
	}
	t.Logf("%s read the datasheet's example: %v, %d Pa, %v", s.Name(), e.Temperature, e.Pressure/physic.Pascal, e.Humidity)

	target := physic.Env{Temperature: physic.ZeroCelsius + 21500*physic.MilliCelsius, Pressure: 101325 * physic.Pascal, Humidity: 45 * physic.PercentRH}
	raw, err := bme280test.RawFor(&cal, target, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := bme280test.SetRawOn(prog, 0x76, raw[0], raw[1], raw[2]); err != nil {
		t.Fatal(err)
	}
	if err := s.Sense(&e); err != nil {
		t.Fatal(err)
	}
	if d := e.Temperature - target.Temperature; d < -10*physic.MilliKelvin || d > 10*physic.MilliKelvin ||
		absP(e.Pressure-target.Pressure) > physic.Pascal || absH(e.Humidity-target.Humidity) > physic.PercentRH/10 {
		t.Errorf("read %v, %v, %v; want %v, %v, %v", e.Temperature, e.Pressure, e.Humidity, target.Temperature, target.Pressure, target.Humidity)
	}
	// Nothing at 0x77: the sensor is absent, not failed.
	bus2, err := Open(stubName)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bme280.Open(bus2, 0x77, nil); !errors.Is(err, bme280.ErrNoAnswer) || !strings.Contains(err.Error(), "nothing answers at 0x77") {
		t.Errorf("nothing at 0x77: %v", err)
	}
}

func absP(p physic.Pressure) physic.Pressure {
	if p < 0 {
		return -p
	}
	return p
}

func absH(h physic.RelativeHumidity) physic.RelativeHumidity {
	if h < 0 {
		return -h
	}
	return h
}
