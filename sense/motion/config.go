package motion

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrConfig is wrapped by every error of Config.Validate and of New about
// the configuration; the message names the field.
var ErrConfig = errors.New("motion: bad config")

// Limits of a configuration.
const (
	MaxZones     = 32 // zones per camera
	MaxVertices  = 64 // vertices per zone polygon
	MaxZoneName  = 64 // bytes of a zone name
	MaxDownscale = 32 // the largest downscale factor
)

// WholeFrame is the name of the zone a detector watches when the
// configuration names none: the whole frame.
const WholeFrame = "frame"

// Defaults, used for the zero value of each field.
const (
	DefaultSensitivity    = 0.5
	DefaultMinArea        = 0.005
	DefaultStartFrames    = 3
	DefaultEndAfter       = time.Second
	DefaultBackground     = 2 * time.Second
	DefaultCalibrateAbove = 0.5
	DefaultCalibration    = time.Second
)

// Point is a position in normalised frame coordinates: X from the left
// edge (0) to the right edge (1), Y from the top (0) to the bottom (1).
type Point struct{ X, Y float64 }

// Zone is a named area of the frame. Motion is reported per zone.
type Zone struct {
	// Name is what events carry: 1 to MaxZoneName bytes of letters,
	// digits, '.', '_' and '-', unique within a camera.
	Name string
	// Polygon is a simple polygon (no edge crosses another) of 3 to
	// MaxVertices points, in order around it; the last point joins the
	// first. A cell of the downscaled frame belongs to the zone when its
	// centre is inside.
	Polygon []Point
}

// Config is the motion configuration of one camera. The zero value of a
// field means its default.
type Config struct {
	// Zones to watch; none means one zone, WholeFrame, covering the frame.
	// Zones may overlap: motion in both is reported in both.
	Zones []Zone
	// Sensitivity in (0, 1]: 1 reports the faintest change, 0.5 (the
	// default) a change of about the scene's typical contrast (one
	// standard deviation of its luma).
	Sensitivity float64
	// MinArea is the smallest moving region that counts, as a fraction of
	// the frame in (0, 1), measured after the dilation (which grows a
	// region by a cell all round); default 0.005 (0.5 %).
	MinArea float64
	// MaxFPS caps the frames processed per second; frames that come sooner
	// are skipped (and counted). 0 processes every frame.
	MaxFPS float64
	// Downscale is the side of the square of pixels averaged into one
	// cell, 1 to MaxDownscale; 0 picks the largest power of two that
	// leaves at least 80 cells across (8 at 640x480: 80x60 cells).
	Downscale int
	// StartFrames is how many processed frames in a row must show motion
	// in a zone before it is reported started; default 3.
	StartFrames int
	// EndAfter is how long a zone must stay still before its motion is
	// reported ended; default 1 s.
	EndAfter time.Duration
	// Background is the time constant of the running-average background:
	// something that stops moving fades into it over a few of these;
	// default 2 s. The scene's contrast is tracked five times slower.
	Background time.Duration
	// CalibrateAbove is the fraction of the frame in (0, 1] that, changing
	// at once, means the light changed rather than something moved (lights
	// switched on, the camera's exposure jumped); default 0.5.
	CalibrateAbove float64
	// Calibration is how long the detector then takes the frames as the
	// new background and reports nothing; default 1 s.
	Calibration time.Duration
}

// Validate checks every field of c and the zones; the error wraps
// ErrConfig and names the first bad field. It does not fill defaults.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
	}
	switch {
	case !(c.Sensitivity >= 0 && c.Sensitivity <= 1):
		return bad("Sensitivity %v is outside [0, 1]", c.Sensitivity)
	case !(c.MinArea >= 0 && c.MinArea < 1):
		return bad("MinArea %v is outside [0, 1)", c.MinArea)
	case !(c.MaxFPS >= 0 && c.MaxFPS <= 1000):
		return bad("MaxFPS %v is outside [0, 1000]", c.MaxFPS)
	case c.Downscale < 0 || c.Downscale > MaxDownscale:
		return bad("Downscale %d is outside [0, %d]", c.Downscale, MaxDownscale)
	case c.StartFrames < 0 || c.StartFrames > 1000:
		return bad("StartFrames %d is outside [0, 1000]", c.StartFrames)
	case c.EndAfter < 0 || c.EndAfter > time.Hour:
		return bad("EndAfter %v is outside [0, 1h]", c.EndAfter)
	case c.Background < 0 || c.Background > time.Hour:
		return bad("Background %v is outside [0, 1h]", c.Background)
	case !(c.CalibrateAbove >= 0 && c.CalibrateAbove <= 1):
		return bad("CalibrateAbove %v is outside [0, 1]", c.CalibrateAbove)
	case c.Calibration < 0 || c.Calibration > time.Hour:
		return bad("Calibration %v is outside [0, 1h]", c.Calibration)
	case len(c.Zones) > MaxZones:
		return bad("Zones has %d zones, more than %d", len(c.Zones), MaxZones)
	}
	for i, z := range c.Zones {
		path := fmt.Sprintf("Zones[%d]", i)
		if err := z.validate(path); err != nil {
			return bad("%v", err)
		}
		for j := range i {
			if c.Zones[j].Name == z.Name {
				return bad("%s.Name %q is also the name of Zones[%d]", path, z.Name, j)
			}
		}
	}
	return nil
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Sensitivity, DefaultSensitivity)
	def(&c.MinArea, DefaultMinArea)
	def(&c.CalibrateAbove, DefaultCalibrateAbove)
	defDur(&c.EndAfter, DefaultEndAfter)
	defDur(&c.Background, DefaultBackground)
	defDur(&c.Calibration, DefaultCalibration)
	if c.StartFrames == 0 {
		c.StartFrames = DefaultStartFrames
	}
	if len(c.Zones) == 0 {
		c.Zones = []Zone{{Name: WholeFrame, Polygon: []Point{{0, 0}, {1, 0}, {1, 1}, {0, 1}}}}
	}
	return c
}

