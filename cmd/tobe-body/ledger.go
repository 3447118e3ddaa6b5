package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/ledger"
)

// ledgerFile is the ledger's name in the data directory.
const ledgerFile = "ledger.db"

// auditTypes are the event types whose counts the ledger keeps.
var auditTypes = []string{"action.", "grant.", "estop.", "approval.", "lease.", "ledger."}

// ledgerOptions are the options every opener of the body's ledger uses, so
// verify rebuilds the same projections the daemon keeps.
func ledgerOptions(cfg config.Ledger, dataDir string, id body.Identity, log *slog.Logger) (ledger.Options, error) {
	classes, err := ledgerClasses(cfg)
	if err != nil {
		return ledger.Options{}, err
	}
	opts := ledger.Options{
		Path:           filepath.Join(dataDir, ledgerFile),
		Projections:    []ledger.Projection{ledger.TypeCounts{Follow: auditTypes}},
		Classes:        &classes,
		OutboxMaxRows:  cfg.OutboxMaxRows,
		OutboxMaxBytes: int64(cfg.OutboxMaxMB) << 20,
		CompactFree:    int64(cfg.CompactFreeMB) << 20,
		Log:            log,
	}
	if id.AgentID != "" {
		var err error
		if opts.AgentID, err = ledger.ParseUUID(id.AgentID); err != nil {
			return opts, fmt.Errorf("agent_id: %w", err)
		}
		if opts.BodyID, err = ledger.ParseUUID(id.BodyID); err != nil {
			return opts, fmt.Errorf("body_id: %w", err)
		}
	}
	return opts, nil
}

// ledgerClasses builds the class of every event type from the defaults and
// the config. Audit types stay audit: the record of actions, grants and the
// e-stop is never dropped or expired by a config change.
func ledgerClasses(cfg config.Ledger) (ledger.Classes, error) {
	c := ledger.DefaultClasses()
	ttl := time.Duration(cfg.TelemetryTTLDays) * 24 * time.Hour
	for p, cl := range c.ByPrefix {
		if cl.TTL > 0 {
			cl.TTL = ttl
			c.ByPrefix[p] = cl
		}
	}
	byName := map[string]ledger.Class{"telemetry": ledger.ClassTelemetry, "state": ledger.ClassState, "local": ledger.ClassLocal, "audit": ledger.ClassAudit}
	for _, name := range []string{"telemetry", "state"} {
		cl := byName[name]
		cl.TTL = ttl
		byName[name] = cl
	}
	for prefix, name := range cfg.Classes {
		cl, ok := byName[name]
		if !ok {
			return c, fmt.Errorf("ledger.classes: %q: unknown class %q", prefix, name)
		}
		for _, a := range auditTypes {
			if name != "audit" && (strings.HasPrefix(prefix, a) || strings.HasPrefix(a, prefix)) {
				return c, fmt.Errorf("ledger.classes: %q would move audit events (%s) out of the audit class", prefix, a)
			}
		}
		c.ByPrefix[prefix] = cl
	}
	return c, nil
}

// ledgerMethods are the admin socket's ledger calls.
func ledgerMethods(store *ledger.Store) map[string]method {
	return map[string]method{
		"ledger.stats": func(context.Context, json.RawMessage) (any, error) { return store.Stats() },
		"ledger.verify": func(ctx context.Context, _ json.RawMessage) (any, error) {
			return store.Verify(ctx)
		},
		"ledger.backup": func(_ context.Context, p json.RawMessage) (any, error) {
			var req struct{ Path string }
			if err := json.Unmarshal(p, &req); err != nil || !filepath.IsAbs(req.Path) {
				return nil, errors.New(`want {"path": an absolute path}`)
			}
			n, err := store.Backup(req.Path)
			return map[string]any{"path": req.Path, "bytes": n}, err
		},
		"ledger.events": func(ctx context.Context, p json.RawMessage) (any, error) {
			var req eventsRequest
			if len(p) > 0 {
				if err := json.Unmarshal(p, &req); err != nil {
					return nil, fmt.Errorf("params: %w", err)
				}
			}
			return readEvents(ctx, store, req)
		},
	}
}

// eventsRequest asks for events; with WaitMS it waits that long for the
// first new one (long poll for --follow).
type eventsRequest struct {
	After  uint64    `json:"after"`
	Types  []string  `json:"types,omitempty"`
	Since  time.Time `json:"since,omitzero"`
	Limit  int       `json:"limit,omitempty"`
	WaitMS int       `json:"wait_ms,omitempty"`
}

type eventsReply struct {
	Events  []ledger.EventView `json:"events"`
	LastSeq uint64             `json:"last_seq"` // where to continue from
}

func readEvents(ctx context.Context, store *ledger.Store, req eventsRequest) (eventsReply, error) {
	f := ledger.Filter{After: req.After, Types: req.Types, Since: req.Since, Limit: min(max(req.Limit, 0), 10000)}
	wait := time.Duration(min(max(req.WaitMS, 0), 60000)) * time.Millisecond
	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	for {
		changed := store.Changed()
		evs, next, err := store.Scan(f)
		if err != nil {
			return eventsReply{}, err
		}
		reply := eventsReply{Events: []ledger.EventView{}, LastSeq: next}
		for _, e := range evs {
			reply.Events = append(reply.Events, e.View())
		}
		if len(reply.Events) > 0 || timeout == nil {
			return reply, nil
		}
		f.After = next
		if next != req.After {
			req.After = next
			continue // only non-matching events so far; look further
		}
		select {
		case <-changed:
		case <-timeout:
			return reply, nil
		case <-ctx.Done():
			return reply, ctx.Err()
		}
	}
}
