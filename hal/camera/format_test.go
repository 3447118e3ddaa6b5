package camera

import (
	"errors"
	"strings"
	"testing"

	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/hal"
)

func TestCheckConfig(t *testing.T) {
	rgb := hal.FourCC('R', 'G', 'B', '3')
	for _, tc := range []struct {
		name string
		cfg  hal.CameraConfig
		want string // in the error; "" for none
	}{
		{"empty", hal.CameraConfig{}, ""},
		{"full", hal.CameraConfig{Device: "/dev/video0", Pixel: []hal.PixelFormat{hal.PixelMJPEG, hal.PixelYUYV}, Width: 640, Height: 480, Rate: 30 * physic.Hertz}, ""},
		{"negative width", hal.CameraConfig{Device: "cam", Width: -640, Height: 480}, "camera cam: width -640 is negative"},
		{"negative height", hal.CameraConfig{Width: 640, Height: -1}, "height -1 is negative"},
		{"width alone", hal.CameraConfig{Width: 640}, "width 640 and height 0: give both or neither"},
		{"negative rate", hal.CameraConfig{Rate: -physic.Hertz}, "frame rate -1Hz is negative"},
		{"absurd rate", hal.CameraConfig{Rate: 5 * physic.KiloHertz}, "frame rate 5kHz is more than 1kHz"},
		{"unknown pixel format", hal.CameraConfig{Pixel: []hal.PixelFormat{hal.PixelYUYV, rgb}}, "pixel format RGB3 is not one this driver captures (YUYV, GREY, MJPG)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkConfig(tc.cfg)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("%v, want no error", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("%v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestChoosePixel(t *testing.T) {
	y, g, m := hal.PixelYUYV, hal.PixelGrey, hal.PixelMJPEG
	nv12 := hal.FourCC('N', 'V', '1', '2')
	for _, tc := range []struct {
		name    string
		accept  []hal.PixelFormat
		offered []hal.PixelFormat
		want    hal.PixelFormat
		err     string
	}{
		{"YUYV first by default", nil, []hal.PixelFormat{m, g, y}, y, ""},
		{"GREY when there is no YUYV", nil, []hal.PixelFormat{m, g}, g, ""},
		{"MJPEG when it is all there is", nil, []hal.PixelFormat{nv12, m}, m, ""},
		{"the config's order among raw formats", []hal.PixelFormat{g, y}, []hal.PixelFormat{y, g}, g, ""},
		{"raw before MJPEG whatever the order", []hal.PixelFormat{m, y}, []hal.PixelFormat{m, y}, y, ""},
		{"MJPEG only if accepted", []hal.PixelFormat{y}, []hal.PixelFormat{m}, 0, "it offers MJPG, none of YUYV: hal: unsupported"},
		{"nothing usable", nil, []hal.PixelFormat{nv12}, 0, "it offers NV12, none of YUYV, GREY, MJPG"},
		{"nothing listed", nil, nil, 0, "it offers no format, none of YUYV, GREY, MJPG"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := choosePixel(tc.accept, tc.offered)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, hal.ErrUnsupported) {
					t.Errorf("%v, %v; want an ErrUnsupported with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("%v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestChooseSize(t *testing.T) {
	discrete := func(w, h int) sizeRange { return sizeRange{MinW: w, MaxW: w, MinH: h, MaxH: h} }
	webcam := []sizeRange{discrete(320, 180), discrete(640, 360), discrete(640, 480), discrete(1280, 720), discrete(1920, 1080)}
	stepwise := []sizeRange{{MinW: 16, MaxW: 1920, StepW: 8, MinH: 16, MaxH: 1080, StepH: 4}}
	for _, tc := range []struct {
		name         string
		offered      []sizeRange
		w, h         int
		wantW, wantH int
	}{
		{"exact", webcam, 640, 480, 640, 480},
		{"nearest", webcam, 800, 600, 640, 480},
		{"nearest above", webcam, 1200, 700, 1280, 720},
		{"tie goes to the smaller", []sizeRange{discrete(600, 400), discrete(680, 400)}, 640, 400, 600, 400},
		{"default 640x480", webcam, 0, 0, 640, 480},
		{"stepwise snaps to the step", stepwise, 643, 481, 640, 480},
		{"stepwise clamps", stepwise, 4000, 8, 1920, 16},
		{"continuous asks for it", []sizeRange{{}}, 333, 222, 333, 222},
		{"nothing offered asks for it", nil, 333, 222, 333, 222},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if w, h := chooseSize(tc.offered, tc.w, tc.h); w != tc.wantW || h != tc.wantH {
				t.Errorf("%dx%d, want %dx%d", w, h, tc.wantW, tc.wantH)
			}
		})
	}
}

func TestChooseInterval(t *testing.T) {
	vivid640 := []fraction{{1, 1}, {1, 2}, {1, 4}, {1, 5}, {1, 10}, {2, 25}, {1, 15}, {1, 25}}
	for _, tc := range []struct {
		name    string
		offered []fraction
		want    physic.Frequency
		got     fraction
	}{
		{"exact", vivid640, 15 * physic.Hertz, fraction{1, 15}},
		{"nearest", vivid640, 12 * physic.Hertz, fraction{2, 25}},
		{"faster than offered", vivid640, 60 * physic.Hertz, fraction{1, 25}},
		{"tie goes to the faster", []fraction{{1, 10}, {1, 20}}, 15 * physic.Hertz, fraction{1, 20}},
		{"a zero interval is ignored", []fraction{{0, 0}, {1, 30}}, 30 * physic.Hertz, fraction{1, 30}},
		{"nothing offered asks for it", nil, 30 * physic.Hertz, fraction{1, 30}},
		{"a fractional rate", nil, 12500 * physic.MilliHertz, fraction{2, 25}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := chooseInterval(tc.offered, tc.want); got != tc.got {
				t.Errorf("%v, want %v", got, tc.got)
			}
		})
	}
}

func TestFractionRate(t *testing.T) {
	for _, tc := range []struct {
		f    fraction
		want physic.Frequency
	}{
		{fraction{1, 30}, 30 * physic.Hertz},
		{fraction{2, 25}, 12500 * physic.MilliHertz},
		{fraction{1001, 30000}, 29970030 * physic.MicroHertz},
		{fraction{0, 30}, 0},
		{fraction{1, 0}, 0},
	} {
		if got := tc.f.rate(); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.f, got, tc.want)
		}
	}
}

func TestWireFormat(t *testing.T) {
	if got, want := wireFormat(hal.PixelMJPEG, 640, 480, 0, 30*physic.Hertz), (hal.FrameFormat{Pixel: hal.PixelGrey, Width: 640, Height: 480, Stride: 640, Rate: 30 * physic.Hertz}); got != want {
		t.Errorf("MJPEG is delivered as %v, want %v", got, want)
	}
	if got, want := wireFormat(hal.PixelYUYV, 640, 480, 1280, 0), (hal.FrameFormat{Pixel: hal.PixelYUYV, Width: 640, Height: 480, Stride: 1280}); got != want {
		t.Errorf("YUYV is delivered as %v, want %v", got, want)
	}
}
