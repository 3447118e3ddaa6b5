// Package sched is the control plane's scheduler: at each tick (60 s by
// default, and once at start, so that what fell due while the body was
// down runs once) it records the work items whose next check came
// (work.due), those gone stale (work.stale, once until progress comes),
// ends the wait conditions that expired or whose work item ended, and
// makes ready the items blocked on their dependencies when the last one
// closed, and only those. Each is a ledger command checked against the
// item's version: a change the agent made meanwhile wins, and the next
// tick looks again.
//
// The tick reads the wall clock: a body whose clock is not yet set finds
// nothing due (and nothing expires early); a clock stepped forward makes
// what it passes due at once.
package sched

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/tobe-body/tobe-body/awareness/control/wait"
	"github.com/tobe-body/tobe-body/awareness/control/work"
	"github.com/tobe-body/tobe-body/ledger"
)

// Scheduler ticks over a store.
type Scheduler struct {
	Store *ledger.Store
	// Every is the tick (0: a minute).
	Every time.Duration
	// StaleAfter is how long without progress makes an active item
	// stale (0: never).
	StaleAfter time.Duration
	Now        func() time.Time
	Log        *slog.Logger
}

// Report is what a tick did.
type Report struct {
	Due      []string `json:"due,omitempty"`
	Stale    []string `json:"stale,omitempty"`
	Expired  []string `json:"expired,omitempty"`
	Ended    []string `json:"ended,omitempty"` // conditions whose work item ended
	Released []string `json:"released,omitempty"`
	// Skipped: changes a concurrent one won (the next tick looks again).
	Skipped int `json:"skipped,omitempty"`
}

// Run ticks at once, then every Every, until ctx ends.
func (s *Scheduler) Run(ctx context.Context) {
	every := s.Every
	if every <= 0 {
		every = time.Minute
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		rep, err := s.Tick(ctx)
		switch {
		case err != nil && ctx.Err() == nil && s.Log != nil:
			s.Log.Error("scheduler", "err", err)
		case s.Log != nil && (len(rep.Due)+len(rep.Stale)+len(rep.Expired)+len(rep.Ended)+len(rep.Released) > 0):
			s.Log.Info("scheduler", "due", rep.Due, "stale", rep.Stale, "expired", rep.Expired, "ended", rep.Ended, "released", rep.Released)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Tick does one round.
func (s *Scheduler) Tick(ctx context.Context) (Report, error) {
	now := time.Now()
	if s.Now != nil {
		now = s.Now()
	}
	var rep Report
	exec := func(cmd ledger.Command) (bool, error) {
		_, err := s.Store.Execute(context.WithoutCancel(ctx), cmd)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, work.ErrStale), errors.Is(err, work.ErrInvalid), errors.Is(err, wait.ErrRemoved):
			rep.Skipped++ // changed meanwhile: the next tick looks again
			return false, nil
		}
		return false, err
	}
	items, err := work.List(s.Store, nil)
	if err != nil {
		return rep, err
	}
	byID := make(map[string]*work.Item, len(items))
	for i := range items {
		byID[items[i].ID] = &items[i]
	}
	for i := range items {
		it := &items[i]
		if it.Status.Final() {
			continue
		}
		if it.NextCheckAt != 0 && it.NextCheckAt <= now.UnixMilli() {
			c := &work.Due{ID: it.ID, Expected: it.Version, At: now}
			ok, err := exec(c)
			if err != nil {
				return rep, fmt.Errorf("sched: %s due: %w", it.ID, err)
			}
			if ok {
				*it = c.Item
				rep.Due = append(rep.Due, it.ID)
			}
		}
		if it.StaleSince == 0 && it.Stale(now, s.StaleAfter) {
			c := &work.Stale{ID: it.ID, Expected: it.Version, After: s.StaleAfter, At: now}
			ok, err := exec(c)
			if err != nil {
				return rep, fmt.Errorf("sched: %s stale: %w", it.ID, err)
			}
			if ok {
				*it = c.Item
				rep.Stale = append(rep.Stale, it.ID)
			}
		}
	}

	conds, err := wait.List(s.Store, func(c *wait.Condition) bool { return c.Removed == "" })
	if err != nil {
		return rep, err
	}
	for _, c := range conds {
		why := ""
		switch owner, ok := byID[c.Owner]; {
		case c.ExpiresAt <= now.UnixMilli():
			why = "expired"
		case !ok:
			why = "its work item is not there"
		case owner.Status.Final():
			why = "its work item is " + string(owner.Status)
		default:
			continue
		}
		ok, err := exec(&wait.Remove{ID: c.ID, Why: why, By: "scheduler", At: now})
		if err != nil {
			return rep, fmt.Errorf("sched: condition %s: %w", c.ID, err)
		}
		if ok && why == "expired" {
			rep.Expired = append(rep.Expired, c.ID)
		} else if ok {
			rep.Ended = append(rep.Ended, c.ID)
		}
	}

	// The dependents of closed dependencies: blocked on their
	// dependencies, every one of them closed.
	for i := range items {
		it := &items[i]
		if it.Status != work.Blocked || it.BlockedOn != work.BlockedOnDependencies || len(it.DependsOn) == 0 {
			continue
		}
		if !slices.ContainsFunc(it.DependsOn, func(d string) bool { return byID[d] == nil || byID[d].Status != work.Closed }) {
			m := &work.Move{ID: it.ID, Expected: it.Version, To: work.Ready, Reason: fmt.Sprintf("its dependencies closed: %v", it.DependsOn), By: "scheduler", At: now}
			ok, err := exec(m)
			if err != nil {
				return rep, fmt.Errorf("sched: release %s: %w", it.ID, err)
			}
			if ok {
				*it = m.Item
				rep.Released = append(rep.Released, it.ID)
			}
		}
	}
	return rep, nil
}
