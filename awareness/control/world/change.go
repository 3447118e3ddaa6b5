package world

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"

	"github.com/tobe-body/tobe-body/ledger"
)

// src names a source of an entity.
type src struct{ entity, source string }

// current is a source's record as a change sees it: stored at seq, or
// written by this change (seq 0).
type current struct {
	seq uint64
	rec Record
}

// mark is the last seen mark of a channel: stored at seq, or written by
// this change (seq 0, after every stored record).
type mark struct {
	seq uint64
	s   Seen
}

// marked is a seen mark a change made (of a source of entity), emitted
// in out[at].
type marked struct {
	entity string
	prov   ledger.Provenance
	at     int
	s      Seen
}

// cache is what a Deriver keeps of the projection between events: the
// sources' current records, the channels' last marks and the entities'
// last changes, as of the Model's generation gen and the ledger's count
// of lost derivations. Anything else that writes the model (a told
// assertion, the keeper) moves the generation on, a derivation the
// ledger refused or rolled back moves the count, and the next derivation
// starts the cache afresh.
type cache struct {
	gen, lost uint64
	cur       map[src]*current
	marks     map[string]*mark
	last      map[string]*Changed
	// held lists by entity the sources the projection holds a current
	// record of, as first read; a change adds its own (sourcesOf).
	held map[string][]string
	// sighted holds by channel its last sighting since its last mark,
	// while the records it confirmed hold: what the next mark of any
	// channel marks too (see observe).
	sighted map[string]*sighting
	// calm says, by channel, that an event of a type and input (what
	// the model reads of it: nothing of a sound level summary, the most
	// common event a body records; the zones of a camera summary, see
	// calmInput) that only held what its sources hold changes nothing
	// before a running time, as long as nothing of the channel was
	// written since: the Deriver does not derive it again until then.
	calm map[string]*calm
}

// calm is what a cache knows of a channel's calm.
type calm struct {
	// epoch moves on with every derivation that began or ended a record
	// of one of the channel's sources, or marked the channel: all that
	// a calm event of it reads.
	epoch uint64
	// ok: an event of typ and input held what the channel's sources
	// hold at epoch at, and changes nothing before untilMS.
	ok      bool
	at      uint64
	typ     string
	input   []byte
	untilMS int64
	// sighting is the channel's in sighted (nil: none), which stays
	// while the epoch does: a sighting is made or forgotten only by a
	// derivation, and forgotten when the channel is marked or one of
	// its sources has a new record, which move the epoch on.
	sighting *sighting
}

// holds tells whether an event of typ, whose calm input is in, holds
// what the channel's sources hold at the running time run.
func (q *calm) holds(typ string, in []byte, run int64) bool {
	return q != nil && q.ok && q.at == q.epoch && q.typ == typ && run < q.untilMS && bytes.Equal(q.input, in)
}

// calmOf is a channel's calm, made when it has none.
func (ca *cache) calmOf(channel string) *calm {
	q := ca.calm[channel]
	if q == nil {
		q = &calm{}
		ca.calm[channel] = q
	}
	return q
}

// sighting is a sighting of a channel that confirmed its records, by
// the event at seq (id, of type typ), of a source of entity.
type sighting struct {
	entity  string
	at, run int64
	seq     uint64
	id      ledger.UUID
	typ     string
	prov    ledger.Provenance
}

func newCache(gen, lost uint64) *cache {
	return &cache{gen: gen, lost: lost, cur: map[src]*current{}, marks: map[string]*mark{}, last: map[string]*Changed{}, held: map[string][]string{},
		sighted: map[string]*sighting{}, calm: map[string]*calm{}}
}

// sight notes that the change's event saw channel, confirming what a
// source of entity holds, before its mark was due.
func (c *change) sight(channel, entity string, prov ledger.Provenance) {
	if c.cache == nil || c.cause == nil {
		return
	}
	p := c.cache.sighted[channel]
	if p == nil {
		p = &sighting{}
		c.cache.sighted[channel] = p
	}
	*p = sighting{entity: entity, at: c.base.OccurredAt, run: c.run, seq: c.causeSeq, id: c.cause.ID, typ: c.cause.Type, prov: prov}
}

