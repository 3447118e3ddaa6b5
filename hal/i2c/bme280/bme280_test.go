package bme280_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"periph.io/x/conn/v3/i2c"
	"periph.io/x/conn/v3/i2c/i2ctest"
	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/hal/i2c/bme280"
	"github.com/tobe-body/tobe-body/hal/i2c/bme280/bme280test"
)

// sleeps records the waits a Dev asks for, in place of time.Sleep.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.d = append(s.d, d)
}

// take returns the waits so far and forgets them.
func (s *sleeps) take() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.d
	s.d = nil
	return d
}

// rig is a Dev on a fake chip, with its bus recorded and its waits
// injected.
type rig struct {
	chip   *bme280test.Chip
	rec    *i2ctest.Record
	sleeps *sleeps
	dev    *bme280.Dev
}

func newRig(t *testing.T, chip *bme280test.Chip, o *bme280.Opts) *rig {
	t.Helper()
	r := &rig{chip: chip, rec: &i2ctest.Record{Bus: chip}, sleeps: &sleeps{}}
	dev, err := bme280.NewWithSleep(&i2c.Dev{Bus: r.rec, Addr: bme280test.DefaultAddr}, o, r.sleeps.sleep)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	r.dev = dev
	return r
}

// ops returns the transactions recorded so far and forgets them.
func (r *rig) ops() []i2ctest.IO {
	r.rec.Lock()
	defer r.rec.Unlock()
	ops := r.rec.Ops
	r.rec.Ops = nil
	return ops
}

func typical() bme280.Calibration { return bme280test.TypicalCalibration() }

func newBME280() *bme280test.Chip { return bme280test.NewBME280(typical()) }

func TestNewChipID(t *testing.T) {
	for _, tc := range []struct {
		name    string
		id      byte
		want    bme280.Chip
		wantErr string
	}{
		{"BME280", 0x60, bme280.BME280, ""},
		{"BMP280", 0x58, bme280.BMP280, ""},
		{"BMP280 sample 0x57", 0x57, bme280.BMP280, ""},
		{"BMP280 sample 0x56", 0x56, bme280.BMP280, ""},
		{"BME680", 0x61, 0, "bme280 bme280test 0x76: chip id 0x61, want 0x60 (BME280) or 0x56, 0x57, 0x58 (BMP280)"},
		{"BMP180", 0x55, 0, "chip id 0x55"},
		{"nothing driving the bus", 0xFF, 0, "chip id 0xff"},
		{"zero", 0x00, 0, "chip id 0x00"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chip := bme280test.New(bme280test.DefaultAddr, tc.id, typical())
			dev, err := bme280.NewWithSleep(&i2c.Dev{Bus: chip, Addr: bme280test.DefaultAddr}, nil, (&sleeps{}).sleep)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, bme280.ErrUnknownChip) {
					t.Fatalf("got %v, want an ErrUnknownChip error with %q", err, tc.wantErr)
				}
				if errors.Is(err, bme280.ErrNoAnswer) {
					t.Errorf("got %v, want it not to be ErrNoAnswer: something answered", err)
				}
				if w := chip.Writes(); len(w) != 0 {
					t.Errorf("got writes %v to a chip refused, want none", w)
				}
				return
			}
			if err != nil {
				t.Fatalf("got %v, want no error", err)
			}
			if got := dev.Chip(); got != tc.want {
				t.Errorf("got chip %v, want %v", got, tc.want)
			}
			if got, want := dev.HasHumidity(), tc.want == bme280.BME280; got != want {
				t.Errorf("got HasHumidity %v, want %v", got, want)
			}
		})
	}
}

