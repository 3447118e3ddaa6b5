package bme280

import (
	"bytes"
	"fmt"
	"math"
	"testing"

	"periph.io/x/conn/v3/physic"
)

// datasheetExample is the BMP280 datasheet's calculation example.
var datasheetExample = Calibration{
	T1: 27504, T2: 26435, T3: -1000,
	P1: 36477, P2: -10685, P3: 3024, P4: 2855, P5: 140, P6: -7, P7: 15500, P8: -14600, P9: 6000,
}

// Calibrations of real chips, to compare the integer formulas with the
// floating-point ones over.
var realCalibrations = []struct {
	name string
	cal  Calibration
}{
	{"BMP280 datasheet example", datasheetExample},
	{"BME280 breakout A", Calibration{
		T1: 28009, T2: 25654, T3: 50,
		P1: 39145, P2: -10750, P3: 3024, P4: 5667, P5: -120, P6: -7, P7: 15500, P8: -14600, P9: 6000,
		H1: 75, H2: 362, H3: 0, H4: 313, H5: 50, H6: 30,
	}},
	{"BME280 breakout B", Calibration{
		T1: 27377, T2: 25596, T3: 50,
		P1: 37748, P2: -10650, P3: 3024, P4: 7972, P5: -212, P6: -7, P7: 15500, P8: -14600, P9: 6000,
		H1: 75, H2: 356, H3: 0, H4: 339, H5: 0, H6: 30,
	}},
	{"BME280 breakout C", Calibration{
		T1: 27782, T2: 25943, T3: 50,
		P1: 38273, P2: -10526, P3: 3024, P4: 7253, P5: -217, P6: -7, P7: 15500, P8: -14600, P9: 6000,
		H1: 75, H2: 370, H3: 0, H4: 298, H5: 50, H6: 30,
	}},
	{"BME280 with H3, negative H5", Calibration{
		T1: 28405, T2: 26435, T3: 50,
		P1: 36943, P2: -10556, P3: 3024, P4: 6510, P5: -62, P6: -7, P7: 9900, P8: -10230, P9: 4285,
		H1: 0, H2: 344, H3: 12, H4: 324, H5: -8, H6: 30,
	}},
}

// compensateTests are temperature and pressure results worked out by
// hand or printed in a datasheet. FuzzCompensate starts from them.
var compensateTests = []struct {
	name       string
	cal        Calibration
	adcT, adcP int32
	wantT      int32
	wantTFine  int32
	wantP      uint32 // Q24.8 Pa
}{
	// The BMP280 datasheet's example prints 25.08 °C, t_fine 128422
	// and 100653.27 Pa. 100653.27 Pa is what the floating-point
	// formula gives when t_fine is not truncated to an integer
	// (100653.2668 Pa; with t_fine 128422 it gives 100653.2581 Pa).
	// The 64-bit integer formula gives 25767233 in Q24.8, that is
	// 100653.2539 Pa, 0.016 Pa below the printed value.
	{"BMP280 datasheet example", datasheetExample, 519888, 415148, 2508, 128422, 25767233},
	// adc_T = T1<<4 is the calibration point: both terms are zero,
	// so t_fine is 0 and T is (0*5+128)>>8 = 0.
	{"at the temperature calibration point", datasheetExample, 27504 << 4, 0, 0, 0, 0},
	// With T3 = 0 only var1 counts: ((64986-55008)*26435)>>11 =
	// 263768430>>11 = 128793; T = (128793*5+128)>>8 = 644093>>8 =
	// 2515.
	{"no quadratic term", Calibration{T1: 27504, T2: 26435}, 519888, 0, 2515, 128793, 0},
	// P1 = 0 makes the pressure divisor zero: the guard returns 0.
	{"pressure divisor zero", Calibration{T1: 27504, T2: 26435, T3: -1000}, 519888, 415148, 2508, 128422, 0},
}