// validate checks z, which is the field at path (Zones[i]).
func (z Zone) validate(path string) error {
	if err := validName(path, z.Name); err != nil {
		return err
	}
	p := z.Polygon
	if len(p) < 3 || len(p) > MaxVertices {
		return fmt.Errorf("%s.Polygon has %d points, want 3 to %d (zone %q)", path, len(p), MaxVertices, z.Name)
	}
	for i, v := range p {
		if !(v.X >= 0 && v.X <= 1 && v.Y >= 0 && v.Y <= 1) {
			return fmt.Errorf("%s.Polygon[%d] (%v, %v) is outside the frame [0, 1] (zone %q)", path, i, v.X, v.Y, z.Name)
		}
	}
	n := len(p)
	for i := range n {
		if p[i] == p[(i+1)%n] {
			return fmt.Errorf("%s.Polygon[%d] and Polygon[%d] are the same point (zone %q)", path, i, (i+1)%n, z.Name)
		}
	}
	// Edges i (p[i]→p[i+1]) and j must not touch unless they are
	// neighbours, and neighbours must not fold back onto each other.
	for i := range n {
		a, b := p[i], p[(i+1)%n]
		for j := i + 1; j < n; j++ {
			c, d := p[j], p[(j+1)%n]
			switch {
			case j == i+1: // share b == c
				if foldsBack(a, b, d) {
					return fmt.Errorf("%s.Polygon edges %d and %d overlap (zone %q)", path, i, j, z.Name)
				}
			case i == 0 && j == n-1: // share a == d
				if foldsBack(b, a, c) {
					return fmt.Errorf("%s.Polygon edges %d and %d overlap (zone %q)", path, j, i, z.Name)
				}
			default:
				if segmentsTouch(a, b, c, d) {
					return fmt.Errorf("%s.Polygon edges %d and %d cross (zone %q)", path, i, j, z.Name)
				}
			}
		}
	}
	if area := math.Abs(shoelace(p)); !(area > 1e-9) {
		return fmt.Errorf("%s.Polygon has no area (zone %q)", path, z.Name)
	}
	return nil
}

func validName(path, s string) error {
	if s == "" || len(s) > MaxZoneName {
		return fmt.Errorf("%s.Name %q must have 1 to %d bytes", path, s, MaxZoneName)
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
		default:
			return fmt.Errorf("%s.Name %q: %q is not a letter, a digit, '.', '_' or '-'", path, s, r)
		}
	}
	return nil
}

// shoelace returns twice the signed area of polygon p.
func shoelace(p []Point) float64 {
	var s float64
	for i := range p {
		a, b := p[i], p[(i+1)%len(p)]
		s += float64(a.X*b.Y) - float64(b.X*a.Y)
	}
	return s
}

// orient is the sign of the turn a→b→c: >0 left, <0 right, 0 collinear.
func orient(a, b, c Point) float64 {
	return float64((b.X-a.X)*(c.Y-a.Y)) - float64((b.Y-a.Y)*(c.X-a.X)) // not fused, as everywhere
}

// onSegment tells whether c, collinear with a and b, lies between them.
func onSegment(a, b, c Point) bool {
	return min(a.X, b.X) <= c.X && c.X <= max(a.X, b.X) && min(a.Y, b.Y) <= c.Y && c.Y <= max(a.Y, b.Y)
}

// segmentsTouch tells whether segments ab and cd share any point.
func segmentsTouch(a, b, c, d Point) bool {
	o1, o2, o3, o4 := orient(a, b, c), orient(a, b, d), orient(c, d, a), orient(c, d, b)
	if ((o1 > 0 && o2 < 0) || (o1 < 0 && o2 > 0)) && ((o3 > 0 && o4 < 0) || (o3 < 0 && o4 > 0)) {
		return true
	}
	return (o1 == 0 && onSegment(a, b, c)) || (o2 == 0 && onSegment(a, b, d)) ||
		(o3 == 0 && onSegment(c, d, a)) || (o4 == 0 && onSegment(c, d, b))
}

// foldsBack tells whether consecutive edges a→b and b→c overlap: c lies on
// the line through a and b, back on the side of a.
func foldsBack(a, b, c Point) bool {
	if orient(a, b, c) != 0 {
		return false
	}
	return float64((b.X-a.X)*(c.X-b.X))+float64((b.Y-a.Y)*(c.Y-b.Y)) < 0
}

// inside tells whether q is inside polygon p by the even-odd rule (a ray
// towards +X crosses the edges an odd number of times).
func inside(p []Point, q Point) bool {
	in := false
	for i, j := 0, len(p)-1; i < len(p); j, i = i, i+1 {
		a, b := p[i], p[j]
		if (a.Y > q.Y) != (b.Y > q.Y) && q.X < (b.X-a.X)*(q.Y-a.Y)/(b.Y-a.Y)+a.X {
			in = !in
		}
	}
	return in
}
