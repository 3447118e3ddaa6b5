package awareness

import (
	"strings"
	"testing"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/ledger"
)

// TestWorkItemsAreTheirOwners: an agent's work item is its own; another
// agent may neither change it, close it, give it away, nor leave or
// remove its wait conditions; a local administrator may.
func TestWorkItemsAreTheirOwners(t *testing.T) {
	b := newTestBody(t)
	other := act.Principal{Kind: act.AgentSession, Subject: "agent:other", Session: "other-1", Trust: ledger.High}
	if got, err := b.call(t, agent, "work.create", `{"id": "mine", "goal": "g", "done_when": ["x"]}`); err != nil || !strings.Contains(got, `"owner":"agent:pi"`) {
		t.Fatalf("create: %s %v", got, err)
	}
	if _, err := b.call(t, agent, "wait.add", `{"id": "door", "owner": "mine", "event_types": ["camera.motion_started"], "expires_in": "1h"}`); err != nil {
		t.Fatalf("wait.add by the owner: %v", err)
	}
	const notYours = "work item mine belongs to agent:pi, not agent:other: only its owner or a local administrator changes it"
	for _, c := range []struct {
		name, op, params, want string
	}{
		{"create for another", "work.create", `{"id": "theirs", "goal": "g", "done_when": ["x"], "owner": "agent:pi"}`, `owner "agent:pi": an agent's work items are its own (agent:other)`},
		{"update", "work.update", `{"id": "mine", "version": 1, "status": "ready"}`, notYours},
		{"give away", "work.update", `{"id": "mine", "version": 1, "owner": "agent:other"}`, notYours},
		{"close", "work.close", `{"id": "mine", "version": 1}`, notYours},
		{"wait.add", "wait.add", `{"owner": "mine", "event_types": ["camera.motion_started"], "expires_in": "1h"}`, notYours},
		{"wait.remove", "wait.remove", `{"id": "door"}`, notYours},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := b.call(t, other, c.op, c.params)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), string(ReasonNotAuthorized)) {
				t.Errorf("%s: %s %v, want %q", c.op, got, err, c.want)
			}
		})
	}
	if _, err := b.call(t, agent, "work.update", `{"id": "mine", "version": 1, "owner": "agent:other"}`); err == nil || !strings.Contains(err.Error(), `owner "agent:other": an agent's work items are its own (agent:pi)`) {
		t.Errorf("the owner gives it away: %v", err)
	}
	// A local administrator may: give it to the other agent, which then may.
	if got, err := b.call(t, maxAdmin, "work.update", `{"id": "mine", "version": 1, "owner": "agent:other"}`); err != nil || !strings.Contains(got, `"owner":"agent:other"`) {
		t.Fatalf("the administrator gives it: %s %v", got, err)
	}
	if _, err := b.call(t, other, "wait.remove", `{"id": "door"}`); err != nil {
		t.Errorf("the new owner removes its condition: %v", err)
	}
	if _, err := b.call(t, agent, "work.update", `{"id": "mine", "version": 2, "status": "ready"}`); err == nil || !strings.Contains(err.Error(), "belongs to agent:other, not agent:pi") {
		t.Errorf("the former owner: %v", err)
	}
}
