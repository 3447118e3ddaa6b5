package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/tobe-body/tobe-body/awareness/control/world"
	"github.com/tobe-body/tobe-body/board"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/ledger"
	"github.com/tobe-body/tobe-body/sense"
)

// Summary periods of the channels whose summaries keep the world model's
// states, when their config says nothing.
const (
	defaultCameraSummary = sense.DefaultCameraSummary
	defaultMicSummary    = 10 * time.Second
)

// worldFacts are what the board and the config give the world model:
// which channels feed entities, and how often those that summarise do.
func worldFacts(p *board.Profile, c *config.Config) world.Facts {
	f := world.Facts{Cameras: map[string][]string{}, MicSummary: defaultMicSummary,
		EnvSummary: time.Duration(c.Sense.Env.SummaryS) * time.Second}
	for _, cam := range p.Cameras {
		zones := []string{"frame"}
		if cc, ok := c.Sense.Cameras[cam.Name]; ok && len(cc.Zones) > 0 {
			zones = zones[:0]
			for _, z := range cc.Zones {
				zones = append(zones, z.Name)
			}
		}
		f.Cameras[body.ChannelID("camera", cam.Name)] = zones
		every := defaultCameraSummary
		if cc, ok := c.Sense.Cameras[cam.Name]; ok && cc.SummaryS > 0 {
			every = time.Duration(cc.SummaryS) * time.Second
		}
		f.CameraSummary = max(f.CameraSummary, every)
	}
	if a := p.Audio.Capture; a != nil {
		f.Microphones = append(f.Microphones, body.ChannelID("audio-capture", a.Name))
		if mc, ok := c.Sense.Microphones[a.Name]; ok && mc.SummaryS > 0 {
			f.MicSummary = time.Duration(mc.SummaryS) * time.Second
		}
	}
	if p.GPIO != nil {
		for _, in := range p.GPIO.Inputs {
			if in.Role == "sensor" {
				f.Lines = append(f.Lines, body.ChannelID("gpio-in", in.Name))
			}
		}
		for _, o := range p.GPIO.Outputs {
			f.Outputs = append(f.Outputs, body.ChannelID("gpio-out", o.Name))
		}
	}
	if p.I2C != nil {
		for _, s := range p.I2C.Sensors {
			f.EnvSensors = append(f.EnvSensors, body.ChannelID("env-sensor", s.Name))
		}
	}
	return f
}

// worldModel builds the world model of the config's world section on
// the board's facts; an error names the entity and field at fault.
func worldModel(p *board.Profile, c *config.Config) (*world.Model, error) {
	wc := world.Config{Defaults: &c.World.Defaults, Entities: map[string]world.EntityConfig{}}
	for name, e := range c.World.Entities {
		ec := world.EntityConfig{Kind: e.Kind, ExpireAfterS: e.ExpireAfterS, Area: e.Area}
		for _, s := range e.Sources {
			ec.Sources = append(ec.Sources, world.Source{Channel: s.Channel, Zone: s.Zone})
		}
		wc.Entities[name] = ec
	}
	return world.Build(wc, worldFacts(p, c))
}

// startWorld records that the body restarted (what it sensed before is
// not known to hold) and keeps the model's expiries recorded while it
// runs.
func (d *daemon) startWorld(ctx context.Context, store *ledger.Store, dv *world.Deriver, log *slog.Logger) {
	if store == nil || store.Damage() != nil {
		return
	}
	k := &world.Keeper{Store: store, Model: dv.Model, Deriver: dv, Log: log}
	if st, err := store.Stats(); err == nil && st.LastSeq > 0 {
		if evs, err := store.EventsAt(st.LastSeq); err == nil && len(evs) == 1 {
			k.StoppedAt = evs[0].Occurred()
		}
	}
	if err := k.Start(ctx); err != nil {
		log.Error("world: the restart could not be recorded; what the body sensed before it may be shown as holding", "err", err)
	}
	d.spawn("world keeper", func(ctx context.Context) { k.Run(ctx) })
}
