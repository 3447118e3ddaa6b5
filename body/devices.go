package body

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/tobe-body/tobe-body/board"
	"github.com/tobe-body/tobe-body/hal"
)

// InputLine is a GPIO input the body opened: a button, a sensor, a
// feedback contact, or one of the e-stop's lines (Role says which).
type InputLine struct {
	ID     string
	Role   string // button, sensor, feedback, or one of board's e-stop roles
	Line   hal.LineIn
	Active hal.Level // the level that means pressed, on, or stop
}

// OutputLine is a GPIO output the body opened.
type OutputLine struct {
	ID   string
	Name string // the profile's name
	Kind string // the profile's kind: relay, led, buzzer
	Line hal.LineOut
}

// CameraDevice is a camera the body opened.
type CameraDevice struct {
	ID  string
	Cam hal.Camera
}

// InputDevice is an input device the body opened by name.
type InputDevice struct {
	ID   string
	Role string // control or activity
	Dev  hal.InputDevice
}

// Hotplug is a profile input that takes every device as it comes
// ("match": "*"): its watcher, and how to open what it reports.
type Hotplug struct {
	ID      string
	Watcher hal.InputWatcher
	Open    func(hal.InputConfig) (hal.InputDevice, error)
}

// EnvDevice is an environment sensor the body opened.
type EnvDevice struct {
	ID  string
	Dev hal.EnvSensor
}

// LightDevice is one of the board's own LEDs the body took over.
type LightDevice struct {
	ID   string // light.NAME
	Name string // the profile's name
	LED  hal.LED
}

// Devices are the hal devices the body opened for its board's profile.
type Devices struct {
	Chip      hal.Chip
	Ins       []InputLine
	Outs      []OutputLine
	Cams      []CameraDevice
	Mic       hal.AudioCapture
	MicID     string
	Speaker   hal.AudioPlayback
	SpeakerID string
	Inputs    []InputDevice
	Hotplug   []Hotplug
	Envs      []EnvDevice
	Lights    []LightDevice
}

// TakeOutput takes the output of channel id (light.NAME, gpio.NAME) out
// of ds, so that neither the runner nor the e-stop drives it: for the
// body's own signal (the privacy indicator). An id of no output ds
// holds is an error that names the ones it does.
func (ds *Devices) TakeOutput(id string) (hal.LineOut, error) {
	var names []string
	for i, l := range ds.Lights {
		if l.ID == id {
			ds.Lights = append(ds.Lights[:i:i], ds.Lights[i+1:]...)
			return l.LED, nil
		}
		names = append(names, l.ID)
	}
	for i, o := range ds.Outs {
		if o.ID == id {
			ds.Outs = append(ds.Outs[:i:i], ds.Outs[i+1:]...)
			return o.Line, nil
		}
		names = append(names, o.ID)
	}
	return nil, fmt.Errorf("no output %q on this board (outputs: %q)", id, names)
}

// OpenDevices opens every device p names with d (found with f where d
// cannot open its kind), through the same walk of the profile as
// board.Check, and registers a channel for each: opened ones enabled,
// found ones discovered (to be enabled when their driver is there),
// failed ones in error with the reason; devices absent on this board get
// no channel. Outputs are requested at their safe levels.
func OpenDevices(p *board.Profile, d hal.Drivers, f board.Finder, reg *Registry, log *slog.Logger) *Devices {
	ds := &Devices{}
	taken := map[string]bool{} // channel ids of what was opened and kept
	keep := func(o board.Opened) bool {
		id := ChannelID(o.Kind, o.Name)
		switch {
		case o.Chip != nil:
			ds.Chip = o.Chip
			return true
		case o.LineIn != nil:
			ds.Ins = append(ds.Ins, InputLine{ID: id, Role: o.Line.Role, Line: o.LineIn, Active: o.Line.Active})
		case o.LineOut != nil:
			ds.Outs = append(ds.Outs, OutputLine{ID: id, Name: o.Name, Kind: o.Line.Role, Line: o.LineOut})
		case o.Camera != nil:
			ds.Cams = append(ds.Cams, CameraDevice{ID: id, Cam: o.Camera})
		case o.Capture != nil:
			ds.Mic, ds.MicID = o.Capture, id
		case o.Playback != nil:
			ds.Speaker, ds.SpeakerID = o.Playback, id
		case o.Input != nil:
			ds.Inputs = append(ds.Inputs, InputDevice{ID: id, Role: o.InputCfg.Role, Dev: o.Input})
		case o.Watcher != nil:
			ds.Hotplug = append(ds.Hotplug, Hotplug{ID: id, Watcher: o.Watcher, Open: d.OpenInput})
		case o.Env != nil:
			ds.Envs = append(ds.Envs, EnvDevice{ID: id, Dev: o.Env})
		case o.LED != nil:
			ds.Lights = append(ds.Lights, LightDevice{ID: id, Name: o.Name, LED: o.LED})
		default:
			return false
		}
		taken[id] = true
		return true
	}
	for _, r := range board.Walk(p, d, f, keep) {
		id := ChannelID(r.Kind, r.Name)
		kind := r.Kind
		if kind == "estop" {
			kind = "gpio-in"
		}
		ch := Channel{ID: id, Kind: kind, Device: device(r), Driver: string(r.Status)}
		switch {
		case r.Status == board.Skipped:
			log.Info("device skipped", "channel", id, "why", r.Reason)
			continue
		case r.Status == board.Failed:
			log.Warn("device failed", "channel", id, "err", r.Reason)
			ch.State, ch.Health = Error, r.Reason
		case taken[id]:
			ch.State = Enabled
			switch r.Kind {
			case "gpio-out":
				ch.Device = fmt.Sprintf("%s, safe %s", r.Target, safeOf(p, r.Name))
			case "led":
				ch.Device = r.Target + ", safe off"
			}
		case r.Kind == "gpio-chip":
			if d.OpenChip != nil {
				continue // opened: its lines have the channels
			}
			ch.State, ch.Health = Discovered, fmt.Sprintf("found; this build has no %q driver to stream from it", d.Name)
		case r.Kind == "thermal-zone" || r.Kind == "throttle":
			ch.State, ch.Health = Discovered, "found; read by self-state (to come)"
		default:
			ch.State, ch.Health = Discovered, fmt.Sprintf("found; this build has no %q driver to stream from it", d.Name)
		}
		if err := reg.Register(ch); err != nil {
			log.Error("channel not registered", "channel", id, "err", err)
		}
	}
	return ds
}