// unsight forgets a channel's sighting: a new record of it began, and
// what was seen before was the record before. (An end leaves it: marks
// after a record's end are not that record's.)
func (c *change) unsight(channel string) {
	if c.cache != nil && channel != "" {
		delete(c.cache.sighted, channel)
	}
}

// step is what a change makes of one entity: new records of its sources
// and ends of old ones.
type step struct {
	recs  []Record
	ended []Ended
	// at is the valid time of the latest of them.
	at int64
}

// change decides the events of one step of the model (a sensed event, a
// told assertion, the keeper's round) from the projection as a
// transaction sees it, and keeps what it writes in view for its own next
// decisions: the events it appends are applied only after it returns.
type change struct {
	kv    ledger.ReadKV
	model *Model
	run   int64 // the running clock, ms
	// base stamps the events: time, clock, causation.
	base ledger.Event
	out  []ledger.Event
	// cur and marks are what this change wrote, over cache (nil: none)
	// over kv.
	cur   map[src]*current // a source of an entity -> its record; nil: none
	marks map[string]*mark
	cache *cache
	// steps are the touched entities' steps, in the order touched.
	steps   map[string]*step
	touched []string
	// ents and helds are settle's, by touched entity: kept from change
	// to change.
	ents  []Entity
	helds [][]*current
	// changed are the changes this change recorded, marked the seen
	// marks (at their index in out).
	changed []Changed
	marked  []marked
	// cause is the event the change follows, at causeSeq (nil: a told
	// assertion or the keeper's round, which rest on no event).
	cause    *ledger.Event
	causeSeq uint64
	// stamped: base has the cause's clock.
	stamped bool
	// unsettled: an observation did more than confirm a record before
	// its seen mark was due; else calmUntil is the running time (ms)
	// when the first of those marks is due.
	unsettled bool
	calmUntil int64
	// arena is where the payloads of out are written: a Deriver's is
	// kept from change to change (see ledger.Deriver: the ledger is done
	// with a derivation's events before the next), up to maxArena.
	arena []byte
}

const maxArena = 1 << 20

// evidence is the event the change follows as evidence, or nil.
func (c *change) evidence() *Evidence {
	if c.cause == nil {
		return nil
	}
	return &Evidence{Seq: c.causeSeq, ID: c.cause.ID.String(), Type: c.cause.Type}
}

func newChange(kv ledger.ReadKV, m *Model, runMS int64, base ledger.Event, c *cache) *change {
	ch := &change{}
	ch.reset(kv, m, runMS, base, c)
	return ch
}

// reset makes c a new change, keeping what it allocated (a Deriver's,
// from event to event).
func (c *change) reset(kv ledger.ReadKV, m *Model, runMS int64, base ledger.Event, ca *cache) {
	cur, marks, steps := c.cur, c.marks, c.steps
	clear(cur)
	clear(marks)
	clear(steps)
	if ca == nil {
		if cur == nil {
			cur = map[src]*current{}
		}
		if marks == nil {
			marks = map[string]*mark{}
		}
	}
	*c = change{kv: kv, model: m, run: runMS, base: base, cache: ca, calmUntil: math.MaxInt64,
		cur: cur, marks: marks, steps: steps, touched: c.touched[:0], changed: c.changed[:0], marked: c.marked[:0],
		ents: c.ents[:0], helds: c.helds[:0], out: c.out[:0], arena: c.arena[:0]}
	if cap(c.arena) > maxArena {
		c.arena = nil
	}
}

// wrote keeps what this change wrote of a source (nil: its record ended).
func (c *change) wrote(k src, cu *current) {
	if c.cur == nil {
		c.cur = map[src]*current{}
	}
	c.cur[k] = cu
}

// current returns a source's record, or nil.
func (c *change) current(entity, source string) *current {
	k := src{entity, source}
	if cu, ok := c.cur[k]; ok {
		return cu
	}
	if c.cache != nil {
		if cu, ok := c.cache.cur[k]; ok {
			return cu
		}
	}
	cu := currentOf(c.kv, entity, source)
	if c.cache != nil {
		c.cache.cur[k] = cu
	} else {
		c.cur[k] = cu
	}
	return cu
}

