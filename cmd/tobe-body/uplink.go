package main

import (
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/body/uplink"
	"github.com/tobe-body/tobe-body/ledger"
)

// startUplink starts what mqtt configures: the embedded broker, and the
// relay of the outbox to the broker. With no ledger there is no outbox,
// and nothing to relay.
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
	d.spawn(r.Run)
	return r, nil
}