// device says what a channel reads or drives: what answered, or what
// was looked for.
func device(r board.Report) string {
	switch {
	case r.Status != board.Loaded:
		return r.Target
	case r.Kind == "gpio-in" || r.Kind == "gpio-out" || r.Kind == "estop":
		return r.Target
	case r.Found != "":
		return r.Found
	}
	return r.Target
}

func safeOf(p *board.Profile, name string) string {
	for _, o := range p.GPIO.Outputs {
		if o.Name == name {
			return string(o.Safe)
		}
	}
	return "?"
}

// Halt makes every device inert: outputs at their safe levels first, then
// the streams stopped. It returns the first error of an output.
func (ds *Devices) Halt() error {
	var first error
	for _, o := range ds.Outs {
		if err := o.Line.Halt(); err != nil && first == nil {
			first = fmt.Errorf("halt %s: %w", o.ID, err)
		}
	}
	for _, l := range ds.Lights {
		if err := l.LED.Halt(); err != nil && first == nil {
			first = fmt.Errorf("halt %s: %w", l.ID, err)
		}
	}
	if ds.Speaker != nil {
		ds.Speaker.Halt()
	}
	for _, in := range ds.Ins {
		in.Line.Halt()
	}
	for _, c := range ds.Cams {
		c.Cam.Halt()
	}
	if ds.Mic != nil {
		ds.Mic.Halt()
	}
	for _, in := range ds.Inputs {
		in.Dev.Halt()
	}
	for _, h := range ds.Hotplug {
		h.Watcher.Close()
	}
	for _, e := range ds.Envs {
		e.Dev.Halt()
	}
	return first
}

// Close halts and releases everything.
func (ds *Devices) Close() error {
	err := ds.Halt()
	var errs []error
	for _, c := range ds.Cams {
		errs = append(errs, c.Cam.Close())
	}
	if ds.Mic != nil {
		errs = append(errs, ds.Mic.Close())
	}
	if ds.Speaker != nil {
		errs = append(errs, ds.Speaker.Close())
	}
	for _, in := range ds.Inputs {
		errs = append(errs, in.Dev.Close())
	}
	for _, e := range ds.Envs {
		errs = append(errs, e.Dev.Close())
	}
	for _, l := range ds.Lights {
		errs = append(errs, l.LED.Close())
	}
	if ds.Chip != nil {
		errs = append(errs, ds.Chip.Close())
	}
	return errors.Join(append([]error{err}, errs...)...)
}

// EStop tells whether the line is one of the e-stop's: the e-stop reads
// it, not a sense channel.
func (l InputLine) EStop() bool { return l.EStopLine() != "" }

// EStopLine says which of the e-stop's lines this is: main, second,
// reset, or "" for a line that is not the e-stop's.
func (l InputLine) EStopLine() string {
	switch l.Role {
	case board.RoleEStop:
		return "main"
	case board.RoleEStopSecond:
		return "second"
	case board.RoleEStopReset:
		return "reset"
	}
	return ""
}
