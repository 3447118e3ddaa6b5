package camera

import (
	"fmt"
	"slices"
	"strings"

	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/hal"
)

// deliverable are the formats this driver captures, in the order it
// prefers them when the config names none: the raw ones are handed out
// as they are; MJPEG is decoded to its luma and handed out as GREY.
var deliverable = []hal.PixelFormat{hal.PixelYUYV, hal.PixelGrey, hal.PixelMJPEG}

// Defaults for what a config leaves out.
const (
	defaultWidth  = 640
	defaultHeight = 480
	// maxRate bounds a configured rate; V4L2 intervals are 32-bit
	// fractions and no camera this body drives goes faster.
	maxRate = 1000 * physic.Hertz
)

// checkConfig refuses a config that cannot mean anything, naming the
// field that is wrong.
func checkConfig(cfg hal.CameraConfig) error {
	switch {
	case cfg.Width < 0:
		return fmt.Errorf("camera %s: width %d is negative", cfg.Device, cfg.Width)
	case cfg.Height < 0:
		return fmt.Errorf("camera %s: height %d is negative", cfg.Device, cfg.Height)
	case (cfg.Width == 0) != (cfg.Height == 0):
		return fmt.Errorf("camera %s: width %d and height %d: give both or neither", cfg.Device, cfg.Width, cfg.Height)
	case cfg.Rate < 0:
		return fmt.Errorf("camera %s: frame rate %s is negative", cfg.Device, cfg.Rate)
	case cfg.Rate > maxRate:
		return fmt.Errorf("camera %s: frame rate %s is more than %s", cfg.Device, cfg.Rate, maxRate)
	}
	for _, p := range cfg.Pixel {
		if !slices.Contains(deliverable, p) {
			return fmt.Errorf("camera %s: pixel format %s is not one this driver captures (%s): %w", cfg.Device, p, formatList(deliverable), hal.ErrUnsupported)
		}
	}
	return nil
}

func formatList(ps []hal.PixelFormat) string {
	if len(ps) == 0 {
		return "no format"
	}
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

// choosePixel picks the format to capture in from what the device offers:
// the first raw format of the accepted ones, in the config's order, and
// MJPEG only when the device offers no accepted raw format (decoding
// costs a copy and CPU that raw frames do not). An empty accept list
// means every deliverable format.
func choosePixel(accept, offered []hal.PixelFormat) (hal.PixelFormat, error) {
	if len(accept) == 0 {
		accept = deliverable
	}
	for _, p := range accept {
		if p != hal.PixelMJPEG && slices.Contains(offered, p) {
			return p, nil
		}
	}
	if slices.Contains(accept, hal.PixelMJPEG) && slices.Contains(offered, hal.PixelMJPEG) {
		return hal.PixelMJPEG, nil
	}
	sorted := slices.Clone(offered)
	slices.Sort(sorted)
	return 0, fmt.Errorf("it offers %s, none of %s: %w", formatList(sorted), formatList(accept), hal.ErrUnsupported)
}

// sizeRange is one answer of VIDIOC_ENUM_FRAMESIZES: a discrete size
// (min == max, no step) or a stepwise range. A zero range stands for a
// continuous one, which github.com/blackjack/webcam reports as zeros.
type sizeRange struct {
	MinW, MaxW, StepW int
	MinH, MaxH, StepH int
}

// snap returns the size in r nearest to w×h.
func (r sizeRange) snap(w, h int) (int, int) {
	if r == (sizeRange{}) {
		return w, h
	}
	return snapOne(w, r.MinW, r.MaxW, r.StepW), snapOne(h, r.MinH, r.MaxH, r.StepH)
}

func snapOne(v, lo, hi, step int) int {
	v = min(max(v, lo), hi)
	if step > 1 {
		v = lo + (v-lo+step/2)/step*step
		if v > hi {
			v -= step
		}
	}
	return v
}

// chooseSize picks the offered size nearest to w×h (640×480 when the
// config gives none): the smallest sum of the width and height
// differences, the smaller size on a tie. With nothing offered it asks
// for w×h and lets VIDIOC_S_FMT adjust.
func chooseSize(offered []sizeRange, w, h int) (int, int) {
	if w == 0 || h == 0 {
		w, h = defaultWidth, defaultHeight
	}
	bw, bh, best := w, h, -1
	for _, r := range offered {
		cw, ch := r.snap(w, h)
		d := abs(cw-w) + abs(ch-h)
		if best < 0 || d < best || d == best && cw*ch < bw*bh {
			bw, bh, best = cw, ch, d
		}
	}
	return bw, bh
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// fraction is a V4L2 frame interval: Num/Den seconds per frame.
type fraction struct{ Num, Den uint32 }

// rate returns the frames per second of the interval; 0 when unknown.
func (f fraction) rate() physic.Frequency {
	if f.Num == 0 || f.Den == 0 {
		return 0
	}
	return physic.Frequency((uint64(f.Den)*uint64(physic.Hertz) + uint64(f.Num)/2) / uint64(f.Num))
}

// interval returns the interval of rate r, reduced.
func interval(r physic.Frequency) fraction {
	num, den := uint64(physic.Hertz), uint64(r)
	g := gcd(num, den)
	// checkConfig bounds r to maxRate, so den fits.
	return fraction{uint32(num / g), uint32(den / g)}
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// chooseInterval picks the offered interval whose rate is nearest to
// want, the faster one on a tie. With nothing offered (a stepwise or
// continuous range, or no answer) it asks for want and lets VIDIOC_S_PARM
// adjust.
func chooseInterval(offered []fraction, want physic.Frequency) fraction {
	best, bestD := interval(want), physic.Frequency(-1)
	for _, f := range offered {
		r := f.rate()
		if r == 0 {
			continue
		}
		d := r - want
		if d < 0 {
			d = -d
		}
		if bestD < 0 || d < bestD || d == bestD && r > best.rate() {
			best, bestD = f, d
		}
	}
	return best
}

// wireFormat describes a negotiated capture: the format the device
// fills buffers in (wire) and the one the consumer gets.
func wireFormat(wire hal.PixelFormat, w, h, stride int, rate physic.Frequency) hal.FrameFormat {
	f := hal.FrameFormat{Pixel: wire, Width: w, Height: h, Stride: stride, Rate: rate}
	if wire == hal.PixelMJPEG {
		f.Pixel, f.Stride = hal.PixelGrey, w
	}
	return f
}

// minStride is the least bytes per row of a raw format.
func minStride(p hal.PixelFormat, w int) int {
	if p == hal.PixelYUYV {
		return 2 * w
	}
	return w
}
