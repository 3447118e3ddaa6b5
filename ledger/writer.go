package ledger

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// writer appends within one transaction. Values given to bbolt must stay
// valid until the commit, so records and keys are cut from an arena that
// is only ever appended to: chunks of arenaChunk bytes, the last of which
// the next batch goes on filling until the transaction commits (a chunk
// is never grown by copying, which would leave bbolt pointing into the
// old one, and allocate and copy it all again).
type writer struct {
	s  *Store
	tx *bolt.Tx
	// view is the one a deriver is given (see derive): one a writer.
	view  View
	now   time.Time
	run   int64 // the running clock at now: every event this writes is born at it
	arena []byte
	// retired are the arena's chunks before the last.
	retired [][]byte
	buf     bytes.Buffer
	// stamp is Options.Stamp's answer, asked for once (stamped).
	stamp   TimeStamp
	stamped bool
	// wrote: an event was written; ckpt: a checkpoint was.
	wrote, ckpt bool

	events, ids, inbox, aggs, meta, projs, clock *jb
	// past is the past keys' bucket (nil in a file opened only to look).
	past *jb
	// rec is what this writer did to bbolt, as the journal's record.
	rec jrec
	// buckets are the projections' buckets commands and derivers looked
	// up in this transaction (View.Projection).
	buckets map[string]*bolt.Bucket
	// The counts as this transaction leaves them; update publishes them
	// before the commit. outboxDirty: the outbox changed.
	n           counts
	nDirty      bool
	outboxDirty bool
	// derived: a deriver ran in this transaction.
	derived bool
	// Ids of events this transaction wrote, and whether it wrote every
	// pending id to the ids bucket.
	newIDs       map[UUID]uint64
	idsFlushed   bool
	idsWrittenTo uint64 // with idsFlushed: ids_through as this transaction left it
}

func (s *Store) newWriter(tx *bolt.Tx) *writer {
	now := s.opts.Now()
	w := &writer{s: s, tx: tx, now: now, run: s.clock.read(now)}
	w.events, w.ids, w.inbox = w.bucket(tx.Bucket(bEvents), bEvents), w.bucket(tx.Bucket(bIDs), bIDs), w.bucket(tx.Bucket(bInbox), bInbox)
	w.aggs, w.meta, w.projs = w.bucket(tx.Bucket(bAggregates), bAggregates), w.bucket(tx.Bucket(bMeta), bMeta), w.bucket(tx.Bucket(bProj), bProj)
	w.clock = w.bucket(tx.Bucket(bClock), bClock)
	if b := tx.Bucket(bPast); b != nil {
		w.past = w.bucket(b, bPast)
	}
	// Keys grow with time (sequences, UUIDv7s): pages that split are not
	// written to again, so fill them (bbolt's default of half full would
	// write twice the pages a commit).
	for _, b := range []*jb{w.events, w.ids} {
		b.b.FillPercent = 0.95
	}
	s.countsMu.Lock()
	w.n = s.counts
	s.countsMu.Unlock()
	return w
}

// storedID finds an event id in the ids bucket, among the ids waiting to
// be written, or among this transaction's.
func (w *writer) storedID(id UUID) (uint64, bool) {
	if seq := w.ids.Get(id[:]); seq != nil {
		return getU64(seq), true
	}
	if seq, ok := w.newIDs[id]; ok {
		return seq, true
	}
	return w.s.pendingID(id)
}

// idFlushAt is how many ids wait in memory before they are written.
const idFlushAt = 1024

// pendingID returns the sequence of an event whose id is not yet written.
func (s *Store) pendingID(id UUID) (uint64, bool) {
	s.idsMu.Lock()
	defer s.idsMu.Unlock()
	seq, ok := s.pendingIDs[id]
	return seq, ok
}

