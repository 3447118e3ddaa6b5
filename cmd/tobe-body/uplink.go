package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/control/world"
	"github.com/tobe-body/tobe-body/awareness/mqttcmd"
	"github.com/tobe-body/tobe-body/board"
	"github.com/tobe-body/tobe-body/sense"

	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/body/evidence"
	"github.com/tobe-body/tobe-body/body/uplink"
	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/ledger"
)

// startUplink starts what mqtt configures: the embedded broker, and makes
// the relay of the outbox to the broker, which startStates runs once it
// knows what the body has. With no ledger there is no outbox, and
// nothing to relay.
func (d *daemon) startUplink(cfg config.MQTT, lcfg config.Ledger, id body.Identity, store *ledger.Store, log *slog.Logger) (*uplink.Relay, error) {
	if cfg.EmbeddedBroker {
		// A port already taken (a Mosquitto of the machine's own, often)
		// costs the first look its broker, not the body its start: the
		// relay goes to whatever broker mqtt.broker names.
		if b, err := uplink.StartBroker(cfg.EmbeddedPort, log); err != nil {
			log.Error("the embedded MQTT broker does not run", "err", err)
		} else {
			log.Info("embedded MQTT broker", "addr", fmt.Sprintf("127.0.0.1:%d", cfg.EmbeddedPort))
			d.onStop(func() { b.Close() })
		}
	}
	if !cfg.Enabled {
		return nil, nil
	}
	if store == nil {
		log.Error("the uplink does not run: the ledger, which holds its outbox, is not open")
		return nil, nil
	}
	if why := uplink.InClear(cfg.Broker); why != "" {
		log.Warn("mqtt: " + why)
	}
	classes, err := body.LedgerClasses(lcfg)
	if err != nil {
		return nil, err
	}
	opts := uplink.Options{
		Broker: cfg.Broker, ClientID: cfg.ClientID, Username: cfg.Username, Password: cfg.Password.Reveal(),
		Keepalive: time.Duration(cfg.KeepaliveS) * time.Second, Prefix: cfg.TopicPrefix,
		AgentID: id.AgentID, BodyID: id.BodyID, Window: cfg.Window,
		AckCommit:    time.Duration(cfg.AckCommitMS) * time.Millisecond,
		ReconnectMin: time.Duration(cfg.Reconnect.MinMS) * time.Millisecond,
		ReconnectMax: time.Duration(cfg.Reconnect.MaxMS) * time.Millisecond,
		Mirror:       func(typ string) bool { return slices.Contains(cfg.JSONMirror, classes.Of(typ).Name) },
		Log:          log.With("part", "uplink"),
	}
	if t := cfg.TLS; t.CAFile != "" || t.CertFile != "" || t.ServerName != "" {
		if opts.TLS, err = uplink.LoadTLS(t.CAFile, t.CertFile, t.KeyFile, t.ServerName); err != nil {
			return nil, err
		}
	}
	r, err := uplink.New(store, opts)
	if err != nil {
		return nil, err
	}
	log.Info("uplink", "broker", cfg.Broker, "topics", opts.Prefix+"/"+id.AgentID+"/"+id.BodyID+"/...")
	return r, nil
}