func TestNewNoAnswer(t *testing.T) {
	nack := errors.New("remote I/O error")
	for _, tc := range []struct {
		name  string
		chip  func() *bme280test.Chip
		addr  uint16
		inner error
	}{
		{"bus fails", func() *bme280test.Chip {
			c := bme280test.NewBME280(typical())
			c.SetFail(nack)
			return c
		}, bme280test.DefaultAddr, nack},
		{"nothing at the address", func() *bme280test.Chip { return bme280test.NewBME280(typical()) }, 0x77, bme280test.ErrNoDevice},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chip := tc.chip()
			_, err := bme280.NewWithSleep(&i2c.Dev{Bus: chip, Addr: tc.addr}, nil, (&sleeps{}).sleep)
			if !errors.Is(err, bme280.ErrNoAnswer) || !errors.Is(err, tc.inner) {
				t.Fatalf("got %v, want an error that is ErrNoAnswer and %v", err, tc.inner)
			}
			if want := fmt.Sprintf("bme280test 0x%02x: read chip id", tc.addr); !strings.Contains(err.Error(), want) {
				t.Errorf("got %q, want it to name %q", err, want)
			}
			if got := chip.Transactions(); got != 1 {
				t.Errorf("got %d transactions, want 1", got)
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	fail := errors.New("bus gone")
	if _, err := bme280.New(nil, nil); err == nil {
		t.Errorf("New(nil): got no error, want one")
	}
	if _, err := bme280.New(&i2c.Dev{}, nil); err == nil {
		t.Errorf("New without a bus: got no error, want one")
	}
	bad := bme280.DefaultOpts
	bad.Pressure = 3
	if _, err := bme280.New(&i2c.Dev{Bus: bme280test.NewBME280(typical()), Addr: 0x76}, &bad); err == nil || !strings.Contains(err.Error(), "Opts.Pressure") {
		t.Errorf("New with bad opts: got %v, want an error naming Opts.Pressure", err)
	}
	for _, tc := range []struct {
		name     string
		failFrom int // the transaction that fails first, from 1
		want     string
	}{
		{"soft reset", 2, "bme280test 0x76: soft reset: bus gone"},
		{"reset status", 3, "soft reset: read status: bus gone"},
		{"calibration", 4, "read calibration: bus gone"},
		{"humidity calibration", 5, "read humidity calibration: bus gone"},
		{"config", 6, "configure: write config: bus gone"},
		{"ctrl_hum", 7, "configure: write ctrl_hum: bus gone"},
		{"ctrl_meas", 8, "configure: write ctrl_meas: bus gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bus := &failingBus{Bus: bme280test.NewBME280(typical()), from: tc.failFrom, err: fail}
			_, err := bme280.NewWithSleep(&i2c.Dev{Bus: bus, Addr: 0x76}, nil, (&sleeps{}).sleep)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, fail) {
				t.Fatalf("got %v, want an error with %q that wraps %v", err, tc.want, fail)
			}
			if errors.Is(err, bme280.ErrNoAnswer) {
				t.Errorf("got %v, want it not to be ErrNoAnswer", err)
			}
		})
	}
}

// failingBus fails every transaction from the from'th on.
type failingBus struct {
	i2c.Bus
	mu   sync.Mutex
	n    int
	from int
	err  error
}

func (b *failingBus) Tx(addr uint16, w, r []byte) error {
	b.mu.Lock()
	b.n++
	fail := b.n >= b.from
	b.mu.Unlock()
	if fail {
		return b.err
	}
	return b.Bus.Tx(addr, w, r)
}

func TestNewReset(t *testing.T) {
	for _, tc := range []struct {
		name      string
		busy      int // status reads showing im_update
		silent    int // transactions failing after the reset
		wantSleep []time.Duration
		wantErr   string
	}{
		{"at once", 0, 0, []time.Duration{2 * time.Millisecond}, ""},
		{"copying", 3, 0, []time.Duration{2 * time.Millisecond, time.Millisecond, time.Millisecond, time.Millisecond}, ""},
		{"silent in start-up", 0, 2, []time.Duration{2 * time.Millisecond, time.Millisecond, time.Millisecond}, ""},
		{"silent then copying", 1, 1, []time.Duration{2 * time.Millisecond, time.Millisecond, time.Millisecond}, ""},
		{"copy never ends", 100, 0, nil, "soft reset: calibration copy (status im_update) still running after 10 polls"},
		{"never answers again", 0, 100, nil, "soft reset: read status: bme280test: tx to 0x76 during start-up"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chip := bme280test.NewBME280(typical())
			chip.SetResetBusy(tc.busy)
			chip.SetResetSilence(tc.silent)
			s := &sleeps{}
			_, err := bme280.NewWithSleep(&i2c.Dev{Bus: chip, Addr: 0x76}, nil, s.sleep)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("got %v, want no error", err)
			}
			if got := s.take(); fmt.Sprint(got) != fmt.Sprint(tc.wantSleep) {
				t.Errorf("got waits %v, want %v", got, tc.wantSleep)
			}
		})
	}
}

