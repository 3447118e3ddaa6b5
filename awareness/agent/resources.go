package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/ledger"
)

// The session's own resources besides the table's.
const (
	// ObservationsURI is the observations queued for this session (what
	// drain would take), read without taking them; it changes whenever
	// one is queued.
	ObservationsURI = "tobe://observations"
	// ObservationsAfter reads what the body told its agents after a
	// ledger sequence (tobe://observations?after=SEQ), from the ledger:
	// an agent that was away, or a body that restarted, loses none.
	ObservationsAfter = "tobe://observations{?after}"
)

// Keys of the body's own in an MCP _meta.
const (
	// SeqKey, in notifications/resources/updated, is the ledger sequence
	// of what changed the resource (of the newest observation, for
	// ObservationsURI); absent when no event did (a channel's health).
	SeqKey = "tobe/seq"
	// AfterKey, in resources/subscribe's or subscriptions/listen's _meta
	// with ObservationsURI, is the sequence of the last observation the
	// agent has: when the body told of any after it, the session is told
	// at once that ObservationsURI changed, so that it reads them
	// (ObservationsAfter) and misses nothing while it was away.
	AfterKey = "tobe/after_seq"
)

// replayLimit is how many observations one read of ObservationsAfter
// gives at most; more says there are others after its next.
const replayLimit = 100

// Replayed is what a read of ObservationsAfter answers: the observations
// after the sequence asked for, oldest first, and the sequence to ask
// after next; More says there may be more after it.
type Replayed struct {
	Observations []awareness.Observation `json:"observations"`
	Next         uint64                  `json:"next"`
	More         bool                    `json:"more,omitempty"`
}

// Replay reads what was told after a sequence, up to limit observations
// (the gate's wakes in the observer's words), for the hub's sessions.
type Replay func(after uint64, limit int, fn func(awareness.Observation)) (next uint64, more bool, err error)

// watcher is one session's share of the resources: which it subscribed
// to, and which changed since it was last told, coalesced, so that a
// client slow to read never holds up what changes them.
type watcher struct {
	srv *mcp.Server

	mu    sync.Mutex
	subs  map[string]bool
	dirty map[string]uint64
	// resume is the sequence a subscription asked to resume after, until
	// the subscription is acknowledged.
	resume *uint64
	wake   chan struct{}
}

func newWatcher(srv *mcp.Server) *watcher {
	return &watcher{srv: srv, subs: map[string]bool{}, dirty: map[string]uint64{}, wake: make(chan struct{}, 1)}
}

// touch marks uri changed, by the event at seq (0: none), when the
// session subscribed to it.
func (w *watcher) touch(uri string, seq uint64) {
	w.mu.Lock()
	if !w.subs[uri] {
		w.mu.Unlock()
		return
	}
	if seq >= w.dirty[uri] {
		w.dirty[uri] = seq
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// run tells the session of what changed until ctx ends.
func (w *watcher) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		}
		w.mu.Lock()
		dirty := w.dirty
		w.dirty = map[string]uint64{}
		w.mu.Unlock()
		for uri, seq := range dirty {
			p := &mcp.ResourceUpdatedNotificationParams{URI: uri}
			if seq > 0 {
				p.Meta = mcp.Meta{SeqKey: seq}
			}
			w.srv.ResourceUpdated(ctx, p)
		}
	}
}

// resources gives a session's server the table's resources for its
// principal, its observations, and subscriptions to them.
type resources struct {
	s       *Server
	p       act.Principal
	sub     *subscriber // nil without a hub
	offered map[string]bool
	w       *watcher
}

// serverOptions are the MCP options a session's resources need:
// subscriptions, checked against what the session is offered.
func (r *resources) serverOptions(o *mcp.ServerOptions) {
	o.Capabilities.Resources = &mcp.ResourceCapabilities{Subscribe: true}
	o.SubscribeHandler = func(ctx context.Context, req *mcp.SubscribeRequest) error {
		uri := req.Params.URI
		if !r.offered[uri] {
			return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("no resource %q for %s (resources/list says which)", uri, r.p.Subject)}
		}
		after, resume, err := afterOf(req.Params.Meta)
		if err != nil {
			return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
		}
		r.w.mu.Lock()
		r.w.subs[uri] = true
		if resume && uri == ObservationsURI {
			r.w.resume = &after
		}
		r.w.mu.Unlock()
		return nil
	}
	o.UnsubscribeHandler = func(ctx context.Context, req *mcp.UnsubscribeRequest) error {
		r.w.mu.Lock()
		delete(r.w.subs, req.Params.URI)
		r.w.mu.Unlock()
		return nil
	}
}

// afterOf reads AfterKey from a _meta: a whole number, or its absence.
func afterOf(m mcp.Meta) (after uint64, ok bool, err error) {
	v, ok := m[AfterKey]
	if !ok {
		return 0, false, nil
	}
	switch n := v.(type) {
	case float64:
		if n >= 0 && n == float64(uint64(n)) {
			return uint64(n), true, nil
		}
	case json.Number:
		if u, err := strconv.ParseUint(string(n), 10, 64); err == nil {
			return u, true, nil
		}
	case string:
		if u, err := strconv.ParseUint(n, 10, 64); err == nil {
			return u, true, nil
		}
	}
	return 0, false, fmt.Errorf("_meta.%s: %v: want the sequence of the last observation you have, a whole number", AfterKey, v)
}

// install gives srv the resources, and resumes a subscription that asks
// to (AfterKey) once it is acknowledged: after the listen stream's
// notifications/subscriptions/acknowledged, or resources/subscribe's
// answer.
func (r *resources) install(srv *mcp.Server) {
	r.w = newWatcher(srv)
	r.add(srv)
	srv.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if method == "notifications/subscriptions/acknowledged" {
				r.acknowledged()
			}
			return res, err
		}
	})
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if method == "resources/subscribe" && err == nil {
				r.acknowledged()
			}
			return res, err
		}
	})
}

