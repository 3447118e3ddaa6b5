package act

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/tobe-body/tobe-body/ledger"
)

// feed applies the events p follows, as the ledger does.
func feed(t *testing.T, p ledger.Projection, kv ledger.KV, evs []ledger.Event) {
	t.Helper()
	for i := range evs {
		followed := false
		for _, typ := range p.Types() {
			followed = followed || typ == evs[i].Type || strings.HasSuffix(typ, ".") && strings.HasPrefix(evs[i].Type, typ)
		}
		if !followed {
			continue
		}
		if evs[i].ID.IsZero() {
			evs[i].ID = ledger.NewID()
		}
		if err := p.Apply(kv, &evs[i]); err != nil {
			t.Fatalf("%s on event %d (%s): %v", p.Name(), i, evs[i].Type, err)
		}
	}
}

func payload(t testing.TB, v any) cbor.RawMessage {
	t.Helper()
	p, err := ledger.MarshalPayload(v)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func estopEvent(typ, channel string, prov ledger.Provenance) ledger.Event {
	return ledger.Event{Type: typ, ChannelID: channel, Provenance: prov}
}

func TestEStopLatchApply(t *testing.T) {
	trip := estopEvent("estop.tripped", EStopChannel, ledger.Observed)
	reset := estopEvent("estop.reset", EStopChannel, ledger.Observed)
	for _, tc := range []struct {
		name string
		evs  []ledger.Event
		want string // the latch's value, "" for none
	}{
		{"nothing", nil, ""},
		{"a trip", []ledger.Event{trip}, "01"},
		{"a trip, then a reset", []ledger.Event{trip, reset}, "00"},
		{"a reset, then a trip", []ledger.Event{reset, trip}, "01"},
		{"a reset told by someone", []ledger.Event{trip, estopEvent("estop.reset", EStopChannel, ledger.Told)}, "01"},
		{"a reset on another channel", []ledger.Event{trip, estopEvent("estop.reset", "estop.other", ledger.Observed)}, "01"},
		{"a trip told by someone", []ledger.Event{estopEvent("estop.tripped", EStopChannel, ledger.Told)}, ""},
		{"a refused reset", []ledger.Event{trip, estopEvent("estop.reset_refused", EStopChannel, ledger.Observed)}, "01"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kv := ledger.MemKV{}
			feed(t, estopLatch{}, kv, tc.evs)
			if got := fmt.Sprintf("%x", kv.Get(keyLatched)); got != tc.want || len(kv) > 1 {
				t.Errorf("latch %q (%d keys), want %q", got, len(kv), tc.want)
			}
		})
	}
}

func takeoverEvent(t testing.TB, res, ctrl string) ledger.Event {
	return ledger.Event{Type: EventHumanTakeover, Payload: payload(t, humanTakeover{Resource: res, Control: ctrl, Epoch: 3, End: EndOnPressAgain})}
}

func releasedEvent(t testing.TB, res, ctrl string) ledger.Event {
	return ledger.Event{Type: EventHumanReleased, Payload: payload(t, humanReleased{Resource: res, Control: ctrl, Why: "pressed again"})}
}