func TestNewCalibration(t *testing.T) {
	cal := typical()
	noH := cal
	noH.H1, noH.H2, noH.H3, noH.H4, noH.H5, noH.H6 = 0, 0, 0, 0, 0, 0
	for _, tc := range []struct {
		name string
		chip *bme280test.Chip
		want bme280.Calibration
		// reads is the calibration reads: register and length.
		reads [][2]int
	}{
		{"BME280", bme280test.NewBME280(cal), cal, [][2]int{{0x88, 26}, {0xE1, 7}}},
		{"BMP280", bme280test.NewBMP280(cal), noH, [][2]int{{0x88, 26}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.chip, nil)
			if got := r.dev.Calibration(); got != tc.want {
				t.Errorf("got calibration %+v, want %+v", got, tc.want)
			}
			var reads [][2]int
			for _, op := range r.ops() {
				if len(op.R) > 1 {
					reads = append(reads, [2]int{int(op.W[0]), len(op.R)})
				}
			}
			if fmt.Sprint(reads) != fmt.Sprint(tc.reads) {
				t.Errorf("got calibration reads %v, want %v", reads, tc.reads)
			}
		})
	}
}

// TestTransactions checks the shape of every transaction: a register
// write is two bytes and nothing read; a read writes the register alone
// and reads at most 32 bytes.
func TestTransactions(t *testing.T) {
	for _, chip := range []*bme280test.Chip{bme280test.NewBME280(typical()), bme280test.NewBMP280(typical())} {
		for _, mode := range []bme280.Mode{bme280.Forced, bme280.Normal} {
			t.Run(fmt.Sprint(chip.Reg(0xD0), mode), func(t *testing.T) {
				o := bme280.DefaultOpts
				o.Mode = mode
				r := newRig(t, chip, &o)
				var e physic.Env
				for range 3 {
					if err := r.dev.Sense(&e); err != nil {
						t.Fatal(err)
					}
				}
				if err := r.dev.Halt(); err != nil {
					t.Fatal(err)
				}
				for _, op := range r.ops() {
					write := len(op.W) == 2 && len(op.R) == 0
					read := len(op.W) == 1 && len(op.R) >= 1 && len(op.R) <= 32
					if !write && !read || op.Addr != 0x76 {
						t.Errorf("got transaction %+v, want a 2-byte write or a 1-byte write and a read of 1 to 32 bytes, at 0x76", op)
					}
				}
			})
		}
	}
}