// currentOf reads a source's record that holds (its last entry, when
// that is a record), or nil.
func currentOf(kv ledger.ReadKV, entity, source string) *current {
	x, ok := entryOf(kv.Get(lastKey(entity, source)))
	if !ok || x.end {
		return nil
	}
	rec, why, err := readEntry(kv, entity, source, x)
	if err != nil || why != "" {
		return nil
	}
	return &current{seq: x.seq, rec: rec}
}

// lastChangeOf reads an entity's last recorded change (ok false, and a
// value of unknown, when none).
func lastChangeOf(kv ledger.ReadKV, entity string) (last Changed, ok bool, err error) {
	last = Changed{Value: Unknown}
	t := kv.Get(entityKey(entity))
	if t == nil {
		return last, false, nil
	}
	at, seq := tail(t)
	b := kv.Get(historyKey(entity, at, seq))
	if b == nil {
		return Changed{}, false, fmt.Errorf("world: %s: the last state at %d is missing", entity, seq)
	}
	if err := ledger.UnmarshalPayload(b, &last); err != nil {
		return Changed{}, false, fmt.Errorf("world: %s: the last state: %w", entity, err)
	}
	return last, true, nil
}

// lastMark returns a channel's last seen mark, or nil.
func (c *change) lastMark(channel string) *mark {
	if m, ok := c.marks[channel]; ok {
		return m
	}
	if c.cache != nil {
		if m, ok := c.cache.marks[channel]; ok {
			return m
		}
	}
	var m *mark
	if s, seq, ok := markAt(c.kv, channel, 0, math.MaxUint64); ok {
		m = &mark{seq: seq, s: s}
	}
	if c.cache != nil {
		c.cache.marks[channel] = m
	} else {
		c.marks[channel] = m
	}
	return m
}

// seen is when a record was last seen: its own time, or its channel's
// last mark after it.
func (c *change) seen(cu *current) (runMS, at int64) {
	runMS, at = cu.rec.RunMS, cu.rec.ValidFrom
	if cu.rec.Channel == "" || cu.seq == 0 || cu.rec.ExpireMS <= 0 {
		return runMS, at // never marked: only what expires is (observe)
	}
	if m := c.lastMark(cu.rec.Channel); m != nil && (m.seq == 0 || m.seq > cu.seq) {
		// The latest sighting, whatever the wall clock said of it.
		runMS, at = max(runMS, m.s.RunMS), m.s.At
	}
	return runMS, at
}

// expired tells whether a record is past its expiry at the running time
// of the change.
func (c *change) expired(cu *current) bool {
	if cu.rec.ExpireMS <= 0 {
		return false
	}
	run, _ := c.seen(cu)
	return c.run-run > cu.rec.ExpireMS
}

// emit appends an event of the model, its payload as encoded: what
// the arena holds from at on.
func (c *change) emit(typ, entity string, prov ledger.Provenance, at int) {
	p := c.arena[at:len(c.arena):len(c.arena)]
	if e := c.cause; e != nil && !c.stamped {
		c.base.MonotonicNS, c.base.ClockDomain, c.base.ClockUncertaintyMS, c.base.ClockUnsynced = e.MonotonicNS, e.ClockDomain, e.ClockUncertaintyMS, e.ClockUnsynced
		c.base.CausationID, c.base.CorrelationID, c.base.Trust = e.ID, e.CorrelationID, ledger.Medium
		c.stamped = true
	}
	e := c.base // the ledger gives it its id
	e.Type, e.ChannelID, e.Payload, e.Provenance = typ, entity, p, prov
	if ent, ok := c.model.Entity(entity); ok {
		e.Privacy = ent.Privacy
	} else if e.Privacy == 0 {
		e.Privacy = ledger.Sensitive
	}
	c.out = append(c.out, e)
}

// stepOf is an entity's step in this change, touched now.
func (c *change) stepOf(entity string, at int64) *step {
	st := c.steps[entity]
	if st == nil {
		if c.steps == nil {
			c.steps = map[string]*step{}
		}
		st = &step{at: at}
		c.steps[entity] = st
		c.touched = append(c.touched, entity)
	}
	st.at = max(st.at, at)
	return st
}

