// Package motion detects motion in a camera's frames, per named zone, and
// reports when it starts and ends: never one report per frame.
//
// It works on the luma plane only (YUYV or GREY frames; the camera driver
// decodes MJPEG to GREY), on a downscaled copy of it. For each processed
// frame:
//
//  1. downscale: each cell is the mean of a Downscale×Downscale square of
//     luma pixels (read straight from YUYV's even bytes, row stride
//     honoured), rounded half to even; pixels past the last whole cell on
//     the right and bottom are not read;
//  2. contrast normalisation: the standard deviation s of the cells is
//     tracked with a running average (time constant five times
//     Background) and differences count g = clamp(32/s, 0.25, 4) times
//     their size in luma, so that Sensitivity means the same in a dim,
//     flat scene and a bright, busy one;
//  3. light blur: a 3×3 Gaussian ([1 2 1]ᵀ[1 2 1]/16, rounded half up,
//     borders reflected without repeating the edge cell);
//  4. illumination: the light's change since the last frame is the median
//     of the ratios frame/background of the cells at even columns and rows
//     that are between 8 and 250 in both (1 when fewer than n/16 are);
//     the background is relit by it (prediction =
//     min(ratio·background, 255)). Moving things cover less than half of
//     the frame and barely move the median, so a light that changes
//     gradually is followed, not reported;
//  5. difference against the running-average background and threshold: a
//     cell changed when |frame − prediction| is above max(T/g, 6·m),
//     where T = max(2, round(64·(1−Sensitivity))) and m, the sensor
//     noise, is the median of |frame − prediction| over the cells of step
//     4 (6·m is about four standard deviations of Gaussian noise);
//  6. calibration: when more than CalibrateAbove of the cells changed, or
//     the light changed by more than 25 % within about a second (the log
//     ratios summed, each fading with a 1 s time constant), or during
//     Calibration after either last happened, the frame becomes the
//     background, the contrast is taken from it, and nothing is reported
//     (a light switched on, a camera's exposure jump). Otherwise the
//     background moves towards the frame: frame·α + prediction·(1−α),
//     α = 1−exp(−Δt/Background);
//  7. dilation of the changed cells by a 3×3 square; 8-connected regions;
//     regions smaller than MinArea of the frame are dropped;
//  8. zone test: the cells of the remaining regions inside each zone's
//     polygon are the zone's motion in this frame (area and bounding box);
//  9. hysteresis per zone: StartFrames processed frames in a row with
//     motion start it, EndAfter without motion ends it.
//
// The background is not held still where things move, so a moving thing
// leaves a fading trail in it for about a Background; its area and box
// include the trail, and its end comes that much later. Something that
// stops moving fades into the background the same way.
//
// Time comes only from the frames' timestamps, so the detector is
// deterministic and tests need no sleeps; products are rounded before they
// are added (never fused), so it gives the same results on every
// architecture. A Detector preallocates every
// buffer for its frame format in New: Process does not allocate. It is not
// safe for concurrent use; one goroutine (a camera's reader) owns it.
package motion

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/tobe-body/tobe-body/hal"
)

// Errors of New and Process, for errors.Is.
var (
	// ErrFormat: a pixel format other than YUYV and GREY, a size or stride
	// that does not describe a frame, or a frame whose format is not the
	// detector's.
	ErrFormat = errors.New("motion: unsupported frame format")
	// ErrShortFrame: the frame's data is shorter than its format needs.
	ErrShortFrame = errors.New("motion: frame data too short")
	// ErrTime: the frame's timestamp is earlier than the previous one's.
	ErrTime = errors.New("motion: frame time went backwards")
)

// Bounds of a frame's width and height, and of the cells of the grid (and
// so of every buffer): 1920x1080 fits without downscaling.
const (
	maxSide  = 16384
	maxCells = 1 << 21
)

// Kind says what a Transition reports.
type Kind uint8

const (
	Started Kind = iota + 1 // motion started in a zone
	Ended                   // motion in a zone ended
)