func TestConfigure(t *testing.T) {
	W := func(reg, v byte) bme280test.Write { return bme280test.Write{Reg: reg, Value: v} }
	reset := W(0xE0, 0xB6)
	for _, tc := range []struct {
		name        string
		chip        *bme280test.Chip
		opts        bme280.Opts
		want        []bme280test.Write
		wantStandby time.Duration
	}{
		{"BME280 default", bme280test.NewBME280(typical()), bme280.DefaultOpts,
			[]bme280test.Write{reset, W(0xF5, 0x00), W(0xF2, 0x01), W(0xF4, 0x24)}, 0},
		{"BME280 x16 filter 16", bme280test.NewBME280(typical()), bme280.Opts{Temperature: 16, Pressure: 16, Humidity: 16, Filter: 16},
			[]bme280test.Write{reset, W(0xF5, 0x10), W(0xF2, 0x05), W(0xF4, 0xB4)}, 0},
		{"BME280 pressure and humidity skipped", bme280test.NewBME280(typical()), bme280.Opts{Temperature: 2, Filter: 4},
			[]bme280test.Write{reset, W(0xF5, 0x08), W(0xF2, 0x00), W(0xF4, 0x40)}, 0},
		// 70 ms is nearest 62.5 ms (t_sb 001); normal mode starts last.
		{"BME280 normal", bme280test.NewBME280(typical()), bme280.Opts{Temperature: 1, Pressure: 4, Humidity: 1, Filter: 2, Mode: bme280.Normal, Standby: 70 * time.Millisecond},
			[]bme280test.Write{reset, W(0xF5, 0x24), W(0xF2, 0x01), W(0xF4, 0x2F)}, 62500 * time.Microsecond},
		// 15 ms lies halfway between 10 ms (t_sb 110) and 20 ms (111):
		// the shorter wins.
		{"BME280 normal 15 ms", bme280test.NewBME280(typical()), bme280.Opts{Temperature: 1, Mode: bme280.Normal, Standby: 15 * time.Millisecond},
			[]bme280test.Write{reset, W(0xF5, 0xC0), W(0xF2, 0x00), W(0xF4, 0x23)}, 10 * time.Millisecond},
		// A BMP280 has no ctrl_hum, and 3 s is between its 2 s (110) and
		// 4 s (111).
		{"BMP280 normal 3 s", bme280test.NewBMP280(typical()), bme280.Opts{Temperature: 1, Pressure: 1, Humidity: 1, Mode: bme280.Normal, Standby: 3 * time.Second},
			[]bme280test.Write{reset, W(0xF5, 0xC0), W(0xF4, 0x27)}, 2 * time.Second},
		{"BMP280 long standby", bme280test.NewBMP280(typical()), bme280.Opts{Temperature: 1, Mode: bme280.Normal, Standby: time.Minute},
			[]bme280test.Write{reset, W(0xF5, 0xE0), W(0xF4, 0x23)}, 4 * time.Second},
		{"BMP280 default", bme280test.NewBMP280(typical()), bme280.DefaultOpts,
			[]bme280test.Write{reset, W(0xF5, 0x00), W(0xF4, 0x24)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.chip, &tc.opts)
			if got := tc.chip.Writes(); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got writes %v, want %v", got, tc.want)
			}
			if got := r.dev.Opts().Standby; got != tc.wantStandby {
				t.Errorf("got standby %v, want %v", got, tc.wantStandby)
			}
		})
	}
}

// TestCtrlHumBeforeCtrlMeas checks that ctrl_hum is written before the
// ctrl_meas write that makes it take effect. In Normal mode the driver
// writes ctrl_meas once, at New, so a late ctrl_hum would leave humidity
// skipped for good.
func TestCtrlHumBeforeCtrlMeas(t *testing.T) {
	for _, mode := range []bme280.Mode{bme280.Forced, bme280.Normal} {
		t.Run(mode.String(), func(t *testing.T) {
			chip := bme280test.NewBME280(typical())
			if err := chip.SetEnv(physic.Env{Temperature: physic.ZeroCelsius + 20*physic.Celsius, Pressure: 100 * physic.KiloPascal, Humidity: 50 * physic.PercentRH}); err != nil {
				t.Fatal(err)
			}
			o := bme280.DefaultOpts
			o.Mode = mode
			r := newRig(t, chip, &o)
			var e physic.Env
			if err := r.dev.Sense(&e); err != nil {
				t.Fatal(err)
			}
			hum, meas := -1, -1
			for i, w := range chip.Writes() {
				switch w.Reg {
				case 0xF2:
					hum = i
				case 0xF4:
					if meas < 0 {
						meas = i
					}
				}
			}
			if hum < 0 || meas < 0 || hum > meas {
				t.Errorf("got ctrl_hum at write %d and the first ctrl_meas at %d (%v), want ctrl_hum first", hum, meas, chip.Writes())
			}
			if d := e.Humidity - 50*physic.PercentRH; d < -physic.PercentRH/10 || d > physic.PercentRH/10 {
				t.Errorf("got humidity %v, want 50%%rH: the chip took ctrl_hum", e.Humidity)
			}
		})
	}
}

