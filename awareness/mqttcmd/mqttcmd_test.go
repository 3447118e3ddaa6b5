package mqttcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/ledger"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const base = "tobe/a/b"

// TestValidID: the loop takes what the pattern it replaced took.
func TestValidID(t *testing.T) {
	pattern := regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)
	for _, id := range []string{"", "a", "A-z_0.9:x", strings.Repeat("a", 64), strings.Repeat("a", 65), "a b", "a/b", "a\n", "é", "a\xff", "cmd-1", "a+b", "a#b", "ab\x00"} {
		if got, want := validID(id), pattern.MatchString(id); got != want {
			t.Errorf("validID(%q) = %v, the pattern says %v", id, got, want)
		}
	}
}

func FuzzValidID(f *testing.F) {
	pattern := regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)
	f.Add("cmd-1")
	f.Fuzz(func(t *testing.T, id string) {
		if got, want := validID(id), pattern.MatchString(id); got != want {
			t.Errorf("validID(%q) = %v, the pattern says %v", id, got, want)
		}
	})
}

type sent struct {
	mu   sync.Mutex
	msgs map[string][]Result
}

func (s *sent) publish(topic string, payload []byte) error {
	var r Result
	if err := json.Unmarshal(payload, &r); err != nil {
		panic("a result that is not JSON: " + string(payload))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.msgs[topic] = append(s.msgs[topic], r)
	return nil
}

// handler answers with a table of three operations: status (counted),
// action.do (its key recorded) and an administrative one.
func handler(t testing.TB) (*Handler, *sent, *atomic.Int64, *sync.Map) {
	var statuses atomic.Int64
	var keys sync.Map
	table, err := awareness.NewTable(
		awareness.Bind(awareness.OpStatus, func(context.Context, act.Principal, awareness.None) (awareness.Status, error) {
			statuses.Add(1)
			return awareness.Status{Body: "b"}, nil
		}),
		awareness.Bind(awareness.OpDo, func(_ context.Context, p act.Principal, in awareness.DoIn) (act.Result, error) {
			keys.Store(in.IdempotencyKey, p.Subject)
			if in.Capability == "refused" { // as the table answers an action the runner refused
				res := act.Result{ActionID: "a-" + in.IdempotencyKey, Status: act.Refused, Reason: act.ReasonNoGrant, Detail: "no grant"}
				return res, &awareness.Error{Reason: res.Reason, Detail: res.Detail, Record: res}
			}
			if in.Capability == "failing" { // an action that ran and failed its verification
				return act.Result{ActionID: "a-" + in.IdempotencyKey, Status: act.Failed, Detail: "read back low"}, nil
			}
			return act.Result{ActionID: "a-" + in.IdempotencyKey, Status: act.Succeeded}, nil
		}),
		awareness.Bind(awareness.OpGrantList, func(context.Context, act.Principal, awareness.GrantListIn) (awareness.Grants, error) {
			t.Error("an administrative operation ran for an MQTT command")
			return awareness.Grants{}, nil
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	s := &sent{msgs: map[string][]Result{}}
	h := &Handler{Table: table, Base: base, Publish: s.publish,
		Principal: act.Principal{Kind: act.MQTTCommand, Subject: "mqtt:home", Session: "mqtt", Trust: ledger.Medium}}
	return h, s, &statuses, &keys
}

func TestCommands(t *testing.T) {
	h, s, statuses, keys := handler(t)
	var told []string
	h.Refused = func(r Result) { told = append(told, r.ID) }
	for _, tc := range []struct {
		op, payload, rid, status, reason string
	}{
		{"status", `{"id": "s1"}`, "s1", "success", ""},
		{"status", `{"id": "s1"}`, "s1", "success", ""}, // kept: not run again
		{"action.do", `{"id": "d1", "args": {"capability": "x", "target": "y"}}`, "d1", "success", ""},
		{"grant.list", `{"id": "g1"}`, "g1", "error", "not_authorized"},
		{"status", `{"id": "s2", "args": null}`, "s2", "success", ""},
		{"status", `{"id": "s3", "args": {"x": 1}}`, "s3", "error", "invalid_params"},
		{"status", `{"id": "s4"} {"id": "s5"}`, "invalid", "error", "invalid_params"},
		{"status", `{"args": {}}`, "invalid", "error", "invalid_params"},
		{"status", `{"id": "` + strings.Repeat("x", 65) + `"}`, "invalid", "error", "invalid_params"},
		{"status", `{"id": 7}`, "invalid", "error", "invalid_params"},
		{"status", `[]`, "invalid", "error", "invalid_params"},
		{"status", `{"id": "ok-id", "junk": true}`, "ok-id", "error", "invalid_params"},
		{"nothing", `{"id": "n1"}`, "n1", "error", "not_found"},
		{"action.do", `{"id": "d2", "args": {"capability": "x", "target": "y", "idempotency_key": "d2"}}`, "d2", "success", ""},
		{"action.do", `{"id": "d3", "args": {"capability": "x", "target": "y", "idempotency_key": "other"}}`, "d3", "error", "invalid_params"},
		{"action.do", `{"id": "d4", "args": "x"}`, "d4", "error", "invalid_params"},
		{"action.do", `{"id": "d5", "args": {"capability": "refused", "target": "y"}}`, "d5", "error", "no_grant"},
		{"action.do", `{"id": "d6", "args": {"capability": "failing", "target": "y"}}`, "d6", "success", ""},
	} {
		before := len(s.msgs[h.ResultTopic(tc.rid)])
		h.Handle(h.Base+"/cmd/"+tc.op, []byte(tc.payload))
		got := s.msgs[h.ResultTopic(tc.rid)]
		if len(got) != before+1 {
			t.Errorf("%s %s: %d results on %s, want %d", tc.op, tc.payload, len(got), tc.rid, before+1)
			continue
		}
		r := got[len(got)-1]
		if r.Status != tc.status || (tc.reason != "") != (r.Error != nil) || r.Error != nil && string(r.Error.Reason) != tc.reason {
			t.Errorf("%s %s: %+v %+v, want %s %s", tc.op, tc.payload, r, r.Error, tc.status, tc.reason)
		}
	}
	// Refused hears every error and the failed action, nothing else.
	if want := "[g1 s3 invalid invalid invalid invalid invalid ok-id n1 d3 d4 d5 d6]"; fmt.Sprint(told) != want {
		t.Errorf("Refused heard %v, want %s", told, want)
	}
	if n := statuses.Load(); n != 2 {
		t.Errorf("status ran %d times for s1 twice and s2, want 2", n)
	}
	if r := s.msgs[h.ResultTopic("s1")]; !r[1].Repeat {
		t.Errorf("the repeat of s1 is not marked as one: %+v", r[1])
	}
	// A refused action: the runner's record as data, the refusal beside
	// it without the record.
	r := s.msgs[h.ResultTopic("d5")][0]
	if rec, _ := r.Data.(map[string]any); rec["action_id"] != "a-d5" || rec["status"] != "refused" ||
		r.Error.Op != "action.do" || r.Error.Detail != "no grant" || r.Error.Record != nil {
		t.Errorf("a refused action: %+v %+v, want the record as data and the refusal without it", r, r.Error)
	}
	for _, k := range []string{"d1", "d2"} {
		if who, ok := keys.Load(k); !ok || who != "mqtt:home" {
			t.Errorf("action %s: idempotency key not the command's id, or not the connection's principal (%v)", k, who)
		}
	}
}

// Duplicates of one id that arrive together run it once.
func TestDuplicatesRunOnce(t *testing.T) {
	h, s, statuses, _ := handler(t)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { h.Handle(base+"/cmd/status", []byte(`{"id": "dup"}`)) })
	}
	wg.Wait()
	if n := statuses.Load(); n != 1 {
		t.Errorf("status ran %d times for 20 copies of one command", n)
	}
	if n := len(s.msgs[h.ResultTopic("dup")]); n != 20 {
		t.Errorf("%d results for 20 copies, want 20", n)
	}
}

func FuzzHandle(f *testing.F) {
	for _, s := range []string{`{"id": "s1"}`, `{"id": "d1", "args": {"capability": "x", "target": "y"}}`, `{"id": "x", "args": {"idempotency_key": 5}}`, `not json`, `{"id": "\u0000"}`, `{}`} {
		f.Add("status", []byte(s))
		f.Add("action.do", []byte(s))
	}
	f.Fuzz(func(t *testing.T, op string, payload []byte) {
		h, s, _, _ := handler(t)
		h.Handle(base+"/cmd/"+op, payload)
		n := 0
		for topic, rs := range s.msgs {
			id, ok := strings.CutPrefix(topic, base+"/cmd_result/")
			if !ok || !validID(id) {
				t.Fatalf("a result on %q", topic)
			}
			for _, r := range rs {
				if r.ID != id || r.Status != "success" && (r.Status != "error" || r.Error == nil) {
					t.Fatalf("result %+v on %s", r, topic)
				}
			}
			n += len(rs)
		}
		if n != 1 {
			t.Fatalf("%d results for one command", n)
		}
	})
}
