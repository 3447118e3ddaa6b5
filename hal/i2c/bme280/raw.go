package bme280

import "fmt"

// Values the chip leaves in a data register whose measurement was
// skipped: the register's reset value.
const (
	SkippedTP = 0x80000 // temperature or pressure
	SkippedH  = 0x8000  // humidity
)

// raw is one burst read of the data registers 0xF7…0xFE.
type raw struct {
	p, t int32 // 20 bits
	h    int32 // 16 bits, when hasH
	hasH bool
}

// parseRaw decodes the data registers: 6 bytes from a BMP280 (pressure,
// temperature), 8 from a BME280 (and humidity). The low nibble of each
// xlsb register is not data and is ignored. It returns an error for any
// other length.
func parseRaw(b []byte) (raw, error) {
	if len(b) != 6 && len(b) != 8 {
		return raw{}, fmt.Errorf("bme280: parse data: %d bytes, want 6 or 8", len(b))
	}
	r := raw{
		p: int32(b[0])<<12 | int32(b[1])<<4 | int32(b[2]>>4),
		t: int32(b[3])<<12 | int32(b[4])<<4 | int32(b[5]>>4),
	}
	if len(b) == 8 {
		r.h = int32(b[6])<<8 | int32(b[7])
		r.hasH = true
	}
	return r, nil
}