// startStates runs the uplink's retained state documents (body/uplink's
// States) over what the body has, when there is a relay: among them the
// world model's entities, their documents starting from the model's
// projection (world.Reader), stamped by the body's clock.
func (d *daemon) startStates(relay *uplink.Relay, store *ledger.Store, estop *act.EStop, senses *sense.Group, a *acting, cfg *config.Loaded, h *host, wm *world.Model, startSeq uint64) error {
	if relay == nil || store == nil {
		return nil
	}
	profile := h.profile
	var mics []string
	if senses.Mic != nil {
		mics = append(mics, senses.Mic.ID)
	}
	s := &uplink.States{Relay: relay, Store: store, After: startSeq, Self: senses.Self, Clock: h.clock.StampNow, Log: d.log,
		Board: uplink.Board{Cameras: senses.CameraZones(), Mics: mics, EStop: estop != nil, Thermal: len(profile.Thermal.Zones) > 0,
			Throttle: profile.Thermal.Throttle.Source != "", Privacy: len(senses.Privacy.State().Devices) > 0, Every: senses.Every()}}
	for _, o := range h.ds.Outs {
		s.Board.Outputs = append(s.Board.Outputs, uplink.Output{ID: o.ID, Name: o.Name, ReadBack: readBack(o.Line)})
	}
	for _, l := range h.ds.Lights {
		s.Board.Outputs = append(s.Board.Outputs, uplink.Output{ID: l.ID, Name: l.Name, Light: true, ReadBack: readBack(l.LED)})
	}
	if h.ds.Speaker != nil {
		s.Board.Speakers = append(s.Board.Speakers, h.ds.SpeakerID)
	}
	for _, c := range senses.Controls {
		s.Board.Controls = append(s.Board.Controls, uplink.Control{ID: c.ID, Keys: c.Keys})
	}
	for _, e := range senses.Envs {
		s.Board.Env = append(s.Board.Env, uplink.EnvSensor{ID: e.ID, Temperature: e.Has.Temperature, Humidity: e.Has.Humidity, Pressure: e.Has.Pressure})
	}
	s.Privacy = func() uplink.PrivacyDoc {
		st := senses.Privacy.State()
		return uplink.PrivacyDoc{Paused: st.Paused, Switch: st.Switch, Why: st.Why}
	}
	if wm != nil {
		s.Board.World = worldEntities(wm)
		s.WorldNow = worldNow(world.Reader{Store: store, Model: wm})
	}
	if ha := cfg.MQTT.HomeAssistant; ha.Enabled {
		s.HomeAssistant = &uplink.HomeAssistant{Prefix: ha.Prefix, PerEntity: ha.PerEntity, Name: cfg.Body.Name, Model: profile.Name,
			Hardware: hardware(profile), Version: version, Area: cfg.Body.Area, ConfigURL: ha.ConfigurationURL}
		for _, b := range ha.Buttons {
			s.Buttons = append(s.Buttons, uplink.Button{ID: b.ID, Name: b.Name, Capability: b.Capability, Target: b.Target, Params: b.Params})
		}
		s.Commands = cfg.MQTT.Commands.Enabled
		s.Announced = filepath.Join(cfg.DataDir, "homeassistant.json")
		s.MayPress = mayPress(cfg.MQTT.Commands, a)
		s.MayView, s.Snapshot = mqttSnapshots(cfg.MQTT.Commands, a)
	}
	if estop != nil {
		s.EStop = func() uplink.EStopState {
			st := estop.Status()
			return uplink.EStopState{Latched: st.Latched, Why: st.Why, WiringFault: st.Fault, Main: st.Main, Second: st.Second, Trips: st.Trips}
		}
	}
	if err := s.Start(); err != nil {
		return err
	}
	d.spawn("uplink states", s.Tick)
	d.spawn("uplink state follower", s.Follow)
	return nil
}

// readBack reads an output's line back: on when it is away from its
// safe level.
func readBack(l hal.LineOut) func() (bool, error) {
	return func() (bool, error) {
		v, err := l.ReadBack()
		return v != l.Safe(), err
	}
}

// hardware is what the body runs on, as Home Assistant's device shows
// it: the device tree's model ("Raspberry Pi 4 Model B Rev 1.5"), a PC's
// maker and product, or "simulated" on the simulated board.
func hardware(p *board.Profile) string {
	if p.Drivers == "sim" {
		return "simulated"
	}
	m := board.ReadMachine()
	if m.Model != "" {
		return m.Model
	}
	return strings.TrimSpace(m.SysVendor + " " + m.ProductName)
}

// worldEntities are the model's entities as the uplink announces them.
func worldEntities(m *world.Model) []uplink.WorldEntity {
	var out []uplink.WorldEntity
	for _, e := range m.Entities() {
		out = append(out, uplink.WorldEntity{ID: e.ID, Kind: string(e.Kind), Name: e.Name, Area: e.Area})
	}
	return out
}

// worldNow reads every entity's state now through r (the projection,
// never history), as the uplink's documents take it.
func worldNow(r world.Reader) func() ([]uplink.WorldState, error) {
	return func() ([]uplink.WorldState, error) {
		sts, err := r.Now()
		if err != nil {
			return nil, err
		}
		out := make([]uplink.WorldState, 0, len(sts))
		for _, st := range sts {
			ws := uplink.WorldState{Entity: st.Entity, Kind: string(st.Kind), Value: st.Value, Confidence: st.Confidence,
				Provenance: st.Provenance, Conflict: st.Conflict}
			if len(st.Readings) > 0 {
				ws.Readings = map[string]uplink.WorldReading{}
				for q, rd := range st.Readings {
					ws.Readings[q] = uplink.WorldReading{Value: rd.Value, Uncertainty: rd.Uncertainty, Unit: rd.Unit}
				}
			}
			if !st.Since.IsZero() {
				since := st.Since
				ws.Since = &since
			}
			out = append(out, ws)
		}
		return out, nil
	}
}

