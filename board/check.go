package board

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/hal"
)

// Status is how a device a profile names fared.
type Status string

// The statuses of a device, as driver registries report them: absent on
// this board is not broken.
const (
	Loaded  Status = "Loaded"  // found and answered
	Skipped Status = "Skipped" // absent on this board, or this build cannot drive it
	Failed  Status = "Failed"  // present but unusable; Reason says why
)

// Report is the state of one device of a profile.
type Report struct {
	Kind   string `json:"kind"`   // gpio-chip, gpio-in, gpio-out, estop, camera, audio-capture, audio-playback, input, thermal-zone, throttle
	Name   string `json:"name"`   // the profile's name for it (main, second, reset for the e-stop lines)
	Target string `json:"target"` // what was looked for
	Status Status `json:"status"`
	Reason string `json:"reason,omitempty"`
	Found  string `json:"found,omitempty"` // what answered (a path, a card)
}

// Finder finds the kernel devices a profile names without streaming from
// them. The Linux implementation is hal/probe; a driver set that can open a
// kind of device is used instead of the finder for that kind.
type Finder interface {
	// Chip returns the path of the GPIO chip with this label.
	Chip(label string) (string, error)
	// Line checks the named line exists on the chip at path and is free.
	Line(chipPath, name string) error
	Camera(device, driver string) (string, error)
	Audio(device string, pcm int, capture bool) (string, error)
	Input(match string) (string, error)
	ThermalZone(typ string) (string, error)
	Throttle(source, glob string) (string, error)
}

// statusOf sorts an error into Skipped (hal.ErrAbsent, or
// hal.ErrUnsupported: the driver cannot do it, as a binary built without
// one says) or Failed.
func statusOf(err error) (Status, string) {
	switch {
	case err == nil:
		return Loaded, ""
	case errors.Is(err, hal.ErrAbsent):
		return Skipped, "absent on this board: " + strings.TrimSuffix(err.Error(), ": "+hal.ErrAbsent.Error())
	case errors.Is(err, hal.ErrUnsupported):
		return Skipped, "unsupported: " + strings.TrimSuffix(err.Error(), ": "+hal.ErrUnsupported.Error())
	}
	return Failed, err.Error()
}