// flushIDs writes the waiting ids and this transaction's to the ids bucket
// when there are enough of them (or always, with all), and moves
// ids_through up. Batches commit in sequence order and publish their ids
// before the next begins, so every event up to the highest id written has
// its id in the bucket.
func (w *writer) flushIDs(all bool) error {
	w.s.idsMu.Lock()
	defer w.s.idsMu.Unlock()
	n := len(w.s.pendingIDs) + len(w.newIDs)
	if n == 0 || !all && n < idFlushAt {
		return nil
	}
	last := getU64(w.meta.Get(kIDsThrough))
	// In key order: a bucket's node holds its keys in a slice, and keys
	// put in any other order move the keys after them with each put (a
	// thousand ids into the last node of the bucket: half a million
	// moves, each under the garbage collector's write barrier while it
	// marks).
	type idSeq struct {
		id  UUID
		seq uint64
	}
	ids := make([]idSeq, 0, n)
	for _, m := range []map[UUID]uint64{w.s.pendingIDs, w.newIDs} {
		for id, seq := range m {
			ids = append(ids, idSeq{id, seq})
		}
	}
	slices.SortFunc(ids, func(a, b idSeq) int { return bytes.Compare(a.id[:], b.id[:]) })
	for _, x := range ids {
		if err := w.ids.Put(w.key(x.id[:]), w.keep(u64(x.seq))); err != nil {
			return err
		}
		last = max(last, x.seq)
	}
	w.idsFlushed, w.idsWrittenTo = true, last
	return w.meta.Put(kIDsThrough, w.keep(u64(last)))
}

// checkpoint writes a checkpoint of the running clock when one is due,
// before this transaction's events get their sequences.
func (w *writer) checkpoint() error {
	r, ok := w.s.clock.due(w.run)
	if !ok {
		return nil
	}
	w.ckpt = true
	return putCheckpoint(w.events, w.clock, r)
}

// done publishes what the committed transaction did to the ids waiting to
// be written, and to the running clock.
func (w *writer) done() {
	w.s.clock.committed(w.run, w.wrote, w.ckpt)
	w.s.idsMu.Lock()
	for id, seq := range w.newIDs {
		w.s.pendingIDs[id] = seq
	}
	if w.idsFlushed {
		// Only what this transaction wrote: a batch committed meanwhile
		// may have added ids of its own.
		for id, seq := range w.s.pendingIDs {
			if seq <= w.idsWrittenTo {
				delete(w.s.pendingIDs, id)
			}
		}
	}
	w.s.idsMu.Unlock()
}

// arenaChunk is the size of the arena's chunks.
const arenaChunk = 64 << 10

// room makes room for n bytes in the arena: a chunk of its own for more
// than a chunk holds.
func (w *writer) room(n int) {
	if cap(w.arena)-len(w.arena) >= n {
		return
	}
	if w.arena != nil {
		w.retired = append(w.retired, w.arena)
	}
	w.arena = make([]byte, 0, max(arenaChunk, n))
}

// keep copies b into the arena and returns the copy.
func (w *writer) keep(b []byte) []byte {
	w.room(len(b))
	start := len(w.arena)
	w.arena = append(w.arena, b...)
	return w.arena[start:len(w.arena):len(w.arena)]
}

func (w *writer) key(parts ...[]byte) []byte {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	w.room(n)
	start := len(w.arena)
	for _, p := range parts {
		w.arena = append(w.arena, p...)
	}
	return w.arena[start:len(w.arena):len(w.arena)]
}

// apply runs one request. A refusal (the command's own error, an invalid
// event, a conflict) is the request's error and writes nothing; only a
// failure of the transaction itself is returned.
func (w *writer) apply(r *request) error {
	switch {
	case r.fold:
		return nil
	case r.fn != nil:
		if err := r.fn(w); err != nil && !errors.Is(err, errUnchanged) {
			return err
		}
		return nil
	case r.cmd == nil:
		return w.ack(r.ack)
	}
	evs, err := r.cmd.Decide(&View{tx: w.tx, s: w.s, w: w})
	if err != nil {
		r.err = err
		return nil
	}
	results, todo, dupOf, err := w.prepare(evs)
	if err != nil {
		r.err = err
		return nil
	}
	for _, i := range todo {
		seq, err := w.write(&evs[i])
		if err != nil {
			return err
		}
		results[i].Seq = seq
		if err := w.derive(&evs[i], seq); err != nil {
			return err
		}
	}
	for i, j := range dupOf {
		results[i].Seq = results[j].Seq
	}
	r.results = results
	return nil
}

