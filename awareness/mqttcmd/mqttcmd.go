// Package mqttcmd is the operation table's MQTT transport: commands the
// home server publishes on PREFIX/<agent_id>/<body_id>/cmd/<operation>,
// answered on .../cmd_result/<id>.
//
// A command is {"id": ID, "args": {...}}: the operation's input as args,
// an id of 1 to 64 characters of [A-Za-z0-9._:-]. It runs with the
// principal configured for the broker connection (kind mqtt), never one
// the message names, through the same table as every other caller: an
// operation that principal is not admitted to (every administrative one,
// the e-stop's reset among them) is refused not_authorized; the e-stop's
// trip is admitted. The id is the command's idempotency key: an action
// (action.do) takes it as its idempotency_key, so the runner's ledger
// makes a repeat, even across a restart, return the recorded result
// without acting again; any other operation's result is kept for an
// hour (at most 1,024 of them) and a repeat of its id within that time
// returns it, as does a duplicate that arrives while the first still
// runs. A payload that is not a command gets a result saying what is
// wrong, on .../cmd_result/<id> when its id can be read, else on
// .../cmd_result/invalid.
package mqttcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness"
)

// Limits.
const (
	MaxPayload = 64 << 10 // a command's bytes
	MaxRunning = 16       // commands running at once; more are refused rate_limited
	keep       = time.Hour
	maxKept    = 1024
)

// InvalidID is the id of a result to a command whose id cannot be read.
const InvalidID = "invalid"

// validID says whether s is a command's id: 1 to 64 characters, each a
// letter, a digit or one of "._:-". It is a loop: as a regular
// expression, compiled at init, it kept 26 KB for the whole run.
func validID(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("._:-", c) >= 0) {
			return false
		}
	}
	return true
}

// Handler answers commands.
type Handler struct {
	Table *awareness.Table
	// Principal is the broker connection's, from the config.
	Principal act.Principal
	// Base is PREFIX/<agent_id>/<body_id>.
	Base string
	// Publish sends a result (QoS 1, not retained).
	Publish func(topic string, payload []byte) error
	// Refused, when set, hears every result that is an error (a refusal,
	// a failure) and every action that failed or whose outcome is
	// unknown, after the result was published.
	Refused func(Result)
	Log     *slog.Logger

	mu      sync.Mutex
	kept    map[string]kept
	order   []string // ids kept, oldest first
	running map[string]chan struct{}
	slots   chan struct{}
}

type kept struct {
	result []byte
	at     time.Time // with its monotonic reading: a step of the wall clock moves nothing
}

// Result is what a command's result topic carries.
type Result struct {
	ID     string           `json:"id"`
	Op     string           `json:"op,omitempty"`
	Status string           `json:"status"` // success or error
	Data   any              `json:"data,omitempty"`
	Error  *awareness.Error `json:"error,omitempty"`
	// Repeat says the result is the one recorded for this id before.
	Repeat bool `json:"repeat,omitempty"`
}

// Filter is the topic filter of the commands.
func (h *Handler) Filter() string { return h.Base + "/cmd/+" }

// ResultTopic is where the result of command id goes.
func (h *Handler) ResultTopic(id string) string { return h.Base + "/cmd_result/" + id }

func (h *Handler) init() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.kept == nil {
		h.kept, h.running, h.slots = map[string]kept{}, map[string]chan struct{}{}, make(chan struct{}, MaxRunning)
		if h.Log == nil {
			h.Log = slog.New(slog.DiscardHandler)
		}
	}
}

// Handle answers one message of the command filter. It never panics on
// what the message holds, and it blocks for as long as the operation
// runs (the uplink calls it in a goroutine of its own).
func (h *Handler) Handle(topic string, payload []byte) {
	h.init()
	op, ok := strings.CutPrefix(topic, h.Base+"/cmd/")
	res := h.handle(op, ok, payload)
	h.send(res)
}

func (h *Handler) send(res Result) {
	b, err := json.Marshal(res)
	if err != nil {
		b, _ = json.Marshal(Result{ID: res.ID, Op: res.Op, Status: "error",
			Error: &awareness.Error{Op: res.Op, Reason: awareness.ReasonFailed, Detail: "the result could not be encoded: " + err.Error()}})
	}
	if err := h.Publish(h.ResultTopic(res.ID), b); err != nil {
		h.Log.Warn("mqtt command: the result was not sent; a repeat of the command gets it", "id", res.ID, "op", res.Op, "err", err)
	}
	if h.Refused != nil && (res.Status == "error" || Failed(res)) {
		h.Refused(res)
	}
}

// Failed says whether res is an action that ran and failed, or whose
// outcome is not known.
func Failed(res Result) bool {
	r, ok := res.Data.(act.Result)
	return ok && (r.Status == act.Failed || r.Status == act.Unknown)
}

func refused(id, op string, reason act.Reason, format string, args ...any) Result {
	return Result{ID: id, Op: op, Status: "error", Error: &awareness.Error{Op: op, Reason: reason, Detail: fmt.Sprintf(format, args...)}}
}

