package motion

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/sense/motion/motiontest"
)

// base is an arbitrary monotonic time for the first frame.
const base = hal.Mono(3 * time.Hour)

func yuyv(w, h int) hal.FrameFormat {
	return hal.FrameFormat{Pixel: hal.PixelYUYV, Width: w, Height: h, Stride: 2 * w}
}

func grey(w, h int) hal.FrameFormat {
	return hal.FrameFormat{Pixel: hal.PixelGrey, Width: w, Height: h, Stride: w}
}

// halves are two zones, the left and the right half of the frame.
var halves = []Zone{
	{Name: "left", Polygon: []Point{{0, 0}, {0.5, 0}, {0.5, 1}, {0, 1}}},
	{Name: "right", Polygon: []Point{{0.5, 0}, {1, 0}, {1, 1}, {0.5, 1}}},
}

// crossing is an object crossing the frame from left to right between 2 s
// and 6 s, at mid height: about 3 % of the frame.
func crossing(luma uint8) []motiontest.Object {
	return []motiontest.Object{{From: 2 * time.Second, To: 6 * time.Second, Start: [2]float64{-0.1, 0.5}, End: [2]float64{1.1, 0.5}, W: 0.15, H: 0.2, Luma: luma}}
}

// result is what a clip produced.
type result struct {
	trs    []Transition
	stats  Stats
	motion int // frames with at least one region
}

// play renders dur of scene at fps and gives every frame to a detector.
func play(t *testing.T, cfg Config, sc motiontest.Scene, fps float64, dur time.Duration) result {
	t.Helper()
	d, err := New(cfg, sc.Format)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, sc.Bytes())
	var r result
	n := int(dur.Seconds() * fps)
	for i := range n {
		at := time.Duration(float64(i) / fps * float64(time.Second))
		sc.Render(buf, at, uint64(i))
		r.trs, err = d.Process(hal.NewFrame(sc.Format, buf, uint64(i), base.Add(at), nil), r.trs)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if d.Last().Regions > 0 {
			r.motion++
		}
	}
	r.stats = d.Stats()
	return r
}

// summary is the transitions as "zone:kind" words, in order.
func summary(trs []Transition) string {
	var b strings.Builder
	for i, tr := range trs {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s:%s", tr.Zone, tr.Kind)
	}
	return b.String()
}

func TestCrossingTwoZones(t *testing.T) {
	padded := yuyv(160, 120)
	padded.Stride = 2*160 + 64
	tests := []struct {
		name   string
		format hal.FrameFormat
		cfg    Config
		objs   []motiontest.Object
		noise  int
	}{
		{"yuyv bright object", yuyv(160, 120), Config{Zones: halves}, crossing(230), 3},
		{"yuyv dark object", yuyv(160, 120), Config{Zones: halves}, crossing(15), 3},
		{"grey", grey(160, 120), Config{Zones: halves}, crossing(230), 3},
		{"yuyv stride padded", padded, Config{Zones: halves}, crossing(230), 3},
		{"yuyv by 4", yuyv(320, 240), Config{Zones: halves}, crossing(230), 3},
		{"yuyv by 8", yuyv(320, 240), Config{Zones: halves, Downscale: 8}, crossing(230), 3},
		{"grey by 8", grey(320, 240), Config{Zones: halves, Downscale: 8}, crossing(230), 3},
		{"by 3", yuyv(240, 180), Config{Zones: halves, Downscale: 3}, crossing(230), 3},
		{"by 1", grey(80, 60), Config{Zones: halves, Downscale: 1}, crossing(230), 3},
		{"noisy camera", yuyv(160, 120), Config{Zones: halves}, crossing(200), 20},
		{"rate capped", yuyv(160, 120), Config{Zones: halves, MaxFPS: 5}, crossing(230), 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sc := motiontest.Scene{Format: tc.format, Seed: 1, Noise: tc.noise, Objects: tc.objs}
			r := play(t, tc.cfg, sc, 15, 10*time.Second)
			if got, want := summary(r.trs), "left:started right:started left:ended right:ended"; got != want {
				t.Fatalf("got %q, want %q", got, want)
			}
			for _, tr := range r.trs {
				left := tr.Zone == "left"
				switch {
				// The object covers 3 % of the frame; with the dilation
				// and the trail it leaves in the background, up to 15 %.
				case tr.Area < 0.01 || tr.Area > 0.15:
					t.Errorf("%s %s: area %v, want 0.01 to 0.15", tr.Zone, tr.Kind, tr.Area)
				case left && tr.Box.X1 > 0.55, !left && tr.Box.X0 < 0.45:
					t.Errorf("%s %s: box %+v outside its zone", tr.Zone, tr.Kind, tr.Box)
				case tr.Box.Y0 < 0.3 || tr.Box.Y1 > 0.7:
					t.Errorf("%s %s: box %+v, want y within the object's 0.4..0.6 and a cell or two", tr.Zone, tr.Kind, tr.Box)
				}
				if tr.Kind == Ended {
					// The object spends about 2.2 s in each half, and its
					// trail fades within about a second more.
					if tr.Duration < 1500*time.Millisecond || tr.Duration > 3500*time.Millisecond {
						t.Errorf("%s ended: duration %v, want 1.5 s to 3.5 s", tr.Zone, tr.Duration)
					}
					if tr.Frames < 10 {
						t.Errorf("%s ended: %d frames, want about 2 s of them", tr.Zone, tr.Frames)
					}
					if !(tr.Box.X0 < 0.1 || tr.Box.X1 > 0.9) {
						t.Errorf("%s ended: box %+v, want the union over the whole crossing of the half", tr.Zone, tr.Box)
					}
				}
			}
			if r.stats.Calibrations != 0 {
				t.Errorf("got %d calibrations, want 0", r.stats.Calibrations)
			}
		})
	}
}

