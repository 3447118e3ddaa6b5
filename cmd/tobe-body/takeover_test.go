package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/haltest"
	"github.com/tobe-body/tobe-body/ledger"
	"github.com/tobe-body/tobe-body/sense"
)

var errFound = errors.New("found")

// waitEvent blocks until the ledger holds an event of type typ after seq
// and returns it.
func waitEvent(t *testing.T, store *ledger.Store, typ string, seq uint64) ledger.Stored {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var got ledger.Stored
	err := store.Follow(ctx, ledger.Filter{After: seq, Types: []string{typ}}, func(e ledger.Stored) error {
		got = e
		return errFound
	})
	if !errors.Is(err, errFound) {
		t.Fatalf("no %s after %d: %v", typ, seq, err)
	}
	return got
}

func lastSeq(t *testing.T, store *ledger.Store) uint64 {
	t.Helper()
	st, err := store.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return st.LastSeq
}

// A person's button, a fake GPIO pin read by its sense channel, takes the
// relay over through the daemon's events: the agent's running pulse is
// cut, its new requests are refused naming the button, a local
// administrator still acts, and letting go gives the relay back; each
// takeover and release is in the ledger.
func TestTakeoverByAButton(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, err := ledger.Open(ledger.Options{Path: filepath.Join(t.TempDir(), "ledger.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	chip := haltest.NewChip("test")
	button := chip.AddIn("BUTTON", hal.High) // pulled up, pressed low
	chip.AddIn("ESTOP", hal.Low)             // healthy
	relay := chip.AddOut("RELAY1")
	btnLine, _ := chip.In("BUTTON", hal.InConfig{})
	estopLine, _ := chip.In("ESTOP", hal.InConfig{})
	relayLine, err := chip.Out("RELAY1", hal.OutConfig{Safe: hal.Low})
	if err != nil {
		t.Fatal(err)
	}

	s, err := act.NewSettings(actFrom(t, `{"human_controls": [{"control": "gpio.button", "resources": ["gpio.relay1"], "release": "release"}]}`), body.FactsOf(simProfile(t)), nil)
	if err != nil {
		t.Fatal(err)
	}
	estop, err := act.NewEStop(act.EStopConfig{Main: estopLine, MainStop: hal.High, Outputs: []hal.LineOut{relayLine}})
	if err != nil {
		t.Fatal(err)
	}
	estop.Check()
	reg := body.NewRegistry(time.Now)
	reg.Register(body.Channel{ID: "gpio.relay1", Kind: "gpio-out", State: body.Enabled})
	grants := []act.Grant{{ID: "g1", Subject: "agent:pi", Capability: "gpio.*", Scope: "gpio.*", ByTrust: ledger.Max}}
	r := act.NewRunner(act.Environment{EStop: estop, Registry: reg, Leases: s.Leases, Rules: s.Rules,
		Health: func() body.Degradation { return body.LevelNormal }, Grants: func() []act.Grant { return grants }}, store)
	set, pulse := act.NewGPIOActions([]*act.GPIOOutput{{Name: "relay1", Channel: "gpio.relay1", Line: relayLine, Risk: act.R2}}, nil)
	r.Register(set)
	r.Register(pulse)
	tk, err := act.NewTakeover(s.Controls, s.Leases, r, store, nil)
	if err != nil {
		t.Fatal(err)
	}

	// The button's sense channel, its outlet to the ledger, and the
	// daemon's follower of the people's controls.
	out := sense.NewOutlet(sense.Source{Channel: "gpio.button", Trust: ledger.High, Privacy: ledger.Internal}, 16)
	lc, err := sense.NewLineChannel(out, btnLine, sense.LineConfig{Active: hal.Low, Button: true})
	if err != nil {
		t.Fatal(err)
	}
	watch := act.NewTakeoverWatch(tk, log)
	watch.Start(ctx, store, lastSeq(t, store))
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); lc.Run(ctx) }()
	go func() { defer wg.Done(); out.Run(ctx, store) }()
	defer func() { // in order: stop the readers, then what they feed
		cancel()
		wg.Wait()
		watch.Wait()
		tk.Close()
	}()

	agent := act.Principal{Kind: act.AgentSession, Subject: "agent:pi", Session: "s1", Trust: ledger.High}
	admin := act.Principal{Kind: act.LocalAdmin, Subject: "admin:uid=0", Session: "admin", Trust: ledger.High}
	inv := func(p act.Principal, ms string) act.Invocation {
		return act.Invocation{Principal: p, Capability: "gpio.pulse", Target: "gpio.relay1", Params: map[string]string{"duration_ms": ms}}
	}

	// The agent pulses the relay for 20 s; the person presses.
	seq := lastSeq(t, store)
	done := make(chan act.Result, 1)
	go func() { done <- r.Submit(ctx, inv(agent, "20000")) }()
	waitEvent(t, store, "action.running", seq)
	seq = lastSeq(t, store)
	button.Set(hal.Low, hal.MonoNow())
	took := waitEvent(t, store, "lease.human_takeover", seq)
	res := <-done
	if res.Status != act.Cancelled || res.Reason != act.ReasonHumanControl || relay.Level() != hal.Low {
		t.Errorf("the agent's pulse after the press: %+v, relay %v", res, relay.Level())
	}
	if took.ChannelID != "gpio.button" {
		t.Errorf("takeover recorded on %q", took.ChannelID)
	}
	res = r.Submit(ctx, inv(agent, "10"))
	if res.Status != act.Refused || res.Reason != act.ReasonHumanControl || !strings.Contains(res.Detail, "a person (gpio.button)") {
		t.Errorf("the agent while the button is held: %+v", res)
	}
	if res := r.Submit(ctx, inv(admin, "10")); res.Status != act.Succeeded {
		t.Errorf("a local administrator while the button is held: %+v", res)
	}

	// Let go: the relay is the agent's again.
	seq = lastSeq(t, store)
	button.Set(hal.High, hal.MonoNow())
	waitEvent(t, store, "lease.human_released", seq)
	if res := r.Submit(ctx, inv(agent, "10")); res.Status != act.Succeeded {
		t.Errorf("the agent after the button was let go: %+v", res)
	}
}