func TestSenseForcedWait(t *testing.T) {
	for _, tc := range []struct {
		name string
		chip func() *bme280test.Chip
		opts bme280.Opts
		want time.Duration
	}{
		// 1.25 + 2.3 + (2.3+0.575) + (2.3+0.575) ms.
		{"BME280 x1 x1 x1", func() *bme280test.Chip { return bme280test.NewBME280(typical()) }, bme280.Opts{Temperature: 1, Pressure: 1, Humidity: 1}, 9300 * time.Microsecond},
		// 1.25 + 36.8 + (36.8+0.575) + (36.8+0.575) ms.
		{"BME280 x16 x16 x16", func() *bme280test.Chip { return bme280test.NewBME280(typical()) }, bme280.Opts{Temperature: 16, Pressure: 16, Humidity: 16}, 112800 * time.Microsecond},
		// 1.25 + 4.6 + (36.8+0.575) ms: the BMP280 datasheet's 43.2 ms
		// for ultra high resolution.
		{"BME280 x2 x16 skip", func() *bme280test.Chip { return bme280test.NewBME280(typical()) }, bme280.Opts{Temperature: 2, Pressure: 16}, 43225 * time.Microsecond},
		{"BME280 temperature only", func() *bme280test.Chip { return bme280test.NewBME280(typical()) }, bme280.Opts{Temperature: 1}, 3550 * time.Microsecond},
		// No humidity on a BMP280, whatever Opts says: 1.25 + 2.3 +
		// 2.875 ms, the datasheet's 6.4 ms for ultra low power.
		{"BMP280 x1 x1", func() *bme280test.Chip { return bme280test.NewBMP280(typical()) }, bme280.Opts{Temperature: 1, Pressure: 1, Humidity: 1}, 6425 * time.Microsecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.chip(), &tc.opts)
			if got := r.dev.MeasureTime(); got != tc.want {
				t.Errorf("got MeasureTime %v, want %v", got, tc.want)
			}
			r.sleeps.take()
			var e physic.Env
			for i := range 2 {
				if err := r.dev.Sense(&e); err != nil {
					t.Fatal(err)
				}
				if got := r.sleeps.take(); len(got) != 1 || got[0] != tc.want {
					t.Errorf("Sense %d: got waits %v, want [%v]", i, got, tc.want)
				}
			}
		})
	}
}

func TestSenseForcedPolls(t *testing.T) {
	for _, tc := range []struct {
		name      string
		measuring int // status reads showing the measurement running
		wantPolls int // status reads
		wantWaits int // waits after the first
		wantErr   string
	}{
		{"done at once", 0, 1, 0, ""},
		{"three more", 3, 4, 3, ""},
		{"twenty polls", 19, 20, 19, ""},
		{"never done", 20, 20, 19, "wait for measurement: status still measuring 20ms after the datasheet's 9.3ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chip := bme280test.NewBME280(typical())
			r := newRig(t, chip, nil)
			if err := chip.SetEnv(physic.Env{Temperature: physic.ZeroCelsius + 20*physic.Celsius, Pressure: 100 * physic.KiloPascal, Humidity: 50 * physic.PercentRH}); err != nil {
				t.Fatal(err)
			}
			chip.SetMeasuring(tc.measuring)
			r.ops()
			r.sleeps.take()
			var e physic.Env
			err := r.dev.Sense(&e)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("got %v, want no error", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("got %v, want an error with %q", err, tc.wantErr)
			}
			polls := 0
			for _, op := range r.ops() {
				if len(op.W) == 1 && op.W[0] == 0xF3 {
					polls++
				}
			}
			if polls != tc.wantPolls {
				t.Errorf("got %d status reads, want %d", polls, tc.wantPolls)
			}
			waits := r.sleeps.take()
			if len(waits) != 1+tc.wantWaits {
				t.Fatalf("got waits %v, want the measurement time and %d of 1ms", waits, tc.wantWaits)
			}
			for _, w := range waits[1:] {
				if w != time.Millisecond {
					t.Errorf("got waits %v, want 1ms between polls", waits)
					break
				}
			}
			if err == nil && e.Humidity == 0 {
				t.Errorf("got %+v, want a reading", e)
			}
		})
	}
}

func TestSenseNormal(t *testing.T) {
	chip := bme280test.NewBME280(typical())
	o := bme280.DefaultOpts
	o.Mode = bme280.Normal
	r := newRig(t, chip, &o)
	if got := r.sleeps.take(); len(got) != 2 || got[1] != 9300*time.Microsecond {
		t.Errorf("got waits %v at New, want the reset's and then the first measurement's 9.3ms", got)
	}
	r.ops()
	writes := len(chip.Writes())
	for i, temp := range []physic.Temperature{10, 20, 30} {
		want := physic.ZeroCelsius + temp*physic.Celsius
		if err := chip.SetEnv(physic.Env{Temperature: want, Pressure: 100 * physic.KiloPascal, Humidity: 50 * physic.PercentRH}); err != nil {
			t.Fatal(err)
		}
		var e physic.Env
		if err := r.dev.Sense(&e); err != nil {
			t.Fatal(err)
		}
		if e.Temperature != want {
			t.Errorf("Sense %d: got %v, want %v", i, e.Temperature, want)
		}
		if ops := r.ops(); len(ops) != 1 || ops[0].W[0] != 0xF7 || len(ops[0].R) != 8 {
			t.Errorf("Sense %d: got transactions %+v, want one read of 8 bytes at 0xF7", i, ops)
		}
	}
	if got := r.sleeps.take(); len(got) != 0 {
		t.Errorf("got waits %v in normal mode, want none", got)
	}
	if got := chip.Writes()[writes:]; len(got) != 0 {
		t.Errorf("got writes %v in normal mode, want none", got)
	}
}