// prepare fills in and checks every event of one request and finds the
// duplicates, before anything is written: a request is all or nothing. It
// returns the indexes to write, and for duplicates within the request the
// index of the event they repeat.
func (w *writer) prepare(evs []Event) (results []Result, todo []int, dupOf map[int]int, err error) {
	results = make([]Result, len(evs))
	dupOf = map[int]int{}
	seenIDs := map[UUID]int{}
	seenKeys := map[string]int{}
	versions := map[string]uint64{}
	for i := range evs {
		e := &evs[i]
		// An id given here is new: no event has it (a UUIDv7 of this
		// clock and 74 random bits).
		fresh := e.ID.IsZero()
		if fresh {
			e.ID = NewID()
		}
		if e.SchemaVersion == 0 {
			e.SchemaVersion = SchemaVersion
		}
		if e.AgentID.IsZero() {
			e.AgentID = w.s.agentID
		}
		if e.BodyID.IsZero() {
			e.BodyID = w.s.bodyID
		}
		if e.IngestedAt == 0 {
			e.IngestedAt = w.now.UnixNano()
		}
		if e.OccurredAt == 0 {
			e.OccurredAt = e.IngestedAt
		}
		if e.ClockDomain == "" && e.MonotonicNS == 0 && w.s.opts.Stamp != nil {
			if !w.stamped {
				w.stamp, w.stamped = w.s.opts.Stamp(), true
			}
			e.MonotonicNS, e.ClockDomain, e.ClockUncertaintyMS, e.ClockUnsynced = w.stamp.MonotonicNS, w.stamp.Domain, w.stamp.UncertaintyMS, w.stamp.Unsynced
			if e.ClockUnsynced {
				e.ClockUncertaintyMS = math.MaxUint32
			}
		}
		if err := e.check(); err != nil {
			return nil, nil, nil, fmt.Errorf("%w: event %d (%s): %v", ErrInvalid, i, e.Type, err)
		}
		results[i].ID = e.ID
		if j, dup := seenIDs[e.ID]; dup {
			results[i] = Result{ID: e.ID, Duplicate: true}
			dupOf[i] = j
			continue
		}
		if !fresh {
			if seq, ok := w.storedID(e.ID); ok {
				results[i] = Result{ID: e.ID, Seq: seq, Duplicate: true}
				continue
			}
		}
		if e.DedupeKey != "" {
			if j, dup := seenKeys[e.DedupeKey]; dup {
				results[i] = Result{ID: e.ID, Duplicate: true}
				dupOf[i] = j
				continue
			}
			// Kept as long as the event that set it; before schema 2 the
			// value began with an expiry, which no longer counts.
			if v := w.inbox.Get([]byte(e.DedupeKey)); v != nil {
				results[i] = Result{ID: e.ID, Seq: getU64(v[8:]), Duplicate: true}
				continue
			}
			// The key of an event the archive took.
			if w.s.opts.Classes.Of(e.Type).PastKeys && w.pastHas(pastDedupe, []byte(e.DedupeKey)) {
				results[i] = Result{ID: e.ID, Duplicate: true, Archived: true}
				continue
			}
		}
		if e.AggregateID != "" {
			cur, ok := versions[e.AggregateID]
			if !ok {
				cur = getU64(w.aggs.Get([]byte(e.AggregateID)))
			}
			if e.AggregateVersion == 0 {
				e.AggregateVersion = cur + 1
			}
			if e.AggregateVersion != cur+1 {
				return nil, nil, nil, fmt.Errorf("%w: %s is at version %d; the command expected %d", ErrConflict, e.AggregateID, cur, e.AggregateVersion-1)
			}
			versions[e.AggregateID] = e.AggregateVersion
		}
		seenIDs[e.ID] = i
		if e.DedupeKey != "" {
			seenKeys[e.DedupeKey] = i
		}
		todo = append(todo, i)
	}
	return results, todo, dupOf, nil
}

// write stores one event with its indexes, outbox row, aggregate version
// and projections.
func (w *writer) write(e *Event) (uint64, error) {
	w.buf.Reset()
	if err := Encode(&w.buf, e); err != nil {
		return 0, err
	}
	return w.writeRecord(e, w.keep(w.buf.Bytes()))
}