// mayPress is what the broker's principal may press: with commands on, a
// capability on a target its grants offer it (act's Grants.Offered); nil
// (nothing) without commands, grants or a runner.
func mayPress(c config.MQTTCommands, a *acting) func(capability, target string) bool {
	if !c.Enabled || a.grants == nil || a.runner == nil {
		return nil
	}
	trust, err := ledger.ParseLevel(c.Trust)
	if err != nil {
		return nil
	}
	return func(capability, target string) bool {
		return a.grants.Offered(a.runner, act.ReadClock(a.clock), c.Subject, trust, capability, target)
	}
}

// mqttSnapshots say whether the broker's principal (mqtt.commands'
// subject and trust) may look at a camera's evidence now, by its own
// evidence.view grant, and give it a snapshot's bytes, the look
// recorded; nil without grants or evidence.
func mqttSnapshots(c config.MQTTCommands, a *acting) (func(string) bool, func(string) ([]byte, error)) {
	trust, err := ledger.ParseLevel(c.Trust)
	if err != nil || a.grants == nil || a.evidence == nil {
		return nil, nil
	}
	p := act.Principal{Kind: act.MQTTCommand, Subject: c.Subject, Trust: trust}
	may := func(camera string) bool {
		return a.grants.Allows(p, awareness.EvidenceView, awareness.EvidenceViewRisk, camera).Allow
	}
	snapshot := func(id string) ([]byte, error) {
		_, f, err := a.evidence.View(context.Background(), id, c.Subject, string(act.MQTTCommand))
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return io.ReadAll(io.LimitReader(f, evidence.MaxItemBytes))
	}
	return may, snapshot
}

// runUplink takes the broker's commands through table, when mqtt.commands
// says so, then runs the relay.
func (d *daemon) runUplink(relay *uplink.Relay, table *awareness.Table, cfg config.MQTT, log *slog.Logger) error {
	if relay == nil {
		return nil
	}
	if c := cfg.Commands; c.Enabled {
		trust, err := ledger.ParseLevel(c.Trust)
		if err != nil {
			return fmt.Errorf("mqtt.commands.trust: %w", err)
		}
		o := relay.Options()
		h := &mqttcmd.Handler{Table: table, Base: strings.TrimSuffix(o.StatusTopic(), "/status"), Publish: relay.Send, Log: log.With("part", "mqtt commands"),
			Principal: act.Principal{Kind: act.MQTTCommand, Subject: c.Subject, Session: "mqtt", Trust: trust}}
		// A refusal or a failure is told on the refusals' topic too: the
		// only way Home Assistant hears of it (its event entity).
		h.Refused = func(res mqttcmd.Result) {
			ev := uplink.Refusal{EventType: "refused", ID: res.ID, Op: res.Op}
			if res.Error != nil {
				ev.Reason, ev.Detail = string(res.Error.Reason), res.Error.Detail
				if res.Error.Reason == awareness.ReasonFailed {
					ev.EventType = "failed"
				}
			}
			if r, ok := res.Data.(act.Result); ok && mqttcmd.Failed(res) {
				ev.EventType, ev.Reason, ev.Detail = "failed", string(r.Status), r.Detail
				if r.Reason != "" {
					ev.Reason = string(r.Reason)
				}
			}
			if b, err := json.Marshal(ev); err == nil {
				_ = relay.Fire(o.RefusedTopic(), b) // not connected: the result is not sent either
			}
		}
		relay.SubscribeFresh(h.Filter(), h.Handle) // a command left retained on the broker is not run at every session
		log.Info("mqtt commands", "topics", h.Filter(), "subject", c.Subject, "trust", trust)
	}
	d.spawn("uplink", func(ctx context.Context) {
		if err := relay.Run(ctx); err != nil {
			log.Error("uplink", "err", err)
		}
	})
	return nil
}
