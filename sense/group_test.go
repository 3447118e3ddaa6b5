package sense

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/haltest"
)

// TestGroupReportsAStoppedDevice: a camera that goes away is offline
// while its driver reopens it and enabled when frames come again; another
// error stops its channel in error; halting is not a fault.
func TestGroupReportsAStoppedDevice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		format := hal.FrameFormat{Pixel: hal.PixelGrey, Width: 64, Height: 48, Stride: 64}
		cam := haltest.NewCamera(format, 1)
		cam2 := haltest.NewCamera(format, 1)
		reg := body.NewRegistry(time.Now)
		reg.Register(body.Channel{ID: "camera.front", State: body.Enabled})
		reg.Register(body.Channel{ID: "camera.back", State: body.Enabled})
		ds := &body.Devices{Cams: []body.CameraDevice{{ID: "camera.front", Cam: cam}, {ID: "camera.back", Cam: cam2}}}
		clock, err := body.NewClock()
		if err != nil {
			t.Fatal(err)
		}
		sn := NewGroup(ds, GroupConfig{Sense: config.Default().Sense, DataDir: t.TempDir(), Clock: clock, Registry: reg, Log: slog.New(slog.DiscardHandler)})
		ctx, cancel := context.WithCancel(t.Context())
		sn.Start(ctx, nil)
		cam.Fail(fmt.Errorf("camera front unplugged: %w", hal.ErrAbsent))
		synctest.Wait()
		c, _ := reg.Get("camera.front")
		if c.State != body.Offline || !strings.Contains(c.Health, "unplugged") {
			t.Errorf("an unplugged camera is %s (%s), want offline with the error", c.State, c.Health)
		}
		// The driver reopens it: frames again bring the channel back.
		cam.Push(make([]byte, 64*48), 7, 1)
		synctest.Wait()
		if c, _ := reg.Get("camera.front"); c.State != body.Enabled {
			t.Errorf("a camera delivering again is %s (%s), want enabled", c.State, c.Health)
		}
		// Another error is a fault that stops the channel.
		cam.Fail(errors.New("VIDIOC_DQBUF: input/output error"))
		synctest.Wait()
		if c, _ := reg.Get("camera.front"); c.State != body.Error || !strings.Contains(c.Health, "input/output") {
			t.Errorf("a failed camera is %s (%s)", c.State, c.Health)
		}
		cam2.Halt()
		synctest.Wait()
		if c, _ := reg.Get("camera.back"); c.State != body.Enabled {
			t.Errorf("a halted camera is %s", c.State)
		}
		cancel()
		sn.Stop()
	})
}

// A camera's summary period and zones come from its config, by the
// profile's camera name; a camera the config does not name has the
// defaults.
func TestGroupCameraSummaryAndZones(t *testing.T) {
	format := hal.FrameFormat{Pixel: hal.PixelGrey, Width: 64, Height: 48, Stride: 64}
	ds := &body.Devices{Cams: []body.CameraDevice{{ID: "camera.front", Cam: haltest.NewCamera(format, 1)}, {ID: "camera.back", Cam: haltest.NewCamera(format, 1)}}}
	clock, err := body.NewClock()
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default().Sense
	cfg.Cameras = map[string]config.Camera{"front": {SummaryS: 30, Zones: []config.Zone{
		{Name: "door", Polygon: [][2]float64{{0, 0}, {0.5, 0}, {0.5, 1}}},
		{Name: "window", Polygon: [][2]float64{{0.5, 0}, {1, 0}, {1, 1}}},
	}}}
	sn := NewGroup(ds, GroupConfig{Sense: cfg, DataDir: t.TempDir(), Clock: clock, Registry: body.NewRegistry(time.Now), Log: slog.New(slog.DiscardHandler)})
	got := map[string]string{}
	for _, c := range sn.Cameras {
		got[c.ID] = fmt.Sprintf("every %v, zones %v", c.Ch.every, c.Zones)
	}
	for id, want := range map[string]string{"camera.front": "every 30s, zones [door window]", "camera.back": "every 1m0s, zones [frame]"} {
		if got[id] != want {
			t.Errorf("%s: got %q, want %q", id, got[id], want)
		}
	}
}
