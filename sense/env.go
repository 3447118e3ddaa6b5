package sense

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/hal"
)

// The quantities an environment sensor reports, as the payloads and the
// thresholds name them.
const (
	QuantityTemperature = "temperature_c"
	QuantityPressure    = "pressure_hpa"
	QuantityHumidity    = "humidity_pct"
)

// EnvThreshold is a value of a quantity whose crossing env.changed
// reports: Above (a rise to or over Value) or not (a fall to or under
// it). Once crossed, it counts as crossed again only after the quantity
// came back past Value by Hysteresis, so a value hovering at the
// threshold is one event, not a stream.
type EnvThreshold struct {
	Quantity   string
	Value      float64
	Above      bool
	Hysteresis float64
}

func (t EnvThreshold) String() string {
	dir := "below"
	if t.Above {
		dir = "above"
	}
	return fmt.Sprintf("%s %s %g (hysteresis %g)", t.Quantity, dir, t.Value, t.Hysteresis)
}

// EnvConfig is how an environment channel reads and reports.
type EnvConfig struct {
	// Every is how often the sensor is read (10 s when zero).
	Every time.Duration
	// Summary is how often env.reading is emitted (5 min when zero).
	Summary    time.Duration
	Thresholds []EnvThreshold
}

// Validate checks the config and fills in its defaults; the error names
// the threshold.
func (c *EnvConfig) Validate() error {
	if c.Every <= 0 {
		c.Every = 10 * time.Second
	}
	if c.Summary <= 0 {
		c.Summary = 5 * time.Minute
	}
	if c.Summary < c.Every {
		return fmt.Errorf("env: a summary every %v is shorter than a reading every %v", c.Summary, c.Every)
	}
	for i, t := range c.Thresholds {
		switch t.Quantity {
		case QuantityTemperature, QuantityPressure, QuantityHumidity:
		default:
			return fmt.Errorf("env: threshold %d: quantity %q: want %s, %s or %s", i, t.Quantity, QuantityTemperature, QuantityPressure, QuantityHumidity)
		}
		if t.Hysteresis < 0 || math.IsNaN(t.Hysteresis) || math.IsNaN(t.Value) {
			return fmt.Errorf("env: threshold %d (%s): hysteresis and value are numbers, the hysteresis not negative", i, t)
		}
	}
	return nil
}

// Stat is what a summary says of one quantity: the last reading, the
// least, the greatest and the mean over the summary's interval.
type Stat struct {
	Last float64 `cbor:"last" json:"last"`
	Min  float64 `cbor:"min" json:"min"`
	Max  float64 `cbor:"max" json:"max"`
	Mean float64 `cbor:"mean" json:"mean"`
}

// EnvReading is the payload of env.reading: the sensor, its last reading
// at the top (so a wait condition's threshold clause reads it), and each
// quantity's summary since the last env.reading.
type EnvReading struct {
	Sensor      string   `cbor:"sensor" json:"sensor"`
	Temperature *float64 `cbor:"temperature_c,omitempty" json:"temperature_c,omitempty"`
	Pressure    *float64 `cbor:"pressure_hpa,omitempty" json:"pressure_hpa,omitempty"`
	Humidity    *float64 `cbor:"humidity_pct,omitempty" json:"humidity_pct,omitempty"`
	// Over is the summary's interval in seconds; Samples the readings in
	// it and Errors the reads that failed.
	Over    float64         `cbor:"over_s" json:"over_s"`
	Samples int             `cbor:"samples" json:"samples"`
	Errors  int             `cbor:"errors,omitempty" json:"errors,omitempty"`
	Stats   map[string]Stat `cbor:"stats" json:"stats"`
}

// EnvChanged is the payload of env.changed: a quantity crossed a
// threshold (Crossed true: to its side, Above or not) or came back past
// it by the hysteresis (Crossed false).
type EnvChanged struct {
	Sensor     string  `cbor:"sensor" json:"sensor"`
	Quantity   string  `cbor:"quantity" json:"quantity"`
	Value      float64 `cbor:"value" json:"value"`
	Threshold  float64 `cbor:"threshold" json:"threshold"`
	Above      bool    `cbor:"above" json:"above"`
	Crossed    bool    `cbor:"crossed" json:"crossed"`
	Hysteresis float64 `cbor:"hysteresis" json:"hysteresis"`
}

// EnvState hears when a sensor stops answering (online false, with the
// error) and when it answers again.
type EnvState func(online bool, err error)

// lostAfter is how many reads in a row must fail before a sensor counts
// as lost: one bad transfer on a noisy bus is not.
const lostAfter = 3

// EnvChannel reads an environment sensor at an interval and emits
// env.reading at the summary interval and env.changed at each crossing
// of a threshold (the first reading's too, when it starts crossed).
type EnvChannel struct {
	out   *Outlet
	dev   hal.EnvSensor
	cfg   EnvConfig
	state EnvState

	mu      sync.Mutex
	crossed []bool // by threshold
	acc     map[string]*accum
	samples int
	errs    int
	failing int
	lost    bool
	since   time.Time // the summary's interval began (the monotonic reading counts)
}

