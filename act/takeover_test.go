package act

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/ledger"
)

// records returns the types and payloads of the lease.human_ events.
func humanRecords(t *testing.T, store *ledger.Store) []string {
	t.Helper()
	evs, err := store.Events(ledger.Filter{Types: []string{"lease."}})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		var p map[string]any
		ledger.UnmarshalPayload(e.Payload, &p)
		out = append(out, strings.TrimPrefix(e.Type, "lease.")+" "+p["resource"].(string))
	}
	return out
}

var localAdmin = Principal{Kind: LocalAdmin, Subject: "admin:uid=0", Session: "admin", Trust: ledger.High}

// A person presses the relay's button while the agent pulses it: the pulse
// is cut and the relay safe, the agent is refused naming the person's
// control, a local administrator still acts, and a second press gives the
// relay back.
func TestTakeoverPressAgain(t *testing.T) {
	b := newBench(t)
	tk, err := NewTakeover([]HumanControl{{Control: "gpio.button", Resources: []string{"gpio.relay1"}, End: EndOnPressAgain}}, b.r.env.Leases, b.r, b.store, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	done := make(chan Result, 1)
	go func() {
		done <- b.r.Submit(context.Background(), Invocation{Principal: b.agent, Capability: "gpio.pulse", Target: "gpio.relay1", Params: map[string]string{"duration_ms": "20000"}})
	}()
	// Running is recorded once the runner can cancel it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	running := errors.New("running")
	if err := b.store.Follow(ctx, ledger.Filter{Types: []string{"action.running"}}, func(ledger.Stored) error { return running }); err != running {
		t.Fatalf("the pulse never ran: %v", err)
	}
	if ok, err := tk.Pressed("gpio.button"); !ok || err != nil {
		t.Fatalf("pressed: %v %v", ok, err)
	}
	res := <-done
	if res.Status != Cancelled || res.Reason != ReasonHumanControl || b.relay.Level() != hal.Low {
		t.Errorf("the agent's pulse after the press: %+v, relay %v", res, b.relay.Level())
	}
	pulse := Invocation{Principal: b.agent, Capability: "gpio.pulse", Target: "gpio.relay1", Params: map[string]string{"duration_ms": "10"}}
	res = b.r.Submit(context.Background(), pulse)
	if res.Status != Refused || res.Reason != ReasonHumanControl || !strings.Contains(res.Detail, "gpio.button") || !strings.Contains(res.Detail, HumanHolder) {
		t.Errorf("an agent request while a person holds it: %+v", res)
	}
	// Another output is not the button's.
	if res := b.r.Submit(context.Background(), Invocation{Principal: b.agent, Capability: "gpio.set", Target: "gpio.led", Params: map[string]string{"state": "on"}}); res.Status != Succeeded {
		t.Errorf("the LED: %+v", res)
	}
	b.fb.Set(hal.Low, hal.MonoNow())
	adm := pulse
	adm.Principal = localAdmin
	if res := b.r.Submit(context.Background(), adm); res.Status != Succeeded || !strings.Contains(res.Decision.Detail, "beside a person's hold") {
		t.Errorf("a local administrator during the hold: %+v", res)
	}
	if _, err := tk.Pressed("gpio.button"); err != nil {
		t.Fatal(err)
	}
	if res := b.r.Submit(context.Background(), pulse); res.Status != Succeeded {
		t.Errorf("the agent after the second press: %+v", res)
	}
	if got := strings.Join(humanRecords(t, b.store), ", "); got != "human_takeover gpio.relay1, human_released gpio.relay1" {
		t.Errorf("recorded %s", got)
	}
	evs, _ := b.store.Events(ledger.Filter{Types: []string{"lease.human_takeover"}})
	var p struct {
		Cancelled []string `cbor:"cancelled"`
		Control   string   `cbor:"control"`
		Resource  string   `cbor:"resource"`
		End       string   `cbor:"end"`
		Epoch     uint64   `cbor:"epoch"`
		Renewed   bool     `cbor:"renewed"`
	}
	if len(evs) != 1 || ledger.UnmarshalPayload(evs[0].Payload, &p) != nil || len(p.Cancelled) != 1 || p.Control != "gpio.button" || p.End != "press_again" {
		t.Errorf("takeover record %+v", p)
	}
	if ok, _ := tk.Pressed("gpio.other"); ok {
		t.Error("a control that is not a person's took something over")
	}
}

// Each way a hold ends, as a table: what the agent gets after each step.
func TestTakeoverEnds(t *testing.T) {
	type step struct {
		do   string // press, letgo, wait
		want Status
	}
	for _, tc := range []struct {
		name  string
		end   HoldEnd
		steps []step
	}{
		{"held while pressed", EndOnLetGo, []step{{"press", Refused}, {"press", Refused}, {"letgo", Succeeded}, {"letgo", Succeeded}}},
		{"press again", EndOnPressAgain, []step{{"press", Refused}, {"letgo", Refused}, {"press", Succeeded}, {"press", Refused}}},
		{"after a time", EndAfter, []step{{"press", Refused}, {"letgo", Refused}, {"half", Refused}, {"press", Refused}, {"half", Refused}, {"half", Succeeded}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tab := NewLeaseTable(0)
				j := &memJournal{}
				tk, err := NewTakeover([]HumanControl{{Control: "input.keypad KEY_1", Resources: []string{"gpio.relay1", "gpio.relay2"}, End: tc.end, After: 9 * time.Second}}, tab, nil, j, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer tk.Close()
				for i, s := range tc.steps {
					switch s.do {
					case "press":
						tk.Pressed("input.keypad KEY_1")
					case "letgo":
						tk.LetGo("input.keypad KEY_1")
					case "half":
						time.Sleep(5 * time.Second) // the fake clock of the bubble
						synctest.Wait()
					}
					for _, res := range []string{"gpio.relay1", "gpio.relay2"} {
						_, d := tab.Acquire(res, Holder{Subject: "agent:pi", Session: "s1"}, time.Second, time.Now())
						got := Succeeded
						if !d.Allow {
							got = Refused
							if d.Reason != ReasonHumanControl {
								t.Errorf("step %d %s: %s refused %s", i, s.do, res, d.Reason)
							}
						} else {
							tab.Release(res, Holder{Subject: "agent:pi", Session: "s1"}, tab.Leases(time.Now())[0].Epoch)
						}
						if got != s.want {
							t.Errorf("step %d %s: %s %s, want %s", i, s.do, res, got, s.want)
						}
					}
				}
				want := 2 // a press that only renews a hold is not recorded again
				if tc.end == EndOnPressAgain {
					want = 4
				}
				if n := j.count("lease.human_takeover"); n != want {
					t.Errorf("%d takeover records: %v", n, j.types())
				}
			})
		})
	}
}