func TestZonesOverlapAndMiss(t *testing.T) {
	zones := []Zone{
		{Name: "all", Polygon: []Point{{0, 0}, {1, 0}, {1, 1}, {0, 1}}},
		{Name: "top-band", Polygon: []Point{{0, 0}, {1, 0}, {1, 0.25}, {0, 0.25}}},
		{Name: "middle-triangle", Polygon: []Point{{0.3, 0.2}, {0.7, 0.2}, {0.5, 0.8}}},
	}
	sc := motiontest.Scene{Format: yuyv(160, 120), Seed: 2, Noise: 3, Objects: crossing(230)}
	r := play(t, Config{Zones: zones}, sc, 15, 10*time.Second)
	got := map[string]string{}
	for _, tr := range r.trs {
		got[tr.Zone] += tr.Kind.String() + " "
	}
	want := map[string]string{"all": "started ended ", "middle-triangle": "started ended "}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestNoZonesMeansWholeFrame(t *testing.T) {
	sc := motiontest.Scene{Format: grey(160, 120), Seed: 3, Noise: 3, Objects: crossing(230)}
	r := play(t, Config{}, sc, 10, 10*time.Second)
	if got, want := summary(r.trs), WholeFrame+":started "+WholeFrame+":ended"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestLightChangesAreNotMotion(t *testing.T) {
	// A change of the light across the whole frame at once re-seeds the
	// background (a calibration); a gradual one is followed by the
	// illumination estimate. A fast ramp may be either.
	const some, none, either = "some", "none", "either"
	tests := []struct {
		name         string
		lights       []motiontest.Light
		calibrations string
	}{
		{"switched on", []motiontest.Light{{At: 3 * time.Second, Gain: 1.8}}, some},
		{"switched on, more on one side", []motiontest.Light{{At: 3 * time.Second, Gain: 1.6, Tilt: 0.8}}, some},
		{"switched off", []motiontest.Light{{At: 3 * time.Second, Gain: 0.4}}, some},
		{"on, then off", []motiontest.Light{{At: 3 * time.Second, Gain: 2}, {At: 6 * time.Second, Gain: 0.5}}, some},
		{"ramp over 0.5 s", []motiontest.Light{{At: 3 * time.Second, Ramp: 500 * time.Millisecond, Gain: 1.8}}, either},
		{"ramp over 0.5 s, uneven", []motiontest.Light{{At: 3 * time.Second, Ramp: 500 * time.Millisecond, Gain: 1.8, Tilt: 0.8}}, either},
		{"gradual, 5 s", []motiontest.Light{{At: 2 * time.Second, Ramp: 5 * time.Second, Gain: 1.8}}, none},
		{"gradual and uneven, 8 s", []motiontest.Light{{At: 1 * time.Second, Ramp: 8 * time.Second, Gain: 1.5, Tilt: 0.6}}, none},
		{"dusk, 10 s", []motiontest.Light{{At: 0, Ramp: 10 * time.Second, Gain: 0.3}}, none},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sc := motiontest.Scene{Format: yuyv(160, 120), Seed: 4, Noise: 3, Lights: tc.lights}
			r := play(t, Config{Zones: halves}, sc, 15, 12*time.Second)
			if len(r.trs) != 0 {
				t.Errorf("got %q, want no motion", summary(r.trs))
			}
			n := r.stats.Calibrations
			if (tc.calibrations == some && n == 0) || (tc.calibrations == none && n != 0) {
				t.Errorf("got %d calibrations, want %s", n, tc.calibrations)
			}
		})
	}
}

