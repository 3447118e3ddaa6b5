package world

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/tobe-body/tobe-body/awareness/control/wait"
	"github.com/tobe-body/tobe-body/ledger"
)

// roundCmd ends what is past its expiry, or (restart) every record of a
// sensed source: a ledger command, decided on the projection as the
// transaction sees it.
type roundCmd struct {
	model *Model
	// deriver, when set, hands over its sightings not yet marked,
	// which the round marks.
	deriver *Deriver
	run     int64 // ms
	now     int64 // ns, the wall clock: the valid time of what it records
	restart bool
	// stoppedAt bounds a restart's ends (ns; 0: now).
	stoppedAt int64
}

func (c *roundCmd) Decide(v *ledger.View) ([]ledger.Event, error) {
	var sights []sightingOf
	if c.deriver != nil {
		sights = c.deriver.takeSightings(c.model.gen.Load(), v.Lost())
	}
	c.model.gen.Add(1) // the Deriver reads what this writes afresh
	ch := newChange(v.Projection(ProjectionName), c.model, c.run, ledger.Event{OccurredAt: c.now, Trust: ledger.High}, nil)
	for _, p := range sights {
		ch.mark(p.seen(p.channel), p.entity, p.prov)
	}
	var currents []*current
	ledger.Range(ch.kv, []byte{kLast}, nil, false, func(k, v []byte) bool {
		if x, ok := entryOf(v); ok && !x.end {
			e, s, _ := cutNUL(string(k[1:]))
			currents = append(currents, ch.current(e, s))
		}
		return true
	})
	for _, cu := range currents {
		if cu == nil {
			continue
		}
		if !c.restart || cu.rec.Channel == "" {
			if _, err := ch.endIfExpired(cu, math.MaxInt64); err != nil {
				return nil, err
			}
			continue
		}
		// What the body sensed before it stopped is not known to hold
		// after: it ended when the body stopped, or when it expired if
		// that came first.
		_, seenAt := ch.seen(cu)
		at := c.stoppedAt
		if at == 0 {
			at = c.now
		}
		if cu.rec.ExpireMS > 0 && seenAt <= math.MaxInt64-cu.rec.ExpireMS*1e6 {
			at = min(at, seenAt+cu.rec.ExpireMS*1e6)
		}
		if err := ch.end(cu, EndRestarted, at, nil); err != nil {
			return nil, err
		}
	}
	if err := ch.settle(); err != nil {
		return nil, err
	}
	return ch.out, nil
}

// eachHeld calls fn with the record each source holds (its entry and
// the record, or the error reading it), until fn returns false.
func eachHeld(kv ledger.ReadKV, fn func(x entry, rec Record, err error) bool) {
	ledger.Range(kv, []byte{kLast}, nil, false, func(k, v []byte) bool {
		x, ok := entryOf(v)
		if !ok || x.end {
			return true
		}
		e, src, _ := cutNUL(string(k[1:]))
		rec, why, err := readEntry(kv, e, src, x)
		if err == nil && why != "" {
			err = fmt.Errorf("world: the last entry of %s from %s is an end, its index a record", e, src)
		}
		return fn(x, rec, err)
	})
}

// Keeper keeps the model true to the running clock: at Start it ends
// what the body sensed before it stopped (restarted); every Every it
// records the ends of states that expired (not_seen), which queries
// already treat as unknown; and every HoldEvery it records that a state
// has held as long as a wait condition asks (world.held). It writes only
// when there is something to record.
type Keeper struct {
	Store *ledger.Store
	Model *Model
	// Now is the wall clock of what it records (valid time); nil:
	// time.Now.
	Now func() time.Time
	// Every is how often it looks for expiries; 0: MinExpiry/20 (30 s).
	Every time.Duration
	// Deriver is the Deriver of Model: the sightings it keeps in memory
	// between seen marks are marked by a round before the marks would
	// let a state expire. Nil: a state whose channel stops expires as
	// soon as a quarter of its expiry after it was last seen.
	Deriver *Deriver
	// StoppedAt is when the body stopped before this start (the time of
	// the ledger's last event then); zero: unknown, the start's time.
	StoppedAt time.Time
	Log       *slog.Logger

	// held are the holds recorded, by dedupe key, while they are due.
	held map[string]bool
}

func (k *Keeper) now() time.Time {
	if k.Now == nil {
		return time.Now()
	}
	return k.Now()
}

// Start records that the body restarted: every record of a sensed
// source ends (told assertions keep their own expiry).
func (k *Keeper) Start(ctx context.Context) error {
	sensed := false
	err := k.Store.ReadProjection(ProjectionName, func(kv ledger.ReadKV) error {
		eachHeld(kv, func(_ entry, rec Record, err error) bool {
			sensed = err != nil || rec.Channel != ""
			return !sensed
		})
		return nil
	})
	if err != nil {
		return fmt.Errorf("world: reading what the body sensed before it stopped: %w", err)
	}
	if !sensed {
		return nil // nothing to end: no write
	}
	var stopped int64
	if !k.StoppedAt.IsZero() {
		stopped = k.StoppedAt.UnixNano()
	}
	_, err = k.Store.Execute(ctx, &roundCmd{model: k.Model, run: k.Store.Running().Milliseconds(), now: k.now().UnixNano(),
		restart: true, stoppedAt: stopped})
	if err != nil {
		return fmt.Errorf("world: recording the restart: %w", err)
	}
	return nil
}