func TestNewTakeoverRefuses(t *testing.T) {
	tab := NewLeaseTable(0)
	for _, tc := range []struct {
		hc   []HumanControl
		want string
	}{
		{[]HumanControl{{Control: "", Resources: []string{"gpio.relay1"}, End: EndOnLetGo}}, "no control"},
		{[]HumanControl{{Control: "gpio.button", End: EndOnLetGo}}, "no resources"},
		{[]HumanControl{{Control: "gpio.button", Resources: []string{"gpio.relay1"}, End: "later"}}, `unknown end "later"`},
		{[]HumanControl{{Control: "gpio.button", Resources: []string{"gpio.relay1"}, End: EndAfter}}, "positive time"},
		{[]HumanControl{{Control: "gpio.button", Resources: []string{"Relay 1"}, End: EndOnLetGo}}, "resource"},
		{[]HumanControl{{Control: "gpio.a", Resources: []string{"gpio.relay1"}, End: EndOnLetGo}, {Control: "gpio.b", Resources: []string{"gpio.relay1"}, End: EndOnLetGo}}, "belongs to two human controls"},
		{[]HumanControl{{Control: "gpio.a", Resources: []string{"gpio.relay1"}, End: EndOnLetGo}, {Control: "gpio.a", Resources: []string{"gpio.relay2"}, End: EndOnLetGo}}, "given twice"},
	} {
		if _, err := NewTakeover(tc.hc, tab, nil, &memJournal{}, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.hc, err, tc.want)
		}
	}
}

// memJournal keeps what is appended, in memory.
type memJournal struct {
	mu  sync.Mutex
	evs []ledger.Event
}

func (j *memJournal) Append(_ context.Context, evs ...ledger.Event) ([]ledger.Result, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.evs = append(j.evs, evs...)
	return make([]ledger.Result, len(evs)), nil
}

func (j *memJournal) types() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []string
	for _, e := range j.evs {
		out = append(out, e.Type)
	}
	return out
}

func (j *memJournal) count(typ string) int {
	n := 0
	for _, t := range j.types() {
		if t == typ {
			n++
		}
	}
	return n
}

// A hold in force when the body stopped is taken again at start; the
// control ends it as usual.
func TestTakeoverResume(t *testing.T) {
	tab := NewLeaseTable(0)
	j := &memJournal{}
	tk, err := NewTakeover([]HumanControl{{Control: "gpio.button", Resources: []string{"gpio.relay1"}, End: EndOnPressAgain}}, tab, nil, j, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	agent := Holder{Subject: "agent:pi", Session: "s1"}
	for i, step := range []struct {
		do   func() error
		want bool // the agent gets the relay
	}{
		{func() error { return tk.Resume("gpio.other") }, true},
		{func() error { return tk.Resume("gpio.button") }, false},
		{func() error { return tk.Resume("gpio.button") }, false}, // once is enough
		{func() error { _, err := tk.Pressed("gpio.button"); return err }, true},
	} {
		if err := step.do(); err != nil {
			t.Fatal(err)
		}
		l, d := tab.Acquire("gpio.relay1", agent, time.Second, time.Now())
		if d.Allow != step.want {
			t.Errorf("step %d: %v, want allowed %v", i, d, step.want)
		}
		if d.Allow {
			tab.Release("gpio.relay1", agent, l.Epoch)
		}
	}
	if got := strings.Join(j.types(), " "); got != "lease.human_takeover lease.human_released" {
		t.Errorf("recorded %s", got)
	}
}