func TestMotionAfterLightSwitch(t *testing.T) {
	// The light goes on at 1 s; the object crosses from 2 s: once the
	// calibration is over (1 s), the detector sees it again.
	sc := motiontest.Scene{Format: yuyv(160, 120), Seed: 5, Noise: 3, Objects: crossing(250),
		Lights: []motiontest.Light{{At: time.Second, Gain: 1.5}}}
	r := play(t, Config{Zones: halves}, sc, 15, 10*time.Second)
	if got, want := summary(r.trs), "left:started right:started left:ended right:ended"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if r.stats.Calibrations != 1 {
		t.Errorf("got %d calibrations, want 1", r.stats.Calibrations)
	}
}

func TestStaticNoisySceneIsStill(t *testing.T) {
	tests := []struct {
		name   string
		format hal.FrameFormat
		cfg    Config
		noise  int
		flat   bool
	}{
		{"textured, noise ±10", yuyv(160, 120), Config{}, 10, false},
		{"textured, noise ±30", yuyv(160, 120), Config{}, 30, false},
		{"flat (gain at its cap), noise ±20", yuyv(160, 120), Config{}, 20, true},
		{"by 1, noise ±12", grey(80, 60), Config{Downscale: 1}, 12, false},
		{"by 8, noise ±20", yuyv(320, 240), Config{Downscale: 8}, 20, false},
		{"sensitive, noise ±6", yuyv(160, 120), Config{Sensitivity: 0.8}, 6, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sc := motiontest.Scene{Format: tc.format, Seed: 6, Noise: tc.noise, Flat: tc.flat}
			r := play(t, tc.cfg, sc, 15, 10*time.Second)
			if len(r.trs) != 0 || r.motion != 0 || r.stats.Calibrations != 0 {
				t.Errorf("got %q, %d frames with motion, %d calibrations; want none", summary(r.trs), r.motion, r.stats.Calibrations)
			}
		})
	}
}