// Round records the ends of the states past their expiry, if any, and
// marks the sightings the Deriver keeps of a channel whose marks would
// let its state expire within two rounds.
func (k *Keeper) Round(ctx context.Context) error {
	run := k.Store.Running().Milliseconds()
	due, mark := false, false
	err := k.Store.ReadProjection(ProjectionName, func(kv ledger.ReadKV) error {
		eachHeld(kv, func(x entry, rec Record, err error) bool {
			if err != nil || rec.ExpireMS <= 0 {
				return true
			}
			seenRun, _ := lastSeen(kv, rec, x, math.MaxUint64)
			left := rec.ExpireMS - (run - seenRun)
			due = left < 0
			mark = mark || k.Deriver != nil && left <= min(2*k.every().Milliseconds(), rec.ExpireMS/4) && k.Deriver.sighted(rec.Channel)
			return !due
		})
		return nil
	})
	if err != nil || !due && !mark {
		return err
	}
	_, err = k.Store.Execute(ctx, &roundCmd{model: k.Model, deriver: k.Deriver, run: run, now: k.now().UnixNano()})
	return err
}

// every is how often Run looks for expiries.
func (k *Keeper) every() time.Duration {
	if k.Every <= 0 {
		return MinExpiry / 20
	}
	return k.Every
}

// HoldEvery is how often the keeper looks for states that have held as
// long as a wait condition asks: a world.held comes at most this late.
const HoldEvery = 5 * time.Second

// Run looks for expiries every Every, and for holds every HoldEvery,
// until ctx ends.
func (k *Keeper) Run(ctx context.Context) error {
	t := time.NewTicker(k.every())
	defer t.Stop()
	h := time.NewTicker(HoldEvery)
	defer h.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := k.Round(ctx); err != nil && !errors.Is(err, context.Canceled) && k.Log != nil {
				k.Log.Warn("world: the expiries could not be recorded; queries still treat them as unknown", "err", err)
			}
		case <-h.C:
			if err := k.Holds(ctx); err != nil && !errors.Is(err, context.Canceled) && k.Log != nil {
				k.Log.Warn("world: the holds wait conditions ask for could not be recorded", "err", err)
			}
		}
	}
}

// hold is what a wait condition asks of world.held: an entity (its
// clause on entity, or a channel it names), a value (its clause on
// value; "" any but unknown), held longer than above seconds (its clause
// on held_s).
type hold struct {
	cond, entity, value string
	above               float64
}

// holdsOf reads what waiting conditions ask of world.held.
func holdsOf(conds []wait.Condition) []hold {
	var out []hold
	for _, c := range conds {
		if !slices.ContainsFunc(c.Types, func(t string) bool { return ledger.MatchType(t, EventHeld) }) {
			continue
		}
		h := hold{cond: c.ID, above: -1}
		var entities []string
		for _, cl := range c.Match {
			s, _ := cl.Equals.(string)
			switch {
			case cl.Field == "entity" && s != "":
				entities = append(entities, s)
			case cl.Field == "value" && s != "":
				h.value = s
			case cl.Field == "held_s" && cl.Above != nil:
				h.above = *cl.Above
			}
		}
		if len(entities) == 0 {
			entities = c.Channels
		}
		if h.above < 0 {
			continue
		}
		for _, e := range entities {
			if !strings.HasSuffix(e, ".") {
				h.entity = e
				out = append(out, h)
			}
		}
	}
	return out
}