// end ends a source's record for reason at valid time at (never before
// the record began).
func (c *change) end(cu *current, reason string, at int64, ev *Evidence) error {
	_, seenAt := c.seen(cu)
	at = max(at, cu.rec.ValidFrom)
	st := c.stepOf(cu.rec.Entity, at)
	st.ended = append(st.ended, Ended{Entity: cu.rec.Entity, Source: cu.rec.Source, Record: cu.seq, Reason: reason, At: at, LastSeen: seenAt, Evidence: ev})
	c.wrote(src{cu.rec.Entity, cu.rec.Source}, nil)
	return nil
}

// endIfExpired ends a record past its expiry, at the last time it was
// seen plus its expiry, or at before if that is earlier: the valid time
// of the source's next record, which an end must not come after (after
// the wall clock stepped back, valid times run slower than the running
// clock that expires).
func (c *change) endIfExpired(cu *current, before int64) (bool, error) {
	if cu == nil || !c.expired(cu) {
		return false, nil
	}
	// Its channel seen since, and not marked yet: the sightings are
	// marked now, and it is judged by them.
	if p := c.sighting(cu.rec.Channel); p != nil && p.seq > cu.seq {
		c.markSightings()
		if !c.expired(cu) {
			return false, nil
		}
	}
	_, at := c.seen(cu)
	if at <= math.MaxInt64-cu.rec.ExpireMS*1e6 {
		at += cu.rec.ExpireMS * 1e6
	}
	return true, c.end(cu, EndNotSeen, min(at, before), nil)
}

// markAfter is how long after a record was last marked seen its
// channel's next sighting is marked again: three quarters of its
// expiry. Until then a sighting is kept in memory (sight), marked with
// the next mark of any channel, or by the keeper before the marks would
// let the record expire (Keeper.Round), so a state expires its expiry
// after it was last seen; only what a power cut took from memory
// expires sooner, as soon as a quarter of its expiry after.
func markAfter(expireMS int64) int64 { return expireMS / 4 * 3 }

// observe applies what a source observed of an entity: a new record when
// the value changed (or none was held), a seen mark of its channel when
// it only confirms the record and the last mark is older than markAfter.
func (c *change) observe(ent Entity, o *observation) error {
	calm := false
	defer func() { c.unsettled = c.unsettled || !calm }()
	cu := c.current(ent.ID, o.source)
	if ended, err := c.endIfExpired(cu, c.base.OccurredAt); err != nil {
		return err
	} else if ended {
		cu = nil
	}
	if o.end != "" {
		if cu == nil {
			return nil
		}
		return c.end(cu, o.end, c.base.OccurredAt, c.evidence())
	}
	value := o.valueFor(ent.Kind)
	if cu != nil && o.channel != "" && cu.rec.Channel == o.channel && (o.confirm || same(cu.rec, value, o.readings)) {
		if cu.rec.ExpireMS <= 0 {
			calm = true
			return nil
		}
		if m := c.lastMark(o.channel); m != nil && m.seq == 0 {
			return nil // marked by this change already
		}
		run, _ := c.seen(cu)
		if due := run + markAfter(cu.rec.ExpireMS); c.run < due {
			calm, c.calmUntil = true, min(c.calmUntil, due)
			c.sight(o.channel, ent.ID, o.prov)
			return nil
		}
		// Due: a mark of this channel, and of every channel seen since
		// its own last mark (each at its last sighting), so a body's
		// channels are marked together, not each in a commit of its own.
		c.mark(Seen{Channel: o.channel, At: c.base.OccurredAt, RunMS: c.run, Evidence: *c.evidence()}, ent.ID, o.prov)
		c.markSightings()
		return nil
	}
	if value == "" && o.readings == nil {
		return nil // nothing this kind can hold
	}
	var evs []Evidence
	if ev := c.evidence(); ev != nil {
		evs = []Evidence{*ev}
	}
	r := Record{Entity: ent.ID, Source: o.source, Channel: o.channel, Value: value, Readings: o.readings, Confidence: o.conf,
		Provenance: o.prov.String(), Evidence: evs, ValidFrom: c.base.OccurredAt, ExpireMS: msOf(ent.ExpireAfter), RunMS: c.run, By: o.by}
	if e := c.cause; e != nil {
		// The valid time is the evidence's, as sure as its clock was.
		r.UncertaintyMS, r.Unsynced = e.ClockUncertaintyMS, e.ClockUnsynced
	}
	if o.expireMS > 0 {
		r.ExpireMS = o.expireMS
	}
	if cu != nil {
		r.Supersedes = cu.seq
	}
	c.unsight(o.channel)
	st := c.stepOf(ent.ID, r.ValidFrom)
	st.recs = append(st.recs, r)
	c.wrote(src{ent.ID, o.source}, &current{rec: r})
	return nil
}