// writeRecord is write with e's record encoded (in the arena).
func (w *writer) writeRecord(e *Event, rec []byte) (uint64, error) {
	seq, err := w.events.NextSequence()
	if err != nil {
		return 0, err
	}
	sk := w.keep(u64(seq))
	if err := w.events.Put(sk, rec); err != nil {
		return 0, err
	}
	w.n.events++
	w.nDirty, w.wrote = true, true
	if w.newIDs == nil {
		w.newIDs = map[UUID]uint64{}
	}
	w.newIDs[e.ID] = seq
	class := w.s.opts.Classes.Of(e.Type)
	if e.DedupeKey != "" {
		// prepare found no entry: a key is free only once retention
		// deleted it with its event.
		if w.inbox.Get([]byte(e.DedupeKey)) == nil {
			w.n.inboxKeys++
		}
		if err := w.inbox.Put(w.keep([]byte(e.DedupeKey)), w.key(u64(0), sk)); err != nil {
			return 0, err
		}
	}
	if class.Outbox && !w.s.opts.NoOutbox {
		row := outboxRow{Priority: class.Priority, Droppable: class.Droppable, Urgent: class.Urgent, Size: uint32(len(rec))}
		if err := w.events.Put(w.key(sk, []byte{rowSuffix}), w.keep(row.encode())); err != nil {
			return 0, err
		}
		w.n.outboxRows++
		w.n.outboxBytes += uint64(len(rec))
		w.outboxDirty = true
	}
	if e.AggregateID != "" {
		if err := w.aggs.Put(w.keep([]byte(e.AggregateID)), w.keep(u64(e.AggregateVersion))); err != nil {
			return 0, err
		}
		if e.AggregateVersion == 1 {
			w.n.aggregates++
		}
	}
	for _, p := range w.s.followers(e.Type).projections {
		if err := p.Apply(boltKV{w.projs.child([]byte(p.Name())), w, seq}, e); err != nil {
			return 0, fmt.Errorf("projection %s on %s: %w", p.Name(), e.Type, err)
		}
	}
	return seq, nil
}

// enforceOutboxBudget drops the lowest-priority, oldest droppable rows
// when the outbox is over its budget, down to nine tenths of it, and
// records the drop as an event (of the audit class, which is never
// dropped). Audit rows are never dropped, even over the budget. It reads
// the rows from where the droppable ones start (kDropFrom): when audit
// rows alone are over the budget, a commit reads only the rows that came
// since the last, not every row.
func (w *writer) enforceOutboxBudget() error {
	if !w.outboxDirty {
		return nil
	}
	o := w.s.opts
	if w.n.outboxRows <= uint64(o.OutboxMaxRows) && w.n.outboxBytes <= uint64(o.OutboxMaxBytes) {
		return nil
	}
	// Over budget, which is rare: read the rows, and drop the droppable
	// ones from the lowest priority up, oldest first, to nine tenths.
	targetRows, targetBytes := uint64(o.OutboxMaxRows)*9/10, uint64(o.OutboxMaxBytes)*9/10
	type victim struct {
		key  []byte
		size uint64
	}
	byPrio := map[uint8][]victim{}
	var prios []uint8
	c := w.events.Cursor()
	for k, v := c.Seek(u64(getU64(w.meta.Get(kDropFrom)))); k != nil; k, v = c.Next() {
		if !isRowKey(k) {
			continue
		}
		row := decodeOutboxRow(v)
		if row.Droppable {
			if _, ok := byPrio[row.Priority]; !ok {
				prios = append(prios, row.Priority)
			}
			byPrio[row.Priority] = append(byPrio[row.Priority], victim{w.keep(k), uint64(row.Size)})
		}
	}
	// The droppable rows left start at the oldest not dropped; with none
	// left, after every row there is now.
	dropFrom := w.events.Sequence() + 1
	slices.Sort(prios)
	var dropped, droppedBytes uint64
	var first, last uint64
	byPriority := map[uint8]uint64{}
	var victims [][]byte
	for _, p := range prios {
		for i, v := range byPrio[p] {
			if w.n.outboxRows-dropped <= targetRows && w.n.outboxBytes-droppedBytes <= targetBytes {
				for _, left := range byPrio[p][i:] {
					dropFrom = min(dropFrom, getU64(left.key))
				}
				break
			}
			seq := getU64(v.key)
			victims = append(victims, v.key)
			dropped++
			droppedBytes += v.size
			byPriority[p]++
			if first == 0 || seq < first {
				first = seq
			}
			last = max(last, seq)
		}
	}
	for _, k := range victims {
		if err := w.events.Delete(k); err != nil {
			return err
		}
	}
	w.n.outboxRows -= dropped
	w.n.outboxBytes -= droppedBytes
	w.nDirty = true
	if err := w.giveUpWaiting(targetRows, targetBytes); err != nil {
		return err
	}
	if err := w.meta.Put(kDropFrom, w.keep(u64(dropFrom))); err != nil {
		return err
	}
	if dropped > 0 {
		total := getU64(w.meta.Get(kDropped)) + dropped
		if err := w.meta.Put(kDropped, w.keep(u64(total))); err != nil {
			return err
		}
		if err := w.record("ledger.outbox_dropped", map[string]any{"rows": dropped, "bytes": droppedBytes, "first_seq": first, "last_seq": last,
			"by_priority": byPriority, "budget_rows": o.OutboxMaxRows, "budget_bytes": o.OutboxMaxBytes}); err != nil {
			return err
		}
		w.s.opts.Log.Warn("outbox over budget: telemetry dropped", "rows", dropped, "bytes", droppedBytes)
	}
	return nil
}