func TestCompensateExamples(t *testing.T) {
	for _, tc := range compensateTests {
		t.Run(tc.name, func(t *testing.T) {
			tt, tFine := tc.cal.Temperature(tc.adcT)
			if tt != tc.wantT || tFine != tc.wantTFine {
				t.Errorf("Temperature(%d) = %d, t_fine %d; want %d, t_fine %d", tc.adcT, tt, tFine, tc.wantT, tc.wantTFine)
			}
			if tc.adcP == 0 {
				return // a temperature row
			}
			if p := tc.cal.Pressure64(tc.adcP, tFine); p != tc.wantP {
				t.Errorf("Pressure64(%d, %d) = %d (%.4f Pa), want %d (%.4f Pa)", tc.adcP, tFine, p, float64(p)/256, tc.wantP, float64(tc.wantP)/256)
			}
		})
	}
}

// TestDatasheetExampleEnv checks the datasheet example through to the
// physical values Sense stores: 25.08 °C and 25767233/256 Pa, exactly.
func TestDatasheetExampleEnv(t *testing.T) {
	d := &Dev{chip: BMP280, cal: datasheetExample, opts: Opts{Temperature: X1, Pressure: X1}}
	e, err := d.compensate(raw{p: 415148, t: 519888})
	if err != nil {
		t.Fatal(err)
	}
	if want := physic.ZeroCelsius + 25080*physic.MilliCelsius; e.Temperature != want {
		t.Errorf("got %v, want %v", e.Temperature, want)
	}
	// 25767233 × 1e9/256 nPa = 100653.25390625 Pa; 100653 Pa whole.
	if want := 100653253906250 * physic.NanoPascal; e.Pressure != want {
		t.Errorf("got %v (%d nPa), want %d nPa", e.Pressure, int64(e.Pressure), int64(want))
	}
	if got := e.Pressure / physic.Pascal; got != 100653 {
		t.Errorf("got %d whole Pa, want 100653", got)
	}
	if e.Humidity != 0 {
		t.Errorf("got humidity %v from a BMP280, want 0", e.Humidity)
	}
}

// TestHumidityUnits checks the Q22.10 %RH to physic conversion, rounded
// to physic's 1e-5 %RH.
func TestHumidityUnits(t *testing.T) {
	cal := realCalibrations[1].cal
	d := &Dev{chip: BME280, cal: cal, opts: DefaultOpts}
	_, tFine := cal.Temperature(519888)
	for _, adcH := range []int32{0, 20000, 28000, 33333, 65535} {
		e, err := d.compensate(raw{p: 415148, t: 519888, h: adcH, hasH: true})
		if err != nil {
			t.Fatal(err)
		}
		q := cal.Humidity(adcH, tFine)
		want := physic.RelativeHumidity(math.Round(float64(q) * 100000 / 1024))
		if e.Humidity != want {
			t.Errorf("adc_H %d: got %v (%d), want %d from %d/1024 %%RH", adcH, e.Humidity, int64(e.Humidity), int64(want), q)
		}
	}
}

func TestPressureExamples(t *testing.T) {
	byHand := Calibration{P1: 50000}
	for _, tc := range []struct {
		name  string
		cal   Calibration
		adcP  int32
		tFine int32
		want  uint32 // Q24.8 Pa
	}{
		{"BMP280 datasheet example", datasheetExample, 415148, 128422, 25767233},
		// t_fine = 128000 zeroes the formula's temperature terms; with
		// P2 … P9 = 0 it is p = ((2^20-adc_P)<<31)*3125 / (P1<<14), then
		// >>8. P1 = 50000 and adc_P = 2^20-1000 give 1000*2^17/16 =
		// 8192000, >>8 = 32000 = 125 Pa.
		{"by hand", byHand, 1<<20 - 1000, 128000, 32000},
		// adc_P = 2^20 leaves only P7<<4 (and P4's term, zero here).
		{"top of the raw range", Calibration{P1: 50000, P7: 100}, 1 << 20, 128000, 1600},
		{"divisor zero", Calibration{}, 415148, 128422, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if p := tc.cal.Pressure64(tc.adcP, tc.tFine); p != tc.want {
				t.Errorf("Pressure64(%d, %d) = %d (%.4f Pa), want %d (%.4f Pa)", tc.adcP, tc.tFine, p, float64(p)/256, tc.want, float64(tc.want)/256)
			}
		})
	}
}

