package bme280

import (
	"encoding/binary"
	"fmt"
)

// Calibration holds the trimming parameters the factory writes into each
// chip's non-volatile memory: dig_T1 … dig_H6 in the datasheets' names,
// without the dig_ prefix. A BMP280 has no humidity parameters; its H
// fields are zero.
//
// The compensation methods are pure functions of the parameters and the
// raw values: they keep the datasheets' exact integer arithmetic, so a
// Calibration is safe for concurrent use as long as no one writes to it.
type Calibration struct {
	T1     uint16
	T2, T3 int16

	P1                             uint16
	P2, P3, P4, P5, P6, P7, P8, P9 int16

	H1 uint8
	H2 int16
	H3 uint8
	// H4 and H5 are 12-bit signed values: -2048 … 2047.
	H4, H5 int16
	H6     int8
}

// Lengths of the two calibration blocks.
const (
	// CalibrationLen is the length of the block at 0x88…0xA1.
	CalibrationLen = 26
	// HumidityCalibrationLen is the length of the BME280's block at
	// 0xE1…0xE7.
	HumidityCalibrationLen = 7
)

// ParseCalibration decodes the calibration block read from 0x88…0xA1
// (b26, 26 bytes) and, for a BME280, the block read from 0xE1…0xE7 (h7,
// 7 bytes). For a BMP280, h7 is nil (or empty): the byte at 0xA1 is then
// not a calibration parameter and H1 … H6 stay zero.
//
// It returns an error, and a zero Calibration, when a block has the wrong
// length. Every byte pattern of the right length decodes.
func ParseCalibration(b26, h7 []byte) (Calibration, error) {
	if len(b26) != CalibrationLen {
		return Calibration{}, fmt.Errorf("bme280: parse calibration: block at 0x88 is %d bytes, want %d", len(b26), CalibrationLen)
	}
	if len(h7) != 0 && len(h7) != HumidityCalibrationLen {
		return Calibration{}, fmt.Errorf("bme280: parse calibration: block at 0xE1 is %d bytes, want %d or none", len(h7), HumidityCalibrationLen)
	}
	u16 := func(i int) uint16 { return binary.LittleEndian.Uint16(b26[i:]) }
	s16 := func(i int) int16 { return int16(u16(i)) }
	c := Calibration{
		T1: u16(0), T2: s16(2), T3: s16(4),
		P1: u16(6), P2: s16(8), P3: s16(10), P4: s16(12), P5: s16(14),
		P6: s16(16), P7: s16(18), P8: s16(20), P9: s16(22),
	}
	if len(h7) == 0 {
		return c, nil
	}
	c.H1 = b26[25]
	c.H2 = int16(binary.LittleEndian.Uint16(h7[0:]))
	c.H3 = h7[2]
	// H4 is 0xE4[7:0] then 0xE5[3:0]; H5 is 0xE6[7:0] then 0xE5[7:4].
	// The high byte is signed, so the 12-bit value is too.
	c.H4 = int16(int8(h7[3]))<<4 | int16(h7[4]&0x0F)
	c.H5 = int16(int8(h7[5]))<<4 | int16(h7[4]>>4)
	c.H6 = int8(h7[6])
	return c, nil
}

// Bytes encodes c as the chip lays it out: b26 for 0x88…0xA1 (with H1 at
// 0xA1) and h7 for 0xE1…0xE7. It is the inverse of ParseCalibration:
// ParseCalibration(c.Bytes()) returns c for every c whose H4 and H5 fit
// in 12 bits; of H4 and H5 only the low 12 bits are encoded.
func (c *Calibration) Bytes() (b26, h7 []byte) {
	b26 = make([]byte, CalibrationLen)
	le := binary.LittleEndian
	for i, v := range []uint16{
		c.T1, uint16(c.T2), uint16(c.T3),
		c.P1, uint16(c.P2), uint16(c.P3), uint16(c.P4), uint16(c.P5),
		uint16(c.P6), uint16(c.P7), uint16(c.P8), uint16(c.P9),
	} {
		le.PutUint16(b26[2*i:], v)
	}
	b26[24] = 0 // reserved
	b26[25] = c.H1
	h7 = make([]byte, HumidityCalibrationLen)
	le.PutUint16(h7[0:], uint16(c.H2))
	h7[2] = c.H3
	h7[3] = byte(c.H4 >> 4)
	h7[4] = byte(c.H4&0x0F) | byte(c.H5&0x0F)<<4
	h7[5] = byte(c.H5 >> 4)
	h7[6] = byte(c.H6)
	return b26, h7
}

