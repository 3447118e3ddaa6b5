package awareness

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness/control/world"
	"github.com/tobe-body/tobe-body/ledger"
)

// appendEvent appends e to the body's ledger and returns its id.
func (b *testBody) appendEvent(t *testing.T, e ledger.Event) string {
	t.Helper()
	res, err := b.store.Append(context.Background(), e)
	if err != nil || len(res) != 1 {
		t.Fatalf("append %s: %v %v", e.Type, res, err)
	}
	return res[0].ID.String()
}

// worldChanged appends a world.changed of the front door, inferred at
// medium trust, whose payload says whether a record the body observed
// or verified says it.
func (b *testBody) worldChanged(t *testing.T, observed bool, trust ledger.Level, privacy ledger.Privacy) string {
	t.Helper()
	p, err := ledger.MarshalPayload(world.Changed{Entity: "contact.front", Kind: world.Door, Value: "open", Confidence: 0.6,
		Provenance: ledger.Inferred.String(), Observed: observed, Sources: []string{"camera.front"}})
	if err != nil {
		t.Fatal(err)
	}
	return b.appendEvent(t, ledger.Event{Type: world.EventChanged, ChannelID: "contact.front", Provenance: ledger.Inferred, Trust: trust,
		Privacy: privacy, Payload: p})
}

// proposedCause is the caused_by the proposal of action id records, and
// whether the runner recorded it refused.
func (b *testBody) proposedCause(t *testing.T, id string) (cause map[string]any, refused bool) {
	t.Helper()
	evs, err := b.store.Events(ledger.Filter{Types: []string{"action."}})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.AggregateID != "action:"+id {
			continue
		}
		switch e.Type {
		case "action.proposed":
			var p map[string]cbor.RawMessage
			if err := ledger.UnmarshalPayload(e.Payload, &p); err != nil {
				t.Fatal(err)
			}
			if raw, ok := p["caused_by"]; ok {
				if err := ledger.UnmarshalPayload(raw, &cause); err != nil {
					t.Fatal(err)
				}
			}
		case "action.refused":
			refused = true
		}
	}
	return cause, refused
}

