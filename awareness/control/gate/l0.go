// Package gate decides what of what the body senses is worth the agent's
// attention. L0 matches every event against the wait conditions through
// an index (by event type, then channel, then the matcher over the
// payload), never by looking at every condition; system events (the
// e-stop, a person's takeover, the body going offline or online, a
// channel revoked) match fixed rules that no condition is needed for.
// What matches nothing goes to the noise pool, a small sample per
// channel and class that expires.
package gate

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tobe-body/tobe-body/awareness/control/wait"
	"github.com/tobe-body/tobe-body/ledger"
)

// SystemTypes are the event types (or prefixes ending in a dot) that
// always match: the fixed rules of L0.
var SystemTypes = []string{"estop.", "lease.human_", "body.offline", "body.online", "channel.revoked", "body.degradation"}

// IsSystem tells whether an event type matches a fixed rule.
func IsSystem(typ string) bool {
	return slices.ContainsFunc(SystemTypes, func(s string) bool {
		if strings.HasSuffix(s, ".") || strings.HasSuffix(s, "_") {
			return strings.HasPrefix(typ, s)
		}
		return typ == s
	})
}

// Index finds the conditions an event matches. It is built from the
// conditions that wait (Build) and changed one at a time (Put, Delete);
// it is not safe for concurrent use: the gate owns it.
type Index struct {
	// slots by type selector (a type, or a prefix ending in a dot), then
	// by channel selector ("" for any channel).
	slots map[string]map[string]*slot
	conds map[string]*wait.Condition
	// routes are, by an event's type and channel, the slots it visits:
	// found once, through every selector of each, and kept until a
	// condition is put or deleted. Events come from few pairs (the
	// channels the registry holds and their types), so an event costs
	// one lookup however many slots there are; maxRoutes bounds it.
	routes map[route][]*slot
	// fields is Match's, kept from one event to the next.
	fields wait.Fields
}

// route is an event's type and channel.
type route struct{ typ, channel string }

// maxRoutes bounds the routes kept: past it they are found afresh.
const maxRoutes = 4096

// slot holds the conditions of one type selector and channel selector:
// those with a clause that names the values it wants (equals, in, zone
// names) by that field and value, the others to be looked at each.
type slot struct {
	scan    []*wait.Condition
	byValue []valueIndex // a slice, not a map: ranging over a map costs more than the few fields it holds
	n       int
}

// valueIndex files the conditions of a slot by the value of one field.
type valueIndex struct {
	field string
	conds map[any][]*wait.Condition
}

// values returns the slot's index of a field, made when make is true.
func (s *slot) values(field string, make bool) *valueIndex {
	for i := range s.byValue {
		if s.byValue[i].field == field {
			return &s.byValue[i]
		}
	}
	if !make {
		return nil
	}
	s.byValue = append(s.byValue, valueIndex{field: field, conds: map[any][]*wait.Condition{}})
	return &s.byValue[len(s.byValue)-1]
}

// keyOf is the clause of a condition the index files it under, by its
// field and the values it wants; ok is false when it has none.
func keyOf(c *wait.Condition) (field string, values []any, ok bool) {
	for _, cl := range c.Match {
		switch {
		case cl.Equals != nil:
			return cl.Field, []any{cl.Equals}, true
		case cl.In != nil:
			return cl.Field, cl.In, true
		case cl.Zone != nil && cl.Zone.Box == nil:
			f := cl.Field
			if f == "" {
				f = "zone"
			}
			vs := make([]any, len(cl.Zone.Names))
			for i, n := range cl.Zone.Names {
				vs[i] = n
			}
			return f, vs, true
		}
	}
	return "", nil, false
}

func (s *slot) add(c *wait.Condition) {
	s.n++
	field, values, ok := keyOf(c)
	if !ok {
		s.scan = append(s.scan, c)
		return
	}
	byV := s.values(field, true).conds
	for _, v := range values {
		if !slices.Contains(byV[v], c) {
			byV[v] = append(byV[v], c)
		}
	}
}

func (s *slot) remove(c *wait.Condition) {
	s.n--
	field, values, ok := keyOf(c)
	if !ok {
		s.scan = slices.DeleteFunc(s.scan, func(x *wait.Condition) bool { return x == c })
		return
	}
	byV := s.values(field, false).conds
	for _, v := range values {
		if list := slices.DeleteFunc(byV[v], func(x *wait.Condition) bool { return x == c }); len(list) == 0 {
			delete(byV, v)
		} else {
			byV[v] = list
		}
	}
	if len(byV) == 0 {
		s.byValue = slices.DeleteFunc(s.byValue, func(vi valueIndex) bool { return vi.field == field })
	}
}

// NewIndex makes an empty index.
func NewIndex() *Index {
	return &Index{slots: map[string]map[string]*slot{}, conds: map[string]*wait.Condition{}, routes: map[route][]*slot{}}
}

// Len is how many conditions the index holds.
func (ix *Index) Len() int { return len(ix.conds) }

// Get returns the condition of an id the index holds.
func (ix *Index) Get(id string) (*wait.Condition, bool) {
	c, ok := ix.conds[id]
	return c, ok
}

// Put adds a condition, or replaces the one of its id; a removed
// condition is deleted instead.
func (ix *Index) Put(c wait.Condition) {
	ix.Delete(c.ID)
	clear(ix.routes)
	if c.Removed != "" {
		return
	}
	p := &c
	ix.conds[c.ID] = p
	chans := c.Channels
	if len(chans) == 0 {
		chans = []string{""}
	}
	for _, t := range c.Types {
		byChan := ix.slots[t]
		if byChan == nil {
			byChan = map[string]*slot{}
			ix.slots[t] = byChan
		}
		for _, ch := range chans {
			sl := byChan[ch]
			if sl == nil {
				sl = &slot{}
				byChan[ch] = sl
			}
			sl.add(p)
		}
	}
}