// mark makes a seen mark of a channel (a source of entity's), which
// settle records with the change's others in one event.
func (c *change) mark(s Seen, entity string, prov ledger.Provenance) {
	if c.marks == nil {
		c.marks = map[string]*mark{}
	}
	m := &mark{s: s}
	c.marks[s.Channel] = m
	c.marked = append(c.marked, marked{entity: entity, prov: prov, s: s})
}

// sighting is a channel's sighting since its last mark, kept in memory,
// or nil.
func (c *change) sighting(channel string) *sighting {
	if c.cache == nil || channel == "" {
		return nil
	}
	return c.cache.sighted[channel]
}

// markSightings marks every channel seen since its last mark and not
// marked by this change yet, each at its last sighting, and forgets the
// sightings.
func (c *change) markSightings() {
	if c.cache == nil {
		return
	}
	for _, ch := range slices.Sorted(maps.Keys(c.cache.sighted)) {
		p := c.cache.sighted[ch]
		if m := c.lastMark(ch); m != nil && m.seq == 0 {
			continue
		}
		c.mark(p.seen(ch), p.entity, p.prov)
	}
	clear(c.cache.sighted)
}

// seen is the seen mark of a sighting of channel.
func (p *sighting) seen(channel string) Seen {
	return Seen{Channel: channel, At: p.at, RunMS: p.run, Evidence: Evidence{Seq: p.seq, ID: p.id.String(), Type: p.typ}}
}

// emitMarks records the change's seen marks, if any, in one world.seen
// (of the first mark's entity, and as private as the most private of
// theirs).
func (c *change) emitMarks() {
	if len(c.marked) == 0 {
		return
	}
	ms := Marks{Seen: make([]Seen, len(c.marked))}
	priv := ledger.Privacy(0)
	for i, m := range c.marked {
		ms.Seen[i] = m.s
		if ent, ok := c.model.Entity(m.entity); ok {
			priv = max(priv, ent.Privacy)
		}
	}
	at := len(c.arena)
	c.arena = appendMarks(c.arena, &ms)
	c.emit(EventSeen, c.marked[0].entity, c.marked[0].prov, at)
	e := &c.out[len(c.out)-1]
	e.Privacy = max(e.Privacy, priv)
	for i := range c.marked {
		c.marked[i].at = len(c.out) - 1
	}
}

// same tells whether a record says value (or readings within the
// uncertainty of its own).
func same(r Record, value string, readings map[string]Reading) bool {
	if readings == nil || r.Readings == nil {
		return readings == nil && r.Readings == nil && r.Value == value
	}
	if len(readings) != len(r.Readings) {
		return false
	}
	for q, now := range readings {
		was, ok := r.Readings[q]
		if !ok || math.Abs(now.Value-was.Value) > max(was.Uncertainty, now.Uncertainty) {
			return false
		}
	}
	return true
}