func TestHumidityExamples(t *testing.T) {
	typical := realCalibrations[1].cal
	for _, tc := range []struct {
		name  string
		cal   Calibration
		adcH  int32
		tFine int32
		want  uint32
	}{
		{"clamped at 0 %RH", typical, 0, 115000, 0},
		{"clamped at 100 %RH", typical, 65535, 115000, MaxHumidity},
		{"no humidity calibration", Calibration{}, 30000, 115000, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.cal.Humidity(tc.adcH, tc.tFine); got != tc.want {
				t.Errorf("Humidity(%d, %d) = %d, want %d", tc.adcH, tc.tFine, got, tc.want)
			}
		})
	}
}

// The floating-point compensation of the BME280 datasheet, section 8.1,
// written out apart from the integer code under test. t_fine is an
// argument and a result, not a global.

func floatTemperature(c *Calibration, adcT int32) (degC float64, tFine int32) {
	var1 := (float64(adcT)/16384.0 - float64(c.T1)/1024.0) * float64(c.T2)
	var2 := (float64(adcT)/131072.0 - float64(c.T1)/8192.0) * (float64(adcT)/131072.0 - float64(c.T1)/8192.0) * float64(c.T3)
	return (var1 + var2) / 5120.0, int32(var1 + var2)
}

func floatPressure(c *Calibration, adcP, tFine int32) float64 {
	var1 := float64(tFine)/2.0 - 64000.0
	var2 := var1 * var1 * float64(c.P6) / 32768.0
	var2 = var2 + var1*float64(c.P5)*2.0
	var2 = var2/4.0 + float64(c.P4)*65536.0
	var1 = (float64(c.P3)*var1*var1/524288.0 + float64(c.P2)*var1) / 524288.0
	var1 = (1.0 + var1/32768.0) * float64(c.P1)
	if var1 == 0 {
		return 0
	}
	p := 1048576.0 - float64(adcP)
	p = (p - var2/4096.0) * 6250.0 / var1
	var1 = float64(c.P9) * p * p / 2147483648.0
	var2 = p * float64(c.P8) / 32768.0
	return p + (var1+var2+float64(c.P7))/16.0
}

func floatHumidity(c *Calibration, adcH, tFine int32) float64 {
	h := float64(tFine) - 76800.0
	h = (float64(adcH) - (float64(c.H4)*64.0 + float64(c.H5)/16384.0*h)) *
		(float64(c.H2) / 65536.0 * (1.0 + float64(c.H6)/67108864.0*h*(1.0+float64(c.H3)/67108864.0*h)))
	h = h * (1.0 - float64(c.H1)*h/524288.0)
	return max(0, min(100, h))
}

// Bounds of the integer formulas' distance from the floating-point ones,
// over the chips' operating range.
const (
	// The integer temperature is rounded to 0.01 °C, and its t_fine
	// truncated from a sum of two truncated terms.
	tempBound = 0.01 // °C
	// The integer pressure truncates at each of its steps; over the
	// range it stays within a few of its 1/256 Pa steps of the float.
	pressBound = 0.02 // Pa
	// The integer humidity truncates its intermediate products to
	// 2^-10 %RH or coarser.
	humBound = 0.02 // %RH
)

// temperatureAdc returns the raw readings that cal takes from -40 °C to
// 85 °C, the chips' operating range, in about n steps.
func temperatureAdc(cal *Calibration, n int) []int32 {
	var out []int32
	lo, hi := int32(0), int32(0xFFFFF)
	for x := lo; x <= hi; x += (hi - lo) / int32(4*n) {
		if c, _ := floatTemperature(cal, x); c >= -40 && c <= 85 {
			out = append(out, x)
		}
	}
	return out
}