// Check opens, or finds, every device p names and reports each. Devices are
// released again before Check returns; outputs it requests go to their safe
// level. It never fails as a whole: every problem is in a Report.
func Check(p *Profile, d hal.Drivers, f Finder) []Report {
	var out []Report
	add := func(kind, name, target string, found string, err error) {
		s, reason := statusOf(err)
		if err != nil {
			found = ""
		}
		out = append(out, Report{Kind: kind, Name: name, Target: target, Status: s, Reason: reason, Found: found})
	}
	noDriver := func(kind string) error {
		return fmt.Errorf("no %s driver in the %q driver set and no finder", kind, d.Name)
	}

	if p.GPIO != nil {
		reqs := p.Lines()
		target := func(r LineSpec) string { return fmt.Sprintf("line %s on %s", r.Line, p.GPIO.Chip) }
		switch {
		case d.OpenChip != nil:
			chip, err := d.OpenChip(p.GPIO.Chip)
			add("gpio-chip", p.GPIO.Chip, "chip labelled "+p.GPIO.Chip, p.GPIO.Chip, err)
			for _, r := range reqs {
				if errors.Is(err, hal.ErrAbsent) {
					add(r.Kind, r.Name, target(r), "", fmt.Errorf("its chip %s is absent: %w", p.GPIO.Chip, hal.ErrAbsent))
					continue
				} else if err != nil {
					add(r.Kind, r.Name, target(r), "", fmt.Errorf("chip %s: %w", p.GPIO.Chip, err))
					continue
				}
				var lerr error
				if r.In != nil {
					_, lerr = chip.In(r.Line, *r.In)
				} else {
					_, lerr = chip.Out(r.Line, *r.Out)
				}
				add(r.Kind, r.Name, target(r), r.Line, lerr)
			}
			if chip != nil {
				chip.Close()
			}
		case f != nil:
			path, err := f.Chip(p.GPIO.Chip)
			add("gpio-chip", p.GPIO.Chip, "chip labelled "+p.GPIO.Chip, path, err)
			for _, r := range reqs {
				lerr := err
				if err == nil {
					lerr = f.Line(path, r.Line)
				} else if errors.Is(err, hal.ErrAbsent) {
					lerr = fmt.Errorf("its chip %s is absent: %w", p.GPIO.Chip, hal.ErrAbsent)
				} else {
					lerr = fmt.Errorf("chip %s: %w", p.GPIO.Chip, err)
				}
				add(r.Kind, r.Name, target(r), path, lerr)
			}
		default:
			add("gpio-chip", p.GPIO.Chip, "chip labelled "+p.GPIO.Chip, "", noDriver("GPIO"))
		}
	}

	for _, c := range p.Cameras {
		tgt := c.Device
		if tgt == "" {
			tgt = "first capture device of driver " + c.Driver
		}
		var found string
		var err error
		switch {
		case d.OpenCamera != nil && c.Needs == "":
			var cam hal.Camera
			cam, err = d.OpenCamera(CameraConfig(c))
			if err == nil {
				found = cam.Name() + " " + cam.Format().String()
				cam.Close()
			}
		case f != nil:
			found, err = f.Camera(c.Device, c.Driver)
			if err == nil && c.Needs != "" {
				err = fmt.Errorf("%s is a CSI camera that needs %s, which this body does not drive; use a USB (UVC) camera", found, c.Needs)
			}
		default:
			err = noDriver("camera")
		}
		add("camera", c.Name, tgt, found, err)
	}

	for _, a := range []struct {
		kind    string
		dev     *AudioDevice
		capture bool
	}{{"audio-capture", p.Audio.Capture, true}, {"audio-playback", p.Audio.Playback, false}} {
		if a.dev == nil {
			continue
		}
		tgt := a.dev.Device
		if a.dev.PCM != 0 {
			tgt += fmt.Sprintf(" pcm %d", a.dev.PCM)
		}
		var found string
		var err error
		switch {
		case a.capture && d.OpenCapture != nil:
			var c hal.AudioCapture
			if c, err = d.OpenCapture(AudioConfig(*a.dev)); err == nil {
				found = c.Name() + " " + c.Format().String()
				c.Close()
			}
		case !a.capture && d.OpenPlayback != nil:
			var pb hal.AudioPlayback
			if pb, err = d.OpenPlayback(AudioConfig(*a.dev)); err == nil {
				found = pb.Name() + " " + pb.Format().String()
				pb.Close()
			}
		case f != nil:
			found, err = f.Audio(a.dev.Device, a.dev.PCM, a.capture)
		default:
			err = noDriver("audio")
		}
		add(a.kind, a.dev.Name, tgt, found, err)
	}

	for _, in := range p.Inputs {
		var found string
		var err error
		switch {
		case d.OpenInput != nil && in.Match != "*":
			var dev hal.InputDevice
			dev, err = d.OpenInput(hal.InputConfig{Name: in.Match})
			if err == nil {
				found = dev.Info().Path
				dev.Close()
			}
		case f != nil:
			found, err = f.Input(in.Match)
		default:
			err = noDriver("input")
		}
		add("input", in.Name, "device "+in.Match, found, err)
	}

	for _, z := range p.Thermal.Zones {
		var found string
		err := noDriver("thermal")
		if f != nil {
			found, err = f.ThermalZone(z)
		}
		add("thermal-zone", z, "thermal zone of type "+z, found, err)
	}
	if t := p.Thermal.Throttle; t.Source != "none" {
		var found string
		err := noDriver("throttle")
		if f != nil {
			found, err = f.Throttle(t.Source, t.Path)
		}
		add("throttle", t.Source, t.Path, found, err)
	}
	return out
}

// CameraConfig converts a profile camera to what a driver is asked for.
func CameraConfig(c Camera) hal.CameraConfig {
	cfg := hal.CameraConfig{Device: c.Device, Width: c.Width, Height: c.Height, Rate: physic.Frequency(c.FPS) * physic.Hertz}
	if cfg.Device == "" {
		// A camera named by its V4L2 driver (uvcvideo, vivid): the camera
		// driver takes a bare name as a card or driver name.
		cfg.Device = c.Driver
	}
	for _, f := range c.Format {
		if len(f) == 4 {
			cfg.Pixel = append(cfg.Pixel, hal.FourCC(f[0], f[1], f[2], f[3]))
		}
	}
	return cfg
}

// AudioConfig converts a profile audio device to what a driver is asked
// for. A PCM other than 0 goes into Device as ALSA writes it, CARD,PCM.
func AudioConfig(a AudioDevice) hal.AudioConfig {
	cfg := hal.AudioConfig{Device: a.Device, Rate: physic.Frequency(a.RateHz) * physic.Hertz, Channels: a.Channels}
	if a.PCM != 0 {
		cfg.Device = fmt.Sprintf("%s,%d", a.Device, a.PCM)
	}
	if a.RateHz > 0 && a.FrameMS > 0 {
		cfg.FrameSamples = int(int64(a.RateHz) * int64(a.FrameMS) * int64(time.Millisecond) / int64(time.Second))
	}
	return cfg
}

// Summary counts the statuses, as "12 Loaded, 3 Skipped, 0 Failed".
func Summary(rs []Report) string {
	n := map[Status]int{}
	for _, r := range rs {
		n[r.Status]++
	}
	return strings.Join([]string{
		fmt.Sprintf("%d %s", n[Loaded], Loaded),
		fmt.Sprintf("%d %s", n[Skipped], Skipped),
		fmt.Sprintf("%d %s", n[Failed], Failed),
	}, ", ")
}
