package awareness

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness/control/world"
	"github.com/tobe-body/tobe-body/ledger"
)

// The world model's operations: what the body knows of its surroundings,
// now, at a time and as known then, its history and evidence, and what a
// caller tells it. Rooms and presence are sensitive: a caller below
// medium trust (an administrator excepted) is told nothing of them, not
// even that they exist.
var (
	OpWorldNow = Op[None, WorldStates]{Name: "world.now", Kind: Observe, Least: Anyone, Tool: Tool{Name: "world_now", ReadOnly: true, Idempotent: true},
		Resource:    Resource{URI: "tobe://world", Changes: []string{world.EventChanged}},
		Description: "What the body knows of its surroundings now: each entity's state (rooms active or quiet, doors and windows open or closed, presence, the air's readings, outputs as read back, the body) with its confidence, provenance, since when, and what each source holds, when it was last seen and when it expires. Unknown means no source tells."}
	OpWorldAt = Op[WorldAtIn, world.State]{Name: "world.at", Kind: Observe, Least: Anyone, Tool: Tool{Name: "world_at", ReadOnly: true, Idempotent: true},
		Description: "An entity's state at a time (at, RFC 3339): what was true then, as the body knows it now, or as it knew it when its ledger was at known_at (a sequence: transaction time)."}
	OpWorldHistory = Op[WorldHistoryIn, world.History]{Name: "world.history", Kind: Observe, Least: Anyone, Tool: Tool{Name: "world_history", ReadOnly: true, Idempotent: true},
		Description: "An entity's changes of state from from to to (RFC 3339; default the last 24 hours), oldest first, with the state in force at from; at most limit (1000)."}
	OpWorldExplain = Op[WorldEntityIn, world.Explanation]{Name: "world.explain", Kind: Observe, Least: AdminOrAgent, Tool: Tool{Name: "world_explain", ReadOnly: true, Idempotent: true},
		Description: "An entity's state now with its evidence: each source's records back through what they superseded, each with the events it rests on (or why an event is gone), and the last mark of its channel."}
	OpWorldTell = Op[WorldTellIn, world.State]{Name: "world.tell", Kind: Interact, Least: AdminOrAgent, Tool: Tool{Name: "world_tell"},
		Description: "Tell the body an entity's state (value, one of its kind's) for a while (for, a duration, default 1h, at most 30 days) with a confidence (0..1, default 0.5); withdraw takes back what the caller told. It is kept as told, beside what the body observes, and never becomes observed or verified: only the body's own sources do that."}
)

// WorldStates are entities' states.
type WorldStates struct {
	States []world.State `json:"states"`
	// Withheld counts the entities the caller may not be shown.
	Withheld int `json:"withheld,omitempty"`
}

// WorldAtIn asks for an entity's state at a time.
type WorldAtIn struct {
	Entity  string `json:"entity"`
	At      string `json:"at"`
	KnownAt uint64 `json:"known_at,omitempty"`
}

// WorldHistoryIn asks for an entity's changes over a range.
type WorldHistoryIn struct {
	Entity string `json:"entity"`
	From   string `json:"from,omitempty"`
	To     string `json:"to,omitempty"`
	Limit  int    `json:"limit,omitempty"`
}

// WorldEntityIn names an entity.
type WorldEntityIn struct {
	Entity string `json:"entity"`
}

// WorldTellIn is an assertion.
type WorldTellIn struct {
	Entity     string  `json:"entity"`
	Value      string  `json:"value,omitempty"`
	For        string  `json:"for,omitempty"`
	Confidence float64 `json:"confidence,omitempty"`
	Withdraw   bool    `json:"withdraw,omitempty"`
}

var errNoWorld = refuse(ReasonUnavailable, "the world model is not kept: the ledger is not open (see the body's log)")

func (b *Parts) worldReader() (*world.Reader, error) {
	if b.World == nil || b.Store == nil {
		return nil, errNoWorld
	}
	return &world.Reader{Store: b.Store, Model: b.World}, nil
}

// seeEntity refuses an entity the caller may not be shown as not found,
// like one that is not there.
func (b *Parts) seeEntity(p act.Principal, id string) error {
	e, ok := b.World.Entity(id)
	priv := ledger.Sensitive // one the model no longer keeps: its records are
	if ok {
		priv = e.Privacy
	}
	if !MaySee(p, priv) {
		return refuse(ReasonNotFound, "no entity %q", id)
	}
	return nil
}

func worldErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, world.ErrNoEntity):
		return refuse(ReasonNotFound, "%v", err)
	case errors.Is(err, world.ErrInvalid):
		return refuse(ReasonInvalidParams, "%v", err)
	}
	var oe *Error
	if errors.As(err, &oe) {
		return err
	}
	return refuse(ReasonFailed, "%v", err)
}

func (b *Parts) worldNow(_ context.Context, p act.Principal, _ None) (WorldStates, error) {
	r, err := b.worldReader()
	if err != nil {
		return WorldStates{}, err
	}
	out := WorldStates{States: []world.State{}}
	var shown []string
	for _, e := range b.World.Entities() {
		if b.seeEntity(p, e.ID) != nil {
			out.Withheld++
			continue
		}
		shown = append(shown, e.ID)
	}
	if len(shown) == 0 {
		return out, nil
	}
	sts, err := r.Now(shown...)
	if err != nil {
		return WorldStates{}, worldErr(err)
	}
	out.States = sts
	return out, nil
}

func parseWhen(field, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, refuse(ReasonInvalidParams, "%s %q: want a time in RFC 3339 (2026-12-04T15:00:00Z)", field, s)
	}
	return t, nil
}

func (b *Parts) worldAt(_ context.Context, p act.Principal, in WorldAtIn) (world.State, error) {
	r, err := b.worldReader()
	if err != nil {
		return world.State{}, err
	}
	if err := b.seeEntity(p, in.Entity); err != nil {
		return world.State{}, err
	}
	if in.At == "" {
		return world.State{}, refuse(ReasonInvalidParams, "at: the time to ask about is required")
	}
	t, err := parseWhen("at", in.At)
	if err != nil {
		return world.State{}, err
	}
	st, err := r.At(in.Entity, t, in.KnownAt)
	return st, worldErr(err)
}

func (b *Parts) worldHistory(_ context.Context, p act.Principal, in WorldHistoryIn) (world.History, error) {
	r, err := b.worldReader()
	if err != nil {
		return world.History{}, err
	}
	if err := b.seeEntity(p, in.Entity); err != nil {
		return world.History{}, err
	}
	to := b.Now()
	if in.To != "" {
		if to, err = parseWhen("to", in.To); err != nil {
			return world.History{}, err
		}
	}
	from := to.Add(-24 * time.Hour)
	if in.From != "" {
		if from, err = parseWhen("from", in.From); err != nil {
			return world.History{}, err
		}
	}
	if !from.Before(to) {
		return world.History{}, refuse(ReasonInvalidParams, "from %s is not before to %s", from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	if in.Limit < 0 || in.Limit > world.MaxHistory {
		return world.History{}, refuse(ReasonInvalidParams, "limit %d: between 1 and %d (0: %d)", in.Limit, world.MaxHistory, world.MaxHistory)
	}
	h, err := r.History(in.Entity, from, to, in.Limit)
	return h, worldErr(err)
}

func (b *Parts) worldExplain(_ context.Context, p act.Principal, in WorldEntityIn) (world.Explanation, error) {
	r, err := b.worldReader()
	if err != nil {
		return world.Explanation{}, err
	}
	if err := b.seeEntity(p, in.Entity); err != nil {
		return world.Explanation{}, err
	}
	x, err := r.Explain(in.Entity)
	return x, worldErr(err)
}

func (b *Parts) worldTell(ctx context.Context, p act.Principal, in WorldTellIn) (world.State, error) {
	if _, err := b.worldReader(); err != nil {
		return world.State{}, err
	}
	if err := b.seeEntity(p, in.Entity); err != nil {
		return world.State{}, err
	}
	a := world.Assertion{Entity: in.Entity, Value: in.Value, By: p.Subject, Trust: p.Trust, Confidence: in.Confidence, Withdraw: in.Withdraw}
	if in.For != "" {
		d, err := time.ParseDuration(in.For)
		if err != nil {
			return world.State{}, refuse(ReasonInvalidParams, "for %q: want a duration (90s, 2h)", in.For)
		}
		a.For = d
	}
	if in.Withdraw && in.Value != "" {
		return world.State{}, refuse(ReasonInvalidParams, "withdraw takes back what the caller told: no value with it")
	}
	st, err := world.Tell(ctx, b.Store, b.World, a, b.Now())
	if err != nil {
		return world.State{}, worldErr(fmt.Errorf("world.tell: %w", err))
	}
	return st, nil
}
