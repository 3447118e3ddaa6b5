//go:build lab

package sense

import (
	"strings"
	"testing"

	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/i2c"
	"github.com/tobe-body/tobe-body/hal/i2c/bme280"
	"github.com/tobe-body/tobe-body/hal/i2c/bme280/bme280test"
)

// TestLabEnvOnTheI2CStub: the environment channel over a BME280 the test
// programs onto the kernel's i2c-stub (at 0x76, scripts/lab/run.sh),
// read through i2c-dev: the test writes raw readings for a bathroom
// whose humidity rises past 70 %RH, hovers, and falls back below 65; the
// channel emits one env.changed on the way up and one on the way down,
// and env.reading summarises what it read.
func TestLabEnvOnTheI2CStub(t *testing.T) {
	const stub = "SMBus stub driver"
	cal := bme280test.TypicalCalibration()
	prog, err := i2c.Open(stub)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	if err := bme280test.Program(prog, 0x76, bme280test.IDBME280, cal); err != nil {
		t.Fatal(err)
	}
	air := func(rh float64) {
		t.Helper()
		raw, err := bme280test.RawFor(&cal, physic.Env{Temperature: physic.ZeroCelsius + 22*physic.Celsius, Pressure: 101325 * physic.Pascal,
			Humidity: physic.RelativeHumidity(rh * float64(physic.PercentRH))}, true)
		if err != nil {
			t.Fatal(err)
		}
		if err := bme280test.SetRawOn(prog, 0x76, raw[0], raw[1], raw[2]); err != nil {
			t.Fatal(err)
		}
	}
	air(50)
	bus, err := i2c.Open(stub)
	if err != nil {
		t.Fatal(err)
	}
	s, err := bme280.Open(bus, 0x76, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	o := NewOutlet(Source{Channel: "env.bathroom"}, 64)
	c, err := NewEnvChannel(o, s, EnvConfig{Thresholds: []EnvThreshold{{Quantity: QuantityHumidity, Value: 70, Above: true, Hysteresis: 5}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, rh := range []float64{50, 62, 71, 74, 69, 72, 66, 64, 55} {
		air(rh)
		c.read(hal.MonoNow())
		got = append(got, envEvents(t, o)...)
	}
	want := []string{
		"env.changed quantity=humidity_pct crossed=true above=true value=71 threshold=70",
		"env.changed quantity=humidity_pct crossed=false above=true value=64 threshold=70",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var r EnvReading
	c.summarise(hal.MonoNow())
	if ev := envEvents(t, o, &r); len(ev) != 1 || r.Samples != 9 || r.Stats[QuantityHumidity].Max != 74 || r.Stats[QuantityHumidity].Min != 50 ||
		*r.Temperature != 22 || *r.Pressure != 1013.25 || !strings.HasPrefix(r.Sensor, "BME280 at 0x76 on I2C") {
		t.Errorf("the summary: %q %+v", ev, r)
	}
	t.Logf("%s: %s", s.Name(), strings.Join(got, "; "))
}
