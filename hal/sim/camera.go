package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/hal"
)

// Camera limits of the sim; sizes outside are clamped like a driver would.
const (
	camBuffers   = 4 // like a V4L2 MMAP queue
	camMinSide   = 32
	camMaxWidth  = 1920
	camMaxHeight = 1080
	camMaxRate   = 60
)

type camera struct {
	b      *Board
	format hal.FrameFormat
	period time.Duration

	halt     chan struct{}
	haltOnce sync.Once
	freed    chan []byte // buffers given back by Release

	pauser

	mu    sync.Mutex // one reader at a time; guards the fields below
	free  [][]byte
	next  uint64 // sequence of the next frame to capture
	fresh uint64 // buffers not yet allocated
	bg    []byte // the background's luma, w×h: the same every frame
}

func (b *Board) openCamera(cfg hal.CameraConfig) (hal.Camera, error) {
	if cfg.Device != CameraName && cfg.Device != "" {
		return nil, fmt.Errorf("sim: no camera %q (the sim board has %q): %w", cfg.Device, CameraName, hal.ErrAbsent)
	}
	pix := hal.PixelYUYV
	if len(cfg.Pixel) > 0 {
		i := slices.IndexFunc(cfg.Pixel, func(p hal.PixelFormat) bool { return p == hal.PixelYUYV || p == hal.PixelGrey })
		if i < 0 {
			return nil, fmt.Errorf("sim: camera offers YUYV and GREY, not %v: %w", cfg.Pixel, hal.ErrUnsupported)
		}
		pix = cfg.Pixel[i]
	}
	w := clamp(cfg.Width, camMinSide, camMaxWidth, 320) &^ 1
	h := clamp(cfg.Height, camMinSide, camMaxHeight, 240)
	rate := clamp(int(cfg.Rate/physic.Hertz), 1, camMaxRate, 10)
	stride := w
	if pix == hal.PixelYUYV {
		stride = 2 * w
	}
	c := &camera{
		b:      b,
		format: hal.FrameFormat{Pixel: pix, Width: w, Height: h, Stride: stride, Rate: physic.Frequency(rate) * physic.Hertz},
		period: time.Second / time.Duration(rate),
		halt:   make(chan struct{}),
		freed:  make(chan []byte, camBuffers),
		fresh:  camBuffers,
	}
	// The first frame is the next one due after opening.
	c.next = uint64(b.elapsed()/c.period) + 1
	return c, nil
}

func clamp(v, lo, hi, def int) int {
	switch {
	case v == 0:
		return def
	case v < lo:
		return lo
	case v > hi:
		return hi
	}
	return v
}

func (c *camera) Name() string            { return CameraName }
func (c *camera) Format() hal.FrameFormat { return c.format }

func (c *camera) Halt() error {
	c.haltOnce.Do(func() { close(c.halt) })
	return nil
}

func (c *camera) Close() error { return c.Halt() }

// buffer takes a free buffer, waiting for the consumer to release one when
// all are out (the frames due meanwhile are dropped, as V4L2 would).
func (c *camera) buffer(ctx context.Context) ([]byte, error) {
	for {
		select {
		case buf := <-c.freed:
			c.free = append(c.free, buf)
		default:
		}
		if n := len(c.free); n > 0 {
			buf := c.free[n-1]
			c.free = c.free[:n-1]
			return buf, nil
		}
		if c.fresh > 0 {
			c.fresh--
			return make([]byte, c.format.Stride*c.format.Height), nil
		}
		select {
		case buf := <-c.freed:
			c.free = append(c.free, buf)
		case <-c.halt:
			return nil, hal.ErrHalted
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (c *camera) NextFrame(ctx context.Context) (*hal.Frame, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.halt:
		return nil, hal.ErrHalted
	default:
	}
	for {
		stop, _, err := c.gate(ctx, c.halt)
		if err != nil {
			return nil, err
		}
		buf, err := c.buffer(ctx)
		if err != nil {
			return nil, err
		}
		// A frame whose time passed while the consumer was away (or the
		// camera paused) is lost; the sequence shows the gap.
		if due := uint64(c.b.elapsed() / c.period); due > c.next {
			c.next = due
		}
		seq := c.next
		at := time.Duration(seq) * c.period
		err = c.b.waitUntil(ctx, c.halt, stop, at)
		if errors.Is(err, errPausedMidRead) {
			c.free = append(c.free, buf)
			continue
		}
		if err != nil {
			c.free = append(c.free, buf)
			return nil, err
		}
		return c.frame(buf, seq, at), nil
	}
}

// frame renders the frame seq, due at at, into buf.
func (c *camera) frame(buf []byte, seq uint64, at time.Duration) *hal.Frame {
	c.next++
	if c.bg == nil {
		c.bg = c.b.background(c.format)
	}
	c.b.render(c.format, c.bg, buf, at, seq)
	return hal.NewFrame(c.format, buf, seq, c.b.mono(at), func() { c.freed <- buf })
}

// Luma of the scene.
const (
	lumaObject = 225
	lumaLow    = 60
	lumaHigh   = 130
)

// background is the scene without the object or noise: a gradient with
// a coarse texture, the same every frame, one luma byte a pixel.
func (b *Board) background(f hal.FrameFormat) []byte {
	w, h := f.Width, f.Height
	bg := make([]byte, w*h)
	for y := range h {
		for x := range w {
			v := lumaLow + (lumaHigh-lumaLow)*(x+y)/(w+h)
			v += int(b.sc.rand(streamTexture, uint64(y/8), uint64(x/8))*20) - 10
			bg[y*w+x] = byte(min(max(v, 0), 255))
		}
	}
	return bg
}

// render draws the scene at t into buf: the background bg, a little
// sensor noise that changes every frame, and the crossing object. The
// noise takes 4 bits a pixel of one draw per 16 pixels.
func (b *Board) render(f hal.FrameFormat, bg, buf []byte, t time.Duration, seq uint64) {
	obj, present := b.sc.objectAt(t)
	step := 1
	if f.Pixel == hal.PixelYUYV {
		step = 2
	}
	w, h := f.Width, f.Height
	x0, x1, y0, y1 := -1, -1, -1, -1
	if present {
		x0, x1 = int((obj.X-obj.Half)*float64(w)), int((obj.X+obj.Half)*float64(w))
		half := obj.Half * float64(w) / float64(h)
		y0, y1 = int((obj.Y-half)*float64(h)), int((obj.Y+half)*float64(h))
	}
	for y := range h {
		row := buf[y*f.Stride : y*f.Stride+w*step]
		back := bg[y*w : y*w+w]
		var bits uint64
		for x := range w {
			if x%16 == 0 {
				bits = mix(b.sc.seed ^ seq<<32 ^ uint64(y*w+x))
			}
			n := int(bits&7) - 3 // ±3 of sensor noise
			bits >>= 4
			v := int(back[x])
			if x >= x0 && x < x1 && y >= y0 && y < y1 {
				v = lumaObject
			}
			row[x*step] = byte(min(max(v+n, 0), 255))
			if step == 2 {
				row[x*step+1] = 128 // U and V: no colour
			}
		}
	}
}
