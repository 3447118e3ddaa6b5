package board

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/i2c/bme280"
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
	Kind   string `json:"kind"`   // gpio-chip, gpio-in, gpio-out, estop, camera, audio-capture, audio-playback, input, env-sensor, led, thermal-zone, throttle
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
	// I2C finds an I²C bus by number or name.
	I2C(bus string) (string, error)
	// LED finds one of the board's LEDs by its name in /sys/class/leds.
	LED(name string) (string, error)
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

// Opened is a device a Walk opened, with its report. Exactly one of the
// device fields is set, by Report.Kind: Chip (gpio-chip), LineIn (estop,
// gpio-in; Line says how it was requested), LineOut (gpio-out), Camera,
// Capture, Playback, Input (a named input device), Watcher (an input
// that takes every device as it is plugged, "match": "*"), Env (an
// environment sensor) or LED (one of the board's own LEDs).
type Opened struct {
	Report
	Line     *LineSpec
	Chip     hal.Chip
	LineIn   hal.LineIn
	LineOut  hal.LineOut
	Camera   hal.Camera
	Capture  hal.AudioCapture
	Playback hal.AudioPlayback
	Input    hal.InputDevice
	InputCfg *Input
	Watcher  hal.InputWatcher
	Env      hal.EnvSensor
	LED      hal.LED
}

// Check opens, or finds, every device p names and reports each. Devices are
// released again before Check returns; outputs it requests go to their safe
// level. It never fails as a whole: every problem is in a Report.
func Check(p *Profile, d hal.Drivers, f Finder) []Report { return Walk(p, d, f, nil) }

