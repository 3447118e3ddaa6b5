package act

import (
	"context"
	"fmt"
	"sync"
	"unicode/utf8"

	"github.com/tobe-body/tobe-body/ledger"
)

// Notify is body.notify: an event for the home server and the agent
// (body.notified), carrying a short message and an attention level. It is
// verified by reading the event back from the ledger.
type Notify struct {
	store *ledger.Store

	mu   sync.Mutex
	seqs map[string]uint64 // action id -> the sequence its event got
}

// NewNotify writes notifications to store.
func NewNotify(store *ledger.Store) *Notify { return &Notify{store: store, seqs: map[string]uint64{}} }

// maxMessage bounds a notification's text, in bytes.
const maxMessage = 1024

// Notification is the payload of body.notified.
type Notification struct {
	Message   string `cbor:"message" json:"message"`
	Attention string `cbor:"attention" json:"attention"`
	ActionID  string `cbor:"action_id" json:"action_id"`
	By        string `cbor:"by" json:"by"`
}

var attentions = map[string]bool{"low": true, "medium": true, "high": true}

func (n *Notify) Capability() Capability {
	return Capability{Name: "body.notify", Risk: R1, Reversible: false, Verify: "the event read back from the ledger"}
}

// Channel checks the request: target "home" (the home server and the
// agent alike read the ledger's events), a message and an attention.
func (n *Notify) Channel(target string, params map[string]string) (string, error) {
	if target != "home" {
		return "", fmt.Errorf(`target %q: body.notify's target is "home"`, target)
	}
	msg := params["message"]
	switch {
	case msg == "":
		return "", fmt.Errorf("params.message is empty")
	case len(msg) > maxMessage:
		return "", fmt.Errorf("params.message is %d bytes, more than %d", len(msg), maxMessage)
	case !utf8.ValidString(msg):
		return "", fmt.Errorf("params.message is not UTF-8")
	}
	if a := params["attention"]; a != "" && !attentions[a] {
		// max is the e-stop's alone.
		return "", fmt.Errorf(`params.attention %q: want "low", "medium" or "high"`, a)
	}
	return "body.notify", nil
}

func (n *Notify) Do(ctx context.Context, inv *Invocation) (string, error) {
	att := inv.Params["attention"]
	if att == "" {
		att = "medium"
	}
	p, err := ledger.MarshalPayload(Notification{Message: inv.Params["message"], Attention: att, ActionID: inv.ActionID, By: inv.Principal.Subject})
	if err != nil {
		return "", err
	}
	res, err := n.store.Append(ctx, ledger.Event{Type: "body.notified", ChannelID: "body.notify", Provenance: ledger.Told,
		Trust: inv.Principal.Trust, Privacy: ledger.Internal, DedupeKey: "notify:" + inv.ActionID, Payload: p})
	if err != nil {
		return "", err
	}
	n.mu.Lock()
	n.seqs[inv.ActionID] = res[0].Seq
	n.mu.Unlock()
	return fmt.Sprintf("body.notified recorded as event %d, for the home server and the agent", res[0].Seq), nil
}

// Verify reads the notification back from the ledger by its sequence.
func (n *Notify) Verify(ctx context.Context, inv *Invocation) Verification {
	n.mu.Lock()
	seq, ok := n.seqs[inv.ActionID]
	delete(n.seqs, inv.ActionID)
	n.mu.Unlock()
	if !ok {
		return Verification{Result: "failed", Evidence: "no body.notified event was written for this action"}
	}
	evs, err := n.store.Events(ledger.Filter{After: seq - 1, Limit: 1})
	if err != nil {
		return Verification{Result: "unknown", Evidence: "the ledger could not be read: " + err.Error()}
	}
	var p Notification
	if len(evs) == 1 && evs[0].Seq == seq && evs[0].Type == "body.notified" && ledger.UnmarshalPayload(evs[0].Payload, &p) == nil && p.ActionID == inv.ActionID {
		return Verification{Result: "verified", Evidence: fmt.Sprintf("body.notified read back as event %d", seq)}
	}
	return Verification{Result: "failed", Evidence: fmt.Sprintf("event %d in the ledger is not this action's notification", seq)}
}