type accum struct {
	last, min, max, sum float64
	n                   int
}

// NewEnvChannel reads dev into out.
func NewEnvChannel(out *Outlet, dev hal.EnvSensor, cfg EnvConfig, state EnvState) (*EnvChannel, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &EnvChannel{out: out, dev: dev, cfg: cfg, state: state, crossed: make([]bool, len(cfg.Thresholds)), acc: map[string]*accum{}}, nil
}

// Run reads until ctx is done. A sensor that fails lostAfter reads in a
// row is reported lost (EnvState) and read on at the same interval; the
// first good read reports it back. The first good read after the start
// is an env.reading of its own at once (what the air is is known from
// the start, not a summary interval later); after it, each summary is
// taken after the read that completes its interval, so it holds that
// read.
func (c *EnvChannel) Run(ctx context.Context) error {
	t := time.NewTicker(c.cfg.Every)
	defer t.Stop()
	c.mu.Lock()
	c.since = time.Now()
	c.mu.Unlock()
	first := true
	for {
		at := hal.MonoNow()
		c.read(at)
		c.mu.Lock()
		due := time.Since(c.since)+c.cfg.Every/2 >= c.cfg.Summary || first && c.samples > 0
		first = first && c.samples == 0
		c.mu.Unlock()
		if due {
			c.summarise(at)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// values are a reading's quantities the sensor measures.
func values(e *hal.Env, has hal.EnvQuantities) map[string]float64 {
	v := map[string]float64{}
	if has.Temperature {
		v[QuantityTemperature] = round2(e.Temperature.Celsius())
	}
	if has.Pressure {
		v[QuantityPressure] = round2(float64(e.Pressure) / float64(100*physic.Pascal))
	}
	if has.Humidity {
		v[QuantityHumidity] = round2(float64(e.Humidity) / float64(physic.PercentRH))
	}
	return v
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }

// read takes one reading and emits the crossings it makes.
func (c *EnvChannel) read(at hal.Mono) {
	var e hal.Env
	err := c.dev.Sense(&e)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.errs++
		c.failing++
		if c.failing == lostAfter && !c.lost {
			c.lost = true
			if c.state != nil {
				c.state(false, err)
			}
		}
		return
	}
	c.failing = 0
	if c.lost {
		c.lost = false
		if c.state != nil {
			c.state(true, nil)
		}
	}
	c.samples++
	vs := values(&e, c.dev.Has())
	for q, v := range vs {
		a := c.acc[q]
		if a == nil {
			a = &accum{min: v, max: v}
			c.acc[q] = a
		}
		a.last, a.sum, a.n = v, a.sum+v, a.n+1
		a.min, a.max = min(a.min, v), max(a.max, v)
	}
	for i, t := range c.cfg.Thresholds {
		v, ok := vs[t.Quantity]
		if !ok {
			continue
		}
		beyond := v >= t.Value
		back := v < t.Value-t.Hysteresis
		if !t.Above {
			beyond, back = v <= t.Value, v > t.Value+t.Hysteresis
		}
		switch {
		case !c.crossed[i] && beyond:
			c.crossed[i] = true
			c.out.Emit("env.changed", at, 0, EnvChanged{Sensor: c.dev.Name(), Quantity: t.Quantity, Value: v, Threshold: t.Value,
				Above: t.Above, Crossed: true, Hysteresis: t.Hysteresis})
		case c.crossed[i] && back:
			c.crossed[i] = false
			c.out.Emit("env.changed", at, 0, EnvChanged{Sensor: c.dev.Name(), Quantity: t.Quantity, Value: v, Threshold: t.Value,
				Above: t.Above, Crossed: false, Hysteresis: t.Hysteresis})
		}
	}
}

// summarise emits env.reading for what was read since the last one, and
// starts the next interval. An interval with no reading emits nothing:
// the sensor's loss was reported when it came.
func (c *EnvChannel) summarise(at hal.Mono) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if c.samples == 0 {
		c.errs, c.since = 0, now
		return
	}
	r := EnvReading{Sensor: c.dev.Name(), Over: math.Round(now.Sub(c.since).Seconds()), Samples: c.samples, Errors: c.errs, Stats: map[string]Stat{}}
	for q, a := range c.acc {
		last := a.last
		switch q {
		case QuantityTemperature:
			r.Temperature = &last
		case QuantityPressure:
			r.Pressure = &last
		case QuantityHumidity:
			r.Humidity = &last
		}
		r.Stats[q] = Stat{Last: a.last, Min: a.min, Max: a.max, Mean: round2(a.sum / float64(a.n))}
	}
	c.out.Emit("env.reading", at, 0, r)
	clear(c.acc)
	c.samples, c.errs, c.since = 0, 0, now
}