func (k Kind) String() string {
	switch k {
	case Started:
		return "started"
	case Ended:
		return "ended"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Box is a bounding box in normalised frame coordinates: cells from
// (X0, Y0) up to, not including, (X1, Y1).
type Box struct{ X0, Y0, X1, Y1 float64 }

// Transition is motion starting or ending in one zone.
type Transition struct {
	Kind Kind
	Zone string
	// Time is when it happened: for Started the first frame of the run
	// that started it, for Ended the last frame with motion. The frame
	// that decided it is later (StartFrames, EndAfter).
	Time hal.Mono
	// Box and Area: for Started, the motion in the zone in the frame that
	// decided it; for Ended, the union of every frame's box and the
	// largest area (the peak) over the whole episode. Area is a fraction
	// of the frame.
	Box  Box
	Area float64
	// Duration (Ended only) is from the first to the last frame with motion.
	Duration time.Duration
	// Frames (Ended only) counts the processed frames with motion in the
	// zone during the episode.
	Frames int
}

// Stats counts what a detector did since New.
type Stats struct {
	Frames       uint64 // frames processed
	Skipped      uint64 // frames skipped by MaxFPS
	Calibrations uint64 // times the light changed at once and the background was re-seeded
	Calibrating  uint64 // frames processed while calibrating
}

// FrameInfo describes the last frame Process was given.
type FrameInfo struct {
	Time        hal.Mono
	Skipped     bool    // MaxFPS skipped it; the fields below are zero
	Calibrating bool    // it was taken as background; nothing was reported
	Changed     float64 // fraction of cells over the threshold, before dilation
	Light       float64 // brightness relative to the background (1: the same)
	Regions     int     // regions of at least MinArea
	Area        float64 // fraction of the frame in those regions
}

// zone is one zone's raster size and its start/end state.
type zone struct {
	name  string
	cells int

	// This frame's motion in the zone, in cells.
	count          int
	x0, y0, x1, y1 int

	active bool
	run    int      // frames with motion in a row, while not active
	first  hal.Mono // first frame of the run or episode
	last   hal.Mono // last frame with motion
	frames int      // frames with motion in the run or episode
	peak   int      // largest count
	box    cellBox  // union of the boxes
}

type cellBox struct{ x0, y0, x1, y1 int }

func (b *cellBox) add(x0, y0, x1, y1 int) {
	if b.x1 == 0 { // empty: x1 is exclusive, so a box has x1 > 0
		*b = cellBox{x0, y0, x1, y1}
		return
	}
	b.x0, b.y0, b.x1, b.y1 = min(b.x0, x0), min(b.y0, y0), max(b.x1, x1), max(b.y1, y1)
}

// Detector finds motion in the frames of one camera. Make it with New.
type Detector struct {
	cfg    Config
	format hal.FrameFormat
	need   int // bytes a frame needs
	f      int // downscale factor
	w, h   int // cells across and down
	n      int // w*h

	thr         int // a cell changed when its difference is above thr
	minCells    int // smallest region kept
	calibCells  int // more changed cells than this means the light changed
	minInterval time.Duration
	bgTau       float64 // seconds
	normTau     float64 // seconds

	// Buffers, each of n cells unless noted.
	colSum  []uint64 // per cell column, while downscaling one row of cells
	small   []uint8  // downscaled luma
	tmp     []uint16 // horizontal pass of the blur
	blur    []uint8
	acc     []float32 // the background
	ratio   []float32 // frame/background of a quarter of the cells, for the illumination
	changed []int32   // indices of the changed cells
	dil     []uint8   // changed cells, dilated (0/1)
	labels  []int32   // region of each cell of dil, from 1
	visit   []int32   // the regions' cells, region after region
	kept    []span    // the regions kept, in visit
	zbits   []uint32  // by cell: the zones it is in
	zones   []zone

	seeded     bool
	seen       hal.Mono // time of the last frame given
	last       hal.Mono // time of the last frame processed
	calibUntil hal.Mono
	sigma      float64 // tracked contrast: standard deviation of the cells
	drift      float64 // recent change of the light: log of the brightness ratios, fading over lightWindow

	stats Stats
	info  FrameInfo
}

// New returns a detector for frames of format f with configuration cfg
// (checked with Validate, zero fields set to their defaults). Errors wrap
// ErrConfig or ErrFormat.
func New(cfg Config, f hal.FrameFormat) (*Detector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	bpp := 0
	switch f.Pixel {
	case hal.PixelYUYV:
		bpp = 2
	case hal.PixelGrey:
		bpp = 1
	default:
		return nil, fmt.Errorf("%w: %v (want YUYV or GREY)", ErrFormat, f.Pixel)
	}
	if f.Width <= 0 || f.Height <= 0 || f.Width > maxSide || f.Height > maxSide {
		return nil, fmt.Errorf("%w: size %dx%d is outside 1..%d", ErrFormat, f.Width, f.Height, maxSide)
	}
	if f.Pixel == hal.PixelYUYV && f.Width%2 != 0 {
		return nil, fmt.Errorf("%w: YUYV width %d is odd", ErrFormat, f.Width)
	}
	if f.Stride < f.Width*bpp || f.Stride > 4*maxSide {
		return nil, fmt.Errorf("%w: stride %d for %s width %d (want %d to %d)", ErrFormat, f.Stride, f.Pixel, f.Width, f.Width*bpp, 4*maxSide)
	}
	ds := cfg.Downscale
	if ds == 0 {
		ds = 1
		for ds*2 <= MaxDownscale && f.Width/(ds*2) >= 80 {
			ds *= 2
		}
	}
	d := &Detector{
		cfg:    cfg,
		format: f,
		need:   (f.Height-1)*f.Stride + f.Width*bpp,
		f:      ds,
		w:      f.Width / ds,
		h:      f.Height / ds,
	}
	if d.w < 4 || d.h < 4 {
		return nil, fmt.Errorf("%w: %dx%d downscaled by %d is %dx%d cells, fewer than 4x4", ErrFormat, f.Width, f.Height, ds, d.w, d.h)
	}
	if d.w*d.h > maxCells {
		return nil, fmt.Errorf("%w: %dx%d downscaled by %d is %d cells, more than %d (downscale more)", ErrFormat, f.Width, f.Height, ds, d.w*d.h, maxCells)
	}
	d.n = d.w * d.h
	d.thr = max(2, int(math.RoundToEven(64*(1-cfg.Sensitivity))))
	d.minCells = max(1, int(math.Ceil(cfg.MinArea*float64(d.n)-1e-9)))
	d.calibCells = int(cfg.CalibrateAbove * float64(d.n))
	if cfg.MaxFPS > 0 {
		d.minInterval = time.Duration(float64(time.Second) / cfg.MaxFPS)
	}
	d.bgTau = cfg.Background.Seconds()
	d.normTau = 5 * d.bgTau

	d.colSum = make([]uint64, d.w)
	d.small = make([]uint8, d.n)
	d.tmp = make([]uint16, d.n)
	d.blur = make([]uint8, d.n)
	d.acc = make([]float32, d.n)
	d.ratio = make([]float32, 0, (d.w+1)/2*((d.h+1)/2))
	d.changed = make([]int32, 0, d.n)
	d.dil = make([]uint8, d.n)
	d.labels = make([]int32, d.n)
	d.visit = make([]int32, 0, d.n)
	d.kept = make([]span, 0, d.n/max(d.minCells, 4)+1)
	d.zbits = make([]uint32, d.n)
	d.zones = make([]zone, len(cfg.Zones))
	for i, z := range cfg.Zones {
		d.zones[i].name = z.Name
		for cy := range d.h {
			for cx := range d.w {
				q := Point{(float64(cx) + 0.5) / float64(d.w), (float64(cy) + 0.5) / float64(d.h)}
				if inside(z.Polygon, q) {
					d.zbits[cy*d.w+cx] |= 1 << i
					d.zones[i].cells++
				}
			}
		}
		if d.zones[i].cells == 0 {
			return nil, fmt.Errorf("%w: Zones[%d] %q covers no cell of the %dx%d grid (the frame downscaled by %d)", ErrConfig, i, z.Name, d.w, d.h, ds)
		}
	}
	return d, nil
}

// Format returns the frame format the detector takes (Rate is not compared).
func (d *Detector) Format() hal.FrameFormat { return d.format }

// Grid returns the size of the downscaled frame in cells and the factor.
func (d *Detector) Grid() (w, h, downscale int) { return d.w, d.h, d.f }

// Stats returns the counters since New.
func (d *Detector) Stats() Stats { return d.stats }

// Last describes the last frame given to Process.
func (d *Detector) Last() FrameInfo { return d.info }

// Process takes one frame and appends to out the transitions it causes,
// in the order of the configured zones (usually none). The frame's data is
// read during the call only; the caller may release it afterwards.
//
// A frame whose format (pixel, size, stride) is not the detector's is
// refused with ErrFormat, one too short with ErrShortFrame, and one older
// than the previous with ErrTime; the detector's state is then unchanged.
// A frame sooner than MaxFPS allows (with 10 % slack for jitter) is
// skipped and counted.
func (d *Detector) Process(fr *hal.Frame, out []Transition) ([]Transition, error) {
	if fr == nil {
		return out, fmt.Errorf("%w: no frame", ErrFormat)
	}
	if g := fr.Format; g.Pixel != d.format.Pixel || g.Width != d.format.Width || g.Height != d.format.Height || g.Stride != d.format.Stride {
		return out, fmt.Errorf("%w: frame is %s stride %d, the detector takes %s stride %d", ErrFormat, g, g.Stride, d.format, d.format.Stride)
	}
	if len(fr.Data) < d.need {
		return out, fmt.Errorf("%w: %d bytes, %s stride %d needs %d", ErrShortFrame, len(fr.Data), d.format, d.format.Stride, d.need)
	}
	t := fr.Time
	if d.seeded && t < d.seen {
		return out, fmt.Errorf("%w: %v after %v", ErrTime, t, d.seen)
	}
	d.seen = t
	if d.seeded && d.minInterval > 0 && t.Sub(d.last) < d.minInterval-d.minInterval/10 {
		d.stats.Skipped++
		d.info = FrameInfo{Time: t, Skipped: true}
		return out, nil
	}
	return d.process(fr.Data, t, out), nil
}

// Reset ends every zone's motion (appending the Ended transitions, as of
// each zone's last motion) and forgets the background: the next frame
// starts afresh. Use it when the stream stopped or broke off.
func (d *Detector) Reset(out []Transition) []Transition {
	for i := range d.zones {
		z := &d.zones[i]
		if z.active {
			out = append(out, d.ended(z))
		}
		d.zones[i] = zone{name: z.name, cells: z.cells}
	}
	d.seeded = false
	d.calibUntil = 0
	return out
}

func (d *Detector) process(data []byte, t hal.Mono, out []Transition) []Transition {
	d.stats.Frames++
	d.info = FrameInfo{Time: t}
	sigma := d.downscale(data)
	d.gauss3()

	first := !d.seeded
	calibrating := !first && t < d.calibUntil
	dt := t.Sub(d.last).Seconds()
	d.last = t
	if first || calibrating {
		d.sigma = sigma
	} else {
		d.sigma += float64((1 - math.Exp(-dt/d.normTau)) * (sigma - d.sigma))
	}
	if first {
		d.seed()
		d.seeded, d.drift = true, 0
		return d.still(t, out)
	}

	light := d.illumination()
	limit := float32(max(float64(d.thr)/contrastGain(d.sigma), noiseFloor*float64(d.noise(light))))
	d.drift = float64(d.drift*math.Exp(-dt/lightWindow.Seconds())) + math.Log(float64(light))
	alpha := float32(1 - math.Exp(-dt/d.bgTau))
	changed := d.difference(light, limit, alpha)
	d.info.Changed = float64(changed) / float64(d.n)
	d.info.Light = float64(light)
	sudden := changed > d.calibCells || math.Abs(d.drift) > lightLimit
	if calibrating || sudden {
		if !calibrating {
			d.stats.Calibrations++
		}
		if sudden {
			d.calibUntil = t.Add(d.cfg.Calibration)
		}
		d.stats.Calibrating++
		d.info.Calibrating = true
		d.sigma = sigma
		d.seed()
		return d.still(t, out)
	}
	if changed == 0 {
		return d.still(t, out)
	}
	d.dilate()
	regions, cells := d.label()
	d.info.Regions = regions
	d.info.Area = float64(cells) / float64(d.n)
	if regions == 0 {
		return d.still(t, out)
	}
	d.zoneTest()
	return d.update(t, out)
}

// seed makes the blurred frame the background.
func (d *Detector) seed() {
	for i, v := range d.blur {
		d.acc[i] = float32(v)
	}
}

// still runs the zones' state machines for a frame without motion.
func (d *Detector) still(t hal.Mono, out []Transition) []Transition {
	for i := range d.zones {
		d.zones[i].count = 0
	}
	return d.update(t, out)
}

// update runs each zone's state machine on its motion in this frame.
func (d *Detector) update(t hal.Mono, out []Transition) []Transition {
	for i := range d.zones {
		z := &d.zones[i]
		if z.count == 0 {
			if !z.active {
				z.run = 0
			} else if t.Sub(z.last) >= d.cfg.EndAfter {
				out = append(out, d.ended(z))
				z.active, z.run = false, 0
			}
			continue
		}
		if !z.active && z.run == 0 {
			z.first, z.frames, z.peak, z.box = t, 0, 0, cellBox{}
		}
		z.last = t
		z.frames++
		z.peak = max(z.peak, z.count)
		z.box.add(z.x0, z.y0, z.x1, z.y1)
		if z.active {
			continue
		}
		z.run++
		if z.run >= d.cfg.StartFrames {
			z.active = true
			out = append(out, Transition{
				Kind: Started,
				Zone: z.name,
				Time: z.first,
				Box:  d.box(cellBox{z.x0, z.y0, z.x1, z.y1}),
				Area: float64(z.count) / float64(d.n),
			})
		}
	}
	return out
}

func (d *Detector) ended(z *zone) Transition {
	return Transition{
		Kind:     Ended,
		Zone:     z.name,
		Time:     z.last,
		Box:      d.box(z.box),
		Area:     float64(z.peak) / float64(d.n),
		Duration: z.last.Sub(z.first),
		Frames:   z.frames,
	}
}

func (d *Detector) box(b cellBox) Box {
	w, h := float64(d.w), float64(d.h)
	return Box{float64(b.x0) / w, float64(b.y0) / h, float64(b.x1) / w, float64(b.y1) / h}
}
