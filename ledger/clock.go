package ledger

import (
	"fmt"
	"math"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TimeStamp is how the body's clock stamps an event that carries no time of its own.
type TimeStamp struct {
	MonotonicNS   int64
	Domain        string // the boot id of the monotonic clock
	UncertaintyMS uint32
	Unsynced      bool // the wall clock was not synchronised
}

// checkpointEvery is the running time between two checkpoints, at most:
// how much younger than it is an event may be taken for after a crash, and
// how much longer than its TTL it may live.
const checkpointEvery = time.Minute

// runClock is the ledger's running clock: the time the file has been open,
// summed over every open, measured on the monotonic reading of
// Options.Now. No step of the wall clock moves it. It does not advance
// while no process has the file open.
//
// It is persisted as checkpoints in the clock bucket: seq -> running ns. A
// checkpoint (S, R) says that every event with a sequence below S was
// ingested at running time R or before; R is the running time of the last
// commit before it. One is written at most every checkpointEvery of
// running time, inside a commit that happens anyway, before that commit's
// events get their sequences, and one by Close, which also keeps the
// running time it closed at (meta "running"). Open resumes from the later
// of the two; what ran after them before a crash is lost, so events only
// ever count as younger than they are.
type runClock struct {
	mu       sync.Mutex
	base     int64     // running ns when the file was opened
	openedAt time.Time // Options.Now at open, with its monotonic reading
	max      int64     // the latest reading given out: readings never go back
	lastRun  int64     // running ns of the last commit that wrote events
	ckptAt   int64     // running ns of the commit that wrote the last checkpoint
}

// start resumes the clock at running time from, at now.
func (c *runClock) start(from int64, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.base, c.openedAt, c.max, c.lastRun, c.ckptAt = from, now, from, from, from
}

// read returns the running time at now. It never returns less than it
// returned before: a clock without a monotonic reading that goes back (a
// test's) stands still instead.
func (c *runClock) read(now time.Time) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := now.Sub(c.openedAt)
	r := c.base
	if d > 0 && r <= math.MaxInt64-int64(d) {
		r += int64(d)
	}
	c.max = max(c.max, r)
	return c.max
}

// opened is the running time at which the file was opened.
func (c *runClock) opened() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.base
}

// due returns the checkpoint a commit at running time run writes first,
// if one is due: the running time of the last commit, which no event
// before this commit's is younger than.
func (c *runClock) due(run int64) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if run-c.ckptAt < int64(checkpointEvery) {
		return 0, false
	}
	return c.lastRun, true
}

// committed notes a commit at running time run, which wrote events when
// events is set and a checkpoint when ckpt is.
func (c *runClock) committed(run int64, events, ckpt bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if events {
		c.lastRun = max(c.lastRun, run)
	}
	if ckpt {
		c.ckptAt = max(c.ckptAt, run)
	}
}

// last is the running time of the last commit that wrote events (or of
// the open, before any).
func (c *runClock) last() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastRun
}

// bucketRW is a bucket to read and write: bbolt's, or the writer's, which
// journals what it writes.
type bucketRW interface {
	Get(k []byte) []byte
	Put(k, v []byte) error
	Delete(k []byte) error
	Cursor() *bolt.Cursor
	Sequence() uint64
}

// putCheckpoint writes the checkpoint (the next sequence, run). A
// checkpoint at that sequence already (no event came since it) keeps the
// earlier running time, the closer bound.
func putCheckpoint(events, b bucketRW, run int64) error {
	k := u64(events.Sequence() + 1)
	if v := b.Get(k); v != nil && int64(getU64(v)) <= run {
		return nil
	}
	return b.Put(k, u64(uint64(run)))
}

// resumeFrom returns the running time Open resumes from: the later of the
// newest checkpoint and the running time the last Close recorded.
func resumeFrom(tx *bolt.Tx) (int64, error) {
	k, v := tx.Bucket(bClock).Cursor().Last()
	if k == nil {
		return 0, fmt.Errorf("%w: the clock bucket has no checkpoint", ErrDamaged)
	}
	if len(k) != 8 || len(v) != 8 {
		return 0, fmt.Errorf("%w: a checkpoint of %d and %d bytes", ErrDamaged, len(k), len(v))
	}
	return max(int64(getU64(v)), int64(getU64(tx.Bucket(bMeta).Get(kRunning)))), nil
}

// cutoffs returns, for each ttl, the sequence below which every event was
// ingested at least ttl of running time before run: the largest S of a
// checkpoint (S, R) with R <= run - ttl, or 0. It reads the checkpoints
// from the oldest up to the first too young for the shortest ttl.
func cutoffs(tx *bolt.Tx, run int64, ttls []time.Duration) map[time.Duration]uint64 {
	out := make(map[time.Duration]uint64, len(ttls))
	if len(ttls) == 0 {
		return out
	}
	shortest := ttls[0]
	for _, t := range ttls {
		shortest = min(shortest, t)
	}
	c := tx.Bucket(bClock).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		r := int64(getU64(v))
		if r > run-int64(shortest) {
			break
		}
		for _, t := range ttls {
			if r <= run-int64(t) {
				out[t] = getU64(k)
			}
		}
	}
	return out
}

// pruneCheckpoints deletes the checkpoints no cutoff needs any more: those
// older than the newest at or below the cutoff of the longest ttl (with no
// ttl, all but the newest). The newest is always kept: Open resumes from
// it. It returns how many it deleted.
func pruneCheckpoints(tx *bolt.Tx, b bucketRW, run int64, ttls []time.Duration) (int, error) {
	lastK, _ := b.Cursor().Last()
	if lastK == nil {
		return 0, nil
	}
	keep := getU64(lastK)
	if len(ttls) > 0 {
		longest := ttls[0]
		for _, t := range ttls {
			longest = max(longest, t)
		}
		if s, ok := cutoffs(tx, run, []time.Duration{longest})[longest]; ok && s > 0 {
			keep = min(keep, s)
		} else {
			keep = 0
		}
	}
	var gone [][]byte
	c := b.Cursor()
	for k, _ := c.First(); k != nil && getU64(k) < keep; k, _ = c.Next() {
		gone = append(gone, append([]byte(nil), k...))
	}
	for _, k := range gone {
		if err := b.Delete(k); err != nil {
			return 0, err
		}
	}
	return len(gone), nil
}

// ttls returns the distinct TTLs of the classes, without 0.
func (c Classes) ttls() []time.Duration {
	var out []time.Duration
	add := func(t time.Duration) {
		if t <= 0 {
			return
		}
		for _, have := range out {
			if have == t {
				return
			}
		}
		out = append(out, t)
	}
	add(c.Default.TTL)
	for _, cl := range c.ByPrefix {
		add(cl.TTL)
	}
	return out
}

// Running returns the ledger's running clock: how long the file has been
// open, summed over every open since it was created (or since the first
// open with a ledger that keeps it), as Options.Now's monotonic reading
// measures it. Steps of the wall clock do not move it; it stands still
// while the file is closed, and what ran since the last checkpoint before
// a crash is lost. Retention judges the age of events by it. Safe for
// concurrent use.
func (s *Store) Running() time.Duration {
	return time.Duration(s.clock.read(s.opts.Now()))
}