// Walk is the one walk of a profile that both Check and the daemon make:
// every device p names is opened with d where d has an opener for its
// kind, else found with f (Loaded then means found, not opened), and
// reported. Each device it opened is handed to keep, which takes it by
// returning true; what keep does not take (all of it when keep is nil)
// is closed before Walk returns. GPIO lines have no Close of their own:
// they are released with their chip, so a caller that keeps the chip
// keeps every line it opened. Only a caller that keeps what it opens
// grabs an input device its profile says to grab: a check does not. Reports come in the order the devices
// are walked: the GPIO chip and its lines (the e-stop's first), cameras,
// audio, input devices, I²C sensors, LEDs, thermal zones, throttling.
func Walk(p *Profile, d hal.Drivers, f Finder, keep func(Opened) bool) []Report {
	var out []Report
	report := func(kind, name, target, found string, err error) Report {
		s, reason := statusOf(err)
		if err != nil {
			found = ""
		}
		r := Report{Kind: kind, Name: name, Target: target, Status: s, Reason: reason, Found: found}
		out = append(out, r)
		return r
	}
	add := func(kind, name, target, found string, err error) { report(kind, name, target, found, err) }
	// opened reports a device that was opened and offers it to keep; it
	// tells whether keep took it.
	opened := func(o Opened, found string, err error) bool {
		o.Report = report(o.Kind, o.Name, o.Target, found, err)
		return err == nil && keep != nil && keep(o)
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
			// The outputs are claimed together, so that the driver may hold
			// them in one request: an e-stop then drives them all safe with
			// one write and reads them back with one read.
			var outReqs []hal.OutRequest
			for _, r := range reqs {
				if r.Out != nil {
					outReqs = append(outReqs, hal.OutRequest{Line: r.Line, Config: *r.Out})
				}
			}
			var outs []hal.LineOut
			var outErrs []error
			if err == nil && len(outReqs) > 0 {
				outs, outErrs = chip.Outs(outReqs)
			}
			nOut := 0
			for i, r := range reqs {
				if errors.Is(err, hal.ErrAbsent) {
					add(r.Kind, r.Name, target(r), "", fmt.Errorf("its chip %s is absent: %w", p.GPIO.Chip, hal.ErrAbsent))
					continue
				} else if err != nil {
					add(r.Kind, r.Name, target(r), "", fmt.Errorf("chip %s: %w", p.GPIO.Chip, err))
					continue
				}
				o := Opened{Report: Report{Kind: r.Kind, Name: r.Name, Target: target(r)}, Line: &reqs[i]}
				var lerr error
				if r.In != nil {
					o.LineIn, lerr = chip.In(r.Line, *r.In)
				} else {
					o.LineOut, lerr = outs[nOut], outErrs[nOut]
					nOut++
				}
				opened(o, r.Line, lerr)
			}
			// The chip goes last: closing it releases its lines.
			if chip != nil && (keep == nil || !keep(Opened{Report: Report{Kind: "gpio-chip", Name: p.GPIO.Chip, Status: Loaded}, Chip: chip})) {
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
		switch {
		case d.OpenCamera != nil && c.Needs == "":
			cam, err := d.OpenCamera(CameraConfig(c))
			var found string
			if err == nil {
				found = cam.Name() + " " + cam.Format().String()
			}
			if !opened(Opened{Report: Report{Kind: "camera", Name: c.Name, Target: tgt}, Camera: cam}, found, err) && err == nil {
				cam.Close()
			}
		case d.OpenCamera != nil || f != nil:
			var found string
			var err error
			if f != nil {
				found, err = f.Camera(c.Device, c.Driver)
			}
			if err == nil && c.Needs != "" {
				if found == "" {
					found = c.Driver
				}
				err = fmt.Errorf("%s is a CSI camera that needs %s, which this body does not drive; use a USB (UVC) camera", found, c.Needs)
			}
			add("camera", c.Name, tgt, found, err)
		default:
			add("camera", c.Name, tgt, "", noDriver("camera"))
		}
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
		o := Opened{Report: Report{Kind: a.kind, Name: a.dev.Name, Target: tgt}}
		switch {
		case a.capture && d.OpenCapture != nil:
			c, err := d.OpenCapture(AudioConfig(*a.dev))
			var found string
			if err == nil {
				found = c.Name() + " " + c.Format().String()
			}
			if o.Capture = c; !opened(o, found, err) && err == nil {
				c.Close()
			}
		case !a.capture && d.OpenPlayback != nil:
			pb, err := d.OpenPlayback(AudioConfig(*a.dev))
			var found string
			if err == nil {
				found = pb.Name() + " " + pb.Format().String()
			}
			if o.Playback = pb; !opened(o, found, err) && err == nil {
				pb.Close()
			}
		case f != nil:
			found, err := f.Audio(a.dev.Device, a.dev.PCM, a.capture)
			add(a.kind, a.dev.Name, tgt, found, err)
		default:
			add(a.kind, a.dev.Name, tgt, "", noDriver("audio"))
		}
	}

	for i, in := range p.Inputs {
		o := Opened{Report: Report{Kind: "input", Name: in.Name, Target: "device " + in.Match}, InputCfg: &p.Inputs[i]}
		switch {
		case d.OpenInput != nil && in.Match != "*":
			dev, err := d.OpenInput(hal.InputConfig{Name: in.Match, Grab: in.Grab && keep != nil})
			var found string
			if err == nil {
				found = dev.Info().Path
			}
			if o.Input = dev; !opened(o, found, err) && err == nil {
				dev.Close()
			}
		case d.OpenInput != nil && d.WatchInputs != nil:
			w, err := d.WatchInputs()
			if o.Watcher = w; !opened(o, "every input device, as plugged", err) && err == nil {
				w.Close()
			}
		case f != nil:
			found, err := f.Input(in.Match)
			add("input", in.Name, "device "+in.Match, found, err)
		default:
			add("input", in.Name, "device "+in.Match, "", noDriver("input"))
		}
	}

	if p.I2C != nil {
		for _, sn := range p.I2C.Sensors {
			o := Opened{Report: Report{Kind: "env-sensor", Name: sn.Name, Target: fmt.Sprintf("%s at %s on I²C bus %s", sn.Chip, sn.Address, sn.Bus)}}
			switch {
			case d.OpenI2C == nil && f != nil:
				found, err := f.I2C(sn.Bus)
				if err == nil {
					found, err = "bus "+found, fmt.Errorf("bus %s found; this build has no I²C driver to ask for the sensor: %w", found, hal.ErrUnsupported)
				}
				add(o.Kind, o.Name, o.Target, found, err)
				continue
			case d.OpenI2C == nil:
				add(o.Kind, o.Name, o.Target, "", noDriver("I²C"))
				continue
			}
			sensor, err := openSensor(d, sn)
			var found string
			if err == nil {
				found = sensor.Name()
			}
			if o.Env = sensor; !opened(o, found, err) && err == nil {
				sensor.Close()
			}
		}
	}

	for _, l := range p.LEDs {
		tgt := "LED " + l.LED
		switch {
		case !l.Take:
			why := "left to the system"
			if l.Note != "" {
				why += " (" + l.Note + ")"
			}
			out = append(out, Report{Kind: "led", Name: l.Name, Target: tgt, Status: Skipped, Reason: why + "; act.leds." + l.Name + ": true takes it"})
		case d.OpenLED != nil:
			led, err := d.OpenLED(l.LED)
			if !opened(Opened{Report: Report{Kind: "led", Name: l.Name, Target: tgt}, LED: led}, "/sys/class/leds/"+l.LED, err) && err == nil {
				led.Close()
			}
		case f != nil:
			found, err := f.LED(l.LED)
			add("led", l.Name, tgt, found, err)
		default:
			add("led", l.Name, tgt, "", noDriver("LED"))
		}
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

// openSensor opens an I²C sensor's bus and the sensor on it.
func openSensor(d hal.Drivers, sn I2CSensor) (hal.EnvSensor, error) {
	bus, err := d.OpenI2C(sn.Bus)
	if err != nil {
		return nil, err
	}
	switch sn.Chip {
	case "bme280":
		return bme280.Open(bus, sn.Addr(), nil)
	}
	bus.Close()
	return nil, fmt.Errorf("chip %q: %w", sn.Chip, hal.ErrUnsupported)
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