func TestHysteresis(t *testing.T) {
	obj := func(from, to time.Duration) motiontest.Object {
		return motiontest.Object{From: from, To: to, Start: [2]float64{0.3, 0.5}, End: [2]float64{0.7, 0.5}, W: 0.15, H: 0.2, Luma: 230}
	}
	const fr = time.Second / 10
	tests := []struct {
		name string
		objs []motiontest.Object
		want string
	}{
		{"one frame", []motiontest.Object{obj(2*time.Second, 2*time.Second+fr)}, ""},
		{"two frames", []motiontest.Object{obj(2*time.Second, 2*time.Second+2*fr)}, ""},
		{"two one-frame blips", []motiontest.Object{obj(2*time.Second, 2*time.Second+fr), obj(2*time.Second+2*fr, 2*time.Second+3*fr)}, ""},
		// Appearing and staying, the object is motion on its first frame
		// and its last; frames in between are still when the object
		// stands. It moves here, so every frame of it is motion.
		{"three frames", []motiontest.Object{obj(2*time.Second, 2*time.Second+3*fr)}, "frame:started frame:ended"},
		{"pause shorter than EndAfter", []motiontest.Object{obj(2*time.Second, 3*time.Second), obj(3500*time.Millisecond, 5*time.Second)}, "frame:started frame:ended"},
		{"pause longer than EndAfter", []motiontest.Object{obj(2*time.Second, 3*time.Second), obj(5*time.Second, 6*time.Second)}, "frame:started frame:ended frame:started frame:ended"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sc := motiontest.Scene{Format: yuyv(160, 120), Seed: 7, Noise: 3, Objects: tc.objs}
			r := play(t, Config{}, sc, 10, 10*time.Second)
			if got := summary(r.trs); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestTransitionTimes(t *testing.T) {
	sc := motiontest.Scene{Format: yuyv(160, 120), Seed: 8, Noise: 3, Objects: []motiontest.Object{
		{From: 2 * time.Second, To: 4 * time.Second, Start: [2]float64{0.3, 0.5}, End: [2]float64{0.7, 0.5}, W: 0.15, H: 0.2, Luma: 230},
	}}
	r := play(t, Config{StartFrames: 2, EndAfter: 1500 * time.Millisecond}, sc, 10, 10*time.Second)
	if len(r.trs) != 2 {
		t.Fatalf("got %q, want a started and an ended", summary(r.trs))
	}
	s, e := r.trs[0], r.trs[1]
	// The object is drawn from the frame at 2 s until 3.9 s; the trail it
	// leaves in the running-average background fades within about a
	// second more.
	if got, want := s.Time, base.Add(2*time.Second); got != want {
		t.Errorf("started at %v, want %v", got, want)
	}
	if e.Time < base.Add(3900*time.Millisecond) || e.Time > base.Add(5500*time.Millisecond) {
		t.Errorf("ended at %v, want 3.9 s to 5.5 s", e.Time)
	}
	if got, want := e.Duration, e.Time.Sub(s.Time); got != want {
		t.Errorf("duration %v, want %v", got, want)
	}
	if got, want := e.Frames, int(e.Duration/(time.Second/10))+1; got != want {
		t.Errorf("frames %d, want %d (every frame from first to last)", got, want)
	}
}

func TestMaxFPS(t *testing.T) {
	tests := []struct {
		fps, max           float64
		processed, skipped uint64
	}{
		{30, 0, 300, 0},
		{30, 10, 100, 200},
		{30, 30, 300, 0},
		{30, 7.5, 75, 225},
		{25, 10, 84, 166}, // every 3rd, then every 2nd frame (80 ms, 120 ms apart)
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%v fps capped at %v", tc.fps, tc.max), func(t *testing.T) {
			sc := motiontest.Scene{Format: grey(64, 48), Seed: 9}
			r := play(t, Config{MaxFPS: tc.max}, sc, tc.fps, 10*time.Second)
			if r.stats.Frames != tc.processed || r.stats.Skipped != tc.skipped {
				t.Errorf("got %d processed and %d skipped, want %d and %d", r.stats.Frames, r.stats.Skipped, tc.processed, tc.skipped)
			}
		})
	}
}

func TestReset(t *testing.T) {
	sc := motiontest.Scene{Format: yuyv(160, 120), Seed: 10, Noise: 3, Objects: crossing(230)}
	d, err := New(Config{}, sc.Format)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, sc.Bytes())
	var trs []Transition
	for i := range 40 { // until 4 s: in the middle of the crossing
		at := time.Duration(i) * time.Second / 10
		sc.Render(buf, at, uint64(i))
		if trs, err = d.Process(hal.NewFrame(sc.Format, buf, uint64(i), base.Add(at), nil), trs); err != nil {
			t.Fatal(err)
		}
	}
	trs = d.Reset(trs)
	if got, want := summary(trs), "frame:started frame:ended"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got, want := trs[1].Time, base.Add(3900*time.Millisecond); got != want {
		t.Errorf("ended as of %v, want the last frame %v", got, want)
	}
	// Afterwards the next frame seeds a new background: nothing happens,
	// even with the object in view, and time may start over.
	trs = trs[:0]
	sc.Render(buf, 5*time.Second, 50)
	if trs, err = d.Process(hal.NewFrame(sc.Format, buf, 50, base, nil), trs); err != nil || len(trs) != 0 {
		t.Errorf("after Reset: got %q, %v; want nothing", summary(trs), err)
	}
	if got := d.Reset(nil); len(got) != 0 {
		t.Errorf("Reset when still: got %q, want nothing", summary(got))
	}
}

