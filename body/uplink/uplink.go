// Package uplink relays the ledger's outbox to the home server's MQTT
// broker (MQTT 3.1.1, QoS 1) and owns the connection.
//
// The outbox is the record of what must leave the device; the MQTT
// client's store is only a transport buffer, made new for every session.
// A row is removed only once the broker's PUBACK for that very packet has
// been read in the current session: the relay sees it in the client's
// store, where paho deletes a publish when its PUBACK arrives, not in the
// publish's token, which can also complete when a connection was lost.
// Anything not acknowledged when a session ends is sent again, from the
// outbox, in the next one, so the broker gets every event at least once
// and a consumer that deduplicates by event_id gets each exactly once.
//
// A session sends the urgent rows first (the e-stop, a person's
// takeover, degradation: ledger.ClassSafety), then the backlog in order,
// with at most Window publishes unacknowledged; each event type's order
// holds, since all events of a type are urgent or none. PUBACKs gather
// and their rows are removed in one commit every AckCommit.
//
// The relay reconnects itself, with exponential backoff and full jitter
// (a fleet that lost its broker must not come back in lockstep): paho's
// own reconnect is off, and so is its connect retry. The status topic
// carries a retained "online" while connected, the Last Will "offline"
// when the connection is lost, and an explicit "offline" on a clean
// stop.
package uplink

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/tobe-body/tobe-body/ledger"
)

// Outbox is what the relay reads of the ledger and removes from it;
// *ledger.Store is one.
type Outbox interface {
	OutboxNext(after uint64, n int) ([]ledger.OutboxItem, error)
	OutboxUrgent(after uint64, n int) ([]ledger.OutboxItem, uint64, error)
	OutboxAck(seqs ...uint64) error
	Changed() <-chan struct{}
}

// Options configure a relay. Broker, AgentID and BodyID are required.
type Options struct {
	// Broker is the broker's URL: tcp://host:port, or ssl:// with TLS.
	Broker   string
	ClientID string // empty: the body id
	Username string
	Password string
	TLS      *tls.Config
	// Keepalive is the MQTT keep-alive (default 30 s); the broker sends
	// the Last Will within 1.5 times it of a silent loss.
	Keepalive time.Duration
	// Prefix starts every topic: Prefix/<agent_id>/<body_id>/... (default
	// "tobe").
	Prefix          string
	AgentID, BodyID string
	// Window is how many publishes may wait for their PUBACK at once
	// (default 64).
	Window int
	// AckCommit is how long PUBACKs gather before their rows are removed
	// in one commit (default 200 ms); a crash in between only sends those
	// events again.
	AckCommit time.Duration
	// ReconnectMin and ReconnectMax bound the backoff between sessions
	// (defaults 1 s and 2 min): each wait is drawn uniformly up to
	// ReconnectMin doubled for every failure in a row, at most
	// ReconnectMax.
	ReconnectMin, ReconnectMax time.Duration
	// WriteTimeout bounds a packet's write to the connection (default
	// 5 s). It is also how long a publish can hang when the connection
	// is lost under it (paho waits for its writer with no other way out),
	// so it is kept short: a link that cannot take a packet in that long
	// is reconnected.
	WriteTimeout time.Duration
	// Mirror says which event types are also published as JSON, on
	// .../events_json/<event_type>, for consumers that cannot read CBOR.
	Mirror func(eventType string) bool
	Log    *slog.Logger

	rand func(n int64) int64 // the jitter's draw in [0, n); tests set it
}

// Topics of a body.
func (o Options) base() string        { return o.Prefix + "/" + o.AgentID + "/" + o.BodyID }
func (o Options) StatusTopic() string { return o.base() + "/status" }

// EventTopic is where events of a type go, as CBOR.
func (o Options) EventTopic(eventType string) string { return o.base() + "/events/" + eventType }

// MirrorTopic is where events of a type go, as JSON, when mirrored.
func (o Options) MirrorTopic(eventType string) string { return o.base() + "/events_json/" + eventType }

// The status topic's values (retained).
const (
	Online  = "online"
	Offline = "offline"
)

// Status is the relay's state, for `status`.
type Status struct {
	Broker    string    `json:"broker"`
	Connected bool      `json:"connected"`
	Since     time.Time `json:"since,omitzero"`
	Sessions  uint64    `json:"sessions"`
	Published uint64    `json:"published"`
	Acked     uint64    `json:"acked"`
	LastError string    `json:"last_error,omitempty"`
}