// Temperature compensates a raw 20-bit temperature reading. It returns
// the temperature in 0.01 °C (5123 is 51.23 °C) and t_fine, the fine
// temperature that Pressure64 and Humidity take. It is the datasheets'
// BME280_compensate_T_int32, in 32-bit arithmetic: for raw values and
// parameters no real chip gives, the intermediate products wrap as they
// do on the 32-bit machines the formula was written for.
func (c *Calibration) Temperature(adcT int32) (t int32, tFine int32) {
	t1, t2, t3 := int32(c.T1), int32(c.T2), int32(c.T3)
	var1 := (((adcT >> 3) - (t1 << 1)) * t2) >> 11
	d := (adcT >> 4) - t1
	var2 := (((d * d) >> 12) * t3) >> 14
	tFine = var1 + var2
	t = (tFine*5 + 128) >> 8
	return t, tFine
}

// Pressure64 compensates a raw 20-bit pressure reading at the fine
// temperature tFine from Temperature. It returns the pressure in pascals
// as an unsigned Q24.8 fixed-point number (24674867 is 24674867/256 =
// 96386.2 Pa). It is the datasheets' BME280_compensate_P_int64.
//
// It returns 0 when the calibration makes the formula's divisor zero (the
// datasheet's var1 == 0 guard, as with P1 == 0): 0 then means "no value",
// never 0 Pa.
func (c *Calibration) Pressure64(adcP int32, tFine int32) uint32 {
	var1 := int64(tFine) - 128000
	var2 := var1 * var1 * int64(c.P6)
	var2 += (var1 * int64(c.P5)) << 17
	var2 += int64(c.P4) << 35
	var1 = ((var1 * var1 * int64(c.P3)) >> 8) + ((var1 * int64(c.P2)) << 12)
	var1 = (((int64(1) << 47) + var1) * int64(c.P1)) >> 33
	if var1 == 0 {
		return 0
	}
	p := int64(1048576 - adcP)
	p = (((p << 31) - var2) * 3125) / var1
	var1 = (int64(c.P9) * (p >> 13) * (p >> 13)) >> 25
	var2 = (int64(c.P8) * p) >> 19
	p = ((p + var1 + var2) >> 8) + (int64(c.P7) << 4)
	return uint32(p)
}

// MaxHumidity is the largest value Humidity returns: 100 %RH in Q22.10.
const MaxHumidity = 100 << 10

// Humidity compensates a raw 16-bit humidity reading at the fine
// temperature tFine from Temperature. It returns the relative humidity in
// percent as an unsigned Q22.10 fixed-point number (47445 is 47445/1024 =
// 46.333 %RH), always within 0 … MaxHumidity. It is the BME280
// datasheet's bme280_compensate_H_int32 with its clamps, in 32-bit
// arithmetic.
func (c *Calibration) Humidity(adcH int32, tFine int32) uint32 {
	h1, h2, h3 := int32(c.H1), int32(c.H2), int32(c.H3)
	h4, h5, h6 := int32(c.H4), int32(c.H5), int32(c.H6)
	// Go gives << and >> the precedence of *, C a lower one than + and
	// *: every shift below is parenthesised as the datasheet groups it.
	v := tFine - 76800
	a := ((adcH << 14) - (h4 << 20) - (h5 * v) + 16384) >> 15
	b := ((((((v*h6)>>10)*(((v*h3)>>11)+32768))>>10)+2097152)*h2 + 8192) >> 14
	v = a * b
	v -= ((((v >> 15) * (v >> 15)) >> 7) * h1) >> 4
	if v < 0 {
		v = 0
	}
	if v > 419430400 {
		v = 419430400
	}
	return uint32(v >> 12)
}
