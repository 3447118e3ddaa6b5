// Package main is motionbench, the Go half of scripts/bench/motion.sh.
//
//	motionbench write DIR [-frames N]   render the benchmark clip into DIR
//	motionbench run DIR [-passes P]     time package motion on it
//
// write renders a 640x480 YUYV clip at 30 fps (a bright object crossing
// from left to right, a dark one crossing back lower down, sensor noise,
// and the light switched brighter near the end) into DIR/clip.yuyv, raw
// frames one after the other, and describes it and the detector's
// configuration in DIR/clip.json for the OpenCV reference to read.
//
// run reads the clip into memory and gives every frame to a new detector:
// once to write what it saw to DIR/go.txt, one line a frame ("f index
// regions cells changed calibrating") and one a transition ("t index kind
// zone"), then P times, timed, to print frames per second by wall time and
// by the process's CPU time (on a shared machine the two differ).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/sense/motion"
	"github.com/tobe-body/tobe-body/sense/motion/motiontest"
)

// clip is DIR/clip.json: the clip's format and the detector's
// configuration, with durations in seconds.
type clip struct {
	Width          int     `json:"width"`
	Height         int     `json:"height"`
	FPS            int     `json:"fps"`
	Frames         int     `json:"frames"`
	Zones          []zone  `json:"zones"`
	Sensitivity    float64 `json:"sensitivity"`
	MinArea        float64 `json:"min_area"`
	Downscale      int     `json:"downscale"`
	StartFrames    int     `json:"start_frames"`
	EndAfter       float64 `json:"end_after_s"`
	Background     float64 `json:"background_s"`
	CalibrateAbove float64 `json:"calibrate_above"`
	Calibration    float64 `json:"calibration_s"`
}

type zone struct {
	Name    string       `json:"name"`
	Polygon [][2]float64 `json:"polygon"`
}

// The benchmark's detector configuration: two zones, the left and the
// right half, and the defaults made explicit so the reference reads them.
var config = motion.Config{
	Zones: []motion.Zone{
		{Name: "left", Polygon: []motion.Point{{X: 0, Y: 0}, {X: 0.5, Y: 0}, {X: 0.5, Y: 1}, {X: 0, Y: 1}}},
		{Name: "right", Polygon: []motion.Point{{X: 0.5, Y: 0}, {X: 1, Y: 0}, {X: 1, Y: 1}, {X: 0.5, Y: 1}}},
	},
	Sensitivity:    motion.DefaultSensitivity,
	MinArea:        motion.DefaultMinArea,
	Downscale:      8,
	StartFrames:    motion.DefaultStartFrames,
	EndAfter:       motion.DefaultEndAfter,
	Background:     motion.DefaultBackground,
	CalibrateAbove: motion.DefaultCalibrateAbove,
	Calibration:    motion.DefaultCalibration,
}

const fps = 30

var format = hal.FrameFormat{Pixel: hal.PixelYUYV, Width: 640, Height: 480, Stride: 1280}

// scene is the clip: 10 s at the default 300 frames.
var scene = motiontest.Scene{
	Format: format,
	Seed:   42,
	Noise:  4,
	Objects: []motiontest.Object{
		{From: 1 * time.Second, To: 5 * time.Second, Start: [2]float64{-0.1, 0.4}, End: [2]float64{1.1, 0.4}, W: 0.12, H: 0.25, Luma: 220},
		{From: 4 * time.Second, To: 8500 * time.Millisecond, Start: [2]float64{1.1, 0.7}, End: [2]float64{-0.1, 0.7}, W: 0.1, H: 0.2, Luma: 20},
	},
	Lights: []motiontest.Light{{At: 9 * time.Second, Gain: 1.4}},
}

// frameTime is frame i's timestamp, counted from 0.
func frameTime(i int) time.Duration { return time.Duration(i) * time.Second / fps }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "motionbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) < 2 {
		return errors.New("usage: motionbench write DIR [-frames N] | run DIR [-passes P]")
	}
	cmd, dir := args[0], args[1]
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	frames := fs.Int("frames", 300, "frames in the clip")
	passes := fs.Int("passes", 3, "passes over the clip")
	if err := fs.Parse(args[2:]); err != nil {
		return err
	}
	switch cmd {
	case "write":
		return write(dir, *frames)
	case "run":
		return bench(ctx, dir, *passes, stdout)
	}
	return fmt.Errorf("unknown command %q", cmd)
}

func write(dir string, frames int) error {
	if frames < 1 {
		return fmt.Errorf("-frames %d: want at least 1", frames)
	}
	c := clip{
		Width: format.Width, Height: format.Height, FPS: fps, Frames: frames,
		Sensitivity: config.Sensitivity, MinArea: config.MinArea, Downscale: config.Downscale,
		StartFrames: config.StartFrames, EndAfter: config.EndAfter.Seconds(), Background: config.Background.Seconds(),
		CalibrateAbove: config.CalibrateAbove, Calibration: config.Calibration.Seconds(),
	}
	for _, z := range config.Zones {
		jz := zone{Name: z.Name}
		for _, p := range z.Polygon {
			jz.Polygon = append(jz.Polygon, [2]float64{p.X, p.Y})
		}
		c.Zones = append(c.Zones, jz)
	}
	js, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "clip.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "clip.yuyv"))
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	buf := make([]byte, scene.Bytes())
	for i := range frames {
		scene.Render(buf, frameTime(i), uint64(i))
		if _, err := w.Write(buf); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func bench(ctx context.Context, dir string, passes int, stdout io.Writer) error {
	data, err := os.ReadFile(filepath.Join(dir, "clip.yuyv"))
	if err != nil {
		return err
	}
	size := scene.Bytes()
	if len(data) == 0 || len(data)%size != 0 {
		return fmt.Errorf("clip.yuyv is %d bytes, not a whole number of %d-byte frames", len(data), size)
	}
	n := len(data) / size
	const base = hal.Mono(time.Hour)
	out := make([]motion.Transition, 0, 16)
	fr := hal.NewFrame(format, nil, 0, 0, nil)

	// The first pass records what the detector saw; the timed passes
	// after it only process.
	var results []byte
	var wall, cpu time.Duration
	for pass := range passes + 1 {
		d, err := motion.New(config, format)
		if err != nil {
			return err
		}
		cw, ch, _ := d.Grid()
		cells := float64(cw * ch)
		record := pass == 0
		cpu0, t0 := cpuTime(), time.Now()
		for i := range n {
			fr.Data, fr.Seq, fr.Time = data[i*size:(i+1)*size], uint64(i), base.Add(frameTime(i))
			if out, err = d.Process(fr, out[:0]); err != nil {
				return fmt.Errorf("frame %d: %w", i, err)
			}
			if record {
				l := d.Last()
				calib := 0
				if l.Calibrating {
					calib = 1
				}
				results = fmt.Appendf(results, "f %d %d %d %d %d\n", i, l.Regions, int(math.Round(l.Area*cells)), int(math.Round(l.Changed*cells)), calib)
				for _, t := range out {
					results = fmt.Appendf(results, "t %d %s %s\n", i, t.Kind, t.Zone)
				}
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if record {
			if err := os.WriteFile(filepath.Join(dir, "go.txt"), results, 0o644); err != nil {
				return err
			}
			continue
		}
		wall += time.Since(t0)
		cpu += cpuTime() - cpu0
	}
	frames := float64(n * passes)
	fmt.Fprintf(stdout, "go      %d frames x %d passes: %8.0f frames/s wall, %8.0f frames/s cpu\n", n, passes, frames/wall.Seconds(), frames/cpu.Seconds())
	return nil
}

// cpuTime is the CPU time the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
