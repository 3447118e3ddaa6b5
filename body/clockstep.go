package body

import (
	"context"
	"log/slog"
	"time"

	"github.com/tobe-body/tobe-body/ledger"
)

// ClockSteps is what a running body does when its wall clock is set:
// it logs the step (a warning from a second on), records it in the ledger
// (body.clock_stepped), runs the ledger's retention after a step of a
// second or more, and hands the step's size on (to the grants, whose
// expiries it may have reached).
type ClockSteps struct {
	Clock *Clock
	// Store records each step; nil: a step is logged only.
	Store *ledger.Store
	Log   *slog.Logger
	// Stepped receives each step's size; a step while one waits is
	// dropped (the one waiting already asks for a look). Nil: none.
	Stepped chan<- time.Duration
	// Every is how often the clock is measured again; 0: every minute.
	Every time.Duration
}

// Run watches the clock (Clock.Run) until ctx ends, and does what a step
// does on its goroutine.
func (s ClockSteps) Run(ctx context.Context) {
	every := s.Every
	if every == 0 {
		every = time.Minute
	}
	s.Clock.Run(ctx, every, func(st Step) { s.step(ctx, st) })
}

func (s ClockSteps) step(ctx context.Context, st Step) {
	select {
	case s.Stepped <- st.Size:
	default:
	}
	lvl := slog.LevelInfo
	if st.Size.Abs() >= time.Second {
		lvl = slog.LevelWarn
	}
	s.Log.Log(ctx, lvl, "the wall clock was set", "by", st.Size, "from", st.Before, "to", st.After, "synced", st.Synced)
	if s.Store == nil {
		return
	}
	if _, err := s.Store.Append(ctx, s.Clock.StepEvent(st)); err != nil {
		s.Log.Error("ledger append", "type", EventClockStepped, "err", err)
	}
	// A step is when retention by the wall clock lost data; it ages
	// events by the ledger's running clock, which no step moves: a pass
	// now shows it, in the log.
	if st.Size.Abs() >= time.Second {
		res, err := s.Store.Retain(ctx)
		s.Log.Info("ledger retention after the clock step", "events", res.Events, "outbox_expired", res.OutboxExpired, "inbox_keys", res.InboxKeys, "err", err)
	}
}
