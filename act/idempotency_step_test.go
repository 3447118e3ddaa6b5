package act

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/hal/haltest/stepclock"
	"github.com/tobe-body/tobe-body/ledger"
)

// A repeat of an idempotency key after a restart across a step of the
// wall clock (NTP's first sync on a board without a real-time clock, an
// administrator's date -s) returns the recorded result and drives the
// output no second time: the ledger keeps an audit record's dedupe key as
// long as the record, whatever the wall clock says.
func TestRepeatAcrossWallStepActsOnce(t *testing.T) {
	for _, d := range []time.Duration{-10 * time.Minute, 25 * time.Hour, 30 * 24 * time.Hour, 365 * 24 * time.Hour} {
		t.Run(fmt.Sprint(d), func(t *testing.T) {
			b := newBench(t)
			clk := stepclock.New()
			path := filepath.Join(t.TempDir(), "stepped.db")
			open := func() *ledger.Store {
				t.Helper()
				s, err := ledger.Open(ledger.Options{Path: path, Projections: Projections(), Now: clk.Now})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			}
			runner := func(store *ledger.Store) *Runner {
				env := b.r.env
				env.Now = clk.Now
				r := NewRunner(env, store)
				set, pulse := NewGPIOActions([]*GPIOOutput{{Name: "led", Channel: "gpio.led", Line: b.estop.ledOut, Risk: R1}}, nil)
				for _, a := range []Action{set, pulse} {
					if err := r.Register(a); err != nil {
						t.Fatal(err)
					}
				}
				return r
			}
			inv := Invocation{Principal: b.agent, IdempotencyKey: "k-step", Capability: "gpio.set", Target: "gpio.led", Params: map[string]string{"state": "on"}}
			store := open()
			first := runner(store).Submit(context.Background(), inv)
			if first.Status != Succeeded {
				t.Fatalf("first: %+v", first)
			}
			drives := len(b.led.Writes())
			if err := store.Close(); err != nil {
				t.Fatal(err)
			}
			clk.Step(d)
			store = open()
			res := runner(store).Submit(context.Background(), inv)
			if !res.Repeat || res.Status != Succeeded || res.ActionID != first.ActionID {
				t.Errorf("repeat after a restart and a step of %v: %+v, want a repeat of %s", d, res, first.ActionID)
			}
			if n := len(b.led.Writes()); n != drives {
				t.Errorf("the LED was driven %d times, %d before the repeat: want no second drive", n, drives)
			}
			if got := actionTypes(t, store, first.ActionID); len(got) != 3 {
				t.Errorf("records of the action: %v, want the first invocation's three only", got)
			}
		})
	}
}
