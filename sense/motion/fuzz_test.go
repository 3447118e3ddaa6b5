package motion

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/hal"
)

// encodePolygon packs a polygon for FuzzZones: two little-endian uint16s a
// point, 60000 being 1.
func encodePolygon(p []Point) []byte {
	var b []byte
	for _, v := range p {
		b = binary.LittleEndian.AppendUint16(b, uint16(min(max(math.Round(v.X*60000), 0), 65535)))
		b = binary.LittleEndian.AppendUint16(b, uint16(min(max(math.Round(v.Y*60000), 0), 65535)))
	}
	return b
}

func decodePolygon(b []byte) []Point {
	var p []Point
	for ; len(b) >= 4 && len(p) <= MaxVertices+2; b = b[4:] {
		p = append(p, Point{float64(binary.LittleEndian.Uint16(b)) / 60000, float64(binary.LittleEndian.Uint16(b[2:])) / 60000})
	}
	return p
}

// FuzzZones checks zone validation: it never panics, a refusal names the
// zone, and a zone it accepts is a polygon of 3 to 64 points inside the
// frame with an area, whose cells New finds by their centres.
func FuzzZones(f *testing.F) {
	f.Add("left", 0.0, encodePolygon(halves[0].Polygon))
	f.Add("t", 0.0, encodePolygon([]Point{{0, 0}, {1, 0}, {0, 1}}))
	f.Add("L", 0.0, encodePolygon([]Point{{0, 0}, {0.3, 0}, {0.3, 0.7}, {1, 0.7}, {1, 1}, {0, 1}}))
	f.Add("round", 0.0, encodePolygon(circle("round", MaxVertices).Polygon))
	f.Add("bowtie", 0.0, encodePolygon([]Point{{0, 0}, {1, 1}, {1, 0}, {0, 1}}))
	f.Add("fold", 0.0, encodePolygon([]Point{{0, 0}, {1, 0}, {0.5, 0}, {0.5, 1}}))
	f.Add("touch", 0.0, encodePolygon([]Point{{0, 0}, {0.5, 0.5}, {1, 0}, {1, 1}, {0.5, 0.5}, {0, 1}}))
	f.Add("nan", math.NaN(), encodePolygon([]Point{{0, 0}, {1, 0}, {1, 1}}))
	f.Add("front door", -1.0, encodePolygon([]Point{{0, 0}, {1, 0}, {1, 1}}))
	f.Add("sliver", 0.0, encodePolygon([]Point{{0.01, 0.01}, {0.011, 0.01}, {0.01, 0.011}}))
	f.Fuzz(func(t *testing.T, name string, first float64, coords []byte) {
		p := decodePolygon(coords)
		if len(p) > 0 && first != 0 {
			p[0].X = first
		}
		z := Zone{Name: name, Polygon: p}
		cfg := Config{Zones: []Zone{square("other", 0, 0, 1, 1), z}}
		err := cfg.Validate()
		if err != nil {
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "Zones[1]") {
				t.Fatalf("got %v, want ErrConfig naming Zones[1]", err)
			}
			return
		}
		if len(p) < 3 || len(p) > MaxVertices || !(math.Abs(shoelace(p)) > 0) || validName("", name) != nil || name == "other" {
			t.Fatalf("accepted %q %v", name, p)
		}
		for _, v := range p {
			if !(v.X >= 0 && v.X <= 1 && v.Y >= 0 && v.Y <= 1) {
				t.Fatalf("accepted a point outside the frame: %v", p)
			}
		}
		d, err := New(cfg, grey(160, 120))
		if err != nil {
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "covers no cell") {
				t.Fatalf("New: got %v, want nil or ErrConfig saying the zone covers no cell", err)
			}
			return
		}
		cells := 0
		for y := range d.h {
			for x := range d.w {
				in := inside(p, Point{(float64(x) + 0.5) / float64(d.w), (float64(y) + 0.5) / float64(d.h)})
				if in != (d.zbits[y*d.w+x]&2 != 0) {
					t.Fatalf("cell %d,%d: in the zone's raster %v, inside the polygon %v", x, y, !in, in)
				}
				if in {
					cells++
				}
			}
		}
		if cells == 0 || d.zones[1].cells != cells {
			t.Fatalf("zone has %d cells, counted %d", d.zones[1].cells, cells)
		}
	})
}