func TestProcessRefusesBadFrames(t *testing.T) {
	f := yuyv(160, 120)
	d, err := New(Config{}, f)
	if err != nil {
		t.Fatal(err)
	}
	good := make([]byte, f.Stride*f.Height)
	if _, err := d.Process(hal.NewFrame(f, good, 1, base, nil), nil); err != nil {
		t.Fatal(err)
	}
	other := f
	other.Stride += 2
	tests := []struct {
		name  string
		frame *hal.Frame
		want  error
	}{
		{"nil", nil, ErrFormat},
		{"grey frame", hal.NewFrame(grey(160, 120), good, 2, base.Add(time.Second), nil), ErrFormat},
		{"other size", hal.NewFrame(yuyv(320, 240), make([]byte, 320*240*2), 2, base.Add(time.Second), nil), ErrFormat},
		{"other stride", hal.NewFrame(other, make([]byte, other.Stride*120), 2, base.Add(time.Second), nil), ErrFormat},
		{"short", hal.NewFrame(f, good[:len(good)-1], 2, base.Add(time.Second), nil), ErrShortFrame},
		{"empty", hal.NewFrame(f, nil, 2, base.Add(time.Second), nil), ErrShortFrame},
		{"backwards", hal.NewFrame(f, good, 2, base.Add(-time.Millisecond), nil), ErrTime},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := d.Process(tc.frame, nil)
			if !errors.Is(err, tc.want) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
			if len(out) != 0 {
				t.Errorf("got transitions %q with an error", summary(out))
			}
			if got := d.Stats(); got != (Stats{Frames: 1}) {
				t.Errorf("stats %+v after a refused frame, want 1 frame", got)
			}
		})
	}
	// A frame with the same time is accepted; with a different rate too.
	again := hal.NewFrame(f, good, 2, base, nil)
	again.Format.Rate = 30
	if _, err := d.Process(again, nil); err != nil {
		t.Errorf("same time, other rate: %v", err)
	}
}

func TestNewRefusesBadFormats(t *testing.T) {
	tests := []struct {
		name   string
		format hal.FrameFormat
		cfg    Config
		want   error
		msg    string
	}{
		{"mjpeg", hal.FrameFormat{Pixel: hal.PixelMJPEG, Width: 640, Height: 480}, Config{}, ErrFormat, "MJPG"},
		{"zero size", yuyv(0, 0), Config{}, ErrFormat, "size"},
		{"negative", grey(-8, 8), Config{}, ErrFormat, "size"},
		{"huge", grey(1<<20, 8), Config{}, ErrFormat, "size"},
		{"odd yuyv width", hal.FrameFormat{Pixel: hal.PixelYUYV, Width: 63, Height: 48, Stride: 126}, Config{}, ErrFormat, "odd"},
		{"short stride", hal.FrameFormat{Pixel: hal.PixelYUYV, Width: 64, Height: 48, Stride: 64}, Config{}, ErrFormat, "stride"},
		{"too few cells", grey(64, 48), Config{Downscale: 16}, ErrFormat, "fewer than 4x4"},
		{"bad config", grey(64, 48), Config{Sensitivity: 2}, ErrConfig, "Sensitivity"},
		{"zone between cells", grey(128, 96), Config{Downscale: 16, Zones: []Zone{{Name: "sliver", Polygon: []Point{{0.01, 0.01}, {0.1, 0.01}, {0.01, 0.1}}}}}, ErrConfig, `"sliver" covers no cell`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg, tc.format)
			if !errors.Is(err, tc.want) || !strings.Contains(fmt.Sprint(err), tc.msg) {
				t.Errorf("got %v, want %v mentioning %q", err, tc.want, tc.msg)
			}
		})
	}
}

func TestAutoDownscale(t *testing.T) {
	tests := []struct {
		w, h       int
		cw, ch, ds int
	}{
		{640, 480, 80, 60, 8},
		{320, 240, 80, 60, 4},
		{1920, 1080, 120, 67, 16},
		{4096, 2160, 128, 67, 32},
		{160, 120, 80, 60, 2},
		{100, 60, 100, 60, 1},
	}
	for _, tc := range tests {
		d, err := New(Config{}, grey(tc.w, tc.h))
		if err != nil {
			t.Fatal(err)
		}
		if cw, ch, ds := d.Grid(); cw != tc.cw || ch != tc.ch || ds != tc.ds {
			t.Errorf("%dx%d: got %dx%d cells by %d, want %dx%d by %d", tc.w, tc.h, cw, ch, ds, tc.cw, tc.ch, tc.ds)
		}
	}
}

