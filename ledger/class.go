package ledger

import (
	"strings"
	"time"
)

// Class says how events of some types are kept and whether they leave the
// device.
type Class struct {
	Name string
	// Outbox: the event gets an outbox row for the uplink.
	Outbox bool
	// Droppable: when the outbox is over its budget, rows of this class may
	// be dropped (lowest Priority, oldest first). Audit classes are not.
	Droppable bool
	Priority  uint8
	// Urgent: the uplink sends rows of this class ahead of the backlog
	// (see Store.OutboxUrgent): what a person must hear of now, the
	// e-stop above all. All events of one type share a class, so a type's
	// order is kept whichever way it goes.
	Urgent bool
	// TTL: events older than this by the ledger's running clock (see
	// Store.Running), not by the wall clock, are deleted by retention,
	// with their outbox rows and dedupe keys; 0 keeps them, and their
	// dedupe keys, for ever. The running clock stands still while the
	// body is off: in calendar time an event lives at least its TTL.
	TTL time.Duration
	// PastKeys: when the archive takes an event of the class (see
	// Store.Archive), its dedupe key joins the past keys, and a repeat
	// is refused for ever; otherwise the key goes with the event.
	PastKeys bool
}

// Classes maps event types to classes by the longest matching prefix
// ("camera." matches camera.motion_started).
type Classes struct {
	Default  Class
	ByPrefix map[string]Class
}

// Of returns the class of an event type.
func (c Classes) Of(eventType string) Class {
	best, bestLen := c.Default, -1
	for p, cl := range c.ByPrefix {
		if len(p) > bestLen && strings.HasPrefix(eventType, p) {
			best, bestLen = cl, len(p)
		}
	}
	return best
}

// The built-in classes.
var (
	// ClassAudit: actions, grants, e-stop, approvals, leases and the
	// ledger's own records. Kept for ever, sent, never dropped.
	ClassAudit = Class{Name: "audit", Outbox: true, Priority: 255, PastKeys: true}
	// ClassSafety: the e-stop, a person's takeover and the board's
	// degradation. Audit records (kept for ever, sent, never dropped) that
	// go ahead of the backlog.
	ClassSafety = Class{Name: "safety", Outbox: true, Priority: 255, Urgent: true, PastKeys: true}
	// ClassTelemetry: what the body senses. Kept 7 days, sent, dropped
	// first when the outbox is full.
	ClassTelemetry = Class{Name: "telemetry", Outbox: true, Droppable: true, Priority: 1, TTL: 7 * 24 * time.Hour}
	// ClassState: the body's own state (self-state, channels). Kept 7
	// days, sent, dropped after telemetry.
	ClassState = Class{Name: "state", Outbox: true, Droppable: true, Priority: 2, TTL: 7 * 24 * time.Hour}
	// ClassLocal: the control plane's own records (work items, waits).
	// Kept, not sent.
	ClassLocal = Class{Name: "local"}
)

// DefaultClasses is the body's mapping of event types to classes.
func DefaultClasses() Classes {
	return Classes{
		Default: ClassLocal,
		ByPrefix: map[string]Class{
			"action.": ClassAudit, "grant.": ClassAudit, "approval.": ClassAudit,
			"lease.": ClassAudit, "ledger.": ClassAudit,
			// The agent's work items and wait conditions: their
			// projections are read at every start, so their events
			// are kept.
			"work.": ClassAudit, "wait.": ClassAudit,
			"estop.": ClassSafety, "lease.human_": ClassSafety, "body.degradation": ClassSafety,
			"camera.": ClassTelemetry, "audio.": ClassTelemetry, "input.": ClassTelemetry, "gpio.": ClassTelemetry, "env.": ClassTelemetry,
			"body.": ClassState, "channel.": ClassState,
			// A setting of the wall clock explains the times around it
			// and the grants it ended: kept with the audit records.
			"body.clock_stepped": ClassAudit,
			// Who was refused at the agent socket.
			"agent.refused": ClassAudit,
			// What the body kept to be looked at, who looked, and its end:
			// the records hold no media, only what was kept and why.
			"evidence.": ClassAudit,
			// The privacy switch and pauses: when the body stopped and
			// started seeing and hearing, and who asked.
			"privacy.": ClassAudit,
			// The world model's records: kept (its projection is rebuilt
			// from them long after the sensed events they cite expire),
			// not sent (the home server gets its state documents).
			"world.": ClassLocal,
		},
	}
}