func TestTemperatureAgainstFloat(t *testing.T) {
	for _, rc := range realCalibrations {
		t.Run(rc.name, func(t *testing.T) {
			adcs := temperatureAdc(&rc.cal, 2000)
			if len(adcs) < 500 {
				t.Fatalf("got %d raw values in -40…85 °C, want at least 500", len(adcs))
			}
			worst := 0.0
			for _, adc := range adcs {
				got, tFine := rc.cal.Temperature(adc)
				want, wantFine := floatTemperature(&rc.cal, adc)
				if d := math.Abs(float64(got)/100 - want); d > worst {
					worst = d
				}
				// adc_T>>3 drops up to 7/8 of a count, worth up to
				// 7/8*|T2|/2^14 < 14 in t_fine; the rest truncates by 2.
				if d := tFine - wantFine; d < -16 || d > 16 {
					t.Errorf("adc_T %d: got t_fine %d, want %d within 16", adc, tFine, wantFine)
				}
			}
			if worst > tempBound {
				t.Errorf("got integer temperature %.4f °C from the float one, want at most %v", worst, tempBound)
			}
			t.Logf("%d raw values, largest difference %.4f °C", len(adcs), worst)
		})
	}
}

func TestPressureAgainstFloat(t *testing.T) {
	for _, rc := range realCalibrations {
		t.Run(rc.name, func(t *testing.T) {
			worst, n := 0.0, 0
			for _, adcT := range temperatureAdc(&rc.cal, 40) {
				_, tFine := rc.cal.Temperature(adcT)
				for adcP := int32(0); adcP <= 0xFFFFF; adcP += 997 {
					want := floatPressure(&rc.cal, adcP, tFine)
					if want < 30000 || want > 110000 { // 300 … 1100 hPa
						continue
					}
					n++
					got := float64(rc.cal.Pressure64(adcP, tFine)) / 256
					if d := math.Abs(got - want); d > worst {
						worst = d
					}
				}
			}
			if n < 1000 {
				t.Fatalf("got %d points in 300…1100 hPa, want at least 1000", n)
			}
			if worst > pressBound {
				t.Errorf("got integer pressure %.4f Pa from the float one, want at most %v", worst, pressBound)
			}
			t.Logf("%d points, largest difference %.4f Pa", n, worst)
		})
	}
}

func TestHumidityAgainstFloat(t *testing.T) {
	for _, rc := range realCalibrations {
		if rc.cal.H2 == 0 {
			continue // a BMP280
		}
		t.Run(rc.name, func(t *testing.T) {
			worst, n, clamped0, clamped100 := 0.0, 0, 0, 0
			for _, adcT := range temperatureAdc(&rc.cal, 40) {
				_, tFine := rc.cal.Temperature(adcT)
				for adcH := int32(0); adcH <= 0xFFFF; adcH += 61 {
					got := float64(rc.cal.Humidity(adcH, tFine)) / 1024
					want := floatHumidity(&rc.cal, adcH, tFine)
					n++
					switch want {
					case 0:
						clamped0++
					case 100:
						clamped100++
					}
					if d := math.Abs(got - want); d > worst {
						worst = d
					}
				}
			}
			if clamped0 == 0 || clamped100 == 0 {
				t.Errorf("got %d points clamped at 0 %%RH and %d at 100 %%RH, want some of each", clamped0, clamped100)
			}
			if worst > humBound {
				t.Errorf("got integer humidity %.4f %%RH from the float one, want at most %v", worst, humBound)
			}
			t.Logf("%d points, largest difference %.4f %%RH", n, worst)
		})
	}
}

type parseCalibrationTest struct {
	name    string
	b26, h7 []byte
	want    Calibration
	wantErr string
}

