package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/haltest"
	"github.com/tobe-body/tobe-body/ledger"
)

func TestEventLine(t *testing.T) {
	e := ledger.EventView{Type: "gpio.changed", ChannelID: "gpio.button", Payload: map[string]any{"line": "BUTTON", "level": "high", "edge": "rising", "active": true}}
	if got, want := eventLine(e), "gpio.changed           gpio.button      active=true edge=rising level=high line=BUTTON"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestMonitorReportsAStoppedDevice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cam := haltest.NewCamera(hal.FrameFormat{Pixel: hal.PixelGrey, Width: 4, Height: 4, Stride: 4}, 1)
		reg := body.NewRegistry(time.Now)
		reg.Register(body.Channel{ID: "camera.front", State: body.Enabled})
		ds := &devices{cams: []camera{{id: "camera.front", cam: cam}}}
		m := newMonitor(ds, reg, slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard)
		m.start(t.Context())
		cam.Fail(fmt.Errorf("camera front unplugged: %w", hal.ErrAbsent))
		synctest.Wait()
		c, _ := reg.Get("camera.front")
		if c.State != body.Offline || !strings.Contains(c.Health, "unplugged") {
			t.Errorf("an unplugged camera is %s (%s), want offline with the error", c.State, c.Health)
		}
		// The driver reopens it: frames again bring the channel back.
		cam.Push(make([]byte, 16), 7, 0)
		synctest.Wait()
		if c, _ := reg.Get("camera.front"); c.State != body.Enabled {
			t.Errorf("a camera delivering again is %s (%s), want enabled", c.State, c.Health)
		}
		// Another error is a fault that stops the reader.
		cam.Fail(errors.New("VIDIOC_DQBUF: input/output error"))
		m.wait()
		if c, _ := reg.Get("camera.front"); c.State != body.Offline || !strings.Contains(c.Health, "input/output") {
			t.Errorf("a failed camera is %s (%s)", c.State, c.Health)
		}

		// Halting is not a fault.
		cam2 := haltest.NewCamera(hal.FrameFormat{Pixel: hal.PixelGrey, Width: 4, Height: 4, Stride: 4}, 1)
		reg.Register(body.Channel{ID: "camera.back", State: body.Enabled})
		m2 := newMonitor(&devices{cams: []camera{{id: "camera.back", cam: cam2}}}, reg, slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard)
		m2.start(t.Context())
		cam2.Halt()
		m2.wait()
		if c, _ := reg.Get("camera.back"); c.State != body.Enabled {
			t.Errorf("a halted camera is %s", c.State)
		}
	})
}
