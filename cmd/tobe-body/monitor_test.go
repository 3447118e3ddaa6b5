package main

import (
	"bytes"
	"context"
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
)

// TestMonitorNeverNamesKeyboardKeys is the privacy rule: only devices the
// profile marks as controls name their keys; every other device is counted.
func TestMonitorNeverNamesKeyboardKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		kbd := haltest.NewInput(hal.InputInfo{Name: "USB Keyboard"}, 16)
		pad := haltest.NewInput(hal.InputInfo{Name: "keypad"}, 16)
		ds := &devices{inputs: []inputDevice{{id: "input.keyboard", role: "activity", dev: kbd}, {id: "input.keypad", role: "control", dev: pad}}}
		var out bytes.Buffer
		m := newMonitor(ds, body.NewRegistry(time.Now), slog.New(slog.NewTextHandler(io.Discard, nil)), &out)
		ctx, cancel := context.WithCancel(t.Context())
		m.start(ctx)
		for _, code := range []uint16{35, 18, 38, 38, 24} { // h e l l o
			kbd.Push(hal.InputEvent{Type: hal.EvKey, Code: code, Value: 1})
			kbd.Push(hal.InputEvent{Type: hal.EvKey, Code: code, Value: 0})
		}
		pad.Push(hal.InputEvent{Type: hal.EvKey, Code: hal.BtnMisc, Value: 1})
		synctest.Wait()
		m.print(time.Second, time.Second)
		cancel()
		ds.halt()
		m.wait()
		got := out.String()
		if !strings.Contains(got, "input.keyboard       10 key events\n") {
			t.Errorf("keyboard line:\n%s", got)
		}
		if !strings.Contains(got, "input.keypad         1 key events: BTN_0 down") {
			t.Errorf("keypad line:\n%s", got)
		}
		for _, leak := range []string{"key 35", "key 18", "KEY_H", "hello"} {
			if strings.Contains(got, leak) {
				t.Errorf("the keyboard's keys leak (%q):\n%s", leak, got)
			}
		}
	})
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

// TestHotplugCountsActivityOfDevicesAsTheyCome: an "every device" input
// channel opens what is plugged, counts its events without naming keys,
// forgets what is unplugged, and leaves the devices the profile names to
// their own channels.
func TestHotplugCountsActivityOfDevicesAsTheyCome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := haltest.NewInputWatcher(8)
		named := haltest.NewInput(hal.InputInfo{Name: "keypad", Path: "/dev/input/event0"}, 4)
		kbd := haltest.NewInput(hal.InputInfo{Name: "USB Keyboard", Path: "/dev/input/event1"}, 16)
		mouse := haltest.NewInput(hal.InputInfo{Name: "USB Mouse", Path: "/dev/input/event2"}, 16)
		h := &hotplug{id: "input.all", w: w, open: w.Open, skip: map[string]bool{named.Info().Path: true}, devs: map[string]hal.InputDevice{}}
		ds := &devices{inputs: []inputDevice{{id: "input.keypad", role: "control", dev: named}}, hotplug: []*hotplug{h}}
		var out bytes.Buffer
		m := newMonitor(ds, body.NewRegistry(time.Now), slog.New(slog.NewTextHandler(io.Discard, nil)), &out)
		ctx, cancel := context.WithCancel(t.Context())
		m.start(ctx)

		w.Plug(named)
		w.Plug(kbd)
		w.Plug(mouse)
		synctest.Wait()
		for _, code := range []uint16{35, 18, 38} {
			kbd.Push(hal.InputEvent{Type: hal.EvKey, Code: code, Value: 1})
		}
		mouse.Push(hal.InputEvent{Type: hal.EvRel, Code: 0, Value: 5})
		mouse.Push(hal.InputEvent{Type: hal.EvSyn, Code: hal.SynReport})
		synctest.Wait()
		m.print(time.Second, time.Second)
		if got := out.String(); !strings.Contains(got, "input.all            2 devices plugged, 4 input events\n") {
			t.Errorf("first interval:\n%s", got)
		}
		for _, leak := range []string{"key 35", "KEY_H", "35"} {
			if strings.Contains(out.String(), leak) {
				t.Errorf("a key leaks (%q):\n%s", leak, out.String())
			}
		}

		out.Reset()
		w.Unplug(mouse)
		synctest.Wait()
		m.print(time.Second, time.Second)
		if got := out.String(); !strings.Contains(got, "input.all            1 devices plugged, 0 input events\n") {
			t.Errorf("after unplugging:\n%s", got)
		}
		cancel()
		ds.halt()
		m.wait()
	})
}
