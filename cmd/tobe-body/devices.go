package main

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/tobe-body/tobe-body/board"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/hal"
)

type inputLine struct {
	id     string
	role   string // button, sensor, feedback, or one of the e-stop roles
	line   hal.LineIn
	active hal.Level // the level that means pressed, on, or stop
}

type outputLine struct {
	id   string
	name string
	line hal.LineOut
}

type camera struct {
	id  string
	cam hal.Camera
}

type inputDevice struct {
	id   string
	role string // control or activity
	dev  hal.InputDevice
}

// devices are the hal devices the daemon opened for the board's profile.
type devices struct {
	chip    hal.Chip
	ins     []inputLine
	outs    []outputLine
	cams    []camera
	mic     hal.AudioCapture
	micID   string
	speaker hal.AudioPlayback
	spkID   string
	inputs  []inputDevice
	hotplug []*hotplug
}

// channelID names the channel of a device of a kind, the same whether a
// driver opened it or only the finder found it.
func channelID(kind, name string) string {
	switch kind {
	case "gpio-in", "gpio-out":
		return "gpio." + name
	case "audio-capture", "audio-playback":
		return "audio." + name
	case "thermal-zone":
		return "thermal." + name
	}
	return kind + "." + name
}

// register adds a channel for a device that was tried: Loaded devices
// start in state, Failed ones in error with the reason; Skipped devices
// are not on this board and get no channel.
func register(reg *body.Registry, log *slog.Logger, id, kind, device string, err error, state body.State) {
	var rerr error
	switch {
	case err == nil:
		rerr = reg.Register(body.Channel{ID: id, Kind: kind, Device: device, Driver: string(board.Loaded), State: state})
	case errors.Is(err, hal.ErrAbsent):
		log.Info("device absent on this board", "channel", id, "why", err)
	case errors.Is(err, hal.ErrUnsupported):
		log.Warn("device skipped: unsupported", "channel", id, "why", err)
	default:
		log.Warn("device failed", "channel", id, "err", err)
		rerr = reg.Register(body.Channel{ID: id, Kind: kind, Device: device, Driver: string(board.Failed), State: body.Error, Health: err.Error()})
	}
	if rerr != nil {
		log.Error("channel not registered", "channel", id, "err", rerr)
	}
}