// parseCalibrationTests are calibration blocks and what they decode to.
// FuzzParseCalibration starts from them.
func parseCalibrationTests() []parseCalibrationTest {
	typical := realCalibrations[1].cal
	b26, h7 := typical.Bytes()
	return []parseCalibrationTest{
		{"BME280", b26, h7, typical, ""},
		{"BMP280", b26, nil, Calibration{
			T1: typical.T1, T2: typical.T2, T3: typical.T3,
			P1: typical.P1, P2: typical.P2, P3: typical.P3, P4: typical.P4, P5: typical.P5,
			P6: typical.P6, P7: typical.P7, P8: typical.P8, P9: typical.P9,
		}, ""},
		// 0xE4 = 0x80, 0xE5 = 0x7F, 0xE6 = 0xFF: H4 = -128<<4 | 0xF =
		// -2033, H5 = -1<<4 | 0x7 = -9.
		{"negative H4 and H5", make([]byte, 26), []byte{0xFE, 0xFF, 3, 0x80, 0x7F, 0xFF, 0x80}, Calibration{H2: -2, H3: 3, H4: -2033, H5: -9, H6: -128}, ""},
		// Little-endian and signed: 0x88 = 0x34, 0x89 = 0x12; 0x8A,
		// 0x8B = 0xFF, 0xFF.
		{"byte order", append([]byte{0x34, 0x12, 0xFF, 0xFF}, make([]byte, 22)...), nil, Calibration{T1: 0x1234, T2: -1}, ""},
		{"short block", b26[:24], h7, Calibration{}, "block at 0x88 is 24 bytes, want 26"},
		{"short humidity block", b26, h7[:6], Calibration{}, "block at 0xE1 is 6 bytes, want 7 or none"},
		{"nothing", nil, nil, Calibration{}, "block at 0x88 is 0 bytes"},
	}
}