// outboxRow is what the uplink needs to know of a queued event.
type outboxRow struct {
	Priority  uint8
	Droppable bool
	Urgent    bool
	Attempts  uint32
	LastTry   int64
	Size      uint32
}

// The flags of an outbox row's second byte. Rows written before Urgent
// existed have only rowDroppable, or nothing.
const (
	rowDroppable = 1 << iota
	rowUrgent
)

func (r outboxRow) encode() []byte {
	b := make([]byte, 18)
	b[0] = r.Priority
	if r.Droppable {
		b[1] |= rowDroppable
	}
	if r.Urgent {
		b[1] |= rowUrgent
	}
	putU32(b[2:], r.Attempts)
	putU64(b[6:], uint64(r.LastTry))
	putU32(b[14:], r.Size)
	return b
}

func decodeOutboxRow(b []byte) outboxRow {
	if len(b) < 18 {
		return outboxRow{}
	}
	return outboxRow{Priority: b[0], Droppable: b[1]&rowDroppable != 0, Urgent: b[1]&rowUrgent != 0, Attempts: getU32(b[2:]), LastTry: int64(getU64(b[6:])), Size: getU32(b[14:])}
}

// record writes one event of the ledger's own, in this transaction.
func (w *writer) record(typ string, payload map[string]any) error {
	p, err := MarshalPayload(payload)
	if err != nil {
		return err
	}
	return w.recordPayload(typ, p)
}

// recordPayload is record with the payload encoded.
func (w *writer) recordPayload(typ string, p []byte) error {
	evs := []Event{{Type: typ, Provenance: Observed, Payload: p}}
	if _, todo, _, err := w.prepare(evs); err != nil || len(todo) != 1 {
		return errors.Join(fmt.Errorf("ledger: recording %s", typ), err)
	}
	_, err := w.write(&evs[0])
	return err
}

// clearOutbox deletes every outbox row.
func (w *writer) clearOutbox() (rows, bytes uint64, err error) {
	var keys [][]byte
	c := w.events.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if isRowKey(k) {
			keys = append(keys, w.keep(k))
			bytes += uint64(decodeOutboxRow(v).Size)
		}
	}
	for _, k := range keys {
		if err := w.events.Delete(k); err != nil {
			return 0, 0, err
		}
	}
	rows = uint64(len(keys))
	w.n.outboxRows, w.n.outboxBytes = 0, 0
	w.nDirty, w.outboxDirty = true, true
	return rows, bytes, w.meta.Put(kDropFrom, w.keep(u64(w.events.Sequence()+1)))
}