// openDevices opens every device p names with d and registers a channel
// for each. Devices of kinds d has no opener for are found with f, when
// there is one, and registered discovered.
func openDevices(p *board.Profile, d hal.Drivers, f board.Finder, reg *body.Registry, log *slog.Logger) *devices {
	ds := &devices{}
	// Kinds this driver set cannot open yet are only found: registered
	// discovered, to be enabled when their driver is there.
	if f != nil {
		lacking := map[string]bool{
			"gpio-chip": d.OpenChip == nil, "gpio-in": d.OpenChip == nil, "gpio-out": d.OpenChip == nil, "estop": d.OpenChip == nil,
			"camera": d.OpenCamera == nil, "audio-capture": d.OpenCapture == nil, "audio-playback": d.OpenPlayback == nil,
			"input": d.OpenInput == nil, "thermal-zone": true, "throttle": true,
		}
		for _, r := range board.Check(p, hal.Drivers{Name: d.Name}, f) {
			// "every input device" needs a hotplug watcher.
			if !lacking[r.Kind] && !(r.Kind == "input" && r.Target == "device *" && d.WatchInputs == nil) {
				continue
			}
			id := channelID(r.Kind, r.Name)
			var err error
			switch r.Status {
			case board.Loaded:
				health := fmt.Sprintf("found; this build has no %q driver to stream from it", d.Name)
				if r.Kind == "thermal-zone" || r.Kind == "throttle" {
					health = "found; read by self-state (to come)"
				}
				err = reg.Register(body.Channel{ID: id, Kind: r.Kind, Device: r.Found, Driver: string(board.Loaded), State: body.Discovered, Health: health})
			case board.Failed:
				err = reg.Register(body.Channel{ID: id, Kind: r.Kind, Device: r.Target, Driver: string(board.Failed), State: body.Error, Health: r.Reason})
			default:
				log.Info("device absent on this board", "channel", id, "why", r.Reason)
			}
			if err != nil {
				log.Error("channel not registered", "channel", id, "err", err)
			}
		}
	}

	if g := p.GPIO; g != nil && d.OpenChip != nil {
		chip, err := d.OpenChip(g.Chip)
		if err != nil {
			register(reg, log, channelID("gpio-chip", g.Chip), "gpio-chip", g.Chip, err, body.Enabled)
		} else {
			ds.chip = chip
			for _, l := range p.Lines() {
				id := channelID(l.Kind, l.Name)
				if l.In != nil {
					line, err := chip.In(l.Line, *l.In)
					register(reg, log, id, "gpio-in", fmt.Sprintf("line %s on %s", l.Line, g.Chip), err, body.Enabled)
					if err == nil {
						ds.ins = append(ds.ins, inputLine{id: id, role: l.Role, line: line, active: l.Active})
					}
					continue
				}
				line, err := chip.Out(l.Line, *l.Out)
				register(reg, log, id, "gpio-out", fmt.Sprintf("line %s on %s, safe %s", l.Line, g.Chip, l.Out.Safe), err, body.Enabled)
				if err == nil {
					ds.outs = append(ds.outs, outputLine{id: id, name: l.Name, line: line})
				}
			}
		}
	}
	if d.OpenCamera != nil {
		for _, c := range p.Cameras {
			id := channelID("camera", c.Name)
			if c.Needs != "" {
				register(reg, log, id, "camera", c.Driver, fmt.Errorf("a CSI camera that needs %s, which this body does not drive", c.Needs), body.Enabled)
				continue
			}
			cam, err := d.OpenCamera(board.CameraConfig(c))
			dev := c.Device + c.Driver
			if err == nil {
				dev = cam.Name() + " " + cam.Format().String()
				ds.cams = append(ds.cams, camera{id: id, cam: cam})
			}
			register(reg, log, id, "camera", dev, err, body.Enabled)
		}
	}
	if a := p.Audio.Capture; a != nil && d.OpenCapture != nil {
		id := channelID("audio-capture", a.Name)
		mic, err := d.OpenCapture(board.AudioConfig(*a))
		dev := a.Device
		if err == nil {
			ds.mic, ds.micID, dev = mic, id, mic.Name()+" "+mic.Format().String()
		}
		register(reg, log, id, "audio-capture", dev, err, body.Enabled)
	}
	if a := p.Audio.Playback; a != nil && d.OpenPlayback != nil {
		id := channelID("audio-playback", a.Name)
		spk, err := d.OpenPlayback(board.AudioConfig(*a))
		dev := a.Device
		if err == nil {
			ds.speaker, ds.spkID, dev = spk, id, spk.Name()+" "+spk.Format().String()
		}
		register(reg, log, id, "audio-playback", dev, err, body.Enabled)
	}
	if d.OpenInput != nil {
		var every []board.Input
		for _, in := range p.Inputs {
			id := channelID("input", in.Name)
			if in.Match == "*" {
				every = append(every, in)
				continue
			}
			dev, err := d.OpenInput(hal.InputConfig{Name: in.Match, Grab: in.Grab})
			path := in.Match
			if err == nil {
				path = dev.Info().Path
				ds.inputs = append(ds.inputs, inputDevice{id: id, role: in.Role, dev: dev})
			}
			register(reg, log, id, "input", path, err, body.Enabled)
		}
		// Every other device, as they come and go.
		for _, in := range every {
			if d.WatchInputs == nil {
				break
			}
			id := channelID("input", in.Name)
			w, err := d.WatchInputs()
			if err == nil {
				ds.hotplug = append(ds.hotplug, &hotplug{id: id, w: w, open: d.OpenInput})
			}
			register(reg, log, id, "input", "every input device, as plugged", err, body.Enabled)
		}
	}
	return ds
}

// halt makes every device inert: outputs at their safe levels first, then
// the streams stopped. It returns the first error of an output.
func (ds *devices) halt() error {
	var first error
	for _, o := range ds.outs {
		if err := o.line.Halt(); err != nil && first == nil {
			first = fmt.Errorf("halt %s: %w", o.id, err)
		}
	}
	if ds.speaker != nil {
		ds.speaker.Halt()
	}
	for _, in := range ds.ins {
		in.line.Halt()
	}
	for _, c := range ds.cams {
		c.cam.Halt()
	}
	if ds.mic != nil {
		ds.mic.Halt()
	}
	for _, in := range ds.inputs {
		in.dev.Halt()
	}
	for _, h := range ds.hotplug {
		h.w.Close()
	}
	return first
}

// close halts and releases everything.
func (ds *devices) close() error {
	err := ds.halt()
	for _, c := range ds.cams {
		c.cam.Close()
	}
	if ds.mic != nil {
		ds.mic.Close()
	}
	if ds.speaker != nil {
		ds.speaker.Close()
	}
	for _, in := range ds.inputs {
		in.dev.Close()
	}
	if ds.chip != nil {
		ds.chip.Close()
	}
	return err
}