func TestHalt(t *testing.T) {
	for _, mode := range []bme280.Mode{bme280.Forced, bme280.Normal} {
		t.Run(mode.String(), func(t *testing.T) {
			chip := bme280test.NewBME280(typical())
			o := bme280.DefaultOpts
			o.Mode = mode
			r := newRig(t, chip, &o)
			var e physic.Env
			if err := r.dev.Sense(&e); err != nil {
				t.Fatal(err)
			}
			before := len(chip.Writes())
			if err := r.dev.Halt(); err != nil {
				t.Fatal(err)
			}
			if got, want := chip.Writes()[before:], []bme280test.Write{{Reg: 0xF4, Value: 0x24}}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("got writes %v at Halt, want %v (sleep mode)", got, want)
			}
			if got := chip.Reg(0xF4) & 3; got != 0 {
				t.Errorf("got mode %02b after Halt, want 00", got)
			}
			// A Sense after Halt wakes the chip and waits for a result.
			r.sleeps.take()
			if err := r.dev.Sense(&e); err != nil {
				t.Fatal(err)
			}
			if got := r.sleeps.take(); len(got) != 1 || got[0] != 9300*time.Microsecond {
				t.Errorf("got waits %v at the Sense after Halt, want [9.3ms]", got)
			}
			wantMode := byte(0) // back asleep after the forced measurement
			if mode == bme280.Normal {
				wantMode = 3
			}
			if got := chip.Reg(0xF4) & 3; got != wantMode {
				t.Errorf("got mode %02b after the Sense, want %02b", got, wantMode)
			}
		})
	}
}

func TestHaltBusError(t *testing.T) {
	chip := bme280test.NewBME280(typical())
	r := newRig(t, chip, nil)
	chip.SetFail(errors.New("bus gone"))
	if err := r.dev.Halt(); err == nil || !strings.Contains(err.Error(), "halt: write ctrl_meas: bus gone") {
		t.Errorf("got %v, want an error naming halt", err)
	}
}

func TestSenseSkipped(t *testing.T) {
	env := physic.Env{Temperature: physic.ZeroCelsius + 20*physic.Celsius, Pressure: 100 * physic.KiloPascal, Humidity: 50 * physic.PercentRH}
	for _, tc := range []struct {
		name    string
		chip    func() *bme280test.Chip
		opts    bme280.Opts
		skip    [3]bool // temperature, pressure, humidity read as skipped
		wantErr []string
		want    [3]bool // temperature, pressure, humidity set
	}{
		{"none", newBME280, bme280.DefaultOpts, [3]bool{}, nil, [3]bool{true, true, true}},
		{"temperature", newBME280, bme280.DefaultOpts, [3]bool{true, false, false}, []string{"temperature read as skipped (0x80000), and pressure and humidity need it"}, [3]bool{}},
		{"pressure", newBME280, bme280.DefaultOpts, [3]bool{false, true, false}, []string{"sense: pressure read as skipped (0x80000)"}, [3]bool{true, false, true}},
		{"humidity", newBME280, bme280.DefaultOpts, [3]bool{false, false, true}, []string{"sense: humidity read as skipped (0x8000)"}, [3]bool{true, true, false}},
		{"pressure and humidity", newBME280, bme280.DefaultOpts, [3]bool{false, true, true}, []string{"pressure read as skipped", "humidity read as skipped"}, [3]bool{true, false, false}},
		// Skipped on purpose: no error, the fields are zero.
		{"configured off", newBME280, bme280.Opts{Temperature: 1}, [3]bool{}, nil, [3]bool{true, false, false}},
		{"BMP280", func() *bme280test.Chip { return bme280test.NewBMP280(typical()) }, bme280.DefaultOpts, [3]bool{}, nil, [3]bool{true, true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chip := tc.chip()
			r := newRig(t, chip, &tc.opts)
			if err := chip.SetEnv(env); err != nil {
				t.Fatal(err)
			}
			rt, rp, rh := chip.Raw()
			if tc.skip[0] {
				rt = bme280.SkippedTP
			}
			if tc.skip[1] {
				rp = bme280.SkippedTP
			}
			if tc.skip[2] {
				rh = bme280.SkippedH
			}
			chip.SetRaw(rt, rp, rh)
			// Stale values in e must not survive.
			e := physic.Env{Temperature: 1, Pressure: 1, Humidity: 1}
			err := r.dev.Sense(&e)
			if tc.wantErr == nil && err != nil {
				t.Fatalf("got %v, want no error", err)
			}
			if tc.wantErr != nil {
				if !errors.Is(err, bme280.ErrSkipped) {
					t.Fatalf("got %v, want ErrSkipped", err)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("got %q, want it to contain %q", err, w)
					}
				}
			}
			got := [3]bool{e.Temperature != 0, e.Pressure != 0, e.Humidity != 0}
			if got != tc.want {
				t.Errorf("got %+v (fields set %v), want fields set %v", e, got, tc.want)
			}
		})
	}
}