// queueBacklog gives an outbox row to every event of an outbox class
// younger than age by the running clock that has none.
func (w *writer) queueBacklog(age time.Duration) (int, error) {
	if age <= 0 {
		return 0, nil
	}
	from := cutoffs(w.tx, w.run, []time.Duration{age})[age] // 0: every event is younger
	type pending struct {
		key []byte
		row outboxRow
	}
	var todo []pending
	c := w.events.Cursor()
	for k, v := c.Seek(u64(from)); k != nil; k, v = c.Next() {
		if isRowKey(k) {
			// Its event, just before it, has a row already.
			if n := len(todo); n > 0 && bytes.Equal(todo[n-1].key, k[:8]) {
				todo = todo[:n-1]
			}
			continue
		}
		var e Event
		if err := Decode(v, &e); err != nil {
			return 0, fmt.Errorf("ledger: event %d: %w", getU64(k), err)
		}
		if class := w.s.opts.Classes.Of(e.Type); class.Outbox {
			todo = append(todo, pending{w.keep(k), outboxRow{Priority: class.Priority, Droppable: class.Droppable, Urgent: class.Urgent, Size: uint32(len(v))}})
		}
	}
	for _, p := range todo {
		if err := w.events.Put(w.key(p.key, []byte{rowSuffix}), w.keep(p.row.encode())); err != nil {
			return 0, err
		}
		w.n.outboxRows++
		w.n.outboxBytes += uint64(p.row.Size)
	}
	if len(todo) > 0 {
		w.nDirty, w.outboxDirty = true, true
		// The drops start where the droppable rows now do.
		if err := w.meta.Put(kDropFrom, w.keep(u64(getU64(todo[0].key)))); err != nil {
			return 0, err
		}
	}
	return len(todo), nil
}

// giveUpWaiting takes out of the outbox, oldest first, the rows (audit
// ones: the droppable went first) that have waited longer than
// OutboxAuditWait by the running clock, down to the targets, and records
// them as not sent. It reads rows from kWaitFrom, below which none is
// left that waited that long, up to the cutoff: each row is read once
// over the life of the file.
func (w *writer) giveUpWaiting(targetRows, targetBytes uint64) error {
	wait := w.s.opts.OutboxAuditWait
	if wait <= 0 || w.n.outboxRows <= targetRows && w.n.outboxBytes <= targetBytes {
		return nil
	}
	cut := cutoffs(w.tx, w.run, []time.Duration{wait})[wait]
	from := getU64(w.meta.Get(kWaitFrom))
	if cut <= from {
		return nil
	}
	var gone [][]byte
	var rows, size, first, last uint64
	next := cut
	c := w.events.Cursor()
	for k, v := c.Seek(u64(from)); k != nil && getU64(k) < cut; k, v = c.Next() {
		if !isRowKey(k) {
			continue
		}
		if w.n.outboxRows-rows <= targetRows && w.n.outboxBytes-size <= targetBytes {
			next = getU64(k)
			break
		}
		gone = append(gone, w.keep(k))
		rows++
		size += uint64(decodeOutboxRow(v).Size)
		if first == 0 {
			first = getU64(k)
		}
		last = getU64(k)
	}
	for _, k := range gone {
		if err := w.events.Delete(k); err != nil {
			return err
		}
	}
	if err := w.meta.Put(kWaitFrom, w.keep(u64(next))); err != nil {
		return err
	}
	if rows == 0 {
		return nil
	}
	w.n.outboxRows -= rows
	w.n.outboxBytes -= size
	w.s.opts.Log.Warn("outbox over budget: audit events that waited too long are not sent (they stay in the ledger)", "rows", rows, "waited_over", wait)
	return w.record("ledger.outbox_not_sent", map[string]any{"rows": rows, "bytes": size, "first_seq": first, "last_seq": last,
		"waited_over_s": int64(wait / time.Second), "budget_rows": w.s.opts.OutboxMaxRows, "budget_bytes": w.s.opts.OutboxMaxBytes})
}

// ack removes delivered rows; unknown sequences are ignored.
func (w *writer) ack(seqs []uint64) error {
	for _, seq := range seqs {
		k := rowKey(seq)
		v := w.events.Get(k)
		if v == nil {
			continue
		}
		row := decodeOutboxRow(v)
		if err := w.events.Delete(k); err != nil {
			return err
		}
		w.n.outboxRows--
		w.n.outboxBytes -= uint64(row.Size)
		w.outboxDirty, w.nDirty = true, true
	}
	return nil
}
