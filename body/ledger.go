package body

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/ledger"
)

// LedgerFile is the ledger's name in the data directory.
const LedgerFile = "ledger.db"

// auditTypes are the event types whose counts the ledger keeps.
var auditTypes = []string{"action.", "grant.", "estop.", "approval.", "lease.", "ledger.", EventClockStepped}

// LedgerOptions are the options every opener of the body's ledger uses
// (the daemon, and the CLI when the daemon is not running), with the
// projections the body keeps (the type counts, and what the caller adds:
// act's), so verify rebuilds the same ones the daemon keeps.
func LedgerOptions(cfg config.Ledger, dataDir string, id Identity, log *slog.Logger, projections ...ledger.Projection) (ledger.Options, error) {
	classes, err := LedgerClasses(cfg)
	if err != nil {
		return ledger.Options{}, err
	}
	opts := ledger.Options{
		Path:            filepath.Join(dataDir, LedgerFile),
		Projections:     append([]ledger.Projection{ledger.TypeCounts{Follow: auditTypes}}, projections...),
		Classes:         &classes,
		OutboxMaxRows:   cfg.OutboxMaxRows,
		OutboxAuditWait: time.Duration(cfg.OutboxAuditWaitDays) * 24 * time.Hour,
		GroupCommit:     time.Duration(cfg.TelemetryCommitMS) * time.Millisecond,
		FoldEvery:       time.Duration(cfg.FoldS) * time.Second,
		OutboxMaxBytes:  int64(cfg.OutboxMaxMB) << 20,
		CompactFree:     int64(cfg.CompactFreeMB) << 20,
		AuditKeep:       time.Duration(cfg.AuditKeepDays) * 24 * time.Hour,
		DiskBudget:      int64(cfg.DiskBudgetMB) << 20,
		PastKeys:        cfg.PastKeys,
		Log:             log,
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

// LedgerClasses builds the class of every event type from the defaults and
// the config. Audit types stay audit: the record of actions, grants and the
// e-stop is never dropped or expired by a config change.
func LedgerClasses(cfg config.Ledger) (ledger.Classes, error) {
	c := ledger.DefaultClasses()
	ttl := time.Duration(cfg.TelemetryTTLDays) * 24 * time.Hour
	for p, cl := range c.ByPrefix {
		if cl.TTL > 0 {
			cl.TTL = ttl
			c.ByPrefix[p] = cl
		}
	}
	byName := map[string]ledger.Class{"telemetry": ledger.ClassTelemetry, "state": ledger.ClassState, "local": ledger.ClassLocal,
		"audit": ledger.ClassAudit, "safety": ledger.ClassSafety}
	for _, name := range []string{"telemetry", "state"} {
		cl := byName[name]
		cl.TTL = ttl
		byName[name] = cl
	}
	defaults := ledger.DefaultClasses()
	for prefix, name := range cfg.Classes {
		cl, ok := byName[name]
		if !ok {
			return c, fmt.Errorf("ledger.classes: %q: unknown class %q", prefix, name)
		}
		for _, a := range auditTypes {
			if name != "audit" && name != "safety" && overlaps(prefix, a) {
				return c, fmt.Errorf("ledger.classes: %q would move audit events (%s) out of the audit class", prefix, a)
			}
		}
		// The e-stop, a person's takeover and degradation go ahead of the
		// backlog whatever the config says. (A shorter prefix leaves them
		// be: the longest prefix decides.)
		for p, def := range defaults.ByPrefix {
			if def.Urgent && name != def.Name && strings.HasPrefix(prefix, p) {
				return c, fmt.Errorf("ledger.classes: %q would move %s events out of the %s class", prefix, p, def.Name)
			}
		}
		c.ByPrefix[prefix] = cl
	}
	return c, nil
}

// overlaps reports whether some event type could match both prefixes.
func overlaps(a, b string) bool { return strings.HasPrefix(a, b) || strings.HasPrefix(b, a) }

// LookAtLedger opens the ledger in dataDir, which must exist, for a look
// while the daemon is not running: the identity is read, never made, and
// the file is not compacted. The caller closes the store.
func LookAtLedger(cfg config.Ledger, dataDir string, projections ...ledger.Projection) (*ledger.Store, error) {
	var id Identity
	if _, err := os.Stat(filepath.Join(dataDir, IdentityFile)); err == nil {
		if id, _, err = LoadIdentity(dataDir, time.Now()); err != nil {
			return nil, err
		}
	} // else the ledger keeps its own
	opts, err := LedgerOptions(cfg, dataDir, id, slog.New(slog.DiscardHandler), projections...)
	if err != nil {
		return nil, err
	}
	opts.CompactFree = 0   // a look does not rewrite the file
	opts.OutboxAsIs = true // nor start or clear its outbox
	return ledger.Open(opts)
}