// FuzzProcess gives New arbitrary formats and Process arbitrary frame
// data: neither panics, a refusal is one of the documented errors, and a
// frame of the right size is always taken.
func FuzzProcess(f *testing.F) {
	f.Add(uint8(0), uint16(64), uint16(48), uint16(128), uint8(0), []byte("some frame bytes"))
	f.Add(uint8(1), uint16(160), uint16(120), uint16(160), uint8(2), []byte{0, 255, 0, 255, 7})
	f.Add(uint8(0), uint16(640), uint16(480), uint16(1280), uint8(8), []byte{1, 2, 3})
	f.Add(uint8(1), uint16(99), uint16(77), uint16(104), uint8(3), []byte{200, 10})
	f.Add(uint8(2), uint16(640), uint16(480), uint16(0), uint8(0), []byte{0xff, 0xd8})
	f.Add(uint8(3), uint16(64), uint16(48), uint16(64), uint8(0), []byte{})
	f.Add(uint8(0), uint16(63), uint16(48), uint16(126), uint8(0), []byte{1})
	f.Add(uint8(0), uint16(64), uint16(48), uint16(64), uint8(0), []byte{1})
	f.Add(uint8(1), uint16(65535), uint16(65535), uint16(65535), uint8(1), []byte{1})
	f.Add(uint8(1), uint16(16), uint16(16), uint16(16), uint8(33), []byte{1})
	f.Fuzz(func(t *testing.T, pixel uint8, width, height, stride uint16, downscale uint8, data []byte) {
		var pix hal.PixelFormat
		switch pixel % 4 {
		case 0:
			pix = hal.PixelYUYV
		case 1:
			pix = hal.PixelGrey
		case 2:
			pix = hal.PixelMJPEG
		default:
			pix = hal.PixelFormat(uint32(pixel) * 0x01010101)
		}
		format := hal.FrameFormat{Pixel: pix, Width: int(width), Height: int(height), Stride: int(stride)}
		d, err := New(Config{Downscale: int(downscale % 40)}, format)
		if err != nil {
			if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrConfig) {
				t.Fatalf("New(%v stride %d): got %v, want ErrFormat or ErrConfig", format, stride, err)
			}
			return
		}
		at := hal.Mono(time.Hour)
		frame := func(b []byte) *hal.Frame { return hal.NewFrame(format, b, 0, at, nil) }
		_, err = d.Process(frame(data), nil)
		switch {
		case len(data) < d.need && !errors.Is(err, ErrShortFrame):
			t.Fatalf("%d bytes for %v stride %d: got %v, want ErrShortFrame", len(data), format, stride, err)
		case len(data) >= d.need && err != nil:
			t.Fatalf("%d bytes for %v stride %d: %v", len(data), format, stride, err)
		}
		if d.need > 1<<20 {
			return
		}
		// Frames of the right size made of the data, each shifted, so
		// that things change from frame to frame.
		buf := make([]byte, d.need+int(downscale%3))
		var out []Transition
		for k := range 8 {
			for i := range buf {
				if len(data) > 0 {
					buf[i] = data[(i+k*7)%len(data)]
				}
			}
			at = at.Add(time.Duration(k%3) * 40 * time.Millisecond)
			if out, err = d.Process(frame(buf), out); err != nil {
				t.Fatalf("frame %d: %v", k, err)
			}
			l := d.Last()
			if !(l.Changed >= 0 && l.Changed <= 1 && l.Area >= 0 && l.Area <= 1 && l.Regions >= 0) {
				t.Fatalf("frame %d: %+v", k, l)
			}
		}
		for _, tr := range out {
			if tr.Zone != WholeFrame || (tr.Kind != Started && tr.Kind != Ended) || !(tr.Area > 0 && tr.Area <= 1) ||
				!(0 <= tr.Box.X0 && tr.Box.X0 < tr.Box.X1 && tr.Box.X1 <= 1 && 0 <= tr.Box.Y0 && tr.Box.Y0 < tr.Box.Y1 && tr.Box.Y1 <= 1) {
				t.Fatalf("transition %+v", tr)
			}
		}
		if _, err := d.Process(hal.NewFrame(format, buf, 0, at-1, nil), nil); !errors.Is(err, ErrTime) {
			t.Fatalf("a frame from the past: got %v, want ErrTime", err)
		}
		other := format
		other.Stride++
		if _, err := d.Process(hal.NewFrame(other, buf, 0, at, nil), nil); !errors.Is(err, ErrFormat) {
			t.Fatalf("a frame of another format: got %v, want ErrFormat", err)
		}
	})
}