// Delete removes a condition by its id.
func (ix *Index) Delete(id string) {
	old, ok := ix.conds[id]
	if !ok {
		return
	}
	delete(ix.conds, id)
	clear(ix.routes)
	chans := old.Channels
	if len(chans) == 0 {
		chans = []string{""}
	}
	for _, t := range old.Types {
		byChan := ix.slots[t]
		for _, ch := range chans {
			if sl := byChan[ch]; sl != nil {
				if sl.remove(old); sl.n == 0 {
					delete(byChan, ch)
				}
			}
		}
		if len(byChan) == 0 {
			delete(ix.slots, t)
		}
	}
}

// Build makes the index of the conditions that wait.
func Build(conds []wait.Condition) *Index {
	ix := NewIndex()
	for _, c := range conds {
		ix.Put(c)
	}
	return ix
}

// selectors calls fn with s, then each prefix of s that ends in a dot,
// longest first: the selectors that select s.
func selectors(s string, fn func(sel string)) {
	fn(s)
	for i := len(s) - 1; i > 0; i-- {
		if s[i-1] == '.' {
			fn(s[:i])
		}
	}
}

// Match appends to out the conditions that the event matches at now
// (Unix milliseconds): they were added before the ledger took it (by its
// sequence), want
// its type and channel, have not expired, and every clause holds for its
// payload, whose fields are read only as the clauses ask for them; a
// condition filed by a value is looked at only when the event's field
// has that value. Each condition is appended once.
func (ix *Index) Match(e *ledger.Stored, now int64, out []*wait.Condition) []*wait.Condition {
	slots := ix.route(e.Type, e.ChannelID)
	if len(slots) == 0 {
		return out
	}
	fields := &ix.fields
	fields.Reset(e.Payload)
	first := len(out)
	try := func(list []*wait.Condition) {
		for _, c := range list {
			if c.ExpiresAt <= now || c.Since >= e.Seq || slices.Contains(out[first:], c) {
				continue
			}
			if c.Holds(fields) {
				out = append(out, c)
			}
		}
	}
	for _, sl := range slots {
		try(sl.scan)
		for i := range sl.byValue {
			vi := &sl.byValue[i]
			v, ok := fields.Get(vi.field)
			if !ok {
				continue
			}
			if k, ok := wait.Key(v); ok {
				try(vi.conds[k])
			}
		}
	}
	return out
}

// route returns the slots an event of a type and channel visits: those
// of each selector of its type and, in each, of any channel and of each
// selector of its channel.
func (ix *Index) route(typ, channel string) []*slot {
	k := route{typ, channel}
	if slots, ok := ix.routes[k]; ok {
		return slots
	}
	var slots []*slot
	selectors(typ, func(ts string) {
		byChan := ix.slots[ts]
		if byChan == nil {
			return
		}
		if sl := byChan[""]; sl != nil {
			slots = append(slots, sl)
		}
		if channel != "" {
			selectors(channel, func(cs string) {
				if sl := byChan[cs]; sl != nil {
					slots = append(slots, sl)
				}
			})
		}
	})
	if len(ix.routes) >= maxRoutes {
		clear(ix.routes)
	}
	ix.routes[k] = slots
	return slots
}

// Sample is an event kept by the noise pool.
type Sample struct {
	Seq     uint64    `json:"seq"`
	EventID string    `json:"event_id"`
	Type    string    `json:"type"`
	At      time.Time `json:"at"`
}

// Pool is the noise pool: of the events that matched nothing, it keeps
// the last Per of each channel and class, for TTL (by the monotonic
// clock of when they were added), and counts the rest. It is safe for
// concurrent use.
type Pool struct {
	Per int
	TTL time.Duration
	// MaxKeys bounds the channels and classes kept (the registry bounds
	// the channels; this is the backstop).
	MaxKeys int

	mu      sync.Mutex
	samples map[poolKey][]Sample
	seen    map[poolKey]uint64
}

type poolKey struct{ Channel, Class string }

// Add keeps an unmatched event of a class, seen at at.
func (p *Pool) Add(s *ledger.Stored, class string, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.samples == nil {
		p.samples, p.seen = map[poolKey][]Sample{}, map[poolKey]uint64{}
	}
	k := poolKey{s.ChannelID, class}
	list, ok := p.samples[k]
	if !ok && p.MaxKeys > 0 && len(p.samples) >= p.MaxKeys {
		return
	}
	p.seen[k]++
	list = append(list, Sample{Seq: s.Seq, EventID: s.ID.String(), Type: s.Type, At: at})
	if n := max(p.Per, 1); len(list) > n {
		list = slices.Delete(list, 0, len(list)-n)
	}
	p.samples[k] = list
}

// Find returns the sample of an event id, when the pool still has it.
func (p *Pool) Find(id string, now time.Time) (Sample, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, list := range p.samples {
		for _, s := range list {
			if s.EventID == id && now.Sub(s.At) < p.TTL {
				return s, true
			}
		}
	}
	return Sample{}, false
}

// Expire drops the samples older than TTL at now.
func (p *Pool) Expire(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, list := range p.samples {
		list = slices.DeleteFunc(list, func(s Sample) bool { return now.Sub(s.At) >= p.TTL })
		if len(list) == 0 {
			delete(p.samples, k)
		} else {
			p.samples[k] = list
		}
	}
}

// Counts returns how many unmatched events each channel and class had.
func (p *Pool) Counts() map[string]uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]uint64, len(p.seen))
	for k, n := range p.seen {
		out[k.Channel+" "+k.Class] = n
	}
	return out
}
