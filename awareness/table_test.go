package awareness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness/control/gate"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/haltest"
	"github.com/tobe-body/tobe-body/hal/haltest/stepclock"
	"github.com/tobe-body/tobe-body/ledger"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var update = flag.Bool("update", false, "rewrite the golden files")

// allOps are the operation names the body offers; the table must hold
// exactly these.
var allOps = []string{"action.capabilities", "action.do", "action.result", "approval.approve", "approval.deny", "approval.list",
	"channels", "estop.reset", "estop.status", "estop.trip", "events", "evidence.delete", "evidence.get", "evidence.list", "gate.explain", "grant.add", "grant.list", "grant.revoke",
	"ledger.backup", "ledger.stats", "ledger.verify", "ledger.verify_archive", "privacy.pause", "privacy.resume", "privacy.status", "self", "status",
	"wait.add", "wait.list", "wait.remove", "work.close", "work.create", "work.list", "work.show", "work.update",
	"world.at", "world.explain", "world.history", "world.now", "world.tell"}

// emptyTable is the table over no parts: a handler that ran would panic
// on them, so a refused call shows it never reached its handler.
func emptyTable(t *testing.T) *Table {
	t.Helper()
	tb, err := (&Parts{}).Table()
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func TestTheTableHoldsEveryOperation(t *testing.T) {
	var names []string
	for _, e := range emptyTable(t).Entries() {
		names = append(names, e.Name)
		if e.Description == "" {
			t.Errorf("%s has no description", e.Name)
		}
	}
	if !slices.Equal(names, allOps) {
		t.Fatalf("operations %v, want %v", names, allOps)
	}
}

// Only the e-stop's trip is answered on its own path: a transport never
// queues it nor refuses it for want of room, so nothing else may claim it.
func TestOnlyTheTripIsAStop(t *testing.T) {
	for _, e := range emptyTable(t).Entries() {
		if got, want := e.Stop, e.Name == OpEStopTrip.Name; got != want {
			t.Errorf("%s: Stop %v, want %v", e.Name, got, want)
		}
	}
}

var (
	kinds  = []act.PrincipalKind{act.LocalAdmin, act.AgentSession, act.MQTTCommand, act.LocalRule}
	trusts = []ledger.Level{ledger.Off, ledger.Low, ledger.Medium, ledger.High, ledger.Max}
)

// TestBelowItsLeastEveryOperationRefuses calls every operation as every
// kind of principal at every trust below what it admits: each is refused
// with not_authorized naming what was needed, before its handler runs.
func TestBelowItsLeastEveryOperationRefuses(t *testing.T) {
	tb := emptyTable(t)
	for _, e := range tb.Entries() {
		for _, k := range kinds {
			for _, tr := range trusts {
				if slices.Contains(e.Least.Kinds, k) && tr >= e.Least.Trust {
					continue
				}
				p := act.Principal{Kind: k, Subject: string(k) + ":test", Session: "s", Trust: tr}
				t.Run(e.Name+"/"+string(k)+"/"+tr.String(), func(t *testing.T) {
					_, err := e.Call(context.Background(), p, json.RawMessage(`{}`))
					var oe *Error
					if !errors.As(err, &oe) || oe.Reason != ReasonNotAuthorized {
						t.Fatalf("got %v, want not_authorized", err)
					}
					if oe.Op != e.Name || oe.Need == nil || oe.Need.Trust != e.Least.Trust || !slices.Equal(oe.Need.Kinds, e.Least.Kinds) {
						t.Fatalf("refusal %+v does not name what %s needs (%v)", oe, e.Name, e.Least)
					}
				})
			}
		}
	}
}

// TestNothingCallsWithoutAPrincipal: no principal, or one without a kind
// or a subject, or at a trust that is no level, calls nothing.
func TestNothingCallsWithoutAPrincipal(t *testing.T) {
	tb := emptyTable(t)
	for _, p := range []act.Principal{
		{},
		{Kind: act.LocalAdmin, Trust: ledger.Max},
		{Subject: "admin:uid=0", Trust: ledger.Max},
		{Kind: act.LocalAdmin, Subject: "admin:uid=0"},
		{Kind: act.LocalAdmin, Subject: "admin:uid=0", Trust: ledger.Max + 1},
		{Kind: "root", Subject: "admin:uid=0", Trust: ledger.Max},
	} {
		for _, e := range tb.Entries() {
			if _, err := e.Call(context.Background(), p, nil); ReasonOf(err) != ReasonNotAuthorized {
				t.Errorf("%s as %+v: %v, want not_authorized", e.Name, p, err)
			}
		}
	}
}

// TestOperationsJSON pins every operation's wire form: its kind, least
// principal, whether it streams or stops, its agent's tool, and the JSON
// Schemas of its input and output
// (testdata/ops/NAME.json; go test -update rewrites them).
func TestOperationsJSON(t *testing.T) {
	for _, e := range emptyTable(t).Entries() {
		t.Run(e.Name, func(t *testing.T) {
			op := map[string]any{"name": e.Name, "description": e.Description, "kind": e.Kind, "least": e.Least,
				"input": e.InSchema(), "output": e.OutSchema()}
			if e.Streams {
				op["streams"] = true
			}
			if e.Stop {
				op["stop"] = true
			}
			if e.Tool != (Tool{}) {
				op["tool"] = e.Tool
			}
			got, err := json.MarshalIndent(op, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", "ops", e.Name+".json"), append(got, '\n'))
		})
	}
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s changed:\ngot  %s\nwant %s", path, got, want)
	}
}

// testBody is a body of fakes with a real ledger: an e-stop line, a relay
// and an LED, the GPIO actions through a runner, grants.
type testBody struct {
	parts *Parts
	table *Table
	store *ledger.Store
	relay *haltest.LineOut
	main  *haltest.LineIn
	clock stepClock
}

// stepClock is the step clock as the body's clock: its Mono in the
// body clock's form.
type stepClock struct{ *stepclock.Clock }

func (c stepClock) Mono() hal.Mono { return c.Clock.Mono() }

var (
	maxAdmin  = act.Principal{Kind: act.LocalAdmin, Subject: "admin:uid=0", Session: "admin", Trust: ledger.Max}
	highAdmin = act.Principal{Kind: act.LocalAdmin, Subject: "admin:uid=1000", Session: "admin", Trust: ledger.High}
	agent     = act.Principal{Kind: act.AgentSession, Subject: "agent:pi", Session: "pi-1", Trust: ledger.High}
)

func newTestBody(t *testing.T) *testBody {
	t.Helper()
	store, err := ledger.Open(ledger.Options{Path: filepath.Join(t.TempDir(), "ledger.db"), Projections: append(act.Projections(), gate.Projections()...)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	chip := haltest.NewChip("test")
	main := chip.AddIn("estop", hal.Low)
	relay, led, _ := chip.AddOut("relay1"), chip.AddOut("led"), chip.AddOut("vault")
	in, _ := chip.In("estop", hal.InConfig{})
	rl, _ := chip.Out("relay1", hal.OutConfig{Safe: hal.Low})
	ll, _ := chip.Out("led", hal.OutConfig{Safe: hal.Low})
	vl, _ := chip.Out("vault", hal.OutConfig{Safe: hal.Low})
	reg := body.NewRegistry(time.Now)
	for _, id := range []string{"gpio.relay1", "gpio.led", "gpio.vault"} {
		if err := reg.Register(body.Channel{ID: id, Kind: "gpio-out", Device: id, Driver: "Loaded", State: body.Enabled, Health: "ok"}); err != nil {
			t.Fatal(err)
		}
	}
	reg.Seal()
	estop, err := act.NewEStop(act.EStopConfig{Main: in, MainStop: hal.High, Outputs: []hal.LineOut{rl, ll, vl}})
	if err != nil {
		t.Fatal(err)
	}
	estop.Check()
	clock := stepClock{stepclock.New()}
	grants, err := act.LoadGrants(store, clock)
	if err != nil {
		t.Fatal(err)
	}
	leases := act.NewLeaseTable(0)
	r := act.NewRunner(act.Environment{EStop: estop, Registry: reg, Leases: leases, Grants: grants.All, Clock: clock,
		Health: func() body.Degradation { return body.LevelNormal }}, store)
	set, pulse := act.NewGPIOActions([]*act.GPIOOutput{
		{Name: "relay1", Channel: "gpio.relay1", Line: rl, Risk: act.R2},
		{Name: "led", Channel: "gpio.led", Line: ll, Risk: act.R1},
		{Name: "vault", Channel: "gpio.vault", Line: vl, Risk: act.R3}, // a door's lock
	}, nil)
	if err := r.Register(set); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(pulse); err != nil {
		t.Fatal(err)
	}
	estop.SetRunner(r, leases)
	parts := &Parts{Info: Status{Body: "test", Board: "test"}, Started: time.Now(), Registry: reg, EStop: estop, Runner: r, Grants: grants, Store: store,
		Self: func() (body.SelfState, bool) { return body.SelfState{}, false }}
	tb, err := parts.Table()
	if err != nil {
		t.Fatal(err)
	}
	_ = led
	return &testBody{parts: parts, table: tb, store: store, relay: relay, main: main, clock: clock}
}

// call runs an operation by name with params and returns its output as
// JSON, as a transport would send it.
func (b *testBody) call(t *testing.T, p act.Principal, name, params string) (string, error) {
	t.Helper()
	e, ok := b.table.Lookup(name)
	if !ok {
		t.Fatalf("no operation %s", name)
	}
	out, err := e.Call(context.Background(), p, json.RawMessage(params))
	if err != nil {
		return "", err
	}
	j, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(j), nil
}

func TestOperationsOnABody(t *testing.T) {
	// A body whose local time is not UTC still answers in UTC.
	local := time.Local
	time.Local = time.FixedZone("UTC+1", 3600)
	t.Cleanup(func() { time.Local = local })
	b := newTestBody(t)
	ids := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	for _, tc := range []struct {
		name, op, params string
		p                act.Principal
		want             string // a regexp the JSON must match; with reason, the JSON of the error's record
		reason           act.Reason
	}{
		{"capabilities name their risk", "action.capabilities", `{}`, agent, `"name":"gpio.pulse","risk":"R2".*"name":"gpio.set","risk":"R2","reversible":true`, ""},
		{"a shadow set", "action.do", `{"capability":"gpio.set","target":"gpio.led","params":{"state":"on"},"mode":"shadow"}`, maxAdmin,
			`^\{"action_id":"ID","status":"succeeded","decision":\{"allow":true[^}]*\},.*"receipt":"shadow: recorded, nothing done"`, ""},
		{"a live set", "action.do", `{"capability":"gpio.set","target":"gpio.relay1","params":{"state":"on"},"idempotency_key":"k1"}`, maxAdmin, `"status":"succeeded"`, ""},
		{"its result by key", "action.result", `{"idempotency_key":"k1"}`, maxAdmin, `^\{"action_id":"ID","status":"succeeded",.*"verification":\{"result":"verified"`, ""},
		{"another's key names nothing", "action.result", `{"idempotency_key":"k1"}`, agent, "", ReasonNotFound},
		{"an unknown action", "action.result", `{"action_id":"nope"}`, agent, "", ReasonNotFound},
		{"neither id nor key", "action.result", `{}`, agent, "", ReasonInvalidParams},
		{"the agent without a grant", "action.do", `{"capability":"gpio.set","target":"gpio.relay1","params":{"state":"off"}}`, agent,
			`"status":"refused","decision":\{"allow":false,"reason":"no_grant"`, act.ReasonNoGrant},
		{"a note out of bounds", "action.do", `{"capability":"gpio.set","target":"gpio.led","params":{"state":"on"},"note":"` + strings.Repeat("n", 2000) + `"}`, agent,
			`^\{"action_id":"","status":"refused","decision":\{"allow":false,"reason":"invalid_request","detail":"note: 2000 bytes, more than 1024"\}`, act.ReasonInvalidRequest},
		{"a bad mode", "action.do", `{"capability":"gpio.set","target":"gpio.relay1","mode":"dry"}`, maxAdmin, "", ReasonInvalidParams},
		{"an unknown field", "action.do", `{"capability":"gpio.set","target":"gpio.relay1","force":true}`, maxAdmin, "", ReasonInvalidParams},
		{"a grant", "grant.add", `{"subject":"agent:pi","capability":"gpio.set","scope":"gpio.relay1","expires":"1h","reason":"test"}`, maxAdmin,
			`^\{"id":"ID","subject":"agent:pi","capability":"gpio.set","scope":"gpio.relay1","expires":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z","state":"active"`, ""},
		{"the agent with its grant", "action.do", `{"capability":"gpio.set","target":"gpio.relay1","params":{"state":"off"}}`, agent, `"status":"succeeded"`, ""},
		{"grants listed", "grant.list", `{}`, maxAdmin, `^\{"grants":\[\{"id":"ID"`, ""},
		{"a grant that is not there", "grant.revoke", `{"id":"nope"}`, maxAdmin, "", ReasonNotFound},
		{"a backup naming a file", "ledger.backup", `{"path":"/tmp/x.db"}`, maxAdmin, "", ReasonInvalidParams},
		{"the e-stop", "estop.status", `{}`, agent, `"latched":false`, ""},
		{"the agent trips it", "estop.trip", `{}`, agent, `"cause":"requested by agent:pi"`, ""},
		{"the agent cannot reset it", "estop.reset", `{}`, agent, "", ReasonNotAuthorized},
		{"latched, acting is refused", "action.do", `{"capability":"gpio.set","target":"gpio.relay1","params":{"state":"on"}}`, maxAdmin,
			`"status":"refused","decision":\{"allow":false,"reason":"estop_latched"`, act.ReasonEStopLatched},
		{"a local administrator resets it", "estop.reset", `{}`, maxAdmin, `"latched":false`, ""},
		{"nothing waits", "approval.list", `{}`, maxAdmin, `^\{"waiting":\[\]\}$`, ""},
		{"approving nothing", "approval.approve", `{"action_id":"nope"}`, maxAdmin, "", ReasonNotFound},
		{"events with a bad limit", "events", `{"limit":100000}`, maxAdmin, "", ReasonInvalidParams},
		{"the last events", "events", `{"types":["grant."]}`, maxAdmin, `"event_type":"grant.added"`, ""},
		{"status", "status", `{}`, agent, `"body":"test".*"started_at":"\d{4}-\d\d-\d\dT[0-9:.]+Z".*"since":"\d{4}-\d\d-\d\dT[0-9:.]+Z"`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := b.call(t, tc.p, tc.op, tc.params)
			if tc.reason != "" {
				if ReasonOf(err) != tc.reason {
					t.Fatalf("got %v, want %s", err, tc.reason)
				}
				if tc.want == "" {
					return
				}
				// A refused action: the error carries the runner's record.
				j, _ := json.Marshal(ErrorOf(err).Record)
				got, err = string(j), nil
			}
			if err != nil {
				t.Fatal(err)
			}
			got = ids.ReplaceAllString(got, "ID")
			if !regexp.MustCompile(tc.want).MatchString(got) {
				t.Fatalf("got %s\nwant a match of %s", got, tc.want)
			}
		})
	}
}

// TestParamsAreStrict: every operation but the stop refuses a key its
// input does not have, and trailing data, with invalid_params, before its
// handler runs. The stop is never refused for its params: its handler
// runs (and answers unavailable here, on a body without an e-stop).
func TestParamsAreStrict(t *testing.T) {
	for _, e := range emptyTable(t).Entries() {
		for _, params := range []string{`{"trust":"max"}`, `{} {}`, `[]`, `"x"`, `{"reason":`} {
			_, err := e.Call(context.Background(), maxAdmin, json.RawMessage(params))
			switch {
			case e.Stop && ReasonOf(err) != ReasonUnavailable:
				t.Errorf("%s %s: %v, want its handler's answer (unavailable), never invalid_params", e.Name, params, err)
			case !e.Stop && ReasonOf(err) != ReasonInvalidParams:
				t.Errorf("%s %s: %v, want invalid_params", e.Name, params, err)
			}
		}
	}
}

// TestWithoutALedger: with no ledger open, what needs it says so.
func TestWithoutALedger(t *testing.T) {
	tb, err := (&Parts{Runner: act.NewRunner(act.Environment{}, nil)}).Table()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"grant.add", "grant.list", "grant.revoke", "ledger.stats", "ledger.verify", "ledger.verify_archive", "ledger.backup", "events", "estop.status", "estop.trip", "estop.reset", "action.result"} {
		e, _ := tb.Lookup(name)
		params := json.RawMessage(nil)
		if name == "action.result" {
			params = json.RawMessage(`{"action_id":"a"}`)
		}
		if _, err := e.Call(context.Background(), maxAdmin, params); ReasonOf(err) != ReasonUnavailable {
			t.Errorf("%s: %v, want unavailable", name, err)
		}
	}
	// A cause cannot be looked up: the request is refused, never sent
	// on without it.
	in := DoIn{Capability: "gpio.set", Target: "gpio.relay1", Params: map[string]string{"state": "on"}, CausedBy: ledger.NewID().String()}
	if _, err := Invoke(context.Background(), tb, OpDo, maxAdmin, in); ReasonOf(err) != ReasonUnavailable {
		t.Errorf("action.do caused by an event: %v, want unavailable", err)
	}
}

// The attack of a local administrator at high trust granting R3, which
// R3 itself needs max to do: a grant that covers an R3 capability or
// target is refused below max, naming what it covers; one that covers
// nothing above R2 is not; and a grant given at high never lets R3 run,
// whatever its patterns came to cover later.
func TestGrantingR3NeedsMaxTrust(t *testing.T) {
	b := newTestBody(t)
	for _, tc := range []struct {
		name, params string
		p            act.Principal
		err          string // "" granted
		byTrust      string
	}{
		{"every output, at high", `{"subject":"agent:pi","capability":"gpio.*","scope":"*"}`, highAdmin,
			"grant.add: not_authorized: a grant of gpio.* on * covers gpio.pulse on gpio.vault, which is R3: granting R3 needs a local administrator at max trust or above; the caller is admin:uid=1000 at high trust", ""},
		{"the vault by name, at high", `{"subject":"agent:pi","capability":"gpio.set","scope":"gpio.vault"}`, highAdmin,
			"grant.add: not_authorized: a grant of gpio.set on gpio.vault covers gpio.set on gpio.vault, which is R3", ""},
		{"the relay, at high", `{"subject":"agent:pi","capability":"gpio.set","scope":"gpio.relay1"}`, highAdmin, "", "high"},
		{"a capability the body does not have, at high", `{"subject":"agent:pi","capability":"door.*","scope":"*"}`, highAdmin, "", "high"},
		{"every output, at max", `{"subject":"agent:pi","capability":"gpio.*","scope":"*"}`, maxAdmin, "", "max"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := b.call(t, tc.p, "grant.add", tc.params)
			if tc.err != "" {
				var oe *Error
				if !errors.As(err, &oe) || !strings.HasPrefix(err.Error(), tc.err) || oe.Need == nil || oe.Need.Trust != ledger.Max {
					t.Fatalf("got %v, want %q with need max", err, tc.err)
				}
				return
			}
			if err != nil || !strings.Contains(got, `"by_trust":"`+tc.byTrust+`"`) {
				t.Fatalf("got %s %v, want a grant by %s", got, err, tc.byTrust)
			}
		})
	}
	// Only the grant given at max covers the vault for the agent, which
	// asks at max; the one given at high covers the relay alone.
	agentMax := act.Principal{Kind: act.AgentSession, Subject: "agent:pi", Session: "pi-1", Trust: ledger.Max}
	got, err := b.call(t, agentMax, "action.do", `{"capability":"gpio.set","target":"gpio.vault","params":{"state":"on"},"mode":"shadow"}`)
	if err != nil || !strings.Contains(got, `"reason":"approval_required"`) {
		t.Fatalf("R3 under a grant given at max: got %s %v, want it to wait for approval", got, err)
	}
}