func TestHumanHoldsApply(t *testing.T) {
	extra := ledger.Event{Type: EventHumanTakeover, Payload: payload(t, map[string]any{"resource": "gpio.relay1", "control": "gpio.button", "by": "someone"})}
	for _, tc := range []struct {
		name string
		evs  []ledger.Event
		want map[string]holdState
	}{
		{"nothing", nil, map[string]holdState{}},
		{"a takeover", []ledger.Event{takeoverEvent(t, "gpio.relay1", "gpio.button")},
			map[string]holdState{"gpio.relay1": {Held: true, Control: "gpio.button"}}},
		{"a takeover, then its release", []ledger.Event{takeoverEvent(t, "gpio.relay1", "gpio.button"), releasedEvent(t, "gpio.relay1", "gpio.button")},
			map[string]holdState{"gpio.relay1": {Control: "gpio.button"}}},
		{"two resources of one control, one released", []ledger.Event{takeoverEvent(t, "gpio.relay2", "input.keypad KEY_1"),
			takeoverEvent(t, "gpio.led", "input.keypad KEY_1"), releasedEvent(t, "gpio.led", "input.keypad KEY_1")},
			map[string]holdState{"gpio.relay2": {Held: true, Control: "input.keypad KEY_1"}, "gpio.led": {Control: "input.keypad KEY_1"}}},
		{"released, then taken again", []ledger.Event{takeoverEvent(t, "gpio.relay1", "gpio.button"), releasedEvent(t, "gpio.relay1", "gpio.button"),
			takeoverEvent(t, "gpio.relay1", "gpio.button")},
			map[string]holdState{"gpio.relay1": {Held: true, Control: "gpio.button"}}},
		{"a payload that cannot be read is passed over", []ledger.Event{extra, {Type: EventHumanReleased, Payload: payload(t, "nonsense")}}, map[string]holdState{}},
		{"no resource", []ledger.Event{takeoverEvent(t, "", "gpio.button")}, map[string]holdState{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kv := ledger.MemKV{}
			feed(t, humanHolds{}, kv, tc.evs)
			got := map[string]holdState{}
			for k, v := range kv {
				var st holdState
				if err := ledger.UnmarshalPayload(v, &st); err != nil {
					t.Fatal(err)
				}
				got[k] = st
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// The typed payloads encode as the maps they replace did, so records
// before and after read alike.
func TestHoldPayloadsEncodeAsBefore(t *testing.T) {
	typed := payload(t, humanTakeover{Resource: "gpio.relay1", Control: "gpio.button", Epoch: 7, End: EndAfter, Renewed: true})
	asMap := payload(t, map[string]any{"epoch": uint64(7), "end": "after", "cancelled": []string(nil), "renewed": true, "resource": "gpio.relay1", "control": "gpio.button"})
	if !slices.Equal(typed, asMap) {
		t.Errorf("takeover: %x, the map was %x", typed, asMap)
	}
	typed = payload(t, humanReleased{Resource: "gpio.relay1", Control: "gpio.button", Why: "let go"})
	asMap = payload(t, map[string]any{"why": "let go", "resource": "gpio.relay1", "control": "gpio.button"})
	if !slices.Equal(typed, asMap) {
		t.Errorf("release: %x, the map was %x", typed, asMap)
	}
}

// actionEvent is a record of action id as the runner writes it.
func actionEvent(t testing.TB, id string, s Status, res *Result) ledger.Event {
	p := map[string]any{"status": string(s), "invocation": Invocation{ActionID: id, IdempotencyKey: "k-" + id, Capability: "gpio.set", Target: "gpio.led", Mode: Live}}
	if res != nil {
		p["result"] = res
	}
	return ledger.Event{Type: "action." + string(s), AggregateID: "action:" + id, Payload: payload(t, p)}
}

func TestOpenActionsApply(t *testing.T) {
	done := &Result{ActionID: "a", Status: Succeeded}
	for _, tc := range []struct {
		name string
		evs  []ledger.Event
		want map[string]Status
	}{
		{"nothing", nil, map[string]Status{}},
		{"proposed", []ledger.Event{actionEvent(t, "a", Proposed, nil)}, map[string]Status{"a": Proposed}},
		{"running", []ledger.Event{actionEvent(t, "a", Proposed, nil), actionEvent(t, "a", Running, nil)}, map[string]Status{"a": Running}},
		{"finished", []ledger.Event{actionEvent(t, "a", Proposed, nil), actionEvent(t, "a", Running, nil), actionEvent(t, "a", Succeeded, done)}, map[string]Status{}},
		{"refused at once", []ledger.Event{actionEvent(t, "a", Proposed, nil), actionEvent(t, "a", Refused, done)}, map[string]Status{}},
		{"one of two finished", []ledger.Event{actionEvent(t, "a", Proposed, nil), actionEvent(t, "b", Proposed, nil),
			actionEvent(t, "b", WaitingApproval, done), actionEvent(t, "a", Unknown, done)}, map[string]Status{"b": WaitingApproval}},
		{"a record of no action", []ledger.Event{{Type: "action.running", AggregateID: "grant:a"}, {Type: "action.running"}}, map[string]Status{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kv := ledger.MemKV{}
			feed(t, openActions{}, kv, tc.evs)
			got := map[string]Status{}
			for k, v := range kv {
				var o openAction
				if err := ledger.UnmarshalPayload(v, &o); err != nil {
					t.Fatal(err)
				}
				var p map[string]cbor.RawMessage
				var inv Invocation
				if err := ledger.UnmarshalPayload(o.Payload, &p); err != nil || ledger.UnmarshalPayload(p["invocation"], &inv) != nil || inv.ActionID != k {
					t.Errorf("%s: the record kept does not name its invocation: %v", k, err)
				}
				got[k] = o.Status
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestActionResultsApply(t *testing.T) {
	waiting := &Result{ActionID: "a", Status: WaitingApproval, Reason: ReasonApprovalRequired, Detail: "tobe-body approve a"}
	done := &Result{ActionID: "a", Status: Succeeded, Receipt: "led on", Verification: &Verification{Result: "verified", Evidence: "read back low"}}
	for _, tc := range []struct {
		name string
		evs  []ledger.Event
		want map[string]actionResult
	}{
		{"proposed", []ledger.Event{actionEvent(t, "a", Proposed, nil)}, map[string]actionResult{"a": {Status: Proposed}}},
		{"finished", []ledger.Event{actionEvent(t, "a", Proposed, nil), actionEvent(t, "a", Running, nil), actionEvent(t, "a", Succeeded, done)},
			map[string]actionResult{"a": {Status: Succeeded, Result: payload(t, done)}}},
		{"waiting for approval, then approved: the waiting result stays", []ledger.Event{actionEvent(t, "a", Proposed, nil),
			actionEvent(t, "a", WaitingApproval, waiting), actionEvent(t, "a", Approved, nil)},
			map[string]actionResult{"a": {Status: Approved, Result: payload(t, waiting)}}},
		{"a result that cannot be read is passed over", []ledger.Event{actionEvent(t, "a", WaitingApproval, waiting),
			{Type: "action.cancelled", AggregateID: "action:a", Payload: payload(t, map[string]any{"status": "cancelled", "result": map[string]any{"what": 1}})}},
			map[string]actionResult{"a": {Status: Cancelled, Result: payload(t, waiting)}}},
		{"two actions", []ledger.Event{actionEvent(t, "a", Proposed, nil), actionEvent(t, "b", Proposed, nil), actionEvent(t, "b", Refused, done)},
			map[string]actionResult{"a": {Status: Proposed}, "b": {Status: Refused, Result: payload(t, done)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kv := ledger.MemKV{}
			feed(t, actionResults{}, kv, tc.evs)
			got := map[string]actionResult{}
			for k, v := range kv {
				var r actionResult
				if err := ledger.UnmarshalPayload(v, &r); err != nil {
					t.Fatal(err)
				}
				got[k] = r
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func grantAddedEvent(t testing.TB, id string, at time.Time) ledger.Event {
	return ledger.Event{Type: EventGrantAdded, OccurredAt: at.UnixNano(),
		Payload: payload(t, grantAdded{ID: id, Subject: "agent:pi", Capability: "gpio.set", Scope: "gpio.relay1", By: "admin:uid=0", Expires: "2026-03-02T12:00:00Z"})}
}

func grantRevokedEvent(t testing.TB, id string, at time.Time) ledger.Event {
	return ledger.Event{Type: EventGrantRevoked, OccurredAt: at.UnixNano(), Payload: payload(t, grantRevoked{ID: id, By: "admin:uid=0", Reason: "done"})}
}

func TestGrantsApply(t *testing.T) {
	expires := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	g := func(id string, added time.Time) Grant {
		return Grant{ID: id, Subject: "agent:pi", Capability: "gpio.set", Scope: "gpio.relay1", By: "admin:uid=0", Expires: expires, Added: added, ByTrust: ledger.High} // recorded without by_trust: read as high
	}
	revoked := func(gr Grant, at time.Time) Grant {
		gr.Revoked, gr.RevokedAt, gr.RevokedBy, gr.RevokeReason = true, at, "admin:uid=0", "done"
		return gr
	}
	t1, t2 := t0.Add(time.Minute), t0.Add(2*time.Minute)
	for _, tc := range []struct {
		name  string
		evs   []ledger.Event
		want  []Grant
		fault string
	}{
		{"nothing", nil, []Grant{}, ""},
		{"added in order, not by id", []ledger.Event{grantAddedEvent(t, "z", t0), grantAddedEvent(t, "a", t1)}, []Grant{g("z", t0), g("a", t1)}, ""},
		{"revoked", []ledger.Event{grantAddedEvent(t, "z", t0), grantAddedEvent(t, "a", t1), grantRevokedEvent(t, "z", t2)},
			[]Grant{revoked(g("z", t0), t2), g("a", t1)}, ""},
		{"revoked twice", []ledger.Event{grantAddedEvent(t, "a", t0), grantRevokedEvent(t, "a", t1), grantRevokedEvent(t, "a", t2)}, nil,
			`(grant.revoked): revokes grant "a" a second time`},
		{"never added", []ledger.Event{grantRevokedEvent(t, "a", t1)}, nil, `(grant.revoked): revokes grant "a", which was never added`},
		{"added twice", []ledger.Event{grantAddedEvent(t, "a", t0), grantAddedEvent(t, "a", t1)}, nil, `(grant.added): grant id "a" is empty or used already`},
		{"unknown", []ledger.Event{{Type: "grant.renewed"}}, nil, "(grant.renewed): not a grant event this body knows"},
		{"nothing applies after a fault", []ledger.Event{grantRevokedEvent(t, "x", t0), grantAddedEvent(t, "a", t1)}, nil, `grant "x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kv := ledger.MemKV{}
			feed(t, grantsState{}, kv, tc.evs)
			got, err := readGrants(kv)
			switch {
			case tc.fault != "":
				if err == nil || !strings.Contains(err.Error(), tc.fault) {
					t.Errorf("got %v, %v; want the fault %q", got, err, tc.fault)
				}
				if kv.Get(keyGrantFault) == nil {
					t.Error("no fault kept")
				}
			case err != nil:
				t.Fatal(err)
			case !reflect.DeepEqual(got, tc.want):
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// The projections' names are distinct and their types of a class kept
// for ever: the ledger refuses anything else at open.
func TestProjectionsAreKeptForEver(t *testing.T) {
	seen := map[string]bool{}
	classes := ledger.DefaultClasses()
	for _, p := range Projections() {
		if seen[p.Name()] {
			t.Errorf("%s twice", p.Name())
		}
		seen[p.Name()] = true
		for _, typ := range p.Types() {
			// Kept for ever and never dropped: audit, or safety.
			if c := classes.Of(typ); c.TTL != 0 || c.Droppable {
				t.Errorf("%s follows %s, of class %s", p.Name(), typ, c.Name)
			}
		}
	}
}

// A body upgraded from a ledger written without the projections: at its
// first open with them they are built from the events, and the latch, the
// holds, the grants, what was left running and the answer to a repeated
// key are restored from them.
func TestRestoreFromALedgerWrittenWithoutProjections(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	old, err := ledger.Open(ledger.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	b := newBench(t)
	b.store = old
	b.r.journal = old
	ctx := t.Context()
	done := b.r.Submit(ctx, Invocation{Principal: b.agent, IdempotencyKey: "k-done", Capability: "gpio.set", Target: "gpio.led", Params: map[string]string{"state": "on"}})
	if done.Status != Succeeded {
		t.Fatalf("%+v", done)
	}
	left := Invocation{ActionID: "a-left", IdempotencyKey: "k-left", Principal: b.agent, Capability: "gpio.set", Target: "gpio.relay1", Mode: Live}
	if _, err := b.r.recordProposed(ctx, &left, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.r.record(ctx, &left, Running, nil); err != nil {
		t.Fatal(err)
	}
	tk, err := NewTakeover([]HumanControl{{Control: "gpio.button", Resources: []string{"gpio.relay1"}, End: EndOnPressAgain}}, NewLeaseTable(0), nil, old, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tk.Pressed("gpio.button"); err != nil {
		t.Fatal(err)
	}
	tk.Close()
	// Grants kept without their projection: the in-memory half only.
	g := &Grants{log: old, clock: &testClock{t: t0}, byID: map[string]int{}}
	kept, err := g.Add(ctx, Grant{Subject: "agent:pi", Capability: "gpio.*", Scope: "*", By: "admin:uid=0", ByTrust: ledger.High}, Expiry{})
	if err != nil {
		t.Fatal(err)
	}
	gone, err := g.Add(ctx, Grant{Subject: "agent:pi", Capability: "audio.tone", Scope: "*", By: "admin:uid=0", ByTrust: ledger.High}, Expiry{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Revoke(ctx, gone.ID, "admin:uid=0", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Append(ctx, ledger.Event{Type: "estop.tripped", ChannelID: EStopChannel, Provenance: ledger.Observed}); err != nil {
		t.Fatal(err)
	}
	if _, err := LatchedAtStop(old); !errors.Is(err, ledger.ErrUnknownProjection) {
		t.Errorf("the latch from a store without its projection: %v, want ErrUnknownProjection", err)
	}
	old.Close()

	store := openTestLedger(t, path)
	if rep, err := store.Verify(ctx); err != nil || !rep.OK() {
		t.Errorf("verify after the projections were built: %+v %v", rep, err)
	}
	if latched, err := LatchedAtStop(store); !latched || err != nil {
		t.Errorf("latched %v, %v", latched, err)
	}
	if held, err := HeldAtStop(store); err != nil || !slices.Equal(held, []string{"gpio.button"}) {
		t.Errorf("held %v, %v", held, err)
	}
	grants, err := LoadGrants(store, &testClock{t: t0})
	if err != nil {
		t.Fatal(err)
	}
	if all := grants.All(); len(all) != 2 || all[0].ID != kept.ID || all[0].Revoked || all[1].ID != gone.ID || !all[1].Revoked || !all[0].Added.Equal(t0) {
		t.Errorf("grants %+v", all)
	}
	again := NewRunner(b.r.env, store)
	ids, err := again.Recover(ctx, store)
	if err != nil || !slices.Equal(ids, []string{"a-left"}) {
		t.Errorf("recovered %v, %v", ids, err)
	}
	set, _ := NewGPIOActions([]*GPIOOutput{{Name: "led", Channel: "gpio.led", Line: b.estop.ledOut, Risk: R1}}, nil)
	again.Register(set)
	writes := len(b.led.Writes())
	res := again.Submit(ctx, Invocation{Principal: b.agent, IdempotencyKey: "k-done", Capability: "gpio.set", Target: "gpio.led", Params: map[string]string{"state": "on"}})
	if !res.Repeat || res.Status != Succeeded || res.ActionID != done.ActionID || res.Receipt != done.Receipt || len(b.led.Writes()) != writes {
		t.Errorf("a repeat after the upgrade: %+v, first %+v", res, done)
	}
	res = again.Submit(ctx, Invocation{Principal: b.agent, IdempotencyKey: "k-left", Capability: "gpio.set", Target: "gpio.relay1", Params: map[string]string{"state": "on"}})
	if !res.Repeat || res.Status != Unknown || res.ActionID != "a-left" {
		t.Errorf("a repeat of what was left running: %+v", res)
	}
}

// The latch and the holds are restored as recorded, and without a ledger
// the latch is taken as set.
func TestLatchAndHoldsAtStop(t *testing.T) {
	if latched, err := LatchedAtStop(nil); !latched || err == nil {
		t.Errorf("without a ledger: %v, %v; want latched and an error", latched, err)
	}
	if _, err := HeldAtStop(nil); err == nil {
		t.Error("holds without a ledger")
	}
	store := openTestLedger(t, filepath.Join(t.TempDir(), "ledger.db"))
	if latched, err := LatchedAtStop(store); latched || err != nil {
		t.Errorf("a new ledger: %v, %v", latched, err)
	}
	tk, err := NewTakeover([]HumanControl{
		{Control: "gpio.button", Resources: []string{"gpio.relay1"}, End: EndOnPressAgain},
		{Control: "input.keypad KEY_1", Resources: []string{"gpio.relay2", "gpio.led"}, End: EndOnPressAgain},
		{Control: "input.keypad KEY_2", Resources: []string{"gpio.buzzer"}, End: EndOnPressAgain},
	}, NewLeaseTable(0), nil, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	for _, c := range []string{"gpio.button", "input.keypad KEY_1", "input.keypad KEY_2", "gpio.button"} {
		if _, err := tk.Pressed(c); err != nil {
			t.Fatal(err)
		}
	}
	held, err := HeldAtStop(store)
	if err != nil || strings.Join(held, ",") != "input.keypad KEY_1,input.keypad KEY_2" {
		t.Errorf("held %q, %v", held, err)
	}
	for _, e := range []ledger.Event{
		estopEvent("estop.tripped", EStopChannel, ledger.Observed),
		estopEvent("estop.reset", EStopChannel, ledger.Told), // a forged reset
	} {
		if _, err := store.Append(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	if latched, err := LatchedAtStop(store); !latched || err != nil {
		t.Errorf("after a trip and a forged reset: %v, %v", latched, err)
	}
}

// Why the e-stop starts latched: no ledger first, then the watchdog's
// note, then the latch as recorded; nothing when none of them says so.
func TestWhyLatchedAtStart(t *testing.T) {
	if why := WhyLatchedAtStart(nil, "the main loop"); !strings.HasPrefix(why, "the ledger cannot be read: ") {
		t.Errorf("without a ledger: %q", why)
	}
	store := openTestLedger(t, filepath.Join(t.TempDir(), "ledger.db"))
	if why := WhyLatchedAtStart(store, ""); why != "" {
		t.Errorf("a new ledger: %q, want none", why)
	}
	if why, want := WhyLatchedAtStart(store, "the main loop"), "the watchdog stopped the last run: the main loop"; why != want {
		t.Errorf("stuck: %q, want %q", why, want)
	}
	if _, err := store.Append(t.Context(), estopEvent("estop.tripped", EStopChannel, ledger.Observed)); err != nil {
		t.Fatal(err)
	}
	if why, want := WhyLatchedAtStart(store, ""), "it was latched when the body stopped"; why != want {
		t.Errorf("latched: %q, want %q", why, want)
	}
}

// history is a random history of the events the projections follow.
func history(t testing.TB, rng *rand.Rand, n int) []ledger.Event {
	var evs []ledger.Event
	actions := []string{}
	grantIDs := []string{}
	revoked := map[string]bool{}
	statuses := []Status{Proposed, WaitingApproval, Approved, Running, Succeeded, Failed, Cancelled, Refused, Compensated, Unknown}
	resources := []string{"gpio.relay1", "gpio.relay2", "gpio.led"}
	controls := []string{"gpio.button", "input.keypad KEY_1"}
	at := t0
	for len(evs) < n {
		at = at.Add(time.Duration(rng.IntN(1000)) * time.Second)
		switch k := rng.IntN(10); {
		case k == 0:
			typ := []string{"estop.tripped", "estop.reset", "estop.reset_refused"}[rng.IntN(3)]
			ch := []string{EStopChannel, EStopChannel, "estop.other"}[rng.IntN(3)]
			prov := []ledger.Provenance{ledger.Observed, ledger.Observed, ledger.Told}[rng.IntN(3)]
			evs = append(evs, estopEvent(typ, ch, prov))
		case k == 1:
			res, ctrl := resources[rng.IntN(len(resources))], controls[rng.IntN(len(controls))]
			if rng.IntN(2) == 0 {
				evs = append(evs, takeoverEvent(t, res, ctrl))
			} else {
				evs = append(evs, releasedEvent(t, res, ctrl))
			}
		case k == 2:
			// Now and then one that does not follow: a revocation of a
			// grant revoked already or never added, an id used again.
			odd := rng.IntN(40) == 0
			switch {
			case len(grantIDs) > 0 && rng.IntN(2) == 0:
				i := rng.IntN(len(grantIDs))
				if revoked[grantIDs[i]] && !odd {
					continue
				}
				revoked[grantIDs[i]] = true
				evs = append(evs, grantRevokedEvent(t, grantIDs[i], at))
			case odd && len(grantIDs) > 0:
				evs = append(evs, grantAddedEvent(t, grantIDs[0], at))
			default:
				id := fmt.Sprintf("g%03d", 999-len(grantIDs)) // ids that sort against the order they are added in
				grantIDs = append(grantIDs, id)
				evs = append(evs, grantAddedEvent(t, id, at))
			}
		default:
			if len(actions) == 0 || rng.IntN(3) == 0 {
				id := fmt.Sprintf("a%04d", len(actions))
				actions = append(actions, id)
				evs = append(evs, actionEvent(t, id, Proposed, nil))
				continue
			}
			id := actions[rng.IntN(len(actions))]
			s := statuses[1+rng.IntN(len(statuses)-1)]
			var res *Result
			if s.Final() || s == WaitingApproval {
				res = &Result{ActionID: id, Status: s, Detail: fmt.Sprintf("detail %d", rng.IntN(100))}
			}
			evs = append(evs, actionEvent(t, id, s, res))
		}
		evs[len(evs)-1].OccurredAt = at.UnixNano()
	}
	// Grants are written without aggregates here: a history that does not
	// follow (a revocation twice) must reach the projection too.
	return evs
}

// The restorations from projections give what a scan of the whole history
// gives (the way startup read it before), for random histories, whether
// the projections were kept with every append or built from the events at
// open.
func TestProjectionsEqualAScanOfHistory(t *testing.T) {
	for seed := uint64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0))
			evs := history(t, rng, 150+rng.IntN(250))
			dir := t.TempDir()
			kept := openTestLedger(t, filepath.Join(dir, "kept.db"))
			plain, err := ledger.Open(ledger.Options{Path: filepath.Join(dir, "built.db")})
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < len(evs); {
				n := min(1+rng.IntN(40), len(evs)-i)
				for _, s := range []*ledger.Store{kept, plain} {
					if _, err := s.Append(t.Context(), slices.Clone(evs[i:i+n])...); err != nil {
						t.Fatal(err)
					}
				}
				i += n
			}
			plain.Close()
			built := openTestLedger(t, filepath.Join(dir, "built.db"))
			want := scanHistory(t, kept)
			t.Logf("%d events: latched %v, held %v, %d open, %d actions, %d grants, grants fault %v", len(evs), want.Latched, want.Held, len(want.Open), len(want.Results), len(want.Grants), want.Fault)
			for name, s := range map[string]*ledger.Store{"kept": kept, "built": built} {
				if rep, err := s.Verify(t.Context()); err != nil || !rep.OK() {
					t.Errorf("%s: verify %+v %v", name, rep, err)
				}
				if got := restored(t, s); !reflect.DeepEqual(got, want) {
					t.Errorf("%s:\n got %+v\nwant %+v", name, got, want)
				}
			}
		})
	}
}

// state is what startup restores.
type state struct {
	Latched bool
	Held    []string
	Open    map[string]Status // action id → the status it was left in
	Results map[string]Result // action id → the answer to a repeat
	Grants  []Grant
	Fault   bool // the grants could not be read
}

// restored is the state as read from the projections.
func restored(t *testing.T, s *ledger.Store) state {
	t.Helper()
	var st state
	var err error
	if st.Latched, err = LatchedAtStop(s); err != nil {
		t.Fatal(err)
	}
	if st.Held, err = HeldAtStop(s); err != nil {
		t.Fatal(err)
	}
	st.Open = map[string]Status{}
	err = s.ReadProjection(projOpen, func(kv ledger.ReadKV) error {
		return kv.ForEach(func(k, v []byte) error {
			var o openAction
			err := ledger.UnmarshalPayload(v, &o)
			st.Open[string(k)] = o.Status
			return err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{journal: s}
	st.Results = map[string]Result{}
	for id, seq := range proposals(t, s) {
		st.Results[id] = r.recorded(seq)
	}
	g, err := LoadGrants(s, &testClock{t: t0})
	if err != nil {
		st.Fault = true
	} else {
		st.Grants = g.All()
	}
	return st
}

// proposals are the actions by the sequence of their first record.
func proposals(t *testing.T, s *ledger.Store) map[string]uint64 {
	t.Helper()
	evs, err := s.Events(ledger.Filter{Types: []string{"action.proposed"}, Limit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, e := range evs {
		id := strings.TrimPrefix(e.AggregateID, "action:")
		if _, seen := out[id]; !seen {
			out[id] = e.Seq
		}
	}
	return out
}

// scanHistory is the state as startup read it before the projections: a
// scan of every event.
func scanHistory(t *testing.T, s *ledger.Store) state {
	t.Helper()
	evs, err := s.Events(ledger.Filter{Limit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	st := state{Open: map[string]Status{}, Results: map[string]Result{}}
	type hold struct {
		held    bool
		control string
	}
	holds := map[string]hold{}
	last := map[string]ledger.Stored{}
	g := &Grants{byID: map[string]int{}}
	for _, e := range evs {
		switch {
		case e.Type == "estop.tripped" || e.Type == "estop.reset":
			if e.ChannelID == EStopChannel && e.Provenance == ledger.Observed {
				st.Latched = e.Type == "estop.tripped"
			}
		case e.Type == EventHumanTakeover || e.Type == EventHumanReleased:
			var p map[string]any
			if ledger.UnmarshalPayload(e.Payload, &p) != nil {
				continue
			}
			res, _ := p["resource"].(string)
			ctrl, _ := p["control"].(string)
			holds[res] = hold{e.Type == EventHumanTakeover, ctrl}
		case strings.HasPrefix(e.Type, "action."):
			last[e.AggregateID] = e
		case strings.HasPrefix(e.Type, "grant.") && !st.Fault:
			if err := g.apply(&e.Event); err != nil {
				st.Fault = true
			}
		}
	}
	for _, h := range holds {
		if h.held && !slices.Contains(st.Held, h.control) {
			st.Held = append(st.Held, h.control)
		}
	}
	sort.Strings(st.Held)
	for agg, e := range last {
		if s := Status(strings.TrimPrefix(e.Type, "action.")); !s.Final() {
			st.Open[strings.TrimPrefix(agg, "action:")] = s
		}
	}
	for id, seq := range proposals(t, s) {
		st.Results[id] = scanRecorded(evs, seq)
	}
	if !st.Fault {
		st.Grants = g.All()
	}
	return st
}

// scanRecorded is what a repeat of the key proposed at seq was answered
// with before: a scan of the records after it.
func scanRecorded(evs []ledger.Stored, seq uint64) Result {
	var agg string
	var res Result
	for _, e := range evs {
		if e.Seq == seq {
			agg = e.AggregateID
			res = Result{ActionID: strings.TrimPrefix(agg, "action:"), Status: Proposed}
		}
		if e.Seq < seq || e.AggregateID != agg || !strings.HasPrefix(e.Type, "action.") {
			continue
		}
		res.Status = Status(strings.TrimPrefix(e.Type, "action."))
		var p map[string]cbor.RawMessage
		if ledger.UnmarshalPayload(e.Payload, &p) == nil && p["result"] != nil {
			var prev Result
			if ledger.UnmarshalPayload(p["result"], &prev) == nil {
				prev.Status = res.Status
				res = prev
			}
		}
	}
	if !res.Status.Final() {
		res.Detail = "a repeat of an invocation that has not finished"
	}
	return res
}

// Recover records what the projection shows left, and a second Recover
// finds nothing: the records it wrote closed them.
func TestRecoverReadsTheProjection(t *testing.T) {
	b := newBench(t)
	ctx := context.Background()
	for _, tc := range []struct {
		id string
		s  []Status
	}{{"a-run", []Status{Proposed, Running}}, {"a-wait", []Status{Proposed, WaitingApproval}}, {"a-ok", []Status{Proposed, Running, Succeeded}}} {
		inv := Invocation{ActionID: tc.id, IdempotencyKey: tc.id, Principal: b.agent, Capability: "gpio.set", Target: "gpio.led", Mode: Live}
		for _, s := range tc.s {
			if err := b.r.record(ctx, &inv, s, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	ids, err := b.r.Recover(ctx, b.store)
	if err != nil || !slices.Equal(ids, []string{"a-run", "a-wait"}) {
		t.Fatalf("recovered %v, %v", ids, err)
	}
	if got := strings.Join(b.types(t, "a-wait"), " "); got != "action.proposed action.waiting_approval action.cancelled" {
		t.Errorf("the waiting one: %s", got)
	}
	if again, err := b.r.Recover(ctx, b.store); len(again) != 0 || err != nil {
		t.Errorf("a second recovery: %v, %v", again, err)
	}
}

// forgetCommutes checks what ledger.Forgetter asks of p on the events
// evs, for every point the archive could reach (the first k taken) and
// every point the body had applied to by then (m): applying the first m,
// forgetting the first k, then applying the rest gives what verify's
// rebuild gives (applying the first k, forgetting them, applying the
// rest). It returns the state the archive of every event leaves.
func forgetCommutes(t *testing.T, p interface {
	ledger.Projection
	ledger.Forgetter
}, evs []ledger.Event) ledger.MemKV {
	t.Helper()
	for i := range evs {
		if evs[i].ID.IsZero() {
			evs[i].ID = ledger.NewID()
		}
	}
	forget := func(kv ledger.KV, evs []ledger.Event) {
		for i := range evs {
			if err := p.Forget(kv, &evs[i]); err != nil {
				t.Fatalf("forget event %d (%s): %v", i, evs[i].Type, err)
			}
		}
	}
	var last ledger.MemKV
	for k := 0; k <= len(evs); k++ {
		rebuilt := ledger.MemKV{}
		feed(t, p, rebuilt, evs[:k])
		forget(rebuilt, evs[:k])
		feed(t, p, rebuilt, evs[k:])
		for m := k; m <= len(evs); m++ {
			live := ledger.MemKV{}
			feed(t, p, live, evs[:m])
			forget(live, evs[:k])
			feed(t, p, live, evs[m:])
			if !reflect.DeepEqual(live, rebuilt) {
				t.Fatalf("%d archived, %d applied before: the body keeps %q, a rebuild %q", k, m, live, rebuilt)
			}
		}
		last = rebuilt
	}
	return last
}

func grantExpiredEvent(t testing.TB, id string, at time.Time) ledger.Event {
	return ledger.Event{Type: EventGrantExpired, OccurredAt: at.UnixNano(), AggregateVersion: 2,
		Payload: payload(t, grantExpired{ID: id, By: ExpiredByWall, Synced: true})}
}

// An ended grant leaves the projection when the archive takes what ended
// it; one in force stays; the order the archive and the body go in does
// not change what is kept.
func TestGrantsForget(t *testing.T) {
	t1, t2, t3 := t0.Add(time.Minute), t0.Add(2*time.Minute), t0.Add(3*time.Minute)
	revokedAfter := func(id string, at time.Time, version uint64) ledger.Event {
		e := grantRevokedEvent(t, id, at)
		e.AggregateVersion = version
		return e
	}
	for _, tc := range []struct {
		name string
		evs  []ledger.Event
		kept []string // the grants left once every event is archived
	}{
		{"in force", []ledger.Event{grantAddedEvent(t, "a", t0)}, []string{"a"}},
		{"revoked", []ledger.Event{grantAddedEvent(t, "a", t0), grantAddedEvent(t, "b", t1), revokedAfter("a", t2, 2)}, []string{"b"}},
		{"expired", []ledger.Event{grantAddedEvent(t, "a", t0), grantExpiredEvent(t, "a", t1), grantAddedEvent(t, "b", t2)}, []string{"b"}},
		{"expired, then revoked", []ledger.Event{grantAddedEvent(t, "a", t0), grantExpiredEvent(t, "a", t1), revokedAfter("a", t3, 3)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kv := forgetCommutes(t, grantsState{}, tc.evs)
			got, err := readGrants(kv)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, g := range got {
				ids = append(ids, g.ID)
			}
			if !slices.Equal(ids, tc.kept) {
				t.Errorf("kept %v, want %v", ids, tc.kept)
			}
		})
	}
	// After a fault nothing applies, and forgetting still commutes.
	forgetCommutes(t, grantsState{}, []ledger.Event{grantAddedEvent(t, "a", t0), grantExpiredEvent(t, "a", t1), revokedAfter("x", t2, 2)})
	// A revocation of a grant never added is still a fault, forgotten or
	// not: only one that follows an expiry may find its grant gone.
	kv := ledger.MemKV{}
	feed(t, grantsState{}, kv, []ledger.Event{revokedAfter("x", t0, 2)})
	if _, err := readGrants(kv); err == nil || !strings.Contains(err.Error(), "never added") {
		t.Errorf("a revocation of a grant never added: %v, want the fault", err)
	}
}

// What the actions' projections forget commutes with what follows too: a
// compensation after a final record, an action still open.
func TestActionsForgetCommutes(t *testing.T) {
	done := &Result{ActionID: "a", Status: Succeeded, Receipt: "led on"}
	comp := &Result{ActionID: "a", Status: Compensated, Receipt: "led off"}
	evs := []ledger.Event{actionEvent(t, "a", Proposed, nil), actionEvent(t, "b", Proposed, nil), actionEvent(t, "a", Succeeded, done),
		actionEvent(t, "a", Compensated, comp), actionEvent(t, "b", Running, nil)}
	if kv := forgetCommutes(t, actionResults{}, evs); len(kv) != 1 || kv["b"] == nil {
		t.Errorf("action_results once all is archived: %q, want only the open action b", kv)
	}
	forgetCommutes(t, actionKeys{}, evs)
}