func (h *Handler) handle(op string, topicOK bool, payload []byte) Result {
	var cmd struct {
		ID   string          `json:"id"`
		Args json.RawMessage `json:"args"`
	}
	if len(payload) > MaxPayload {
		return refused(InvalidID, op, awareness.ReasonInvalidParams, "a command of %d bytes: at most %d", len(payload), MaxPayload)
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cmd); err != nil {
		// The id, if it can be read at all, says where to answer.
		var loose struct {
			ID string `json:"id"`
		}
		id := InvalidID
		if json.Unmarshal(payload, &loose) == nil && validID(loose.ID) {
			id = loose.ID
		}
		return refused(id, op, awareness.ReasonInvalidParams, `not a command: %v; want {"id": ID, "args": {...}}`, err)
	}
	if _, err := dec.Token(); err == nil {
		return refused(InvalidID, op, awareness.ReasonInvalidParams, "data after the command")
	}
	if !validID(cmd.ID) {
		return refused(InvalidID, op, awareness.ReasonInvalidParams, "id %q: want 1 to 64 characters of A-Z a-z 0-9 . _ : -", truncate(cmd.ID, 80))
	}
	e, found := h.Table.Lookup(op)
	switch {
	case !topicOK || op == "" || strings.ContainsAny(op, "/+#"):
		return refused(cmd.ID, op, awareness.ReasonInvalidParams, "the topic does not name an operation")
	case !found:
		return refused(cmd.ID, op, awareness.ReasonNotFound, "no operation %q", truncate(op, 80))
	case e.Streams:
		return refused(cmd.ID, op, awareness.ReasonNotAuthorized, "%s sends bytes besides its result, which MQTT does not carry", op)
	}
	call := func(ctx context.Context) (any, error) { return e.Call(ctx, h.Principal, cmd.Args) }
	if op == awareness.OpDo.Name {
		var in awareness.DoIn
		if err := awareness.DecodeParams(cmd.Args, &in); err != nil {
			return refused(cmd.ID, op, awareness.ReasonInvalidParams, "args: %v", err)
		}
		if in.IdempotencyKey != "" && in.IdempotencyKey != cmd.ID {
			return refused(cmd.ID, op, awareness.ReasonInvalidParams, "args.idempotency_key: the command's id is its idempotency key; leave it out")
		}
		in.IdempotencyKey = cmd.ID
		call = func(ctx context.Context) (any, error) {
			return awareness.Invoke(ctx, h.Table, awareness.OpDo, h.Principal, in)
		}
	}

	// One run per id: a repeat gets the kept result, a duplicate that
	// comes while it runs waits for it. Actions are kept by the runner.
	key := op + "\x00" + cmd.ID
	for {
		h.mu.Lock()
		if k, ok := h.kept[key]; ok && time.Since(k.at) < keep {
			h.mu.Unlock()
			var r Result
			json.Unmarshal(k.result, &r)
			r.Repeat = true
			return r
		}
		if wait, ok := h.running[key]; ok {
			h.mu.Unlock()
			<-wait
			continue
		}
		done := make(chan struct{})
		h.running[key] = done
		h.mu.Unlock()
		return h.runOnce(key, op, e, cmd.ID, call, done)
	}
}

// runOnce runs the command whose key is running, keeps its result, and
// lets those waiting for it go, whatever happens in the operation.
func (h *Handler) runOnce(key, op string, e *awareness.Entry, id string, call func(context.Context) (any, error), done chan struct{}) (res Result) {
	defer func() {
		h.mu.Lock()
		delete(h.running, key)
		// A refusal for want of room says try again: it is not kept.
		transient := res.Error != nil && res.Error.Reason == act.ReasonRateLimited
		if op != awareness.OpDo.Name && !transient && res.Status != "" {
			h.keepLocked(key, res)
		}
		h.mu.Unlock()
		close(done)
	}()
	return h.run(e, id, call)
}

func (h *Handler) run(e *awareness.Entry, id string, call func(context.Context) (any, error)) Result {
	select {
	case h.slots <- struct{}{}:
		defer func() { <-h.slots }()
	default:
		if !e.Stop { // the e-stop's trip is never refused for want of room
			return refused(id, e.Name, act.ReasonRateLimited, "%d commands are running; try again", MaxRunning)
		}
	}
	out, err := call(context.Background())
	if err != nil {
		// What the body recorded of what it refused (an action's record)
		// is the data beside the refusal.
		oe, rec := awareness.Unrecorded(err)
		return Result{ID: id, Op: e.Name, Status: "error", Data: rec, Error: oe}
	}
	return Result{ID: id, Op: e.Name, Status: "success", Data: out}
}

func (h *Handler) keepLocked(key string, res Result) {
	b, err := json.Marshal(res)
	if err != nil {
		return
	}
	if _, ok := h.kept[key]; !ok {
		h.order = append(h.order, key)
	}
	h.kept[key] = kept{b, time.Now()}
	for len(h.order) > maxKept || len(h.order) > 0 && time.Since(h.kept[h.order[0]].at) >= keep {
		delete(h.kept, h.order[0])
		h.order = h.order[1:]
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