// TestGrantAddOnAnUnsynchronisedClock: while the body's clock is not
// synchronised, grant.add refuses a relative expiry with
// clock_unsynchronized, naming why and the way out, and takes an
// absolute one from a local administrator; grant.list shows a grant of
// another boot as suspended until the clock is synchronised.
func TestGrantAddOnAnUnsynchronisedClock(t *testing.T) {
	b := newTestBody(t)
	b.clock.SetSynced(false)
	_, err := b.call(t, maxAdmin, "grant.add", `{"subject":"agent:pi","capability":"gpio.set","scope":"gpio.relay1","expires":"24h"}`)
	const want = "grant.add: clock_unsynchronized: the body's clock is not synchronised (no NTP yet): a relative expiry cannot be measured; give an absolute time (RFC 3339) as a local administrator, or wait for time synchronisation"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
	at := b.clock.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	got, err := b.call(t, maxAdmin, "grant.add", `{"subject":"agent:pi","capability":"gpio.set","scope":"gpio.relay1","expires":"`+at+`"}`)
	if err != nil || !strings.Contains(got, `"state":"active"`) {
		t.Fatalf("an absolute expiry from a local administrator: %s %v", got, err)
	}
	b.clock.Reboot()
	if got, err := b.call(t, maxAdmin, "grant.list", `{"all":true}`); err != nil || !strings.Contains(got, `"state":"suspended"`) {
		t.Fatalf("after a reboot, unsynchronised: %s %v", got, err)
	}
	b.clock.SetSynced(true)
	if got, err := b.call(t, maxAdmin, "grant.list", `{}`); err != nil || !strings.Contains(got, `"state":"active"`) {
		t.Fatalf("synchronised: %s %v", got, err)
	}
}

