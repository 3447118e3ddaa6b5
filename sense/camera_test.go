package sense

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/haltest"
	"github.com/tobe-body/tobe-body/hal/haltest/stepclock"
	"github.com/tobe-body/tobe-body/ledger"
	"github.com/tobe-body/tobe-body/sense/motion"
	"github.com/tobe-body/tobe-body/sense/motion/motiontest"
)

// TestCameraChannel plays a synthetic scene (an object crossing two
// zones) through a fake camera, unplugs it during a second crossing, and
// checks the events, the snapshot and the offline/online reports.
func TestCameraChannel(t *testing.T) {
	format := hal.FrameFormat{Pixel: hal.PixelYUYV, Width: 160, Height: 120, Stride: 320}
	sc := motiontest.Scene{Format: format, Seed: 1, Noise: 3, Objects: []motiontest.Object{
		{From: time.Second, To: 4 * time.Second, Start: [2]float64{-0.1, 0.5}, End: [2]float64{1.1, 0.5}, W: 0.15, H: 0.2, Luma: 230},
		{From: 8 * time.Second, To: 12 * time.Second, Start: [2]float64{-0.1, 0.5}, End: [2]float64{1.1, 0.5}, W: 0.15, H: 0.2, Luma: 230},
	}}
	cam := haltest.NewCamera(format, 4)
	snapDir := filepath.Join(t.TempDir(), "evidence", "camera.front")
	o := NewOutlet(Source{Channel: "camera.front"}, 64)
	var states []string
	cfg := motion.Config{Zones: []motion.Zone{
		{Name: "left", Polygon: []motion.Point{{X: 0, Y: 0}, {X: 0.5, Y: 0}, {X: 0.5, Y: 1}, {X: 0, Y: 1}}},
		{Name: "right", Polygon: []motion.Point{{X: 0.5, Y: 0}, {X: 1, Y: 0}, {X: 1, Y: 1}, {X: 0.5, Y: 1}}},
	}}
	c, err := NewCameraChannel(o, cam, cfg, Snapshots{Dir: snapDir, TTL: time.Hour}, func(online bool, err error) {
		states = append(states, fmt.Sprintf("online=%v %v", online, err))
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background()) }()
	const fps = 15
	frames := 19 * fps / 2 // the stream ends in the middle of the second crossing
	for i := range frames {
		at := time.Duration(i) * time.Second / fps
		if at == 7*time.Second { // unplugged between the crossings, once all before is analysed
			for cam.Released() < i {
				time.Sleep(time.Millisecond) // the channel's goroutine, not a clock
			}
			cam.Fail(fmt.Errorf("camera front: %w", hal.ErrAbsent))
		}
		buf := make([]byte, sc.Bytes())
		sc.Render(buf, at, uint64(i))
		cam.Push(buf, uint64(i+1), hal.Mono(at+time.Second))
	}
	for cam.Released() < frames {
		time.Sleep(time.Millisecond)
	}
	cam.Halt()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var got []string
	var ref string
	for len(o.q) > 0 {
		q := <-o.q
		ev := q.ev
		var p map[string]any
		if err := ledger.UnmarshalPayload(ev.Payload, &p); err != nil {
			t.Fatal(err)
		}
		s := fmt.Sprintf("%s %v", ev.Type, p["zone"])
		if p["cut"] == true {
			s += " cut"
		}
		if ev.PayloadRef != "" {
			ref = ev.PayloadRef
		}
		got = append(got, s)
	}
	want := []string{
		"camera.motion_started left", "camera.motion_started right", "camera.motion_ended left", "camera.motion_ended right",
		"camera.motion_started left", "camera.motion_ended left cut",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(states) != 2 || !strings.HasPrefix(states[0], "online=false camera front") || states[1] != "online=true <nil>" {
		t.Errorf("states %q, want offline then online", states)
	}
	if s := c.Stats(); s.Snapshots != 3 || len(s.Moving) != 0 || s.Frames == 0 {
		t.Errorf("stats %+v, want a snapshot per start and nothing moving at the end", s)
	}
	if fi, err := os.Stat(filepath.Join(filepath.Dir(snapDir), ref)); err != nil || fi.Size() < 100 {
		t.Errorf("snapshot %q: %v", ref, err)
	}
	// Swept after the TTL: these have no boot in their names (the outlet
	// has no clock), so a synchronised wall clock ages them.
	later := stepclock.New()
	later.Step(2 * time.Hour)
	if n, err := SweepSnapshots(snapDir, time.Hour, later); err != nil || n != 3 {
		t.Errorf("swept %d %v, want 3", n, err)
	}
	if _, err := SweepSnapshots(filepath.Join(t.TempDir(), "none"), time.Hour, later); err != nil {
		t.Errorf("sweeping a missing directory: %v", err)
	}
}

func TestCameraChannelRefusesAFormatItCannotRead(t *testing.T) {
	cam := haltest.NewCamera(hal.FrameFormat{Pixel: hal.PixelMJPEG, Width: 640, Height: 480}, 1)
	_, err := NewCameraChannel(NewOutlet(Source{Channel: "camera.x"}, 1), cam, motion.Config{}, Snapshots{}, nil)
	if !errors.Is(err, motion.ErrFormat) || !strings.Contains(err.Error(), "camera.x") {
		t.Errorf("got %v, want ErrFormat naming the channel", err)
	}
}