func TestSenseCalibrationError(t *testing.T) {
	cal := typical()
	cal.P1 = 0
	chip := bme280test.NewBME280(cal)
	r := newRig(t, chip, nil)
	chip.SetRaw(519888, 415148, 30000)
	var e physic.Env
	err := r.dev.Sense(&e)
	if !errors.Is(err, bme280.ErrCalibration) || !strings.Contains(err.Error(), "pressure") {
		t.Fatalf("got %v, want ErrCalibration naming pressure", err)
	}
	if e.Pressure != 0 || e.Temperature == 0 || e.Humidity == 0 {
		t.Errorf("got %+v, want temperature and humidity but no pressure", e)
	}
}

func TestSenseBusError(t *testing.T) {
	chip := bme280test.NewBME280(typical())
	r := newRig(t, chip, nil)
	fail := errors.New("bus gone")
	chip.SetFail(fail)
	e := physic.Env{Temperature: 1, Pressure: 2, Humidity: 3}
	err := r.dev.Sense(&e)
	if !errors.Is(err, fail) || !strings.Contains(err.Error(), "bme280 record 0x76: start measurement: write ctrl_meas") {
		t.Errorf("got %v, want an error naming the bus, the address and the operation", err)
	}
	if e != (physic.Env{Temperature: 1, Pressure: 2, Humidity: 3}) {
		t.Errorf("got %+v after a bus error, want e unchanged", e)
	}
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		chip func() *bme280test.Chip
		opts bme280.Opts
		env  physic.Env
	}{
		{"BME280 room", newBME280, bme280.DefaultOpts,
			physic.Env{Temperature: physic.ZeroCelsius + 21500*physic.MilliCelsius, Pressure: 101325 * physic.Pascal, Humidity: 45 * physic.PercentRH}},
		{"BME280 cold dry high", newBME280, bme280.Opts{Temperature: 16, Pressure: 16, Humidity: 16, Filter: 4},
			physic.Env{Temperature: physic.ZeroCelsius - 35*physic.Celsius, Pressure: 45 * physic.KiloPascal, Humidity: 3 * physic.PercentRH}},
		{"BME280 hot wet low", newBME280, bme280.Opts{Temperature: 2, Pressure: 8, Humidity: 4, Mode: bme280.Normal},
			physic.Env{Temperature: physic.ZeroCelsius + 80*physic.Celsius, Pressure: 108 * physic.KiloPascal, Humidity: 97 * physic.PercentRH}},
		{"BME280 saturated", newBME280, bme280.DefaultOpts,
			physic.Env{Temperature: physic.ZeroCelsius + 15*physic.Celsius, Pressure: 100 * physic.KiloPascal, Humidity: 100 * physic.PercentRH}},
		{"BMP280 room", func() *bme280test.Chip { return bme280test.NewBMP280(typical()) }, bme280.DefaultOpts,
			physic.Env{Temperature: physic.ZeroCelsius + 21500*physic.MilliCelsius, Pressure: 101325 * physic.Pascal}},
		{"BMP280 datasheet calibration", func() *bme280test.Chip {
			return bme280test.NewBMP280(bme280.Calibration{T1: 27504, T2: 26435, T3: -1000, P1: 36477, P2: -10685, P3: 3024, P4: 2855, P5: 140, P6: -7, P7: 15500, P8: -14600, P9: 6000})
		}, bme280.DefaultOpts,
			physic.Env{Temperature: physic.ZeroCelsius + 25080*physic.MilliCelsius, Pressure: 100653 * physic.Pascal}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chip := tc.chip()
			r := newRig(t, chip, &tc.opts)
			if err := chip.SetEnv(tc.env); err != nil {
				t.Fatal(err)
			}
			var e physic.Env
			if err := r.dev.Sense(&e); err != nil {
				t.Fatal(err)
			}
			if d := math.Abs(float64(e.Temperature-tc.env.Temperature)) / float64(physic.Celsius); d > 0.01 {
				t.Errorf("got %v, want %v within 0.01 °C", e.Temperature, tc.env.Temperature)
			}
			if d := math.Abs(float64(e.Pressure-tc.env.Pressure)) / float64(physic.Pascal); d > 1 {
				t.Errorf("got %v, want %v within 1 Pa", e.Pressure, tc.env.Pressure)
			}
			if d := math.Abs(float64(e.Humidity-tc.env.Humidity)) / float64(physic.PercentRH); d > 0.1 {
				t.Errorf("got %v, want %v within 0.1 %%RH", e.Humidity, tc.env.Humidity)
			}
		})
	}
}

