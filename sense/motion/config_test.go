package motion

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

func square(name string, x0, y0, x1, y1 float64) Zone {
	return Zone{Name: name, Polygon: []Point{{x0, y0}, {x1, y0}, {x1, y1}, {x0, y1}}}
}

func circle(name string, n int) Zone {
	z := Zone{Name: name}
	for i := range n {
		a := 2 * math.Pi * float64(i) / float64(n)
		z.Polygon = append(z.Polygon, Point{0.5 + 0.4*math.Cos(a), 0.5 + 0.4*math.Sin(a)})
	}
	return z
}

func TestValidateAccepts(t *testing.T) {
	many := make([]Zone, MaxZones)
	for i := range many {
		many[i] = square(fmt.Sprintf("z%d", i), 0, 0, 1, 1)
	}
	tests := []struct {
		name string
		cfg  Config
	}{
		{"zero value", Config{}},
		{"every field", Config{Zones: halves, Sensitivity: 1, MinArea: 0.5, MaxFPS: 30, Downscale: 32, StartFrames: 1, EndAfter: time.Hour, Background: time.Hour, CalibrateAbove: 1, Calibration: time.Hour}},
		{"triangle", Config{Zones: []Zone{{Name: "t", Polygon: []Point{{0, 0}, {1, 0}, {0, 1}}}}}},
		{"clockwise", Config{Zones: []Zone{{Name: "cw", Polygon: []Point{{0, 0}, {0, 1}, {1, 1}, {1, 0}}}}}},
		{"concave (an L)", Config{Zones: []Zone{{Name: "L", Polygon: []Point{{0, 0}, {0.3, 0}, {0.3, 0.7}, {1, 0.7}, {1, 1}, {0, 1}}}}}},
		{"collinear vertex", Config{Zones: []Zone{{Name: "c", Polygon: []Point{{0, 0}, {0.5, 0}, {1, 0}, {1, 1}, {0, 1}}}}}},
		{"64 vertices", Config{Zones: []Zone{circle("round", MaxVertices)}}},
		{"overlapping zones", Config{Zones: []Zone{square("a", 0, 0, 0.6, 1), square("b", 0.4, 0, 1, 1)}}},
		{"32 zones", Config{Zones: many}},
		{"name characters", Config{Zones: []Zone{square("Front_door-2.left", 0, 0, 1, 1)}}},
		{"64-byte name", Config{Zones: []Zone{square(strings.Repeat("n", MaxZoneName), 0, 0, 1, 1)}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.Validate(); err != nil {
				t.Errorf("got %v, want nil", err)
			}
		})
	}
}

