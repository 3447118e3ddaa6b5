package sense

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/haltest"
	"github.com/tobe-body/tobe-body/ledger"
)

func env(tc, hpa, rh float64) hal.Env {
	return hal.Env{Temperature: physic.ZeroCelsius + physic.Temperature(tc*float64(physic.Celsius)),
		Pressure: physic.Pressure(hpa * 100 * float64(physic.Pascal)), Humidity: physic.RelativeHumidity(rh * float64(physic.PercentRH))}
}

// envEvents drains o as "type key=value ..." lines; the env.reading
// payloads go to readings when it is not nil.
func envEvents(t *testing.T, o *Outlet, readings ...*EnvReading) []string {
	t.Helper()
	var got []string
	for len(o.q) > 0 {
		ev := (<-o.q).ev
		if ev.Type == "env.reading" && len(readings) > 0 {
			if err := ledger.UnmarshalPayload(ev.Payload, readings[0]); err != nil {
				t.Fatal(err)
			}
		}
		var p map[string]any
		if err := ledger.UnmarshalPayload(ev.Payload, &p); err != nil {
			t.Fatal(err)
		}
		s := ev.Type
		for _, k := range []string{"quantity", "crossed", "above", "value", "threshold", "humidity_pct", "temperature_c", "pressure_hpa", "samples", "errors"} {
			if v, ok := p[k]; ok {
				s += fmt.Sprintf(" %s=%v", k, v)
			}
		}
		got = append(got, s)
	}
	return got
}