// TestAgentsToolsFollowFromTheTable: an agent is offered, as a tool of
// its own, every operation of the body whose least admits it, save the
// one offered per capability and any that streams other than media; no
// other; and the
// table refuses an operation whose tool does not follow from it.
func TestAgentsToolsFollowFromTheTable(t *testing.T) {
	tb := emptyTable(t)
	var got, want []string
	for _, e := range tb.Tools(agent) {
		got = append(got, e.Tool.Name)
	}
	for _, e := range tb.Entries() {
		switch {
		case !e.Least.Admits(agent) || e.Streams && !e.Media:
		case e.Tool.Name == "" && !e.Tool.PerCapability:
			t.Errorf("%s admits agents and names no tool", e.Name)
		case e.Tool.Name != "":
			want = append(want, e.Tool.Name)
		}
	}
	slices.Sort(want)
	if !slices.Equal(got, want) || !slices.Contains(got, "show_work") {
		t.Errorf("an agent's tools %q, want %q with show_work", got, want)
	}
	if e, _ := tb.Lookup(OpDo.Name); !e.Tool.PerCapability {
		t.Errorf("action.do's tool %+v: want one per capability", e.Tool)
	}
	if tools := tb.Tools(act.Principal{Kind: act.AgentSession, Subject: "agent:pi", Trust: ledger.Off}); len(tools) != 0 {
		t.Errorf("an agent at trust off has %d tools, want none", len(tools))
	}

	h := func(context.Context, act.Principal, None) (None, error) { return None{}, nil }
	for _, tc := range []struct {
		name string
		op   Op[None, None]
	}{
		{"a tool no agent is admitted to", Op[None, None]{Name: "x", Kind: Observe, Least: AnyAdmin, Tool: Tool{Name: "x", ReadOnly: true}}},
		{"a read-only tool that acts", Op[None, None]{Name: "x", Kind: Interact, Least: AdminOrAgent, Tool: Tool{Name: "x", ReadOnly: true}}},
		{"an observation not read-only", Op[None, None]{Name: "x", Kind: Observe, Least: AdminOrAgent, Tool: Tool{Name: "x"}}},
		{"read-only and destructive", Op[None, None]{Name: "x", Kind: Observe, Least: AdminOrAgent, Tool: Tool{Name: "x", ReadOnly: true, Destructive: true}}},
		{"a name and per capability", Op[None, None]{Name: "x", Kind: Interact, Least: AdminOrAgent, Tool: Tool{Name: "x", PerCapability: true}}},
	} {
		if _, err := NewTable(Bind(tc.op, h)); err == nil {
			t.Errorf("%s: the table took it", tc.name)
		}
	}
	a := Op[None, None]{Name: "a", Kind: Observe, Least: AdminOrAgent, Tool: Tool{Name: "same", ReadOnly: true}}
	b := Op[None, None]{Name: "b", Kind: Observe, Least: AdminOrAgent, Tool: Tool{Name: "same", ReadOnly: true}}
	if _, err := NewTable(Bind(a, h), Bind(b, h)); err == nil {
		t.Error("two operations of one tool name: the table took them")
	}
}

