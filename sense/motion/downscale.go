package motion

import (
	"encoding/binary"
	"math"
	"math/bits"

	"github.com/tobe-body/tobe-body/hal"
)

// Downscaling reads every luma byte of the frame once, so it is most of
// the work. When a cell's row of pixels is a whole number of 8-byte words
// (YUYV with a factor divisible by 4, GREY with one divisible by 8) it
// adds a word at a time: the luma bytes of a word are masked into four
// 16-bit lanes and the lanes are summed once per cell. A lane receives at
// most f²/4 bytes of at most 255, which fits 16 bits up to f = 32
// (MaxDownscale).

const lumaLanes = 0x00ff00ff00ff00ff

// downscale fills small with the mean luma of each cell and returns the
// standard deviation of the cells (as OpenCV's meanStdDev computes it).
func (d *Detector) downscale(data []byte) (sigma float64) {
	f := d.f
	switch {
	case d.format.Pixel == hal.PixelYUYV && f == 8:
		d.downscaleYUYV8(data)
	case d.format.Pixel == hal.PixelYUYV && f == 4:
		d.downscaleYUYV4(data)
	case d.format.Pixel == hal.PixelGrey && f == 8:
		d.downscaleGrey8(data)
	case d.format.Pixel == hal.PixelYUYV && f%4 == 0:
		d.downscaleWords(data, 2*f, false)
	case d.format.Pixel == hal.PixelGrey && f%8 == 0:
		d.downscaleWords(data, f, true)
	default:
		d.downscaleBytes(data)
	}
	var sum, sq uint64
	for _, v := range d.small {
		sum += uint64(v)
		sq += uint64(v) * uint64(v)
	}
	scale := 1 / float64(d.n)
	mean := float64(sum) * scale
	return math.Sqrt(max(float64(sq)*scale-mean*mean, 0))
}

// cellMean divides a cell's sum by its area, rounding half to even. The
// areas of the usual factors are powers of two, and a constant area
// inlined here becomes shifts.
func cellMean(sum, area uint64) uint8 {
	q, r := sum/area, sum%area
	if 2*r > area || (2*r == area && q&1 == 1) {
		q++
	}
	return uint8(q)
}

// cellMeans fills out with the means of sums, of cells of area pixels.
func cellMeans(out []uint8, sums []uint64, area uint64, lanes bool) {
	sums = sums[:len(out)]
	if area&(area-1) == 0 {
		shift := uint(bits.TrailingZeros64(area))
		half := area / 2
		for i, a := range sums {
			if lanes {
				a = laneSum(a)
			}
			q, r := a>>shift, a&(area-1)
			if r > half || (r == half && q&1 == 1) {
				q++
			}
			out[i] = uint8(q)
		}
		return
	}
	for i, a := range sums {
		if lanes {
			a = laneSum(a)
		}
		out[i] = cellMean(a, area)
	}
}

func laneSum(a uint64) uint64 {
	return a&0xffff + a>>16&0xffff + a>>32&0xffff + a>>48
}

// downscaleYUYV8 is downscaleWords for YUYV by 8 (the default at 640x480):
// two words per cell row, four cells (a cache line) at a time. Rows are
// read one after the other: from memory, one stream at a time is faster
// here than eight side by side.
func (d *Detector) downscaleYUYV8(data []byte) {
	w, stride := d.w, d.format.Stride
	sums := d.colSum[:w]
	le := binary.LittleEndian
	for cy := range d.h {
		clear(sums)
		for r := range 8 {
			off := (cy*8 + r) * stride
			row := data[off : off+w*16]
			s := sums
			for len(s) >= 4 && len(row) >= 64 {
				c := row[:64]
				s[0] += le.Uint64(c)&lumaLanes + le.Uint64(c[8:])&lumaLanes
				s[1] += le.Uint64(c[16:])&lumaLanes + le.Uint64(c[24:])&lumaLanes
				s[2] += le.Uint64(c[32:])&lumaLanes + le.Uint64(c[40:])&lumaLanes
				s[3] += le.Uint64(c[48:])&lumaLanes + le.Uint64(c[56:])&lumaLanes
				row, s = row[64:], s[4:]
			}
			for len(s) >= 1 && len(row) >= 16 {
				c := row[:16]
				s[0] += le.Uint64(c)&lumaLanes + le.Uint64(c[8:])&lumaLanes
				row, s = row[16:], s[1:]
			}
		}
		out := d.small[cy*w : cy*w+w]
		for cx, a := range sums {
			out[cx] = cellMean(laneSum(a), 64)
		}
	}
}