// sourcesOf lists an entity's source ids: those of the model, and those
// of the records the projection holds for it (told assertions).
func (c *change) sourcesOf(ent Entity) []string {
	var out []string
	for _, s := range ent.Sources {
		out = append(out, s.ID())
	}
	held, ok := []string(nil), false
	if c.cache != nil {
		held, ok = c.cache.held[ent.ID]
	}
	if !ok {
		prefix := lastPrefix(ent.ID)
		ledger.Range(c.kv, prefix, nil, false, func(k, v []byte) bool {
			if x, ok := entryOf(v); ok && !x.end {
				held = append(held, string(k[len(prefix):]))
			}
			return true
		})
		if c.cache != nil {
			c.cache.held[ent.ID] = held
		}
	}
	for _, s := range held {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for k, cu := range c.cur {
		if e, s := k.entity, k.source; e == ent.ID && cu != nil && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

func cutNUL(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// settle records each touched entity's step: a world.changed when its
// fused state is not the one last recorded (after ending its sources'
// records that expired), else a world.observed.
func (c *change) settle() error {
	// First what holds of each touched entity's sources (which may mark
	// what was seen), then the marks, then the steps.
	for i, id := range c.touched {
		ent, ok := c.model.Entity(id)
		if !ok {
			ent = Entity{ID: id, Kind: kindOfID(id), Privacy: ledger.Sensitive}
		}
		c.ents = append(c.ents, ent)
		if i < cap(c.helds) {
			c.helds = c.helds[:i+1]
			c.helds[i] = c.helds[i][:0]
		} else {
			c.helds = append(c.helds, nil)
		}
		for _, s := range c.sourcesOf(ent) {
			cu := c.current(ent.ID, s)
			if ended, err := c.endIfExpired(cu, math.MaxInt64); err != nil {
				return err
			} else if cu != nil && !ended {
				c.helds[i] = append(c.helds[i], cu)
			}
		}
	}
	c.emitMarks()
	for i, ent := range c.ents {
		held := c.helds[i]
		step := c.steps[ent.ID]
		st := fuse(ent, held)
		last, err := c.lastChange(ent.ID)
		if err != nil {
			return err
		}
		if st.Value == last.Value && st.Conflict == last.Conflict && st.Provenance == last.Provenance && st.Observed == last.Observed &&
			slices.Equal(st.Sources, last.Sources) && sameReadings(st.Readings, last.Readings) {
			if len(step.recs)+len(step.ended) == 0 {
				continue
			}
			at := len(c.arena)
			c.arena = appendStep(c.arena, &Step{Entity: ent.ID, Records: step.recs, Ended: step.ended})
			c.emit(EventObserved, ent.ID, ledger.Inferred, at)
			continue
		}
		st.At, st.Since, st.SinceRunMS, st.Was = step.at, step.at, c.run, last.Value
		if st.Value == last.Value {
			st.Since, st.SinceRunMS, st.Was = last.Since, last.SinceRunMS, last.Was
		}
		st.Records, st.Ended = step.recs, step.ended
		at := len(c.arena)
		c.arena = appendChanged(c.arena, &st)
		c.emit(EventChanged, ent.ID, provenanceOf(st.Provenance), at)
		st.Records, st.Ended = nil, nil
		c.changed = append(c.changed, st)
	}
	return nil
}

// lastChange is an entity's last recorded change (a value of unknown
// when none).
func (c *change) lastChange(entity string) (Changed, error) {
	if c.cache != nil {
		if ch, ok := c.cache.last[entity]; ok {
			return *ch, nil
		}
	}
	last, _, err := lastChangeOf(c.kv, entity)
	if err != nil {
		return Changed{}, err
	}
	if c.cache != nil {
		c.cache.last[entity] = &last
	}
	return last, nil
}

// keep moves what this change wrote into the cache, its derived events
// having taken the sequences after first, in order.
func (c *change) keep(first uint64) {
	if c.cache == nil || len(c.out) == 0 {
		return
	}
	seqOf := func(entity string) uint64 { // the seq of its step's event
		for i, e := range c.out {
			if e.Type != EventSeen && e.ChannelID == entity {
				return first + uint64(i)
			}
		}
		return 0
	}
	for _, m := range c.marked {
		c.cache.marks[m.s.Channel] = &mark{seq: first + uint64(m.at), s: m.s}
		c.cache.calmOf(m.s.Channel).epoch++
	}
	for k, cu := range c.cur {
		entity, source := k.entity, k.source
		if old := c.cache.cur[k]; old != nil {
			c.cache.calmOf(old.rec.Channel).epoch++ // what it held ended or was superseded
		}
		if cu != nil {
			c.cache.calmOf(cu.rec.Channel).epoch++
		}
		if cu != nil && cu.seq == 0 {
			cu = &current{seq: seqOf(entity), rec: cu.rec}
		}
		c.cache.cur[k] = cu
		if held, ok := c.cache.held[entity]; ok && cu != nil && !slices.Contains(held, source) {
			c.cache.held[entity] = append(held, source)
		}
	}
	for i := range c.changed {
		ch := c.changed[i]
		c.cache.last[ch.Entity] = &ch
	}
}

func sameReadings(a, b map[string]Reading) bool {
	if len(a) != len(b) {
		return false
	}
	for q, r := range a {
		if o, ok := b[q]; !ok || o != r {
			return false
		}
	}
	return true
}

func provenanceOf(s string) ledger.Provenance {
	for _, p := range []ledger.Provenance{ledger.Observed, ledger.Told, ledger.Inferred, ledger.Verified} {
		if p.String() == s {
			return p
		}
	}
	return ledger.Inferred
}

// kindOfID is the kind an entity id's prefix says (an entity the model
// no longer has, whose told records remain).
func kindOfID(id string) Kind {
	for _, k := range Kinds() {
		if len(id) > len(k.prefix()) && id[:len(k.prefix())+1] == k.prefix()+"." {
			return k
		}
	}
	if id == "body" {
		return Self
	}
	return Door
}

// fuse is an entity's state from its sources' records that hold:
//   - a room is active when any source says so, quiet when the others
//     are quiet, unknown with none (a person may be still before a
//     camera and talking to its microphone: not a conflict);
//   - the air is its latest record's readings, in conflict when two
//     sources differ by more than their uncertainties;
//   - anything else is the value its sources agree on; when they do not
//     (both are kept), the value with the strongest provenance
//     (verified, observed, told), the latest on a tie, in conflict, at
//     half the confidence and of inferred provenance.
//
// The confidence is the highest of the records that say the value, the
// provenance theirs (the strongest of them). A told value is never more
// than told: only a source of its own makes it observed or verified.
func fuse(ent Entity, held []*current) Changed {
	st := Changed{Entity: ent.ID, Kind: ent.Kind, Value: Unknown}
	if len(held) == 0 {
		return st
	}
	if ent.Kind == Air {
		latest := held[0]
		for _, cu := range held[1:] {
			if cu.rec.ValidFrom > latest.rec.ValidFrom {
				latest = cu
			}
		}
		st.Value, st.Readings = "measured", latest.rec.Readings
		support(&st, []*current{latest})
		for _, cu := range held {
			if cu != latest && !same(latest.rec, "", cu.rec.Readings) {
				st.Conflict = true
			}
		}
	} else {
		by := map[string][]*current{}
		var values []string
		for _, cu := range held {
			if by[cu.rec.Value] == nil {
				values = append(values, cu.rec.Value)
			}
			by[cu.rec.Value] = append(by[cu.rec.Value], cu)
		}
		var pick string
		switch {
		case ent.Kind == Room && by["active"] != nil:
			pick = "active"
		case ent.Kind == Room:
			pick = "quiet"
		default:
			best := func(v string) (rank int, latest int64) {
				for _, cu := range by[v] {
					rank, latest = max(rank, provenanceRank(cu.rec.Provenance)), max(latest, cu.rec.ValidFrom)
				}
				return rank, latest
			}
			for _, v := range values {
				if pick == "" {
					pick = v
					continue
				}
				r, l := best(v)
				pr, pl := best(pick)
				if r > pr || r == pr && (l > pl || l == pl && v > pick) {
					pick = v
				}
			}
			st.Conflict = len(values) > 1
		}
		st.Value = pick
		support(&st, by[pick])
	}
	if st.Conflict {
		st.Confidence /= 2
		st.Provenance = ledger.Inferred.String()
	}
	return st
}

// support fills in the confidence, provenance and sources of the
// records that say a state.
func support(st *Changed, recs []*current) {
	rank := 0
	for _, cu := range recs {
		st.Confidence = max(st.Confidence, cu.rec.Confidence)
		r := provenanceRank(cu.rec.Provenance)
		if r > rank {
			rank, st.Provenance = r, cu.rec.Provenance
		}
		st.Sources = append(st.Sources, cu.rec.Source)
		st.Observed = st.Observed || r >= provenanceRank(ledger.Observed.String())
	}
	sort.Strings(st.Sources)
}
