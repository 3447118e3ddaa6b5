package awareness

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/sense"
)

// The privacy operations: whether the body's cameras and microphones are
// let go, and pausing them. Anyone may ask; a local administrator or an
// agent may pause (more privacy is never refused for trust); only a
// local administrator resumes, and nothing overrides the hardware
// switch.
var (
	OpPrivacyStatus = Op[None, sense.PrivacyState]{Name: "privacy.status", Kind: Observe, Least: Anyone,
		Tool:        Tool{Name: "privacy_status", ReadOnly: true, Idempotent: true},
		Description: "Whether the body's cameras and microphones are paused (closed, not read), and why: the hardware privacy switch, and the pauses asked for."}
	OpPrivacyPause = Op[PrivacyPauseIn, sense.PrivacyState]{Name: "privacy.pause", Kind: Interact, Least: AdminOrAgent,
		Tool:        Tool{Name: "privacy_pause", Idempotent: true},
		Description: "Pause every camera and microphone (closed, not read, nothing captured) for a time, or until a local administrator resumes them. An agent may pause but never resume; a second pause of the same caller replaces its first."}
	OpPrivacyResume = Op[None, sense.PrivacyState]{Name: "privacy.resume", Kind: Admin, Least: AnyAdmin,
		Description: "End every pause (a local administrator's alone). The hardware switch still pauses while it is on: nothing overrides it."}
)

// PrivacyPauseIn is a pause: how long (a duration: 30m, 2h; empty:
// until a local administrator resumes) and why.
type PrivacyPauseIn struct {
	For    string `json:"for,omitempty" jsonschema:"how long (30m, 2h, at most 168h); empty: until a local administrator resumes"`
	Reason string `json:"reason,omitempty" jsonschema:"why, for the record"`
}

var errNoPrivacy = refuse(ReasonUnavailable, "the privacy state is not available")

func (b *Parts) privacyStatus(context.Context, act.Principal, None) (sense.PrivacyState, error) {
	if b.Privacy == nil {
		return sense.PrivacyState{}, errNoPrivacy
	}
	return b.Privacy.State(), nil
}

func (b *Parts) privacyPause(ctx context.Context, p act.Principal, in PrivacyPauseIn) (sense.PrivacyState, error) {
	if b.Privacy == nil {
		return sense.PrivacyState{}, errNoPrivacy
	}
	var d time.Duration
	if in.For != "" {
		var err error
		if d, err = time.ParseDuration(in.For); err != nil || d <= 0 {
			return sense.PrivacyState{}, refuse(ReasonInvalidParams, "for %q: want a duration (30m, 2h), or nothing for until resumed", in.For)
		}
	}
	kind := "agent"
	if p.Kind == act.LocalAdmin {
		kind = "admin"
	}
	st, err := b.Privacy.Pause(ctx, p.Subject, kind, cleanText(in.Reason, 256), d)
	if errors.Is(err, sense.ErrPauseInvalid) {
		return st, refuse(ReasonInvalidParams, "%v", err)
	}
	return st, err
}

func (b *Parts) privacyResume(ctx context.Context, p act.Principal, _ None) (sense.PrivacyState, error) {
	if b.Privacy == nil {
		return sense.PrivacyState{}, errNoPrivacy
	}
	st, err := b.Privacy.Resume(ctx, p.Subject, p.Kind == act.LocalAdmin)
	if errors.Is(err, sense.ErrNotLocal) {
		return st, refuse(ReasonNotAuthorized, "%v", err)
	}
	if err != nil {
		return st, fmt.Errorf("privacy: %w", err)
	}
	return st, nil
}