func TestValidateRefuses(t *testing.T) {
	nan := math.NaN()
	zone := func(p ...Point) []Zone { return []Zone{{Name: "z", Polygon: p}} }
	tests := []struct {
		name string
		cfg  Config
		want string // in the message
	}{
		{"sensitivity above 1", Config{Sensitivity: 1.5}, "Sensitivity 1.5"},
		{"sensitivity negative", Config{Sensitivity: -0.1}, "Sensitivity"},
		{"sensitivity NaN", Config{Sensitivity: nan}, "Sensitivity NaN"},
		{"min area 1", Config{MinArea: 1}, "MinArea 1"},
		{"min area negative", Config{MinArea: -0.01}, "MinArea"},
		{"min area NaN", Config{MinArea: nan}, "MinArea"},
		{"max fps negative", Config{MaxFPS: -1}, "MaxFPS"},
		{"max fps infinite", Config{MaxFPS: math.Inf(1)}, "MaxFPS"},
		{"downscale negative", Config{Downscale: -1}, "Downscale -1"},
		{"downscale 33", Config{Downscale: 33}, "Downscale 33"},
		{"start frames negative", Config{StartFrames: -2}, "StartFrames"},
		{"start frames 1001", Config{StartFrames: 1001}, "StartFrames"},
		{"end after negative", Config{EndAfter: -time.Second}, "EndAfter"},
		{"end after 2h", Config{EndAfter: 2 * time.Hour}, "EndAfter"},
		{"background negative", Config{Background: -1}, "Background"},
		{"calibrate above 1.1", Config{CalibrateAbove: 1.1}, "CalibrateAbove"},
		{"calibrate above NaN", Config{CalibrateAbove: nan}, "CalibrateAbove"},
		{"calibration negative", Config{Calibration: -1}, "Calibration"},
		{"33 zones", Config{Zones: make([]Zone, MaxZones+1)}, "33 zones"},
		{"no name", Config{Zones: []Zone{square("", 0, 0, 1, 1)}}, "Zones[0].Name"},
		{"long name", Config{Zones: []Zone{square(strings.Repeat("n", MaxZoneName+1), 0, 0, 1, 1)}}, "1 to 64 bytes"},
		{"space in name", Config{Zones: []Zone{square("front door", 0, 0, 1, 1)}}, `' ' is not a letter`},
		{"non-ASCII name", Config{Zones: []Zone{square("tür", 0, 0, 1, 1)}}, `'ü' is not a letter`},
		{"duplicate names", Config{Zones: []Zone{square("a", 0, 0, 1, 1), square("b", 0, 0, 1, 1), square("a", 0, 0, 0.5, 0.5)}}, `Zones[2].Name "a" is also the name of Zones[0]`},
		{"two points", Config{Zones: zone(Point{0, 0}, Point{1, 1})}, "Polygon has 2 points"},
		{"no points", Config{Zones: zone()}, "Polygon has 0 points"},
		{"65 points", Config{Zones: []Zone{circle("round", MaxVertices+1)}}, "Polygon has 65 points"},
		{"outside the frame", Config{Zones: zone(Point{0, 0}, Point{1.1, 0}, Point{1, 1})}, "Zones[0].Polygon[1] (1.1, 0) is outside"},
		{"negative", Config{Zones: zone(Point{0, 0}, Point{1, 0}, Point{1, -0.5})}, "Polygon[2]"},
		{"NaN", Config{Zones: zone(Point{0, 0}, Point{nan, 0}, Point{1, 1})}, "Polygon[1] (NaN, 0)"},
		{"infinite", Config{Zones: zone(Point{0, 0}, Point{1, math.Inf(1)}, Point{1, 1})}, "Polygon[1]"},
		{"repeated point", Config{Zones: zone(Point{0, 0}, Point{1, 0}, Point{1, 0}, Point{1, 1})}, "Polygon[1] and Polygon[2] are the same point"},
		{"closed explicitly", Config{Zones: zone(Point{0, 0}, Point{1, 0}, Point{1, 1}, Point{0, 0})}, "Polygon[3] and Polygon[0] are the same point"},
		{"bow tie", Config{Zones: zone(Point{0, 0}, Point{1, 1}, Point{1, 0}, Point{0, 1})}, "edges 0 and 2 cross"},
		{"touching itself", Config{Zones: zone(Point{0, 0}, Point{0.5, 0.5}, Point{1, 0}, Point{1, 1}, Point{0.5, 0.5}, Point{0, 1})}, "cross"},
		{"folding back", Config{Zones: zone(Point{0, 0}, Point{1, 0}, Point{0.5, 0}, Point{0.5, 1})}, "edges 0 and 1 overlap"},
		{"flat", Config{Zones: zone(Point{0, 0}, Point{0.5, 0.5}, Point{1, 1})}, "overlap"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if !errors.Is(err, ErrConfig) || !strings.Contains(fmt.Sprint(err), tc.want) {
				t.Errorf("got %v, want ErrConfig mentioning %q", err, tc.want)
			}
		})
	}
}

func TestZoneCells(t *testing.T) {
	// 80x60 cells; cell centres at (x+0.5)/80, (y+0.5)/60.
	tests := []struct {
		zone  Zone
		cells int
	}{
		{square("all", 0, 0, 1, 1), 4800},
		{square("left", 0, 0, 0.5, 1), 2400},
		{square("quarter", 0.5, 0.5, 1, 1), 1200},
		{Zone{Name: "lower-left-triangle", Polygon: []Point{{0, 0}, {1, 1}, {0, 1}}}, 2400},
		{square("between-centres", 0.101, 0.1, 0.104, 0.9), 0},
	}
	for _, tc := range tests {
		t.Run(tc.zone.Name, func(t *testing.T) {
			d, err := New(Config{Zones: []Zone{tc.zone}}, yuyv(640, 480))
			if tc.cells == 0 {
				if !errors.Is(err, ErrConfig) {
					t.Errorf("got %v, want ErrConfig: the zone covers no cell", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := d.zones[0].cells; got != tc.cells {
				t.Errorf("got %d cells, want %d", got, tc.cells)
			}
		})
	}
}