// downscaleYUYV4 is downscaleWords for YUYV by 4 (the default at
// 320x240): one word per cell row, four cells at a time.
func (d *Detector) downscaleYUYV4(data []byte) {
	w, stride := d.w, d.format.Stride
	sums := d.colSum[:w]
	le := binary.LittleEndian
	for cy := range d.h {
		clear(sums)
		for r := range 4 {
			off := (cy*4 + r) * stride
			row := data[off : off+w*8]
			s := sums
			for len(s) >= 4 && len(row) >= 32 {
				c := row[:32]
				s[0] += le.Uint64(c) & lumaLanes
				s[1] += le.Uint64(c[8:]) & lumaLanes
				s[2] += le.Uint64(c[16:]) & lumaLanes
				s[3] += le.Uint64(c[24:]) & lumaLanes
				row, s = row[32:], s[4:]
			}
			for len(s) >= 1 && len(row) >= 8 {
				s[0] += le.Uint64(row) & lumaLanes
				row, s = row[8:], s[1:]
			}
		}
		out := d.small[cy*w : cy*w+w]
		for cx, a := range sums {
			out[cx] = cellMean(laneSum(a), 16)
		}
	}
}

// downscaleGrey8 is downscaleWords for GREY by 8 (MJPEG decoded at
// 640x480): one word per cell row, its even and odd bytes masked into the
// lanes, four cells at a time.
func (d *Detector) downscaleGrey8(data []byte) {
	w, stride := d.w, d.format.Stride
	sums := d.colSum[:w]
	le := binary.LittleEndian
	lanes := func(v uint64) uint64 { return v&lumaLanes + v>>8&lumaLanes }
	for cy := range d.h {
		clear(sums)
		for r := range 8 {
			off := (cy*8 + r) * stride
			row := data[off : off+w*8]
			s := sums
			for len(s) >= 4 && len(row) >= 32 {
				c := row[:32]
				s[0] += lanes(le.Uint64(c))
				s[1] += lanes(le.Uint64(c[8:]))
				s[2] += lanes(le.Uint64(c[16:]))
				s[3] += lanes(le.Uint64(c[24:]))
				row, s = row[32:], s[4:]
			}
			for len(s) >= 1 && len(row) >= 8 {
				s[0] += lanes(le.Uint64(row))
				row, s = row[8:], s[1:]
			}
		}
		out := d.small[cy*w : cy*w+w]
		for cx, a := range sums {
			out[cx] = cellMean(laneSum(a), 64)
		}
	}
}

// downscaleWords sums cells whose rows are cellBytes long, a multiple of
// 8; grey says every byte is luma (else every even byte).
func (d *Detector) downscaleWords(data []byte, cellBytes int, grey bool) {
	f, w, stride := d.f, d.w, d.format.Stride
	sums := d.colSum[:w]
	area := uint64(f * f)
	le := binary.LittleEndian
	for cy := range d.h {
		clear(sums)
		for r := range f {
			off := (cy*f + r) * stride
			row := data[off : off+w*cellBytes]
			for cx := range sums {
				c := row[:cellBytes]
				row = row[cellBytes:]
				var s uint64
				if grey {
					for ; len(c) >= 8; c = c[8:] {
						v := le.Uint64(c)
						s += v&lumaLanes + v>>8&lumaLanes
					}
				} else {
					for ; len(c) >= 8; c = c[8:] {
						s += le.Uint64(c) & lumaLanes
					}
				}
				sums[cx] += s
			}
		}
		cellMeans(d.small[cy*w:cy*w+w], sums, area, true)
	}
}

// downscaleBytes is the plain loop, for every other factor.
func (d *Detector) downscaleBytes(data []byte) {
	f, w, stride := d.f, d.w, d.format.Stride
	step := 1
	if d.format.Pixel == hal.PixelYUYV {
		step = 2
	}
	sums := d.colSum[:w]
	area := uint64(f * f)
	for cy := range d.h {
		clear(sums)
		for r := range f {
			off := (cy*f + r) * stride
			row := data[off : off+w*f*step]
			for cx := range sums {
				c := row[:f*step]
				row = row[f*step:]
				var s uint64
				for k := 0; k < len(c); k += step {
					s += uint64(c[k])
				}
				sums[cx] += s
			}
		}
		cellMeans(d.small[cy*w:cy*w+w], sums, area, false)
	}
}
