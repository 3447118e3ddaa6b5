package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/mqttcmd"
	"github.com/tobe-body/tobe-body/board"
	"github.com/tobe-body/tobe-body/sense"
	"github.com/tobe-body/tobe-body/sense/motion"

	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/body/uplink"
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

// startStates keeps the uplink's retained state documents: the e-stop's
// (every second, and at once on an e-stop event), the board's own and
// the outbox's (every 5 s), and the motion and sound documents the
// events since startSeq make. Nothing is read from history: a document
// starts as the body is now (no motion, no voice).
func (d *daemon) startStates(relay *uplink.Relay, store *ledger.Store, estop *act.EStop, senses *sense.Group, acts actParts, cfg *config.Loaded, profile *board.Profile, startSeq uint64, log *slog.Logger) error {
	if relay == nil || store == nil {
		return nil
	}
	cams := cfg.Sense.Cameras
	cameras := map[string][]string{}
	for _, c := range senses.Cameras {
		zones := []string{motion.WholeFrame}
		if cc := cams[body.ChannelName(c.ID)]; len(cc.Zones) > 0 {
			zones = zones[:0]
			for _, z := range cc.Zones {
				zones = append(zones, z.Name)
			}
		}
		cameras[c.ID] = zones
	}
	var mics []string
	if senses.Mic != nil {
		mics = append(mics, senses.Mic.ID)
	}
	tracker := uplink.NewTracker(cameras, mics)
	announce := func() error { return nil }
	if ha := cfg.MQTT.HomeAssistant; ha.Enabled {
		b := uplink.Board{Cameras: cameras, Mics: mics, EStop: estop != nil, Thermal: len(profile.Thermal.Zones) > 0,
			Throttle: profile.Thermal.Throttle.Source != ""}
		h := uplink.HomeAssistant{Prefix: ha.Prefix, PerEntity: ha.PerEntity, Name: cfg.Body.Name, Model: profile.Description, Version: version}
		var last []string
		announce = func() error {
			es := relay.Options().Entities(b)
			var names []string
			for _, btn := range pressable(cfg.MQTT, acts, log) {
				e, err := relay.Options().ButtonEntity(btn)
				if err != nil {
					return err
				}
				es = append(es, e)
				names = append(names, btn.ID)
			}
			if !slices.Equal(names, last) {
				log.Info("Home Assistant buttons", "pressable", names)
				last = names
			}
			return relay.Announce(h, es)
		}
		if err := announce(); err != nil {
			return err
		}
	}
	set := func(name string, doc any) {
		if err := relay.SetState(name, doc); err != nil {
			log.Error("uplink state", "name", name, "err", err)
		}
	}
	for name, doc := range tracker.Docs() {
		set(name, doc)
	}
	estopDoc := func() {
		if estop == nil {
			return
		}
		st := estop.Status()
		doc := uplink.EStopState{State: "armed", Latched: st.Latched, Why: st.Why, WiringFault: st.Fault, Main: st.Main, Second: st.Second, Trips: st.Trips}
		if st.Latched {
			doc.State = "latched"
		}
		set(uplink.StateEStop, doc)
	}
	boardDocs := func() {
		if self, ok := senses.Self(); ok {
			set(uplink.StateSelf, selfDoc(self))
		}
		if st, err := store.Stats(); err == nil {
			set(uplink.StateOutbox, uplink.OutboxState{Rows: st.OutboxRows, Bytes: st.OutboxBytes})
		}
	}
	estopDoc()
	boardDocs()
	d.spawn(func(ctx context.Context) {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for n := 1; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			estopDoc()
			if n%5 == 0 {
				boardDocs()
			}
		}
	})
	d.spawn(func(ctx context.Context) {
		f := ledger.Filter{After: startSeq, Types: append(tracker.Types(), "estop.", "grant.")}
		err := store.Follow(ctx, f, func(e ledger.Stored) error {
			switch {
			case strings.HasPrefix(e.Type, "estop."):
				estopDoc()
				return nil
			case strings.HasPrefix(e.Type, "grant."):
				// What the broker's principal may press has changed.
				if err := announce(); err != nil {
					log.Error("Home Assistant buttons", "err", err)
				}
				return nil
			}
			if name, doc, ok := tracker.Event(e.Event); ok {
				set(name, doc)
			}
			return nil
		})
		if err != nil && ctx.Err() == nil {
			log.Error("uplink state: following the ledger", "err", err)
		}
	})
	return nil
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
		relay.SubscribeFresh(h.Filter(), h.Handle) // a command left retained on the broker is not run at every session
		log.Info("mqtt commands", "topics", h.Filter(), "subject", c.Subject, "trust", trust)
	}
	d.spawn(func(ctx context.Context) {
		if err := relay.Run(ctx); err != nil {
			log.Error("uplink", "err", err)
		}
	})
	return nil
}

// selfDoc is the board's state document from a self-state sample.
func selfDoc(s body.SelfState) uplink.SelfDoc {
	doc := uplink.SelfDoc{Level: s.Level.String(), Why: s.Why, CPU: s.CPU, Load1: s.Load1,
		DiskFreeMB: float64(s.DiskFree) / (1 << 20), MemFreeMB: float64(s.MemAvailable) / (1 << 20)}
	// The CPU's zone when the board names one, else the hottest.
	zones := slices.Sorted(maps.Keys(s.Temps))
	if i := slices.IndexFunc(zones, func(z string) bool {
		z = strings.ToLower(z)
		return strings.Contains(z, "cpu") || strings.Contains(z, "pkg")
	}); i >= 0 {
		c := s.Temps[zones[i]]
		doc.CPUTempC = &c
	} else {
		for _, z := range zones {
			if c := s.Temps[z]; doc.CPUTempC == nil || c > *doc.CPUTempC {
				doc.CPUTempC = &c
			}
		}
	}
	if s.Throttle != nil {
		doc.Throttled = s.Throttle.Any()
	}
	return doc
}

// actParts are what says what the broker's principal may do.
type actParts struct {
	grants *act.Grants
	runner *act.Runner
	clock  act.Clock
}

// pressable are the configured buttons the broker's principal may press
// now: with commands on, a trust enough for the action's risk on its
// target, and a grant in force that covers it. The policy still decides
// every press.
func pressable(cfg config.MQTT, acts actParts, log *slog.Logger) []uplink.Button {
	c := cfg.Commands
	if !c.Enabled || acts.grants == nil || acts.runner == nil {
		return nil
	}
	trust, err := ledger.ParseLevel(c.Trust)
	if err != nil {
		return nil
	}
	now := act.ReadClock(acts.clock)
	var out []uplink.Button
	for _, b := range cfg.HomeAssistant.Buttons {
		risk, _ := acts.runner.RiskCovered(b.Capability, b.Target)
		if trust < act.MinTrust(risk) {
			continue
		}
		covered := slices.ContainsFunc(acts.grants.Active(now), func(g act.Grant) bool {
			return g.Subject == c.Subject && act.MatchPattern(g.Capability, b.Capability) && act.MatchPattern(g.Scope, b.Target)
		})
		if covered {
			out = append(out, uplink.Button{ID: b.ID, Name: b.Name, Capability: b.Capability, Target: b.Target, Params: b.Params})
		}
	}
	return out
}