// Holds records a world.held for each waiting condition whose entity
// has held its value (on the running clock) longer than the condition's
// held_s: once for each time the value began (a dedupe key of the
// condition, the entity and the start), whatever restarts come between.
func (k *Keeper) Holds(ctx context.Context) error {
	conds, err := wait.List(k.Store, func(c *wait.Condition) bool { return c.Removed == "" })
	if err != nil {
		return err
	}
	hs := holdsOf(conds)
	if len(hs) == 0 {
		return nil
	}
	run := k.Store.Running().Milliseconds()
	states := map[string]Changed{}
	err = k.Store.ReadProjection(ProjectionName, func(kv ledger.ReadKV) error {
		for _, h := range hs {
			if c, ok, err := lastChangeOf(kv, h.entity); err == nil && ok {
				states[h.entity] = c
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if k.held == nil {
		k.held = map[string]bool{}
	}
	var evs []ledger.Event
	due := map[string]bool{}
	for _, h := range hs {
		c, ok := states[h.entity]
		if !ok || c.Value == Unknown || h.value != "" && c.Value != h.value {
			continue
		}
		held := float64(run-c.SinceRunMS) / 1000
		if held <= h.above {
			continue
		}
		dk := fmt.Sprintf("world.held:%s:%s:%d", h.cond, h.entity, c.Since)
		due[dk] = true
		if k.held[dk] {
			continue
		}
		p, err := ledger.MarshalPayload(Held{Entity: h.entity, Value: c.Value, Since: c.Since, HeldS: int64(held), Condition: h.cond})
		if err != nil {
			return err
		}
		priv := ledger.Sensitive
		if e, ok := k.Model.Entity(h.entity); ok {
			priv = e.Privacy
		}
		evs = append(evs, ledger.Event{Type: EventHeld, ChannelID: h.entity, OccurredAt: k.now().UnixNano(), Provenance: provenanceOf(c.Provenance),
			Trust: ledger.High, Privacy: priv, DedupeKey: dk, Payload: p})
	}
	for dk := range k.held {
		if !due[dk] {
			delete(k.held, dk) // the value changed since: its key is not asked for again
		}
	}
	if len(evs) == 0 {
		return nil
	}
	if _, err := k.Store.Append(ctx, evs...); err != nil {
		return err
	}
	for _, e := range evs {
		k.held[e.DedupeKey] = true
	}
	return nil
}

// Assertion is something a principal tells the body of an entity: a
// value it says holds, for a while.
type Assertion struct {
	Entity string
	Value  string
	// By is the teller's subject, Trust its trust.
	By    string
	Trust ledger.Level
	// Confidence is the teller's (0..1; 0: 0.5); For how long it holds
	// (on the running clock) unless told again.
	Confidence float64
	For        time.Duration
	// Withdraw takes back what By told of Entity instead.
	Withdraw bool
}

// Limits of an assertion.
const (
	MaxTellFor  = 30 * 24 * time.Hour
	DefaultTell = time.Hour
)

// ErrInvalid: an assertion the model cannot keep; the error says why.
var ErrInvalid = errors.New("world: invalid")

// tellCmd records an assertion.
type tellCmd struct {
	model *Model
	a     Assertion
	run   int64
	now   int64
}

func (c *tellCmd) Decide(v *ledger.View) ([]ledger.Event, error) {
	c.model.gen.Add(1) // the Deriver reads what this writes afresh
	ent, ok := c.model.Entity(c.a.Entity)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNoEntity, c.a.Entity)
	}
	ch := newChange(v.Projection(ProjectionName), c.model, c.run, ledger.Event{OccurredAt: c.now, Trust: c.a.Trust}, nil)
	src := "told:" + c.a.By
	if c.a.Withdraw {
		cu := ch.current(ent.ID, src)
		if cu == nil {
			return nil, fmt.Errorf("%w: %s told nothing of %s that holds", ErrInvalid, c.a.By, ent.ID)
		}
		if err := ch.end(cu, EndWithdrawn, c.now, nil); err != nil {
			return nil, err
		}
	} else {
		o := observation{source: src, value: c.a.Value, conf: c.a.Confidence, prov: ledger.Told, by: c.a.By, expireMS: c.a.For.Milliseconds()}
		if err := ch.observe(ent, &o); err != nil {
			return nil, err
		}
	}
	if err := ch.settle(); err != nil {
		return nil, err
	}
	return ch.out, nil
}

// Tell records an assertion (or withdraws one): a record of its own
// source, "told:" and the teller, of provenance told. It never makes a
// state observed or verified: only a source of the body's own does.
func Tell(ctx context.Context, s *ledger.Store, m *Model, a Assertion, now time.Time) (State, error) {
	ent, ok := m.Entity(a.Entity)
	if !ok {
		return State{}, fmt.Errorf("%w: %q", ErrNoEntity, a.Entity)
	}
	if !a.Withdraw {
		if ent.Kind == Air {
			return State{}, fmt.Errorf("%w: the air is measured, not told", ErrInvalid)
		}
		valid := false
		for _, v := range ent.Kind.Values() {
			valid = valid || v == a.Value
		}
		if !valid {
			return State{}, fmt.Errorf("%w: value %q: %s is one of %v", ErrInvalid, a.Value, ent.ID, ent.Kind.Values())
		}
		switch {
		case a.For == 0:
			a.For = DefaultTell
		case a.For < time.Second || a.For > MaxTellFor:
			return State{}, fmt.Errorf("%w: for %v: between 1s and %v", ErrInvalid, a.For, MaxTellFor)
		}
		switch {
		case a.Confidence == 0:
			a.Confidence = 0.5
		case a.Confidence < 0 || a.Confidence > 1 || math.IsNaN(a.Confidence):
			return State{}, fmt.Errorf("%w: confidence %g: between 0 and 1", ErrInvalid, a.Confidence)
		}
	}
	if a.By == "" {
		return State{}, fmt.Errorf("%w: an assertion needs its teller", ErrInvalid)
	}
	cmd := &tellCmd{model: m, a: a, run: s.Running().Milliseconds(), now: now.UnixNano()}
	if _, err := s.Execute(ctx, cmd); err != nil {
		return State{}, err
	}
	sts, err := (&Reader{Store: s, Model: m}).Now(ent.ID)
	if err != nil {
		return State{}, err
	}
	return sts[0], nil
}
