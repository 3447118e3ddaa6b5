package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/tobe-body/tobe-body/act"
)

// The grant methods record who granted and revoked as the local
// administrator the admin socket's peer credentials name (adminSubject).

// grantAddParams are the params of "grant.add". Expires is parsed by the
// daemon, on its clock: "" or never, a duration (24h, 30d) or an RFC 3339
// time.
type grantAddParams struct {
	Subject    string `json:"subject"`
	Capability string `json:"capability"`
	Scope      string `json:"scope"`
	Expires    string `json:"expires,omitempty"`
	Reason     string `json:"reason,omitempty"`
}

type grantListParams struct {
	All bool `json:"all,omitempty"` // expired and revoked grants too
}

type grantRevokeParams struct {
	ID     string `json:"id"`
	Reason string `json:"reason,omitempty"`
}

// grantView is a grant as the admin socket shows it. State is active,
// expired or revoked, as of the answer.
type grantView struct {
	ID           string    `json:"id"`
	Subject      string    `json:"subject"`
	Capability   string    `json:"capability"`
	Scope        string    `json:"scope"`
	Expires      time.Time `json:"expires,omitzero"`
	State        string    `json:"state"`
	Added        time.Time `json:"added"`
	By           string    `json:"by"`
	Reason       string    `json:"reason,omitempty"`
	RevokedAt    time.Time `json:"revoked_at,omitzero"`
	RevokedBy    string    `json:"revoked_by,omitempty"`
	RevokeReason string    `json:"revoke_reason,omitempty"`
}

func viewGrant(g act.Grant, now time.Time) grantView {
	v := grantView{ID: g.ID, Subject: g.Subject, Capability: g.Capability, Scope: g.Scope, Expires: g.Expires, State: "active",
		Added: g.Added, By: g.By, Reason: g.Reason, RevokedAt: g.RevokedAt, RevokedBy: g.RevokedBy, RevokeReason: g.RevokeReason}
	switch {
	case g.Revoked:
		v.State = "revoked"
	case g.ExpiredAt(now):
		v.State = "expired"
	}
	return v
}

// errNoGrants answers the grant methods when there is no grant store.
var errNoGrants = errors.New("grants are not available: the ledger is not open or its grants could not be read (see the body's log)")

// grantMethods are the admin socket's grant calls. g is nil when the
// ledger is not open; every call then answers with errNoGrants.
func grantMethods(g *act.Grants) map[string]method {
	return map[string]method{
		"grant.add": func(ctx context.Context, raw json.RawMessage) (any, error) {
			var p grantAddParams
			if err := decodeParams(raw, &p); err != nil {
				return nil, err
			}
			if g == nil {
				return nil, errNoGrants
			}
			now := time.Now()
			exp, err := act.ParseExpiry(p.Expires, now)
			if err != nil {
				return nil, fmt.Errorf("%w: expires: %v", act.ErrInvalidGrant, err)
			}
			gr, err := g.Add(ctx, act.Grant{Subject: p.Subject, Capability: p.Capability, Scope: p.Scope, Expires: exp, By: adminSubject(ctx), Reason: p.Reason})
			if err != nil {
				return nil, err
			}
			return viewGrant(gr, now), nil
		},
		"grant.list": func(_ context.Context, raw json.RawMessage) (any, error) {
			var p grantListParams
			if err := decodeParams(raw, &p); err != nil {
				return nil, err
			}
			if g == nil {
				return nil, errNoGrants
			}
			now := time.Now()
			list := g.Active(now)
			if p.All {
				list = g.All()
			}
			views := []grantView{}
			for _, gr := range list {
				views = append(views, viewGrant(gr, now))
			}
			return views, nil
		},
		"grant.revoke": func(ctx context.Context, raw json.RawMessage) (any, error) {
			var p grantRevokeParams
			if err := decodeParams(raw, &p); err != nil {
				return nil, err
			}
			if g == nil {
				return nil, errNoGrants
			}
			gr, err := g.Revoke(ctx, p.ID, adminSubject(ctx), p.Reason)
			if err != nil {
				return nil, err
			}
			return viewGrant(gr, time.Now()), nil
		},
	}
}

// decodeParams reads params strictly: an unknown key is an error naming
// it. No params read as {}.
func decodeParams(raw json.RawMessage, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("params: %w", err)
	}
	if dec.More() {
		return errors.New("params: more than one object")
	}
	return nil
}