func TestParseCalibration(t *testing.T) {
	for _, tc := range parseCalibrationTests() {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseCalibration(tc.b26, tc.h7)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("got %v, want no error", err)
			case tc.wantErr != "" && (err == nil || !bytes.Contains([]byte(err.Error()), []byte(tc.wantErr))):
				t.Fatalf("got error %v, want one with %q", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// parseRawTests are data register bursts and what they decode to.
// FuzzParseRaw starts from them.
var parseRawTests = []struct {
	name    string
	b       []byte
	want    raw
	wantErr bool
}{
	{"BME280", []byte{0x65, 0x5A, 0xC0, 0x7E, 0xED, 0x00, 0x6E, 0x8F}, raw{p: 0x655AC, t: 0x7EED0, h: 0x6E8F, hasH: true}, false},
	{"BMP280", []byte{0x65, 0x5A, 0xC0, 0x7E, 0xED, 0x00}, raw{p: 0x655AC, t: 0x7EED0}, false},
	{"xlsb low nibble ignored", []byte{0x65, 0x5A, 0xCF, 0x7E, 0xED, 0x0F}, raw{p: 0x655AC, t: 0x7EED0}, false},
	{"skipped", []byte{0x80, 0, 0, 0x80, 0, 0, 0x80, 0}, raw{p: SkippedTP, t: SkippedTP, h: SkippedH, hasH: true}, false},
	{"all ones", []byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}, raw{p: 0xFFFFF, t: 0xFFFFF, h: 0xFFFF, hasH: true}, false},
	{"short", []byte{0x80, 0, 0, 0x80, 0}, raw{}, true},
	{"seven", make([]byte, 7), raw{}, true},
}

func TestParseRaw(t *testing.T) {
	for _, tc := range parseRawTests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseRaw(tc.b)
			if (err != nil) != tc.wantErr {
				t.Fatalf("got error %v, want error %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func FuzzParseCalibration(f *testing.F) {
	for _, tc := range parseCalibrationTests() {
		f.Add(tc.b26, tc.h7)
	}
	for _, rc := range realCalibrations {
		b26, h7 := rc.cal.Bytes()
		f.Add(b26, h7)
		f.Add(b26, []byte(nil))
	}
	f.Fuzz(func(t *testing.T, b26, h7 []byte) {
		c, err := ParseCalibration(b26, h7)
		if err != nil {
			if c != (Calibration{}) {
				t.Errorf("got %+v with error %v, want a zero Calibration", c, err)
			}
			return
		}
		if c.H4 < -2048 || c.H4 > 2047 || c.H5 < -2048 || c.H5 > 2047 {
			t.Errorf("got H4 %d, H5 %d, want 12-bit values", c.H4, c.H5)
		}
		e26, e7 := c.Bytes()
		if len(h7) == 0 {
			// 0xA0 is reserved and 0xA1 is not calibration on a BMP280:
			// both encode as 0. The rest round-trips.
			want26 := append(append([]byte{}, b26[:24]...), 0, 0)
			if !bytes.Equal(e26, want26) {
				t.Errorf("got % x from Bytes, want % x", e26, want26)
			}
			if c.H1 != 0 || c.H2 != 0 || c.H3 != 0 || c.H4 != 0 || c.H5 != 0 || c.H6 != 0 {
				t.Errorf("got humidity parameters %+v from a BMP280 block, want none", c)
			}
			e7 = nil
		} else {
			// 0xA0 is reserved and encodes as 0.
			want26 := append(append([]byte{}, b26[:24]...), 0, b26[25])
			if !bytes.Equal(e26, want26) || !bytes.Equal(e7, h7) {
				t.Errorf("got % x, % x from Bytes, want % x, % x", e26, e7, want26, h7)
			}
		}
		if c2, err := ParseCalibration(e26, e7); err != nil || c2 != c {
			t.Errorf("got %+v, %v from the encoding of %+v, want it back", c2, err, c)
		}
	})
}

func FuzzParseRaw(f *testing.F) {
	for _, tc := range parseRawTests {
		f.Add(tc.b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseRaw(b)
		if err != nil {
			if len(b) == 6 || len(b) == 8 {
				t.Errorf("got %v for %d bytes, want no error", err, len(b))
			}
			return
		}
		if r.p < 0 || r.p > 0xFFFFF || r.t < 0 || r.t > 0xFFFFF || r.h < 0 || r.h > 0xFFFF {
			t.Errorf("got %+v, want 20-bit p and t and a 16-bit h", r)
		}
		if r.hasH != (len(b) == 8) {
			t.Errorf("got hasH %v from %d bytes", r.hasH, len(b))
		}
		// Only the high nibble of an xlsb register is data.
		c := append([]byte{}, b...)
		c[2] ^= 0x0F
		c[5] ^= 0x0F
		if r2, _ := parseRaw(c); r2 != r {
			t.Errorf("got %+v with the xlsb low nibbles flipped, want %+v", r2, r)
		}
	})
}

func FuzzCompensate(f *testing.F) {
	for _, tc := range compensateTests {
		b26, h7 := tc.cal.Bytes()
		f.Add(b26, h7, tc.adcT, tc.adcP, int32(30000))
	}
	for _, rc := range realCalibrations {
		b26, h7 := rc.cal.Bytes()
		f.Add(b26, h7, int32(519888), int32(415148), int32(30000))
		f.Add(b26, h7, int32(0), int32(0), int32(0))
		f.Add(b26, h7, int32(0xFFFFF), int32(0xFFFFF), int32(0xFFFF))
		f.Add(b26, h7, int32(SkippedTP), int32(SkippedTP), int32(SkippedH))
	}
	f.Add(make([]byte, 26), make([]byte, 7), int32(519888), int32(415148), int32(30000))
	f.Add(bytes.Repeat([]byte{0xFF}, 26), bytes.Repeat([]byte{0x80}, 7), int32(-1), int32(math.MinInt32), int32(math.MaxInt32))
	f.Fuzz(func(t *testing.T, b26, h7 []byte, adcT, adcP, adcH int32) {
		c, err := ParseCalibration(b26, h7)
		if err != nil {
			return
		}
		_, tFine := c.Temperature(adcT)
		_ = c.Pressure64(adcP, tFine)
		if h := c.Humidity(adcH, tFine); h > MaxHumidity {
			t.Errorf("got humidity %d (%.3f %%RH), want at most %d", h, float64(h)/1024, MaxHumidity)
		}
		// t_fine is any int32 when the raw values are not the chip's.
		for _, tf := range []int32{math.MinInt32, -1, 0, 76800, 128000, math.MaxInt32} {
			_ = c.Pressure64(adcP, tf)
			if h := c.Humidity(adcH, tf); h > MaxHumidity {
				t.Errorf("got humidity %d at t_fine %d, want at most %d", h, tf, MaxHumidity)
			}
		}
	})
}

func ExampleCalibration_Temperature() {
	c := Calibration{T1: 27504, T2: 26435, T3: -1000}
	t, tFine := c.Temperature(519888)
	fmt.Println(t, tFine)
	// Output: 2508 128422
}