// TestEnvChannelHysteresis: a bathroom's humidity rising past 70 %RH is
// one env.changed, however it hovers there; it comes back only below 65;
// a threshold below a value works the mirror way; a reading that starts
// crossed says so at once.
func TestEnvChannelHysteresis(t *testing.T) {
	o := NewOutlet(Source{Channel: "env.bathroom"}, 64)
	dev := haltest.NewEnv("BME280 at 0x76 on I2C1", hal.EnvQuantities{Temperature: true, Pressure: true, Humidity: true})
	c, err := NewEnvChannel(o, dev, EnvConfig{Every: time.Second, Summary: time.Minute, Thresholds: []EnvThreshold{
		{Quantity: QuantityHumidity, Value: 70, Above: true, Hysteresis: 5},
		{Quantity: QuantityTemperature, Value: 10, Above: false, Hysteresis: 1},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name string
		rh   float64
		tc   float64
		want []string
	}{
		{"dry and warm", 45, 21, nil},
		{"a shower", 71.2, 22, []string{"env.changed quantity=humidity_pct crossed=true above=true value=71.2 threshold=70"}},
		{"hovering over", 69.5, 22, nil},
		{"and back over", 74, 22, nil},
		{"down, inside the hysteresis", 66, 22, nil},
		{"dry again", 64.9, 22, []string{"env.changed quantity=humidity_pct crossed=false above=true value=64.9 threshold=70"}},
		{"a window open in winter", 50, 9.8, []string{"env.changed quantity=temperature_c crossed=true above=false value=9.8 threshold=10"}},
		{"warming, inside the hysteresis", 50, 10.9, nil},
		{"warm", 50, 11.2, []string{"env.changed quantity=temperature_c crossed=false above=false value=11.2 threshold=10"}},
	} {
		dev.Set(env(step.tc, 1013.25, step.rh))
		c.read(hal.MonoNow())
		if got := envEvents(t, o); strings.Join(got, "\n") != strings.Join(step.want, "\n") {
			t.Errorf("%s: got %q, want %q", step.name, got, step.want)
		}
	}

	// A channel whose first reading is already past a threshold says so.
	o2 := NewOutlet(Source{Channel: "env.bathroom"}, 64)
	c2, _ := NewEnvChannel(o2, dev, EnvConfig{Thresholds: []EnvThreshold{{Quantity: QuantityHumidity, Value: 70, Above: true, Hysteresis: 5}}}, nil)
	dev.Set(env(21, 1013.25, 80))
	c2.read(hal.MonoNow())
	if got := envEvents(t, o2); len(got) != 1 || !strings.HasPrefix(got[0], "env.changed quantity=humidity_pct crossed=true") {
		t.Errorf("starting crossed: %q", got)
	}
}

// TestEnvChannelSummaries: env.reading of the first read at once, then
// every summary interval, with the last value at the top and each
// quantity's least, greatest and mean;
// a sensor without humidity reports none; failed reads are counted, three
// in a row report the sensor lost, and the next good read back; an
// interval with no good read emits nothing.
func TestEnvChannelSummaries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := NewOutlet(Source{Channel: "env.hall"}, 64)
		dev := haltest.NewEnv("BMP280 at 0x77 on I2C1", hal.EnvQuantities{Temperature: true, Pressure: true})
		var states []string
		c, err := NewEnvChannel(o, dev, EnvConfig{Every: 10 * time.Second, Summary: time.Minute}, func(online bool, err error) {
			states = append(states, fmt.Sprintf("%v %v", online, err))
		})
		if err != nil {
			t.Fatal(err)
		}
		dev.Set(env(20, 1000, 0))
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		synctest.Wait()
		if got := envEvents(t, o); len(got) != 1 || got[0] != "env.reading temperature_c=20 pressure_hpa=1000 samples=1" {
			t.Fatalf("at the start: %q, want the first read at once", got)
		}
		// Values change between reads (at 5, 15, ... 45 s), so which a
		// read sees does not depend on the order of two goroutines.
		time.Sleep(5 * time.Second)
		for i, tc := range []float64{21, 22, 23, 24, 25} {
			dev.Set(env(tc, 1000+float64(i), 0))
			time.Sleep(10 * time.Second)
			synctest.Wait()
		}
		time.Sleep(5 * time.Second) // 60 s: the read, and the summary
		synctest.Wait()
		var r EnvReading
		got := envEvents(t, o, &r)
		if len(got) != 1 || got[0] != "env.reading temperature_c=25 pressure_hpa=1004 samples=6" {
			t.Fatalf("the first summary: %q", got)
		}
		// Six reads after the first, at 10, 20, ... 60 s: 21, 22, 23, 24,
		// 25 and 25 °C; 1000, 1001, 1002, 1003, 1004 and 1004 hPa.
		if st := r.Stats[QuantityTemperature]; st != (Stat{Last: 25, Min: 21, Max: 25, Mean: 23.33}) || r.Over != 60 || r.Humidity != nil ||
			r.Stats[QuantityPressure] != (Stat{Last: 1004, Min: 1000, Max: 1004, Mean: 1002.33}) || r.Sensor != "BMP280 at 0x77 on I2C1" {
			t.Errorf("the first summary: %+v", r)
		}
		dev.Fail(errors.New("I2C1 address 0x77: remote I/O error"))
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if len(states) != 1 || states[0] != "false I2C1 address 0x77: remote I/O error" {
			t.Errorf("after three failed reads: %q", states)
		}
		time.Sleep(30 * time.Second) // 120 s: a summary of no good read
		synctest.Wait()
		if got := envEvents(t, o); len(got) != 0 {
			t.Errorf("a summary with no reading: %q", got)
		}
		dev.Set(env(19, 990, 0))
		time.Sleep(60 * time.Second)
		synctest.Wait()
		got = envEvents(t, o)
		if len(states) != 2 || states[1] != "true <nil>" || len(got) != 1 || got[0] != "env.reading temperature_c=19 pressure_hpa=990 samples=6" {
			t.Errorf("back: states %q, events %q", states, got)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

func TestEnvConfigRefused(t *testing.T) {
	for _, c := range []struct {
		cfg  EnvConfig
		says string
	}{
		{EnvConfig{Thresholds: []EnvThreshold{{Quantity: "lux", Value: 3}}}, `threshold 0: quantity "lux"`},
		{EnvConfig{Thresholds: []EnvThreshold{{Quantity: QuantityHumidity, Value: 70, Hysteresis: -1}}}, "threshold 0 (humidity_pct below 70 (hysteresis -1))"},
		{EnvConfig{Every: time.Minute, Summary: time.Second}, "shorter than a reading"},
	} {
		if err := c.cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%+v: got %v, want %q", c.cfg, err, c.says)
		}
	}
}
