package motion

import (
	"testing"
	"testing/synctest"

	"go.uber.org/goleak"
	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/sim"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The simulated board's camera: a bright object crosses the frame about
// every 20 s, at a height between 0.3 and 0.7, alternately from the left
// and from the right, over a textured background with sensor noise. In a
// minute each crossing starts and ends motion once in each half.
func TestSimCameraCrossings(t *testing.T) {
	for _, pix := range []hal.PixelFormat{hal.PixelYUYV, hal.PixelGrey} {
		t.Run(pix.String(), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				b := sim.New(3)
				cam, err := b.Drivers().OpenCamera(hal.CameraConfig{Device: sim.CameraName, Pixel: []hal.PixelFormat{pix}, Width: 160, Height: 120, Rate: 10 * physic.Hertz})
				if err != nil {
					t.Fatal(err)
				}
				defer cam.Close()
				d, err := New(Config{Zones: halves}, cam.Format())
				if err != nil {
					t.Fatal(err)
				}
				var trs []Transition
				for range 600 { // 60 s at 10 fps
					f, err := cam.NextFrame(t.Context())
					if err != nil {
						t.Fatal(err)
					}
					trs, err = d.Process(f, trs)
					f.Release()
					if err != nil {
						t.Fatal(err)
					}
				}
				per := map[string]string{}
				for _, tr := range trs {
					per[tr.Zone] += tr.Kind.String() + " "
				}
				want := "started ended started ended started ended "
				for _, z := range []string{"left", "right"} {
					if per[z] != want {
						t.Errorf("zone %s: got %q, want %q", z, per[z], want)
					}
				}
				if len(per) != 2 {
					t.Errorf("got transitions in zones %v, want left and right only", per)
				}
				if s := d.Stats(); s.Frames != 600 || s.Skipped != 0 || s.Calibrations != 0 {
					t.Errorf("stats %+v, want 600 frames, none skipped, no calibration", s)
				}
			})
		})
	}
}