// TestARefusedActionIsAnError: the runner's refusal of an action comes
// from the table as an error with its reason, carrying the runner's
// record of it, through Call and Invoke alike; Invoke gives the record as
// its output too.
func TestARefusedActionIsAnError(t *testing.T) {
	b := newTestBody(t)
	in := DoIn{Capability: "gpio.set", Target: "gpio.relay1", Params: map[string]string{"state": "on"}}
	res, err := Invoke(t.Context(), b.table, OpDo, agent, in)
	oe := ErrorOf(err)
	rec, _ := oe.Record.(act.Result)
	if oe.Op != OpDo.Name || oe.Reason != act.ReasonNoGrant || oe.Detail == "" || oe.Detail != res.Detail {
		t.Errorf("an agent without a grant: %v, want action.do: no_grant with the runner's detail", err)
	}
	if res.Status != act.Refused || res.ActionID == "" || rec.ActionID != res.ActionID {
		t.Errorf("the record: out %+v, in the error %+v; want the refused action, recorded", res, rec)
	}
	raw, _ := json.Marshal(in)
	if _, err := b.table.byName[OpDo.Name].Call(t.Context(), agent, raw); ReasonOf(err) != act.ReasonNoGrant || ErrorOf(err).Record == nil {
		t.Errorf("through Call: %v, want no_grant with its record", err)
	}

	in.Mode = act.Shadow
	res, err = Invoke(t.Context(), b.table, OpDo, maxAdmin, in)
	if err != nil || res.Status != act.Succeeded {
		t.Errorf("a shadow set: %+v %v", res, err)
	}
	if _, err := Invoke(t.Context(), b.table, OpApprove, maxAdmin, ApproveIn{ActionID: "nope"}); ReasonOf(err) != ReasonNotFound || ErrorOf(err).Record != nil {
		t.Errorf("approving nothing: %v, want not_found without a record", err)
	}
}