// The word-at-a-time downscaling gives the same cells as the plain loop.
func TestDownscalePathsAgree(t *testing.T) {
	tests := []struct {
		pixel hal.PixelFormat
		f     int
	}{
		{hal.PixelYUYV, 4}, {hal.PixelYUYV, 8}, {hal.PixelYUYV, 12}, {hal.PixelYUYV, 32},
		{hal.PixelGrey, 8}, {hal.PixelGrey, 16}, {hal.PixelGrey, 32},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%v by %d", tc.pixel, tc.f), func(t *testing.T) {
			bpp := 1
			if tc.pixel == hal.PixelYUYV {
				bpp = 2
			}
			w, h := 8*tc.f+6, 5*tc.f+3 // leftover pixels on both sides
			f := hal.FrameFormat{Pixel: tc.pixel, Width: w, Height: h, Stride: w*bpp + 10}
			d, err := New(Config{Downscale: tc.f}, f)
			if err != nil {
				t.Fatal(err)
			}
			data := make([]byte, d.need)
			for _, fill := range []func(int) byte{
				func(int) byte { return 255 },
				func(int) byte { return byte(rng.IntN(256)) },
				func(i int) byte { return byte(i % 7 * 40) },
			} {
				for i := range data {
					data[i] = fill(i)
				}
				s1 := d.downscale(data)
				fast := append([]uint8(nil), d.small...)
				d.downscaleBytes(data)
				if string(fast) != string(d.small) {
					t.Fatalf("word path and byte path differ:\n%v\n%v", fast, d.small)
				}
				if s1 < 0 || s1 > 128 {
					t.Errorf("sigma %v", s1)
				}
			}
		})
	}
}

func TestCellMeanRoundsHalfToEven(t *testing.T) {
	tests := []struct {
		sum, area uint64
		want      uint8
	}{
		{0, 64, 0}, {31, 64, 0}, {32, 64, 0}, {33, 64, 1}, {96, 64, 2}, {95, 64, 1}, {160, 64, 2}, {64 * 255, 64, 255}, {4, 9, 0}, {5, 9, 1},
	}
	for _, tc := range tests {
		if got := cellMean(tc.sum, tc.area); got != tc.want {
			t.Errorf("cellMean(%d, %d) = %d, want %d", tc.sum, tc.area, got, tc.want)
		}
		var out [1]uint8
		if cellMeans(out[:], []uint64{tc.sum}, tc.area, false); out[0] != tc.want {
			t.Errorf("cellMeans(%d, %d) = %d, want %d", tc.sum, tc.area, out[0], tc.want)
		}
	}
	// Every sum of a 4x4 cell, and the lanes of a word.
	for sum := range uint64(16*255 + 1) {
		var out [1]uint8
		if cellMeans(out[:], []uint64{sum}, 16, false); out[0] != cellMean(sum, 16) {
			t.Errorf("cellMeans(%d, 16) = %d, want %d", sum, out[0], cellMean(sum, 16))
		}
	}
	var out [1]uint8
	if cellMeans(out[:], []uint64{1<<48 | 2<<32 | 3<<16 | 4}, 4, true); out[0] != 2 {
		t.Errorf("cellMeans of lanes 1+2+3+4 over 4 = %d, want 2 (2.5 rounded to even)", out[0])
	}
}

func TestProcessDoesNotAllocate(t *testing.T) {
	sc := motiontest.Scene{Format: yuyv(160, 120), Seed: 11, Noise: 3, Objects: crossing(230)}
	d, err := New(Config{Zones: halves}, sc.Format)
	if err != nil {
		t.Fatal(err)
	}
	const n = 150
	frames := make([][]byte, n)
	for i := range frames {
		frames[i] = make([]byte, sc.Bytes())
		sc.Render(frames[i], time.Duration(i)*time.Second/15, uint64(i))
	}
	out := make([]Transition, 0, 2*len(halves))
	fr := hal.NewFrame(sc.Format, nil, 0, 0, nil)
	i, transitions := 0, 0
	allocs := testing.AllocsPerRun(n-1, func() {
		fr.Data, fr.Time = frames[i], base.Add(time.Duration(i)*time.Second/15)
		i++
		var err error
		if out, err = d.Process(fr, out[:0]); err != nil {
			t.Fatal(err)
		}
		transitions += len(out)
	})
	if allocs != 0 {
		t.Errorf("got %v allocations per frame, want 0", allocs)
	}
	if transitions == 0 {
		t.Error("the clip caused no transitions; the test measured only still frames")
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{Started: "started", Ended: "ended", 0: "Kind(0)", 9: "Kind(9)"} {
		if got := k.String(); got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}