// add gives srv the resources.
func (r *resources) add(srv *mcp.Server) {
	r.offered = map[string]bool{}
	for _, e := range r.s.Table.Resources(r.p) {
		uri := e.Resource.URI
		r.offered[uri] = true
		srv.AddResource(&mcp.Resource{URI: uri, Name: e.Tool.Name, Title: e.Name, Description: e.Description + " (The tool " + e.Tool.Name + " reads the same.)", MIMEType: "application/json"},
			func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				out, err := e.Call(ctx, r.p, nil)
				if err != nil {
					oe := awareness.ErrorOf(err)
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: string(oe.Reason) + ": " + oe.Detail}
				}
				return jsonContents(uri, out)
			})
	}
	if r.sub == nil {
		return
	}
	r.offered[ObservationsURI] = true
	srv.AddResource(&mcp.Resource{URI: ObservationsURI, Name: "observations", Title: "observations",
		Description: "The observations of the body queued for this session since its last drain, oldest first, left queued: subscribe to hear when one is queued. " +
			"After a reconnect, read " + ObservationsAfter + " with the seq of the last observation you have, or subscribe with _meta {\"" + AfterKey + "\": seq}.",
		MIMEType: "application/json"},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return jsonContents(ObservationsURI, r.sub.peek())
		})
	srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: ObservationsAfter, Name: "observations-after", Title: "observations after a sequence",
		Description: fmt.Sprintf("What the body told its agents after ledger sequence after, from the ledger (at most %d a read, oldest first; more: read again after next): what an agent that was away missed.", replayLimit),
		MIMEType:    "application/json"},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			after, err := afterParam(req.Params.URI)
			if err != nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
			}
			rep, err := r.replay(after)
			if err != nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "unavailable: " + err.Error()}
			}
			return jsonContents(req.Params.URI, rep)
		})
	r.sub.mu.Lock()
	r.sub.queued = func(seq uint64) { r.w.touch(ObservationsURI, seq) }
	r.sub.mu.Unlock()
}

// acknowledged resumes a subscription to the observations that asked to
// (AfterKey), once the client has its acknowledgement: when something was
// told after its sequence, the session hears at once that they changed.
func (r *resources) acknowledged() {
	r.w.mu.Lock()
	after := r.w.resume
	r.w.resume = nil
	r.w.mu.Unlock()
	if after == nil || r.sub == nil {
		return
	}
	rep, err := r.replay(*after)
	if err != nil || len(rep.Observations) == 0 {
		return
	}
	r.w.touch(ObservationsURI, rep.Observations[len(rep.Observations)-1].Seq)
}

// replay reads what was told after a sequence that this session's
// principal may see.
func (r *resources) replay(after uint64) (Replayed, error) {
	rep := Replayed{Observations: []awareness.Observation{}, Next: after}
	if r.s.Hub == nil || r.s.Hub.Replay == nil {
		return rep, fmt.Errorf("this body keeps no record of what it told (no ledger, or the gate runs without its state)")
	}
	next, more, err := r.s.Hub.Replay(after, replayLimit, func(o awareness.Observation) {
		if awareness.MaySee(r.p, o.Privacy) {
			rep.Observations = append(rep.Observations, o)
		}
	})
	rep.Next, rep.More = next, more
	return rep, err
}

// afterParam reads the after of an ObservationsAfter URI.
func afterParam(uri string) (uint64, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return 0, fmt.Errorf("%s: %v", uri, err)
	}
	a := u.Query().Get("after")
	if a == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(a, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: after=%q: want a ledger sequence, a whole number", uri, a)
	}
	return n, nil
}

// jsonContents is v as a resource's JSON text.
func jsonContents(uri string, v any) (*mcp.ReadResourceResult, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the resource could not be encoded: " + err.Error()}
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(b)}}}, nil
}

// follow tells the sessions of what changes the table's resources, until
// ctx ends: the events the ledger commits, and the channels' changes.
func (s *Server) follow(ctx context.Context) {
	var types []string
	byType := map[string][]string{} // a type or prefix → the URIs it changes
	var channels []string
	for _, e := range s.Table.Entries() {
		r := e.Resource
		if r.URI == "" {
			continue
		}
		for _, t := range r.Changes {
			if byType[t] == nil {
				types = append(types, t)
			}
			byType[t] = append(byType[t], r.URI)
		}
		if r.Channels {
			channels = append(channels, r.URI)
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	if s.Registry != nil && len(channels) > 0 {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-s.Registry.Changed():
				}
				for _, uri := range channels {
					s.touch(uri, 0)
				}
			}
		})
	}
	if s.Store == nil || len(types) == 0 {
		return
	}
	st, err := s.Store.Stats()
	if err != nil {
		s.Log.Error("agent resources: the ledger cannot be read, so no resource is said to change", "err", err)
		return
	}
	err = s.Store.Follow(ctx, ledger.Filter{After: st.LastSeq, Types: types}, func(e ledger.Stored) error {
		for t, uris := range byType {
			if ledger.MatchType(t, e.Type) {
				for _, uri := range uris {
					s.touch(uri, e.Seq)
				}
			}
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		s.Log.Error("agent resources: following the ledger stopped", "err", err)
	}
}

// touch tells every session subscribed to uri that it changed.
func (s *Server) touch(uri string, seq uint64) {
	s.mu.Lock()
	ws := slices.Collect(maps.Values(s.watchers))
	s.mu.Unlock()
	for _, w := range ws {
		w.touch(uri, seq)
	}
}