// Relay relays one ledger's outbox to one broker.
type Relay struct {
	out  Outbox
	opts Options

	mu     sync.Mutex
	status Status

	// Retained documents (state, discovery) by topic, published in every
	// session and again when they change.
	docMu sync.Mutex
	docs  map[string][]byte
	dirty map[string]bool
	cur   *session // the session connected now, for Send
	// notRetained are the documents published without retain (discovery).
	notRetained map[string]bool
	announced   map[string]bool // the discovery documents Announce keeps
	wake        chan struct{}
	subs        []subscription

	// Acknowledged rows go to the acker, which removes them (its commit
	// may wait for company: ledger.GroupCommit) while the sessions go on;
	// until then they are removing, and no session sends them again.
	acking   []uint64        // under mu: acknowledged, for the acker to remove
	ackWake  chan struct{}   // capacity 1: there is acking
	removing map[uint64]bool // under mu

	running atomic.Bool // a Run is under way
}

type subscription struct {
	filter string
	fn     func(topic string, payload []byte)
	fresh  bool // retained messages are dropped
}

// New checks the options and fills in their defaults.
func New(out Outbox, opts Options) (*Relay, error) {
	switch {
	case opts.Broker == "":
		return nil, errors.New("uplink: no broker")
	case opts.AgentID == "" || opts.BodyID == "":
		return nil, errors.New("uplink: the topics need the agent id and the body id")
	}
	if opts.ClientID == "" {
		opts.ClientID = opts.BodyID
	}
	if opts.Keepalive <= 0 {
		opts.Keepalive = 30 * time.Second
	}
	if opts.Prefix == "" {
		opts.Prefix = "tobe"
	}
	if opts.Window <= 0 {
		opts.Window = 64
	}
	if opts.AckCommit <= 0 {
		opts.AckCommit = 200 * time.Millisecond
	}
	if opts.ReconnectMin <= 0 {
		opts.ReconnectMin = time.Second
	}
	if opts.ReconnectMax < opts.ReconnectMin {
		opts.ReconnectMax = max(opts.ReconnectMin, 2*time.Minute)
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 5 * time.Second
	}
	if opts.Mirror == nil {
		opts.Mirror = func(string) bool { return false }
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.rand == nil {
		opts.rand = rand.Int64N
	}
	return &Relay{out: out, opts: opts, status: Status{Broker: opts.Broker},
		docs: map[string][]byte{}, dirty: map[string]bool{}, notRetained: map[string]bool{}, wake: make(chan struct{}, 1),
		ackWake: make(chan struct{}, 1), removing: map[uint64]bool{}}, nil
}

// StateTopic is where a retained state document goes.
func (o Options) StateTopic(name string) string { return o.base() + "/state/" + name }

// Retain keeps payload as the retained message of topic: published now
// when connected, when it changes, and at the start of every session (a
// broker that restarted without persistence has lost it). An empty
// payload removes the topic's retained message once, and the topic.
func (r *Relay) Retain(topic string, payload []byte) {
	r.docMu.Lock()
	if old, ok := r.docs[topic]; ok && string(old) == string(payload) && len(payload) > 0 {
		r.docMu.Unlock()
		return
	}
	r.docs[topic] = payload
	r.dirty[topic] = true
	r.docMu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// SetState keeps doc, as JSON, retained on .../state/<name>.
func (r *Relay) SetState(name string, doc any) error {
	b, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("uplink: state %s: %w", name, err)
	}
	r.Retain(r.opts.StateTopic(name), b)
	return nil
}

// Send publishes payload on topic at QoS 1, not retained, in the session
// connected now, and waits up to 10 s for its PUBACK. With no session it
// fails at once: what must not be lost goes through the outbox instead.
func (r *Relay) Send(topic string, payload []byte) error {
	r.docMu.Lock()
	s := r.cur
	r.docMu.Unlock()
	if s == nil {
		return errors.New("uplink: not connected")
	}
	tok := s.publish(topic, payload, false, 0)
	if !tok.WaitTimeout(10 * time.Second) {
		return fmt.Errorf("uplink: %s: no PUBACK within 10 s", topic)
	}
	return tok.Error()
}

// Fire publishes payload on topic, not retained, without waiting for its
// PUBACK: what happens now, which is not worth telling later. An error
// says the relay is not connected.
func (r *Relay) Fire(topic string, payload []byte) error {
	r.docMu.Lock()
	s := r.cur
	r.docMu.Unlock()
	if s == nil {
		return errors.New("uplink: not connected")
	}
	s.publish(topic, payload, false, 0)
	return nil
}

// Redo marks every retained document for publishing again (Home
// Assistant asks for its discovery documents when it starts).
func (r *Relay) Redo(prefix string) {
	r.docMu.Lock()
	for t := range r.docs {
		if strings.HasPrefix(t, prefix) {
			r.dirty[t] = true
		}
	}
	r.docMu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Subscribe has every session subscribe to filter at QoS 1 and hand each
// message to fn, in a goroutine of its own (fn may block; the session's
// pings do not wait for it). Call it before Run.
func (r *Relay) Subscribe(filter string, fn func(topic string, payload []byte)) {
	r.subs = append(r.subs, subscription{filter: filter, fn: fn})
}

// SubscribeFresh is Subscribe for messages published from now on: a
// retained one, which would come again at every session (a command left
// retained on the broker), is dropped.
func (r *Relay) SubscribeFresh(filter string, fn func(topic string, payload []byte)) {
	r.subs = append(r.subs, subscription{filter: filter, fn: fn, fresh: true})
}

// publishDocs publishes the retained documents marked dirty (all of them
// with all), without waiting for their PUBACKs: a session that ends
// first publishes them all again in the next.
func (s *session) publishDocs(all bool) error {
	r := s.r
	r.docMu.Lock()
	type doc struct {
		topic    string
		payload  []byte
		retained bool
	}
	var docs []doc
	for t, p := range r.docs {
		// An emptied document is said once, whenever that is.
		if all && len(p) > 0 || r.dirty[t] {
			docs = append(docs, doc{t, p, !r.notRetained[t]})
		}
		delete(r.dirty, t)
		if len(p) == 0 {
			delete(r.docs, t) // removed: said once
			delete(r.notRetained, t)
		}
	}
	r.docMu.Unlock()
	// Discovery first: Home Assistant reads a state only for an entity
	// it knows.
	slices.SortStableFunc(docs, func(a, b doc) int {
		if a.retained != b.retained {
			if a.retained {
				return 1
			}
			return -1
		}
		return strings.Compare(a.topic, b.topic)
	})
	for _, d := range docs {
		if tok := s.publish(d.topic, d.payload, d.retained, 0); tok.Error() != nil {
			return fmt.Errorf("publish %s: %w", d.topic, tok.Error())
		}
	}
	return nil
}

// Options returns the relay's options, with their defaults.
func (r *Relay) Options() Options { return r.opts }

// Status returns the relay's state now.
func (r *Relay) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

func (r *Relay) note(fn func(*Status)) {
	r.mu.Lock()
	fn(&r.status)
	r.mu.Unlock()
}

// ErrRunning is Run's answer while another Run of the relay is under
// way: one relay is one connection.
var ErrRunning = errors.New("uplink: the relay is running already")

// Run connects, relays and reconnects until ctx ends; then it says
// offline, disconnects, and returns once the rows acknowledged are
// removed. A broker that is down is not an error: the outbox keeps what
// it holds until one answers. Run may be called again once it returned;
// while it runs, another Run returns ErrRunning at once.
func (r *Relay) Run(ctx context.Context) error {
	if !r.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer r.running.Store(false)
	acked, stop := make(chan struct{}), make(chan struct{})
	go r.acker(stop, acked)
	defer func() {
		close(stop) // the acker removes what it was given, then ends
		<-acked
	}()
	failures := 0
	for {
		up, err := r.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if up {
			failures = 0
		}
		failures++
		wait := backoff(r.opts.ReconnectMin, r.opts.ReconnectMax, failures, r.opts.rand)
		r.note(func(s *Status) { s.LastError = err.Error() })
		r.opts.Log.Warn("uplink: no connection to the broker", "broker", r.opts.Broker, "err", err, "retry_in", wait.Round(time.Millisecond))
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil
		}
	}
}

// acker removes acknowledged rows, as many at once as have come, until
// stop is closed (Run ends), and then what is left. Handing it rows never
// blocks a session: its commit may wait out the ledger's GroupCommit.
func (r *Relay) acker(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for {
		stopping := false
		select {
		case <-r.ackWake:
		case <-stop:
			stopping = true
		}
		r.mu.Lock()
		seqs := r.acking
		r.acking = nil
		r.mu.Unlock()
		if len(seqs) > 0 {
			err := r.out.OutboxAck(seqs...)
			r.mu.Lock()
			for _, seq := range seqs {
				delete(r.removing, seq)
			}
			if err == nil {
				r.status.Acked += uint64(len(seqs))
			}
			r.mu.Unlock()
			if err != nil {
				r.opts.Log.Warn("uplink: acknowledged rows stay in the outbox and go again in the next session", "rows", len(seqs), "err", err)
			}
		}
		if stopping {
			r.mu.Lock()
			left := len(r.acking)
			r.mu.Unlock()
			if left == 0 {
				return
			}
		}
	}
}

// delivered tells whether row seq was acknowledged and waits for its
// removal.
func (r *Relay) delivered(seq uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.removing[seq]
}

// minWait is the shortest wait between sessions, whatever the draw.
const minWait = 50 * time.Millisecond

// backoff is the wait after the n-th failure in a row (n ≥ 1): uniform
// in [0, min(hi, lo·2^(n-1))], and never under minWait ("full jitter").
func backoff(lo, hi time.Duration, n int, draw func(int64) int64) time.Duration {
	ceil := hi
	if n-1 < 62 && lo <= hi>>(n-1) {
		ceil = lo << (n - 1)
	}
	return max(time.Duration(draw(int64(ceil)+1)), minWait)
}

// session is one connection: it returns when the connection is lost or
// ctx ends, with up true if the broker accepted it.
func (r *Relay) session(ctx context.Context) (up bool, err error) {
	acks := newAckStore(2 * r.opts.Window)
	lost := make(chan error, 1)
	o := mqtt.NewClientOptions().
		AddBroker(r.opts.Broker).
		SetClientID(r.opts.ClientID).
		SetUsername(r.opts.Username).
		SetPassword(r.opts.Password).
		SetKeepAlive(r.opts.Keepalive).
		SetCleanSession(true). // the outbox, not the broker, keeps what is owed
		SetAutoReconnect(false).
		SetConnectRetry(false).
		SetOrderMatters(false).
		SetConnectTimeout(10*time.Second).
		SetWriteTimeout(r.opts.WriteTimeout).
		SetStore(acks).
		SetBinaryWill(r.opts.StatusTopic(), []byte(Offline), 1, true).
		SetConnectionLostHandler(func(_ mqtt.Client, err error) {
			select {
			case lost <- err:
			default:
			}
		})
	if r.opts.TLS != nil {
		o.SetTLSConfig(r.opts.TLS)
	}
	c := mqtt.NewClient(o)
	if err := wait(ctx, c.Connect()); err != nil {
		c.Disconnect(0)
		return false, fmt.Errorf("connect: %w", err)
	}
	r.note(func(s *Status) { s.Connected, s.Since, s.LastError = true, time.Now(), ""; s.Sessions++ })
	r.opts.Log.Info("uplink: connected", "broker", r.opts.Broker, "client_id", r.opts.ClientID)
	s := &session{r: r, c: c, acks: acks, need: map[uint64]int{}}
	defer func() {
		r.note(func(s *Status) { s.Connected = false })
		if ctx.Err() != nil {
			// A clean stop: say so, then leave (a disconnect sends no Will).
			s.say(Offline, time.Second)
			c.Disconnect(250)
		} else {
			c.Disconnect(0)
		}
	}()
	if err := s.say(Online, 10*time.Second); err != nil {
		return true, err
	}
	r.docMu.Lock()
	r.cur = s
	r.docMu.Unlock()
	defer func() {
		r.docMu.Lock()
		r.cur = nil
		r.docMu.Unlock()
	}()
	for _, sub := range r.subs {
		fn, fresh := sub.fn, sub.fresh
		tok := c.Subscribe(sub.filter, 1, func(_ mqtt.Client, m mqtt.Message) {
			if fresh && m.Retained() {
				return
			}
			fn(m.Topic(), m.Payload())
		})
		if !tok.WaitTimeout(10 * time.Second) {
			return true, fmt.Errorf("subscribe %s: no SUBACK within 10 s", sub.filter)
		}
		if err := tok.Error(); err != nil {
			return true, fmt.Errorf("subscribe %s: %w", sub.filter, err)
		}
	}
	if err := s.publishDocs(true); err != nil {
		return true, err
	}
	return true, s.relay(ctx, lost)
}

// wait waits for tok or ctx.
func wait(ctx context.Context, tok mqtt.Token) error {
	select {
	case <-tok.Done():
		return tok.Error()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// session is one connection's relaying state, owned by its goroutine.
type session struct {
	r    *Relay
	c    mqtt.Client
	acks *ackStore

	pubMu sync.Mutex // held around a publish: acks attributes it by store.Put

	inflight int            // publishes waiting for their PUBACK
	need     map[uint64]int // row → its publishes not yet acknowledged
	done     []uint64       // rows acknowledged, not yet removed
}

// say publishes the status, retained, and waits up to d for its PUBACK.
func (s *session) say(v string, d time.Duration) error {
	tok := s.publish(s.r.opts.StatusTopic(), []byte(v), true, 0)
	if !tok.WaitTimeout(d) {
		return fmt.Errorf("status %s: no PUBACK within %v", v, d)
	}
	return tok.Error()
}

// publish sends one QoS 1 message; seq, when not 0, is the outbox row
// its PUBACK acknowledges.
func (s *session) publish(topic string, payload []byte, retained bool, seq uint64) mqtt.Token {
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	s.acks.attribute(seq)
	defer s.acks.attribute(0)
	return s.c.Publish(topic, 1, retained, payload)
}

// send publishes a row (and its JSON mirror).
func (s *session) send(it ledger.OutboxItem) error {
	o := s.r.opts
	n := 1
	var mirror []byte
	if o.Mirror(it.Event.Type) {
		var err error
		if mirror, err = json.Marshal(ledger.Stored{Seq: it.Seq, Event: it.Event}.View()); err != nil {
			return fmt.Errorf("event %d as JSON: %w", it.Seq, err)
		}
		n = 2
	}
	s.need[it.Seq] = n
	s.inflight += n
	if tok := s.publish(o.EventTopic(it.Event.Type), it.Record, false, it.Seq); tok.Error() != nil {
		return fmt.Errorf("publish event %d: %w", it.Seq, tok.Error())
	}
	if mirror != nil {
		if tok := s.publish(o.MirrorTopic(it.Event.Type), mirror, false, it.Seq); tok.Error() != nil {
			return fmt.Errorf("publish event %d as JSON: %w", it.Seq, tok.Error())
		}
	}
	s.r.note(func(st *Status) { st.Published++ })
	return nil
}

// relay sends rows until the connection is lost or ctx ends.
func (s *session) relay(ctx context.Context, lost <-chan error) error {
	o := s.r.opts
	var cursor, tail uint64 // the backlog's last row sent; the urgent scan's last row seen
	commit := time.NewTimer(time.Hour)
	commit.Stop()
	defer commit.Stop()
	committing := false
	flush := func() {
		committing = false
		if len(s.done) == 0 {
			return
		}
		s.r.mu.Lock()
		s.r.acking = append(s.r.acking, s.done...)
		s.r.mu.Unlock()
		select {
		case s.r.ackWake <- struct{}{}:
		default:
		}
		s.done = s.done[:0]
	}
	defer flush()        // rows acknowledged before the end were delivered
	fresh := true        // rows may have been written that the urgent scan has not seen
	backlogDone := false // the backlog was read to its end, and nothing was written since
	for {
		changed := s.r.out.Changed()
		// The urgent rows first, then the backlog in order. The window is
		// filled again once half of it is free, in one read, not a read
		// per PUBACK.
		for fresh && s.inflight < o.Window {
			items, last, err := s.r.out.OutboxUrgent(tail, o.Window-s.inflight)
			if err != nil {
				return err
			}
			for _, it := range items {
				if _, inFlight := s.need[it.Seq]; inFlight || s.r.delivered(it.Seq) {
					continue
				}
				if err := s.send(it); err != nil {
					return err
				}
			}
			tail = last
			if len(items) == 0 {
				fresh = false
			}
		}
		for s.inflight < o.Window && !backlogDone {
			items, err := s.r.out.OutboxNext(cursor, o.Window-s.inflight)
			if err != nil {
				return err
			}
			if len(items) == 0 {
				backlogDone = true
				break
			}
			for _, it := range items {
				cursor = it.Seq
				if _, inFlight := s.need[it.Seq]; inFlight || s.r.delivered(it.Seq) {
					continue
				}
				if err := s.send(it); err != nil {
					return err
				}
			}
		}
		select {
		case seq := <-s.acks.ch:
			s.acked(seq)
			for more := true; more; {
				select {
				case seq := <-s.acks.ch:
					s.acked(seq)
				default:
					more = false
				}
			}
			if len(s.done) > 0 && !committing {
				committing = true
				commit.Reset(o.AckCommit)
			}
		case <-commit.C:
			flush()
		case <-changed:
			fresh, backlogDone = true, false
		case <-s.r.wake:
			if err := s.publishDocs(false); err != nil {
				return err
			}
		case err := <-lost:
			return fmt.Errorf("connection lost: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// acked counts one PUBACK of a row's publishes. A row whose publishes
// are all acknowledged is delivered at once: no scan of this session or
// the next sends it again, whether its removal is done or still to come.
func (s *session) acked(seq uint64) {
	s.inflight--
	if s.need[seq]--; s.need[seq] == 0 {
		delete(s.need, seq)
		s.done = append(s.done, seq)
		s.r.mu.Lock()
		s.r.removing[seq] = true
		s.r.mu.Unlock()
	}
}