// TestAnActionNamesItsCause: action.do's caused_by names an event of the
// ledger, which the runner's policy weighs: a world.changed that is
// inferred with nothing observed under it refuses an R2 action
// (inferred_cause, recorded with the cause), and does not refuse an R1
// one; one with observed evidence lets the R2 action run. A cause that
// is not an id, not in the ledger, or not the caller's to see refuses
// the request before the runner.
func TestAnActionNamesItsCause(t *testing.T) {
	b := newTestBody(t)
	for _, g := range []string{
		`{"subject":"agent:pi","capability":"gpio.set","scope":"gpio.relay1"}`,
		`{"subject":"agent:pi","capability":"gpio.set","scope":"gpio.led"}`,
	} {
		if _, err := b.call(t, maxAdmin, "grant.add", g); err != nil {
			t.Fatal(err)
		}
	}
	inferred := b.worldChanged(t, false, ledger.Medium, ledger.Internal)
	inferredHigh := b.worldChanged(t, false, ledger.High, ledger.Internal)
	seen := b.worldChanged(t, true, ledger.High, ledger.Internal)
	secret := b.worldChanged(t, true, ledger.High, ledger.Restricted)
	told := b.appendEvent(t, ledger.Event{Type: "mqtt.said", ChannelID: "mqtt.home", Provenance: ledger.Told, Trust: ledger.Max, Privacy: ledger.Internal})
	untrusted := b.appendEvent(t, ledger.Event{Type: "gpio.changed", ChannelID: "gpio.door", Provenance: ledger.Observed, Privacy: ledger.Internal})
	unsaid := b.appendEvent(t, ledger.Event{Type: "test.said", ChannelID: "test", Trust: ledger.High, Privacy: ledger.Internal})
	bad, err := ledger.MarshalPayload(map[string]any{"entity": 7})
	if err != nil {
		t.Fatal(err)
	}
	unreadable := b.appendEvent(t, ledger.Event{Type: world.EventChanged, ChannelID: "contact.front", Provenance: ledger.Inferred, Trust: ledger.High,
		Privacy: ledger.Internal, Payload: bad})
	unknown := ledger.NewID().String()

	relay := func(cause string) DoIn {
		return DoIn{Capability: "gpio.set", Target: "gpio.relay1", Params: map[string]string{"state": "on"}, CausedBy: cause}
	}
	for _, tc := range []struct {
		name   string
		p      act.Principal
		in     DoIn
		reason act.Reason // "" the runner ran it
		detail string     // a part of the refusal's detail
		// cause is what the proposal records of the cause, for a request
		// the runner saw ("" for none).
		cause string
	}{
		{"R2 caused by an inferred state without evidence", agent, relay(inferredHigh), act.ReasonInferredCause,
			"R2 needs a cause the body observed or verified; observation " + inferredHigh + " is inferred, with no observed evidence",
			"event_id=" + inferredHigh + " observed=false provenance=inferred trust=high"},
		{"R2 caused by a medium inferred state: its trust first", agent, relay(inferred), act.ReasonRiskExceedsTrust,
			"R2 needs high trust; the effective trust is medium (from observation " + inferred + ")",
			"event_id=" + inferred + " observed=false provenance=inferred trust=medium"},
		{"R1 caused by an inferred state without evidence", agent,
			DoIn{Capability: "gpio.set", Target: "gpio.led", Params: map[string]string{"state": "on"}, CausedBy: inferred}, "", "",
			"event_id=" + inferred + " observed=false provenance=inferred trust=medium"},
		{"R2 caused by an inferred state with observed evidence", agent, relay(seen), "", "",
			"event_id=" + seen + " observed=true provenance=inferred trust=high"},
		{"R2 caused by what someone told at max", agent, relay(told), "", "",
			"event_id=" + told + " observed=false provenance=told trust=max"},
		{"R2 caused by an event without a trust level: low", agent, relay(untrusted), act.ReasonRiskExceedsTrust,
			"the effective trust is low (from observation " + untrusted + ")",
			"event_id=" + untrusted + " observed=true provenance=observed trust=low"},
		{"R2 caused by an event without a provenance: inferred", agent, relay(unsaid), act.ReasonInferredCause, "observation " + unsaid + " is inferred",
			"event_id=" + unsaid + " observed=false provenance=inferred trust=high"},
		{"a local administrator's R2 caused by an inferred state without evidence", maxAdmin, relay(inferredHigh), act.ReasonInferredCause, "", "event_id=" + inferredHigh + " observed=false provenance=inferred trust=high"},
		{"a local administrator sees a restricted cause", maxAdmin, relay(secret), "", "", "event_id=" + secret + " observed=true provenance=inferred trust=high"},

		{"caused_by not an id", agent, relay("the front door"), ReasonInvalidParams, `caused_by "the front door": not an event id (a UUID)`, ""},
		{"caused_by long and not an id", agent, relay(strings.Repeat("x", 1000)), ReasonInvalidParams, "caused_by: 1000 bytes, not an event id (a UUID)", ""},
		{"caused_by an unknown id", agent, relay(unknown), ReasonNotFound,
			"caused_by " + unknown + ": the ledger holds no such event; the cause must be an event the body recorded (retention may have deleted it)", ""},
		{"caused_by a world.changed the caller may not see", agent, relay(secret), ReasonNotFound,
			"caused_by " + secret + ": the ledger holds no such event", ""},
		{"caused_by a world.changed whose payload cannot be read", agent, relay(unreadable), ReasonFailed, "caused_by " + unreadable + ": its world.changed payload could not be read", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Invoke(t.Context(), b.table, OpDo, tc.p, tc.in)
			oe := ErrorOf(err)
			switch {
			case tc.reason == "" && err != nil:
				t.Fatalf("got %v, want the runner to run it", err)
			case tc.reason != "" && oe.Reason != tc.reason:
				t.Fatalf("got %v, want %s", err, tc.reason)
			case tc.reason != "" && !strings.Contains(oe.Detail, tc.detail):
				t.Fatalf("got detail %q, want it to hold %q", oe.Detail, tc.detail)
			}
			if tc.cause == "" {
				if oe.Record != nil || res.ActionID != "" {
					t.Fatalf("got a record %+v of a request the runner never saw", oe.Record)
				}
				return
			}
			if res.ActionID == "" {
				t.Fatalf("got %+v, want an action the runner recorded", res)
			}
			cause, refused := b.proposedCause(t, res.ActionID)
			if got := flat(cause); got != tc.cause {
				t.Errorf("the proposal's caused_by: got %q, want %q", got, tc.cause)
			}
			if refused != (tc.reason != "") {
				t.Errorf("recorded refused %v, want %v", refused, tc.reason != "")
			}
			if tc.reason == "" && res.Status != act.Succeeded {
				t.Errorf("got %s (%s), want succeeded", res.Status, res.Detail)
			}
		})
	}
}

// flat writes a decoded record's fields as "k=v" in key order.
func flat(m map[string]any) string {
	var parts []string
	for _, k := range []string{"event_id", "observed", "provenance", "trust"} {
		if v, ok := m[k]; ok {
			parts = append(parts, fmt.Sprintf("%s=%v", k, v))
		}
	}
	if len(parts) != len(m) {
		return fmt.Sprintf("unexpected fields in %v", m)
	}
	return strings.Join(parts, " ")
}