// TestInvoke: a typed call checks the principal first, as Call does, and
// names its operation in every error; a table without the operation, or
// with one of its name of other types, is unavailable.
func TestInvoke(t *testing.T) {
	tb := emptyTable(t) // a handler that ran would panic
	if _, err := Invoke(t.Context(), tb, OpLedgerStats, agent, None{}); ReasonOf(err) != ReasonNotAuthorized || ErrorOf(err).Op != OpLedgerStats.Name {
		t.Errorf("below its least: %v, want ledger.stats: not_authorized", err)
	}
	if _, err := Invoke(t.Context(), tb, OpDo, act.Principal{}, DoIn{}); ReasonOf(err) != ReasonNotAuthorized {
		t.Errorf("without a principal: %v, want not_authorized", err)
	}
	other := Op[DoIn, None]{Name: OpDo.Name}
	if _, err := Invoke(t.Context(), tb, other, maxAdmin, DoIn{}); ReasonOf(err) != ReasonUnavailable {
		t.Errorf("other types: %v, want unavailable", err)
	}
	if _, err := Invoke(t.Context(), &Table{}, OpStatus, maxAdmin, None{}); ReasonOf(err) != ReasonUnavailable {
		t.Errorf("no such operation: %v, want unavailable", err)
	}
	st, err := Invoke(t.Context(), newTestBody(t).table, OpStatus, agent, None{})
	if err != nil || st.Body != "test" {
		t.Errorf("status: %+v %v", st, err)
	}
}
