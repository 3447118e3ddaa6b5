package agent

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/ledger"
)

// updates is a client's notifications/resources/updated, as they come.
type updates chan *mcp.ResourceUpdatedNotificationParams

func (u updates) opts() *mcp.ClientOptions {
	return &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { u <- r.Params }}
}

// next waits for the next update of uri, skipping others.
func (u updates) next(t *testing.T, uri string) *mcp.ResourceUpdatedNotificationParams {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case p := <-u:
			if p.URI == uri {
				return p
			}
		case <-timeout:
			t.Fatalf("no notifications/resources/updated for %s within 10 s", uri)
		}
	}
}

func read(t *testing.T, cs *mcp.ClientSession, uri string, v any) {
	t.Helper()
	res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatalf("read %s: %v", uri, err)
	}
	if len(res.Contents) != 1 || res.Contents[0].MIMEType != "application/json" {
		t.Fatalf("read %s: %+v", uri, res.Contents)
	}
	if err := json.Unmarshal([]byte(res.Contents[0].Text), v); err != nil {
		t.Fatalf("read %s: %q: %v", uri, res.Contents[0].Text, err)
	}
}

// A generic MCP client, which knows nothing of notifications/tobe/*,
// reads the body's state as resources and hears when it changes: the
// e-stop's trip and reset, a channel going offline, an observation
// queued; it may subscribe only to what it is offered.
func TestResources(t *testing.T) {
	for _, v := range []string{"", "2025-11-25", "2025-06-18"} {
		name := v
		if v == "" {
			name = "newest"
		}
		t.Run(name, func(t *testing.T) { testResources(t, v) })
	}
}

func testResources(t *testing.T, version string) {
	uid, _ := me()
	g := newRig(t, []config.AgentPrincipal{{Name: "pi", Subject: "agent:pi", UID: &uid, Trust: "low"}}, time.Minute)
	u := make(updates, 64)
	cs := g.dialWith(t, "pi", u.opts(), version)
	ctx := context.Background()
	t.Logf("protocol %s", cs.InitializeResult().ProtocolVersion)

	list, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, r := range list.Resources {
		uris = append(uris, r.URI)
	}
	want := []string{"tobe://channels", "tobe://estop", "tobe://observations", "tobe://self", "tobe://status", "tobe://world"}
	if slices.Sort(uris); !slices.Equal(uris, want) {
		t.Errorf("resources %v, want %v", uris, want)
	}
	tmpls, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil || len(tmpls.ResourceTemplates) != 1 || tmpls.ResourceTemplates[0].URITemplate != ObservationsAfter {
		t.Errorf("templates %+v, %v", tmpls, err)
	}

	// Read as the tools read: the same operation, the session's principal.
	var es act.EStopStatus
	read(t, cs, "tobe://estop", &es)
	if es.Latched {
		t.Fatalf("latched at start: %+v", es)
	}
	var chans awareness.Channels
	read(t, cs, "tobe://channels", &chans)
	if len(chans.Channels) != 2 {
		t.Errorf("channels: %+v", chans)
	}

	// A subscription to what it is not offered is refused (at the newest
	// revision the listen stream is refused, which the SDK's client does
	// not wait for).
	err = cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "tobe://nothing"})
	if version != "" && (err == nil || !strings.Contains(err.Error(), `no resource "tobe://nothing" for agent:pi`)) {
		t.Errorf("subscribe to what is not offered: %v", err)
	}
	for _, uri := range []string{"tobe://estop", "tobe://channels", "tobe://observations"} {
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatalf("subscribe %s: %v", uri, err)
		}
	}
	waitSubscribed(t, g.hub, 1)
	g.waitWatching(t, "tobe://estop", "tobe://channels", "tobe://observations")

	// The e-stop trips: the client hears of it, with the record's seq,
	// and reads it latched.
	g.estop.TripNow("test")
	up := u.next(t, "tobe://estop")
	if seq, ok := up.Meta[SeqKey].(float64); !ok || seq < 1 {
		t.Errorf("update without the record's seq: %+v", up.Meta)
	}
	read(t, cs, "tobe://estop", &es)
	if !es.Latched {
		t.Errorf("after the trip: %+v", es)
	}

	// A channel goes offline.
	if err := g.reg.Set("gpio.led", body.Offline, "unplugged"); err != nil {
		t.Fatal(err)
	}
	u.next(t, "tobe://channels")
	read(t, cs, "tobe://channels", &chans)
	if i := slices.IndexFunc(chans.Channels, func(c body.Channel) bool { return c.ID == "gpio.led" }); i < 0 || chans.Channels[i].State != body.Offline {
		t.Errorf("after offline: %+v", chans)
	}

	// An observation is queued: heard of with its seq, read without being
	// taken (drain still has it).
	// One this principal may not see (sensitive, at low trust) is neither
	// heard of nor read.
	g.hub.Publish(awareness.Observation{ID: "o0", Content: "a face", Seq: 41, Trust: ledger.Low, Attention: ledger.High, Privacy: ledger.Sensitive})
	g.hub.Publish(awareness.Observation{ID: "o1", Content: "motion", Seq: 42, Trust: ledger.Low, Attention: ledger.Low, Privacy: ledger.Internal})
	if up := u.next(t, ObservationsURI); up.Meta[SeqKey] != float64(42) {
		t.Errorf("observation update: %+v", up.Meta)
	}
	var d Drained
	read(t, cs, ObservationsURI, &d)
	if len(d.Observations) != 1 || d.Observations[0].ID != "o1" {
		t.Errorf("observations: %+v", d)
	}
	if c, _ := call(t, cs, "drain", map[string]any{}); len(c.Data.(map[string]any)["observations"].([]any)) != 1 {
		t.Errorf("drain after the read: %+v", c)
	}

	// Without a record of what was told, reading after a seq says why.
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "tobe://observations?after=0"}); err == nil || !strings.Contains(err.Error(), "keeps no record") {
		t.Errorf("replay without records: %v", err)
	}
}

// waitWatching waits until a session has subscribed to every uri.
func (g *rig) waitWatching(t *testing.T, uris ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		g.srv.mu.Lock()
		for _, w := range g.srv.watchers {
			w.mu.Lock()
			all := true
			for _, u := range uris {
				all = all && w.subs[u]
			}
			w.mu.Unlock()
			if all {
				g.srv.mu.Unlock()
				return
			}
		}
		g.srv.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no session subscribed to %v", uris)
}
