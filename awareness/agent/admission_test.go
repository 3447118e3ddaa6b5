package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/edge/edgetest"
	"github.com/tobe-body/tobe-body/body/config"
)

// dialAs connects to the socket as a peer of uid (as edgetest.Cred reads
// it) and returns an MCP client session over it (the official SDK's).
func (g *rig) dialAs(t *testing.T, uid int) *mcp.ClientSession {
	t.Helper()
	c, err := edgetest.Dial(g.sock, uid)
	if err != nil {
		t.Fatal(err)
	}
	cl := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := cl.Connect(context.Background(), &mcp.IOTransport{Reader: c, Writer: c}, nil)
	if err != nil {
		c.Close()
		t.Fatalf("connect as uid %d: %v", uid, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// holds waits until uid holds places places of the socket's.
func (g *rig) holds(t *testing.T, uid, places int) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if n, _ := g.srv.edge().Holds(uid); n == places {
			return
		} else if time.Now().After(end) {
			t.Fatalf("uid %d holds %d places, want %d", uid, n, places)
		}
	}
}

func tools(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	l, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range l.Tools {
		names = append(names, tl.Name)
	}
	return names
}

// One edge, on the agent socket: one uid holds every place it may take,
// another every place left below high trust; a high-trust agent still
// gets a kept place and is served, and an agent without a place (over its
// uid's caps) still trips the e-stop, in a brief session whose other
// calls are refused busy naming the limit.
func TestAHighAgentAndATripGetInWhenThePlacesAreTaken(t *testing.T) {
	const low1, low2, high = 3001, 3002, 3003
	u1, u2, u3 := low1, low2, high
	g := newRigWith(t, []config.AgentPrincipal{
		{Name: "a", Subject: "agent:a", UID: &u1, Trust: "low"},
		{Name: "b", Subject: "agent:b", UID: &u2, Trust: "low"},
		{Name: "h", Subject: "agent:h", UID: &u3, Trust: "high"},
	}, time.Minute, func(s *Server) {
		s.cred = edgetest.Cred
		s.Rules.groupsOf = func(int) []int { return nil }
	})
	// uid 3001 takes all it may (4), uid 3002 the rest below high trust.
	for range MaxConnsPerUID {
		cs := g.dialAs(t, low1)
		if c, _ := call(t, cs, "body_status", map[string]any{}); c.Status != "success" {
			t.Fatalf("uid %d on a place: %+v", low1, c)
		}
	}
	for range MaxConns - KeptForHigh - MaxConnsPerUID {
		g.dialAs(t, low2)
	}
	g.holds(t, low1, MaxConnsPerUID)
	g.holds(t, low2, MaxConns-KeptForHigh-MaxConnsPerUID)

	// Past their caps, both get brief sessions: only estop_trip, and
	// every other call refused busy, naming the limit.
	for _, tc := range []struct {
		uid  int
		want string
	}{
		{low1, "4 connections of uid 3001 already open (at most 4 at low trust)"},
		{low2, "6 connections already open (the last 2 of 8 are kept for high trust)"},
	} {
		cs := g.dialAs(t, tc.uid)
		if got := tools(t, cs); len(got) != 1 || got[0] != "estop_trip" {
			t.Errorf("uid %d without a place has tools %q, want estop_trip only", tc.uid, got)
		}
		c, _ := call(t, cs, "body_status", map[string]any{})
		if c.Status != "error" || c.Error.Reason != awareness.ReasonBusy || !strings.Contains(c.Error.Detail, tc.want) {
			t.Errorf("uid %d without a place: body_status answered %+v, want busy: %s", tc.uid, c.Error, tc.want)
		}
		cs.Close()
	}

	// The high-trust agent gets a kept place, and works.
	hs := g.dialAs(t, high)
	g.holds(t, high, 1)
	if c, _ := call(t, hs, "estop_status", map[string]any{}); c.Status != "success" {
		t.Errorf("the high agent: estop_status %+v", c)
	}
	if got := tools(t, hs); len(got) < 2 {
		t.Errorf("the high agent has tools %q, want all of its session's", got)
	}
	if n, _ := g.srv.edge().Holds(low1); n != MaxConnsPerUID {
		t.Errorf("uid %d holds %d places, want %d still", low1, n, MaxConnsPerUID)
	}

	// An agent over its uid's caps trips the e-stop.
	if g.estop.Latched() {
		t.Fatal("latched before the trip")
	}
	cs := g.dialAs(t, low1)
	c, _ := call(t, cs, "estop_trip", map[string]any{})
	if c.Status != "success" || !g.estop.Latched() {
		t.Errorf("estop_trip without a place: %+v, latched %v", c, g.estop.Latched())
	}
	if n, brief := g.srv.edge().Holds(low1); n != MaxConnsPerUID || brief != 1 {
		t.Errorf("uid %d holds %d places and %d brief, want %d and 1", low1, n, brief, MaxConnsPerUID)
	}
}
