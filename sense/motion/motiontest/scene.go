// Package motiontest draws synthetic camera scenes for the tests and
// benchmarks of package motion: a fixed textured background, sensor noise
// that changes every frame, bright or dark objects moving in straight
// lines, and the light changing at once or gradually, evenly or more on
// one side. A scene is a pure function of its fields and the time, so the
// same scene gives the same frames in Go tests and in a benchmark clip
// read by another implementation.
package motiontest

import (
	"time"

	"github.com/tobe-body/tobe-body/hal"
)

// Object is a rectangle moving in a straight line at constant speed.
type Object struct {
	From, To time.Duration // visible from From until, not including, To
	// Start and End are the centre's positions at From and To, in
	// normalised coordinates (they may lie outside the frame).
	Start, End [2]float64
	W, H       float64 // normalised size
	Luma       uint8
}

// Light scales the scene's luma by a gain that goes from 1 before At to
// Gain after At+Ramp (linearly in between; Ramp 0 is a switch). Tilt makes
// it uneven: the gain at horizontal position x is Gain + Tilt·(x − 0.5).
type Light struct {
	At, Ramp   time.Duration
	Gain, Tilt float64
}

// Scene is a synthetic scene. The zero Noise is a noiseless camera. Its
// fields must not change once it has rendered a frame, and it is not safe
// for concurrent use.
type Scene struct {
	Format  hal.FrameFormat
	Seed    uint64
	Noise   int // sensor noise: each pixel moves by up to ±Noise, every frame anew
	Objects []Object
	Lights  []Light
	// Flat draws a plain mid-grey background instead of the texture.
	Flat bool

	background []int16 // the luma of the background, drawn once
}

// mix is splitmix64, the scene's stateless source of noise.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Bytes is the size of one frame's data.
func (s *Scene) Bytes() int { return s.Format.Stride * s.Format.Height }

// Render draws the scene at t into buf (at least Bytes long). frame
// numbers the sensor noise: the same frame number gives the same noise.
// Padding bytes past each row's pixels are set to 0xee.
func (s *Scene) Render(buf []byte, t time.Duration, frame uint64) {
	f := s.Format
	step := 1
	if f.Pixel == hal.PixelYUYV {
		step = 2
	}
	w, h := f.Width, f.Height
	type rect struct {
		x0, y0, x1, y1 int
		luma           int
	}
	var rects [8]rect
	nr := 0
	for _, o := range s.Objects {
		if t < o.From || t >= o.To || nr == len(rects) {
			continue
		}
		p := float64(t-o.From) / float64(o.To-o.From)
		cx := o.Start[0] + float64(p*(o.End[0]-o.Start[0])) // products never fused: the same
		cy := o.Start[1] + float64(p*(o.End[1]-o.Start[1])) // frames on every architecture
		rects[nr] = rect{
			int((cx - o.W/2) * float64(w)), int((cy - o.H/2) * float64(h)),
			int((cx + o.W/2) * float64(w)), int((cy + o.H/2) * float64(h)),
			int(o.Luma),
		}
		nr++
	}
	// Gains at the left and right edges, for the lights on at t.
	gl, gr := 1.0, 1.0
	for _, l := range s.Lights {
		p := 1.0
		switch {
		case t < l.At:
			continue
		case l.Ramp > 0 && t < l.At+l.Ramp:
			p = float64(t-l.At) / float64(l.Ramp)
		}
		gl *= 1 + float64(p*(l.Gain-float64(0.5*l.Tilt)-1))
		gr *= 1 + float64(p*(l.Gain+float64(0.5*l.Tilt)-1))
	}
	if len(s.background) != w*h {
		s.background = make([]int16, w*h)
		for y := range h {
			for x := range w {
				v := 110
				if !s.Flat {
					v = 50 + 90*(x+y)/(w+h)
					v += int(mix(s.Seed^uint64(y/8)<<32^uint64(x/8))%25) - 12
				}
				s.background[y*w+x] = int16(v)
			}
		}
	}
	lit := gl != 1 || gr != 1
	noise := uint64(2*s.Noise + 1)
	rnd := mix(s.Seed^frame<<40^0x5eed) | 1 // xorshift state for the frame's noise
	for y := range h {
		row := buf[y*f.Stride : (y+1)*f.Stride]
		bg := s.background[y*w : (y+1)*w]
		for x := range w {
			v := int(bg[x])
			for _, r := range rects[:nr] {
				if x >= r.x0 && x < r.x1 && y >= r.y0 && y < r.y1 {
					v = r.luma
				}
			}
			if lit {
				g := gl + (gr-gl)*float64(x)/float64(w)
				v = int(float64(float64(v)*g) + 0.5)
			}
			if s.Noise > 0 {
				rnd ^= rnd << 13
				rnd ^= rnd >> 7
				rnd ^= rnd << 17
				v += int(rnd>>32%noise) - s.Noise
			}
			row[x*step] = byte(min(max(v, 0), 255))
			if step == 2 {
				row[x*step+1] = 128
			}
		}
		for i := w * step; i < len(row); i++ {
			row[i] = 0xee
		}
	}
}