func TestConcurrentSense(t *testing.T) {
	chip := bme280test.NewBME280(typical())
	chip.SetMeasuring(2)
	r := newRig(t, chip, nil)
	want := physic.Env{Temperature: physic.ZeroCelsius + 21500*physic.MilliCelsius, Pressure: 101325 * physic.Pascal, Humidity: 45 * physic.PercentRH}
	if err := chip.SetEnv(want); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8*20+1)
	for range 8 {
		wg.Go(func() {
			for range 20 {
				var e physic.Env
				if err := r.dev.Sense(&e); err != nil {
					errs <- err
					return
				}
				if e.Temperature != want.Temperature {
					errs <- fmt.Errorf("got %v, want %v", e.Temperature, want.Temperature)
					return
				}
			}
		})
	}
	wg.Go(func() {
		if err := r.dev.Halt(); err != nil {
			errs <- err
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestOptsCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts bme280.Opts
		want string // in the error; "" for none
	}{
		{"default", bme280.DefaultOpts, ""},
		{"all x16 normal", bme280.Opts{Temperature: 16, Pressure: 16, Humidity: 16, Filter: 16, Mode: bme280.Normal, Standby: time.Second}, ""},
		{"temperature only", bme280.Opts{Temperature: 1}, ""},
		{"zero", bme280.Opts{}, "Opts.Temperature: cannot be skip"},
		{"temperature 3", bme280.Opts{Temperature: 3}, "Opts.Temperature: oversampling 3 is not one of 0 (skip), 1, 2, 4, 8, 16"},
		{"pressure 32", bme280.Opts{Temperature: 1, Pressure: 32}, "Opts.Pressure: oversampling 32"},
		{"humidity 5", bme280.Opts{Temperature: 1, Humidity: 5}, "Opts.Humidity: oversampling 5"},
		{"filter 3", bme280.Opts{Temperature: 1, Filter: 3}, "Opts.Filter: coefficient 3 is not one of 0 (off), 2, 4, 8, 16"},
		{"mode 2", bme280.Opts{Temperature: 1, Mode: 2}, "Opts.Mode: Mode(2) is neither Forced nor Normal"},
		{"negative standby", bme280.Opts{Temperature: 1, Mode: bme280.Normal, Standby: -time.Millisecond}, "Opts.Standby: -1ms is negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.opts.Check()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("got %v, want no error", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestString(t *testing.T) {
	r := newRig(t, bme280test.NewBMP280(typical()), nil)
	if got, want := r.dev.String(), "BMP280 record 0x76"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
