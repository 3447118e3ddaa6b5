package ledger

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Errors of the store. Callers branch on them with errors.Is.
var (
	// ErrConflict: a command expected an aggregate at a version it is no
	// longer at.
	ErrConflict = errors.New("ledger: conflict: the aggregate changed")
	// ErrClosed: the store is closed.
	ErrClosed = errors.New("ledger: closed")
	// ErrNewerSchema: the file was written by a newer tobe-body.
	ErrNewerSchema = errors.New("ledger: the file has a newer schema")
	// ErrDamaged wraps what made a file unusable; Open moves such a file
	// aside (see Damage).
	ErrDamaged = errors.New("ledger: damaged file")
	// ErrNoRoom: the filesystem has too little free space for a
	// snapshot; the error names both figures. It is wrapped in one that
	// says "ledger: snapshot".
	ErrNoRoom = errors.New("not enough free space")
)

// Bucket names.
var (
	bMeta       = []byte("meta")
	bEvents     = []byte("events")      // seq -> record; seq 'o' -> its outbox row
	bIDs        = []byte("ids")         // event id -> seq
	bInbox      = []byte("inbox")       // dedupe key -> 0 (an expiry before schema 2), seq
	bInboxExp   = []byte("inbox_exp")   // schema 1 only: expiry, dedupe key -> nil
	bAggregates = []byte("aggregates")  // aggregate id -> version
	bProj       = []byte("projections") // one nested bucket each
	bClock      = []byte("clock")       // the running clock's checkpoints: seq -> running ns

	kSchema     = []byte("schema")
	kAgentID    = []byte("agent_id")
	kBodyID     = []byte("body_id")
	kCreated    = []byte("created")
	kDropped    = []byte("outbox_dropped")
	kDropFrom   = []byte("outbox_drop_from") // no droppable outbox row has a lower sequence
	kOutboxOff  = []byte("outbox_off")       // present: the file's outbox is off (Options.NoOutbox)
	kWaitFrom   = []byte("outbox_wait_from") // no outbox row below it has waited past OutboxAuditWait unseen
	kRetainFrom = []byte("retain_from")      // retention has looked at every event before this sequence
	kIDsThrough = []byte("ids_through")      // every event up to this sequence has its id in the ids bucket
	kClosed     = []byte("closed")           // the close record: see closeRecord
	kRunning    = []byte("running")          // the running clock at the last Close, ns
	kDamaged    = []byte("damaged")          // damage a running store met: the next Open moves the file aside
)

// counts are what the outbox's budget and Stats need to know of the whole
// file. They are kept in memory: writing them with every commit would cost
// a page a commit, counting them reads every page.
type counts struct {
	outboxRows, outboxBytes       uint64
	events, inboxKeys, aggregates uint64
}

// closeRecord is what Close writes in its last transaction, the one that
// also writes bbolt's free list: that transaction's id, and the counts. An
// open that finds the file at that transaction knows nothing was written
// after the Close: it takes the counts instead of counting, and checks
// only what bbolt needs to map the file (see inspect). Any later commit
// moves the file to another transaction, so a stale record never matches;
// nothing needs to clear it.
type closeRecord struct {
	txid uint64
	n    counts
}

func (r closeRecord) encode() []byte {
	return slices.Concat(u64(r.txid), u64(r.n.outboxRows), u64(r.n.outboxBytes), u64(r.n.events), u64(r.n.inboxKeys), u64(r.n.aggregates))
}

func parseCloseRecord(b []byte) (closeRecord, bool) {
	if len(b) != 48 {
		return closeRecord{}, false
	}
	return closeRecord{getU64(b), counts{getU64(b[8:]), getU64(b[16:]), getU64(b[24:]), getU64(b[32:]), getU64(b[40:])}}, true
}

// An event's outbox row sits right after the event in the events bucket,
// under the event's key and 'o': appending both writes one leaf page, not
// one in each of two buckets.
const rowSuffix = 'o'

func rowKey(seq uint64) []byte { return append(u64(seq), rowSuffix) }

func isRowKey(k []byte) bool { return len(k) == 9 && k[8] == rowSuffix }

func u64(v uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return b[:]
}

func getU64(b []byte) uint64 {
	if len(b) < 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

// Options configure a Store.
type Options struct {
	// Path of the bbolt file.
	Path string
	// AgentID and BodyID are stamped on events that do not carry them and
	// kept in the meta bucket; a file of another body is refused.
	AgentID, BodyID UUID
	// Classes map event types to retention and outbox rules; zero means
	// DefaultClasses.
	Classes *Classes
	// Projections are kept up to date with every append.
	Projections []Projection
	// Group commit: a batch waits at most Linger for more appends, and only
	// when the previous batch had more than one (a lone appender never
	// waits); it holds at most MaxBatch requests.
	Linger   time.Duration
	MaxBatch int
	// GroupCommit: an append by AppendGrouped of telemetry and state
	// alone (droppable classes), and the uplink's acknowledgements
	// (OutboxAck), may wait for others to share their commit until this
	// long after their events began to wait (AppendGrouped's since);
	// anything else that comes meanwhile commits them all at once. It is
	// what a power cut can take of them. 0: they commit at once.
	GroupCommit time.Duration
	// Outbox budget; when over, droppable rows go first. Zero: 100,000
	// rows and 64 MiB.
	OutboxMaxRows  int
	OutboxMaxBytes int64
	// NoOutbox: nothing leaves the device (no uplink is configured): no
	// outbox row is written, and the rows a file has are cleared at open
	// (recorded as ledger.outbox_cleared).
	NoOutbox bool
	// OutboxAsIs leaves the outbox's state as the file has it, whatever
	// NoOutbox says: for a look at the file by another program.
	OutboxAsIs bool
	// OutboxBacklog: when the outbox starts again on a file that had it
	// off, the events of outbox classes younger than this by the running
	// clock are queued too (recorded with ledger.outbox_started); 0: it
	// starts with the next event.
	OutboxBacklog time.Duration
	// OutboxAuditWait: over the budget with nothing droppable left, the
	// audit rows that have waited longer than this by the running clock
	// are taken out of the outbox, oldest first, down to the budget, and
	// recorded as not sent (ledger.outbox_not_sent; the events stay in
	// the ledger). 0: audit rows wait for ever, over the budget if need
	// be.
	OutboxAuditWait time.Duration
	// CheckAtOpen reads and checks every page at every open, and runs
	// bbolt's consistency check. Without it Open does so only when the
	// last process to write the file did not Close it (a crash, a power
	// cut, a kill), or the file was written by another program; a file
	// as Close left it gets a quick check of what bbolt needs to map it
	// (its meta pages, the root bucket, the root page of each top-level
	// bucket, the free list), and damage deeper in it is found by
	// CheckAll or by the read that meets it.
	CheckAtOpen bool
	// CompactFree: at open, a file with more free bytes than this, and
	// more than half of it free, is compacted first. 0 never.
	CompactFree int64
	// RetainEvery runs retention in the background at this interval; 0
	// never (call Retain).
	RetainEvery time.Duration
	// LockTimeout bounds the wait for another process's lock on the file.
	LockTimeout time.Duration
	// Now is the clock; nil means time.Now. Its wall reading stamps
	// ingested_at (and occurred_at when an event has none); only its
	// monotonic reading advances the running clock (see Running), so
	// Now's times must carry one, as time.Now's do. A time without one
	// advances the running clock by its wall reading, never backwards.
	Now func() time.Time
	// Stamp, when not nil, gives the monotonic stamp, clock domain and
	// uncertainty of events that carry none (audit records, the ledger's
	// own): an event with no ClockDomain and MonotonicNS 0 gets
	// MonotonicNS, ClockDomain, ClockUncertaintyMS and ClockUnsynced from
	// it (ClockUncertaintyMS 4294967295 when Unsynced). It is called at
	// most once a commit, in the committer, and must not block.
	Stamp func() TimeStamp
	Log   *slog.Logger
}

func (o *Options) defaults() {
	if o.Classes == nil {
		c := DefaultClasses()
		o.Classes = &c
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 512
	}
	if o.Linger == 0 {
		o.Linger = 100 * time.Microsecond
	}
	if o.OutboxMaxRows <= 0 {
		o.OutboxMaxRows = 100_000
	}
	if o.OutboxMaxBytes <= 0 {
		o.OutboxMaxBytes = 64 << 20
	}
	if o.LockTimeout <= 0 {
		o.LockTimeout = 2 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// Damage says what was wrong with a file Open moved aside.
type Damage struct {
	Reason  string    `json:"reason"`
	MovedTo string    `json:"moved_to"`
	At      time.Time `json:"at"`
}

func (d *Damage) Error() string {
	return fmt.Sprintf("the ledger was damaged (%s); it was moved to %s and a new one started", d.Reason, d.MovedTo)
}

// Result is what an append did with one event.
type Result struct {
	Seq       uint64
	ID        UUID
	Duplicate bool // already stored: Seq is the stored one
}

// Command decides which events to append from the current state. Decide
// must not have side effects: it can run more than once for one Execute
// (a batch that fails is retried one command at a time). An error from
// Decide refuses the command and nothing is written.
type Command interface {
	Decide(v *View) ([]Event, error)
}

// View is the state a command decides on: projections and aggregate
// versions as of the transaction it runs in, including earlier commands of
// the same batch.
type View struct {
	tx *bolt.Tx
	s  *Store
}

// AggregateVersion returns the version of an aggregate (0: none yet).
func (v *View) AggregateVersion(id string) uint64 {
	return getU64(v.tx.Bucket(bAggregates).Get([]byte(id)))
}

// Get reads a projection's key; the slice is valid during Decide only.
func (v *View) Get(projection string, key []byte) []byte {
	b := v.tx.Bucket(bProj).Bucket([]byte(projection))
	if b == nil {
		return nil
	}
	return b.Get(key)
}

// appendCmd appends events as they are: the sense path.
type appendCmd []Event

func (c appendCmd) Decide(*View) ([]Event, error) { return c, nil }

// Store is an open ledger. Its methods are safe for concurrent use.
type Store struct {
	// held is how many requests hold waits with, for tests; commits
	// counts the commit loop's transactions.
	held    atomic.Int32
	commits atomic.Int64
	// hurried: nothing waits for company any more (Hurry).
	hurried   atomic.Bool
	hurry     chan struct{}
	hurryOnce sync.Once

	db      *bolt.DB
	opts    Options
	damage  *Damage
	agentID UUID
	bodyID  UUID
	projs   map[string]Projection

	reqs chan *request
	stop chan struct{}
	// probes are answered by the commit loop between commits (Alive).
	probes chan chan struct{}
	// sendMu orders sending into reqs (read-locked from the look at
	// closed to the send) with shutdown marking the store closed: no
	// request gets into reqs after the last drain, so every one is
	// answered.
	sendMu sync.RWMutex
	wg     sync.WaitGroup

	mu      sync.Mutex
	changed chan struct{}
	closed  bool

	// The outbox's size, kept in memory and counted from the rows at open:
	// writing it with every commit would cost a page a commit. Writers are
	// serialized by bbolt; countsMu orders them with readers of Stats.
	countsMu sync.Mutex
	counts   counts
	writeGen atomic.Uint64

	// The id index is written behind: the ids of recent events are kept
	// here and written to the ids bucket a thousand at a time, which
	// saves two pages a commit. What a crash loses of it is rebuilt at
	// open from the events after ids_through.
	idsMu      sync.Mutex
	pendingIDs map[UUID]uint64

	// What Close needs to know to write the close record: whether the
	// file was found as a Close left it, whether anything was committed
	// since, whether the outbox's counts may be wrong, and the first
	// damage met while running (then no record is written).
	openedClean bool
	openedWhole bool     // every page was read at open
	openTxid    uint64   // with openedClean: the transaction the file was at
	openFree    []uint64 // with openedClean: the pages its free list named
	dirty       atomic.Bool
	countsOff   atomic.Bool
	running     atomic.Bool
	faultMu     sync.Mutex
	fault       error

	// clock is the running clock (see Running).
	clock runClock

	// snapshots holds a token while a snapshot is copied: one at a time,
	// so each one's check of the free space sees the ones before it.
	snapshots chan struct{}
}

// Damage is non-nil when Open found the file damaged, moved it aside and
// started a new one. The body starts latched-safe when it is set.
func (s *Store) Damage() *Damage { return s.damage }

// Path is the file's path.
func (s *Store) Path() string { return s.db.Path() }

// ClosedCleanly tells whether Open found the file as a Close left it (and
// so read only what it had to); false after a crash or a power cut, when
// every page was read, or for a new file.
func (s *Store) ClosedCleanly() bool { return s.openedClean }

// Open opens or creates the ledger at opts.Path, migrating it forward. A
// file that cannot be read as a ledger is moved aside as
// PATH.corrupt.TIME and a fresh one is created; Damage says so. A file
// locked by another process, of another body or of a newer schema is an
// error and is left alone.
//
// Every page is read and checked first when the last process to write
// the file did not Close it, or with CheckAtOpen; a file as Close left it
// gets a quick check, and the damage it leaves unseen surfaces later as
// an error wrapping ErrDamaged (see CheckAll). A file that needs no
// migration, identity or projection bucket is not written by Open.
func Open(opts Options) (*Store, error) {
	opts.defaults()
	names := map[string]bool{}
	for _, p := range opts.Projections {
		if names[p.Name()] {
			return nil, fmt.Errorf("ledger: two projections are named %s", p.Name())
		}
		names[p.Name()] = true
		for _, t := range p.Types() {
			if opts.Classes.Of(t).TTL != 0 {
				return nil, fmt.Errorf("ledger: projection %s follows %s, whose class %s expires: it could not be rebuilt", p.Name(), t, opts.Classes.Of(t).Name)
			}
		}
	}
	var damage *Damage
	var s *Store
	for attempt := 0; ; attempt++ {
		db, st, err := openChecked(opts)
		if err == nil {
			s = &Store{db: db, opts: opts, damage: damage, projs: map[string]Projection{}, openedWhole: st.full,
				reqs: make(chan *request, 4096), stop: make(chan struct{}), probes: make(chan chan struct{}, 8), changed: make(chan struct{}), pendingIDs: map[UUID]uint64{},
				hurry:     make(chan struct{}),
				snapshots: make(chan struct{}, 1)}
			for _, p := range opts.Projections {
				s.projs[p.Name()] = p
			}
			if err = s.init(st); err != nil {
				db.Close()
			}
		}
		if err == nil {
			break
		}
		if !errors.Is(err, ErrDamaged) || attempt > 0 {
			return nil, err
		}
		if damage, err = moveAside(opts, err); err != nil {
			return nil, err
		}
	}
	if damage != nil {
		opts.Log.Error("ledger damaged; moved aside and started anew", "reason", damage.Reason, "moved_to", damage.MovedTo)
		if _, err := s.Append(context.Background(), Event{Type: "ledger.recovered", Provenance: Observed,
			Payload: mustPayload(map[string]string{"reason": damage.Reason, "moved_to": damage.MovedTo})}); err != nil {
			s.Close()
			return nil, err
		}
	}
	if err := s.startOutbox(); err != nil {
		s.Close()
		return nil, err
	}
	s.running.Store(true)
	return s, nil
}

// startOutbox puts the file's outbox in the state the options say: off
// (its rows cleared) or on (from the next event, or with a backlog).
func (s *Store) startOutbox() error {
	if s.opts.OutboxAsIs {
		return nil
	}
	return s.update(func(w *writer) error {
		off := w.meta.Get(kOutboxOff) != nil
		switch {
		case s.opts.NoOutbox && !off:
			if err := w.meta.Put(kOutboxOff, []byte{1}); err != nil {
				return err
			}
			if w.n.outboxRows == 0 {
				return nil
			}
			rows, bytes, err := w.clearOutbox()
			if err != nil {
				return err
			}
			s.opts.Log.Warn("no uplink: the outbox is cleared; nothing is queued for one", "rows", rows, "bytes", bytes)
			return w.record("ledger.outbox_cleared", map[string]any{"rows": rows, "bytes": bytes, "why": "no uplink is configured"})
		case !s.opts.NoOutbox && off:
			if err := w.meta.Delete(kOutboxOff); err != nil {
				return err
			}
			from := w.events.Sequence() + 1
			queued, err := w.queueBacklog(s.opts.OutboxBacklog)
			if err != nil {
				return err
			}
			s.opts.Log.Info("the outbox starts", "from_seq", from, "backlog_events", queued)
			return w.record("ledger.outbox_started", map[string]any{"from_seq": from, "backlog_events": queued,
				"backlog_s": int64(s.opts.OutboxBacklog / time.Second)})
		}
		return errUnchanged
	})
}

func mustPayload(v any) []byte {
	b, err := MarshalPayload(v)
	if err != nil {
		panic(err)
	}
	return b
}

// openChecked opens the bbolt file and checks it can serve as a ledger.
//
// The file is inspected first, with plain reads under a shared lock (see
// inspect): quickly when it is as a Close left it, whole otherwise. A file
// read whole is then opened read-only and every key of every bucket read,
// here, where a panic or a fault of bbolt on a damaged page can be
// recovered. Only then is it opened for writing: with NoFreelistSync (the
// free list is not written with every commit, a page a commit saved, only
// by Close; a file without it has it rebuilt at open by a scan in a
// goroutine of bbolt's own, which must not meet a damaged page, and only
// a file read whole lacks it).
func openChecked(opts Options) (db *bolt.DB, st fileState, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if db != nil {
				db.Close()
			}
			db, err = nil, fmt.Errorf("%w: reading it panicked: %v", ErrDamaged, r)
		}
	}()
	classify := func(err error) error {
		switch {
		case errors.Is(err, berrors.ErrTimeout), errors.Is(err, errLocked):
			return fmt.Errorf("ledger: %s is locked by another process (is tobe-body running?)", opts.Path)
		case errors.Is(err, ErrDamaged):
			return err
		case errors.Is(err, os.ErrNotExist), errors.Is(err, os.ErrPermission),
			errors.Is(err, syscall.EROFS), errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
			// The file system's trouble, not the file's.
			return fmt.Errorf("ledger: %w", err)
		}
		return fmt.Errorf("%w: %v", ErrDamaged, err)
	}
	if fi, err := os.Stat(opts.Path); err == nil && fi.Size() > 0 {
		if st, err = inspect(opts.Path, opts.CheckAtOpen, opts.LockTimeout); err != nil {
			return nil, st, classify(err)
		}
		// bbolt never shrinks its file; when most of it is free, rewrite it.
		if opts.CompactFree > 0 && st.free > opts.CompactFree && st.free > fi.Size()/2 {
			before, after, err := CompactFile(opts.Path, nil)
			if err != nil {
				return nil, st, err
			}
			opts.Log.Info("ledger compacted at open", "before", before, "after", after)
			// The new file carries the old one's close record, which does
			// not name its transaction: it is read whole, like any file
			// another program wrote.
			if st, err = inspect(opts.Path, true, opts.LockTimeout); err != nil {
				return nil, st, classify(err)
			}
		}
		if st.full {
			ro, err := bolt.Open(opts.Path, 0o640, &bolt.Options{Timeout: opts.LockTimeout, ReadOnly: true})
			if err != nil {
				return nil, st, classify(err)
			}
			err = walk(ro)
			ro.Close()
			if err != nil {
				return nil, st, fmt.Errorf("%w: %v", ErrDamaged, err)
			}
		}
	}
	// The array free list: loading it at open is a copy of the ids, where
	// the map's builds hash maps of every span (on a year-old ledger with
	// 18,000 free pages, 8.5 ms of a 10 ms open against 1.2 ms), and an
	// append on that ledger is no slower with it (the commit's fsync
	// dominates).
	db, err = bolt.Open(opts.Path, 0o640, &bolt.Options{Timeout: opts.LockTimeout, FreelistType: bolt.FreelistArrayType, NoFreelistSync: true})
	if err != nil {
		return nil, st, classify(err)
	}
	if opts.CheckAtOpen {
		if err := check(db); err != nil {
			db.Close()
			return nil, st, fmt.Errorf("%w: %v", ErrDamaged, err)
		}
	}
	return db, st, nil
}

// check reads every page of every bucket, then runs bbolt's consistency
// check, and joins what they find. bbolt asserts (panics) on a page that
// does not identify as itself, and its check runs in a goroutine of its
// own where a panic cannot be recovered; the walk reads the same pages
// first, here, where it can.
func check(db *bolt.DB) error {
	if err := walk(db); err != nil {
		return err
	}
	var errs []error
	err := db.View(func(tx *bolt.Tx) error {
		for e := range tx.Check() {
			errs = append(errs, e)
			if len(errs) >= 10 {
				break
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return errors.Join(errs...)
}

// walk reads every key and value of every bucket, turning a panic of bbolt
// on a damaged page into an error.
func walk(db *bolt.DB) (err error) {
	// A damaged branch can point past the end of the map: without this
	// the read faults and the runtime kills the process.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("reading the file panicked: %v", r)
		}
	}()
	// A damaged branch page can point back at itself; no file holds more
	// keys than it has 16-byte slots.
	var budget int64
	if fi, err := os.Stat(db.Path()); err == nil {
		budget = fi.Size() / 16
	}
	var visit func(b *bolt.Bucket, depth int) error
	visit = func(b *bolt.Bucket, depth int) error {
		if depth > 8 {
			return errors.New("buckets nested deeper than 8")
		}
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if budget--; budget < 0 {
				return errors.New("more keys than the file can hold: its pages loop")
			}
			if v == nil {
				if nb := b.Bucket(k); nb != nil {
					if err := visit(nb, depth+1); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	return db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error { return visit(b, 0) })
	})
}

func moveAside(opts Options, cause error) (*Damage, error) {
	now := opts.Now().UTC()
	to := fmt.Sprintf("%s.corrupt.%s", opts.Path, now.Format("20060102T150405.000000000Z"))
	if err := os.Rename(opts.Path, to); err != nil {
		return nil, fmt.Errorf("ledger: %v, and moving it aside failed: %w", cause, err)
	}
	reason := strings.TrimPrefix(cause.Error(), ErrDamaged.Error()+": ")
	return &Damage{Reason: reason, MovedTo: to, At: now}, nil
}

// errUnchanged ends a write transaction that has nothing to commit: it is
// rolled back, and write returns nil.
var errUnchanged = errors.New("ledger: nothing to commit")

// init creates or migrates the layout, checks the identity and starts the
// committer. A file that needs none of it is not written: a look at a
// ledger leaves a cleanly closed file as it was.
func (s *Store) init(st fileState) error {
	err := s.write(func(tx *bolt.Tx) error {
		if meta := tx.Bucket(bMeta); meta != nil {
			if note := meta.Get(kDamaged); note != nil {
				return fmt.Errorf("%w: the last run met damage: %s", ErrDamaged, note)
			}
		}
		changed, migrated, err := migrate(tx, s.opts.Now())
		if err != nil {
			return err
		}
		from, err := resumeFrom(tx)
		if err != nil {
			return err
		}
		s.clock.start(from, s.opts.Now())
		meta := tx.Bucket(bMeta)
		for _, id := range []struct {
			key  []byte
			want UUID
			have *UUID
		}{{kAgentID, s.opts.AgentID, &s.agentID}, {kBodyID, s.opts.BodyID, &s.bodyID}} {
			stored := meta.Get(id.key)
			switch {
			case stored == nil:
				if err := meta.Put(id.key, id.want[:]); err != nil {
					return err
				}
				*id.have = id.want
				changed = true
			case id.want.IsZero() || bytes.Equal(stored, id.want[:]):
				copy(id.have[:], stored)
			default:
				var u UUID
				copy(u[:], stored)
				return fmt.Errorf("ledger: %s belongs to %s %s, not %s", s.opts.Path, id.key, u, id.want)
			}
		}
		reindexed, err := reindex(tx)
		if err != nil {
			return err
		}
		created, err := s.openProjections(tx)
		if err != nil {
			return err
		}
		changed = changed || reindexed || created
		// A write transaction is one past the file's: the record names
		// the file's only if nothing moved it since inspect read it.
		// A migration may have changed what the record counted.
		if rec, ok := parseCloseRecord(meta.Get(kClosed)); st.clean && ok && !migrated && rec.txid == uint64(tx.ID())-1 {
			s.openedClean, s.openTxid, s.openFree = true, rec.txid, st.freeIDs
			s.counts = rec.n
		} else {
			// Every page was read, or the file is new: count.
			err := tx.Bucket(bEvents).ForEach(func(k, v []byte) error {
				if isRowKey(k) {
					s.counts.outboxRows++
					s.counts.outboxBytes += uint64(decodeOutboxRow(v).Size)
				} else {
					s.counts.events++
				}
				return nil
			})
			if err != nil {
				return err
			}
			if migrated {
				// Stats reads the pages as committed; the migration
				// deleted keys in this transaction.
				c := tx.Bucket(bInbox).Cursor()
				for k, _ := c.First(); k != nil; k, _ = c.Next() {
					s.counts.inboxKeys++
				}
			} else {
				s.counts.inboxKeys = uint64(tx.Bucket(bInbox).Stats().KeyN)
			}
			s.counts.aggregates = uint64(tx.Bucket(bAggregates).Stats().KeyN)
		}
		if !changed {
			return errUnchanged
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.wg.Add(1)
	go s.commitLoop()
	if every := s.opts.RetainEvery; every > 0 {
		s.wg.Add(1)
		go s.retainLoop(every)
	}
	return nil
}

// retainLoop runs retention every interval until Close.
func (s *Store) retainLoop(every time.Duration) {
	defer s.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.stop
		cancel()
	}()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if res, err := s.Retain(ctx); err != nil && ctx.Err() == nil {
				s.opts.Log.Error("ledger retention", "err", err)
			} else if res.Events > 0 {
				s.opts.Log.Info("ledger retention", "events", res.Events, "outbox_expired", res.OutboxExpired, "inbox_keys", res.InboxKeys)
			}
		case <-s.stop:
			return
		}
	}
}

// idFlushAt is how many ids wait in memory before they are written.
const idFlushAt = 1024

// reindex puts the ids of the events after ids_through into the ids
// bucket: the ones a crash kept in memory only. It says whether there were
// any.
func reindex(tx *bolt.Tx) (bool, error) {
	meta, ev, ids := tx.Bucket(bMeta), tx.Bucket(bEvents), tx.Bucket(bIDs)
	through := getU64(meta.Get(kIDsThrough))
	c := ev.Cursor()
	last := through
	var e Event
	for k, v := c.Seek(u64(through + 1)); k != nil; k, v = c.Next() {
		if isRowKey(k) {
			continue
		}
		if err := Decode(v, &e); err != nil {
			return false, fmt.Errorf("%w: event %d: %v", ErrDamaged, getU64(k), err)
		}
		if err := ids.Put(append([]byte(nil), e.ID[:]...), u64(getU64(k))); err != nil {
			return false, err
		}
		last = getU64(k)
	}
	if last == through {
		return false, nil
	}
	return true, meta.Put(kIDsThrough, u64(last))
}

// pendingID returns the sequence of an event whose id is not yet written.
func (s *Store) pendingID(id UUID) (uint64, bool) {
	s.idsMu.Lock()
	defer s.idsMu.Unlock()
	seq, ok := s.pendingIDs[id]
	return seq, ok
}

// update runs fn in a write transaction with a writer, publishes the
// counts before the commit (the write lock still held, so the next writer
// starts from them), and the ids it wrote after. writeGen is odd while a
// write is in flight, so Verify can tell whether the counts it compares
// belong to the snapshot it read.
func (s *Store) update(fn func(w *writer) error) error {
	s.writeGen.Add(1)
	defer s.writeGen.Add(1)
	var w *writer
	var was counts
	published := false
	err := s.write(func(tx *bolt.Tx) error {
		w = s.newWriter(tx)
		if err := fn(w); err != nil {
			return err
		}
		if w.nDirty {
			s.countsMu.Lock()
			was, s.counts = s.counts, w.n
			s.countsMu.Unlock()
			published = true
		}
		return nil
	})
	if err != nil && published {
		// The commit failed after the counts were published; a writer
		// that began meanwhile may have started from them. Close records
		// no counts this run: the next open counts.
		s.countsMu.Lock()
		s.counts = was
		s.countsMu.Unlock()
		s.countsOff.Store(true)
	}
	if err == nil {
		w.done()
	}
	return err
}

// write runs fn in a write transaction and commits it, or rolls it back
// when fn returns an error (errUnchanged: without one). It is not
// db.Update: after a panic that rolls back by rebuilding the free list
// from every page of the file, in a goroutine of bbolt's that dies on a
// damaged page; tx.Rollback does not. A panic or fault of bbolt on a
// damaged page is an error wrapping ErrDamaged (see contain).
func (s *Store) write(fn func(tx *bolt.Tx) error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer s.contain(&err)
	tx, err := s.db.Begin(true)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		if errors.Is(err, errUnchanged) {
			return nil
		}
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	s.dirty.Store(true)
	return nil
}

// read runs fn in a read transaction, with a panic or fault of bbolt on a
// damaged page turned into an error wrapping ErrDamaged (see contain).
// A store closed meanwhile is ErrClosed.
func (s *Store) read(fn func(tx *bolt.Tx) error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer s.contain(&err)
	err = s.db.View(fn)
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	return err
}

// contain, deferred, recovers a panic of bbolt: it trusts the pages it
// reads and on a damaged one panics, or faults on a reference past the end
// of its map (a panic under SetPanicOnFault). Unless every page was read
// at open, a read or an append can be the first to meet one. A panic of
// the caller's code in the transaction (a command's Decide, a projection's
// Apply) cannot be told from one of bbolt's, and is taken for damage too:
// the log has its stack, and the next Open, reading every page, keeps a
// file it finds sound.
func (s *Store) contain(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%w: reading it panicked: %v", ErrDamaged, r)
		s.noteFault(*err, "stack", string(debug.Stack()))
	}
}

// noteFault remembers the first damage met while running, and deletes the
// close record so that the next Open reads every page and moves the file
// aside, however this process ends. attrs go to the log.
func (s *Store) noteFault(err error, attrs ...any) {
	if !s.running.Load() {
		return // Open moves the file aside itself
	}
	s.faultMu.Lock()
	first := s.fault == nil
	if first {
		s.fault = err
	}
	s.faultMu.Unlock()
	if !first {
		return
	}
	s.opts.Log.Error("ledger damaged; the next start reads every page and moves the file aside", append([]any{"err", err}, attrs...)...)
	// The note, not only a whole read, makes the next start move the file
	// aside: a later commit may copy the damaged page anew (bbolt copies
	// a page on write), and a whole read would then find nothing wrong
	// with what is left.
	note := err.Error()
	if len(note) > maxDamageNote {
		note = note[:maxDamageNote]
	}
	if err := s.write(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bMeta)
		if err := meta.Delete(kClosed); err != nil {
			return err
		}
		return meta.Put(kDamaged, []byte(note))
	}); err != nil {
		s.opts.Log.Error("ledger: noting the damage for the next start", "err", err)
	}
}

// maxDamageNote bounds the note of damage kept for the next start.
const maxDamageNote = 1024

// CheckAll reads every page of the file with plain reads and checks what
// bbolt trusts of them, as Open does when the last writer did not Close
// the file: the check Open leaves out for a file as Close left it. Run it
// once after Open, in a goroutine of the caller's (the daemon's), to find
// damage now rather than when a read or an append meets it.
//
// While nothing was committed since a clean Open it also checks that no
// page the free list named is in use (bbolt would write over it); later
// the free list is bbolt's, in memory.
//
// After an Open that read every page (an unclean stop, CheckAtOpen) it
// returns nil at once: the pages written since, this store wrote.
//
// It returns nil when every page is sound; an error wrapping ErrDamaged
// that names the first damaged page; ctx's error if ctx ended first; or
// ErrClosed. It never panics or faults on a damaged file. Damage it finds
// (or a read or append met before, which returned ErrDamaged too) is
// remembered: the next Open reads every page and moves the file aside,
// even after a clean Close. The body should act as when Open reports
// Damage: start latched-safe, say why.
//
// It checks one snapshot, in one read transaction: appends go on
// meanwhile, but bbolt cannot reuse the pages they free until it ends,
// and a commit that must grow the file's mapping waits for it. It reads
// through the page cache, not the map: the process's memory does not grow
// with the file. Safe for concurrent use.
func (s *Store) CheckAll(ctx context.Context) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if err := s.faulted(); err != nil {
		return err
	}
	if s.openedWhole {
		return nil // Open read every page; what came since, this store wrote
	}
	return s.checkAll(ctx)
}

// checkAll is CheckAll without the shortcut for damage met before.
func (s *Store) checkAll(ctx context.Context) error {
	f, err := os.Open(s.db.Path())
	if err != nil {
		return fmt.Errorf("ledger: check: %w", err)
	}
	defer f.Close()
	var damage error
	err = s.read(func(tx *bolt.Tx) error {
		fi, err := f.Stat()
		if err != nil {
			return fmt.Errorf("ledger: check: %w", err)
		}
		ps := uint64(s.db.Info().PageSize)
		c := &fileChecker{f: f, size: fi.Size(), ps: ps, hwm: uint64(tx.Size()) / ps, ctx: ctx}
		c.reset(false)
		damage = c.tree(uint64(tx.Cursor().Bucket().Root()), 0, "root")
		if damage == nil && s.openedClean && uint64(tx.ID()) == s.openTxid {
			// Still the file Open found, with the free list it read.
			damage = c.notInUse(s.openFree)
		}
		return nil
	})
	switch {
	case err != nil:
		return err
	case ctx.Err() != nil:
		return ctx.Err()
	case damage != nil:
		err := fmt.Errorf("%w: %v", ErrDamaged, damage)
		s.noteFault(err)
		return err
	}
	return nil
}

// faulted returns the first damage met while running.
func (s *Store) faulted() error {
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	return s.fault
}

// Changed returns a channel closed at the next commit.
func (s *Store) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

func (s *Store) notify() {
	s.mu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// Close stops the committer, fails what is still queued with ErrClosed and
// closes the file. Its last transaction writes bbolt's free list and the
// close record, so the next Open need not read every page (see
// CheckAtOpen); it writes nothing when nothing was written since a clean
// open, and no record when damage was met. An error means the record was
// not written (the next Open reads every page) or the file not closed.
func (s *Store) Close() error { return s.shutdown(true) }

// shutdown is Close; without clean it leaves the file as a crash after
// the last commit would.
func (s *Store) shutdown(clean bool) error {
	s.sendMu.Lock() // no send is under way, and none starts after
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.sendMu.Unlock()
		return nil
	}
	s.closed = true
	close(s.stop)
	s.mu.Unlock()
	s.sendMu.Unlock()
	s.wg.Wait()
	for {
		select {
		case r := <-s.reqs:
			r.err = ErrClosed
			close(r.done)
			continue
		default:
		}
		break
	}
	var err error
	if clean && s.faulted() == nil && !s.countsOff.Load() && (s.dirty.Load() || !s.openedClean) {
		if err = s.markClosed(); err != nil {
			err = fmt.Errorf("ledger: recording the clean stop: %w", err)
		}
	}
	return errors.Join(err, s.db.Close())
}

// markClosed writes the waiting ids, a checkpoint of the running clock
// and the running time it closes at, the close record, and bbolt's free
// list, in one transaction.
func (s *Store) markClosed() error {
	return s.update(func(w *writer) error {
		if err := w.flushIDs(true); err != nil {
			return err
		}
		if err := putCheckpoint(w.tx, s.clock.last()); err != nil {
			return err
		}
		if err := w.meta.Put(kRunning, w.keep(u64(uint64(w.run)))); err != nil {
			return err
		}
		rec := closeRecord{txid: uint64(w.tx.ID()), n: w.n}
		if err := w.meta.Put(kClosed, rec.encode()); err != nil {
			return err
		}
		// Read by this transaction's commit, under the write lock that
		// orders it with every other commit.
		s.db.NoFreelistSync = false
		return nil
	})
}

// Append stores events: each gets an id, its schema version, the body's
// identity and its ingest time when it has none, is checked, deduplicated
// by event_id and dedupe_key, written with its outbox row, and returned
// once the transaction is on disk.
func (s *Store) Append(ctx context.Context, events ...Event) ([]Result, error) {
	return s.Execute(ctx, appendCmd(events))
}

// Execute runs a command and returns after its events are on disk. If ctx
// ends before the command is committed Execute returns ctx.Err(); the
// command may still be committed (retrying with the same event ids is
// safe: they are deduplicated).
func (s *Store) Execute(ctx context.Context, cmd Command) ([]Result, error) {
	return s.submit(&request{ctx: ctx, cmd: cmd, done: make(chan struct{})})
}

// AppendGrouped is Append for what the body senses: when every event is
// of a droppable class (telemetry, state), its commit may wait for other
// appends to share it, so that many events cost the disk one commit, but
// no later than Options.GroupCommit after since, when the oldest of the
// events began to wait (a zero since is now). An event of any other
// class commits at once, and with it whatever waits, and so does an
// append of 32 events or more (its caller is busy; they share a commit
// already).
func (s *Store) AppendGrouped(ctx context.Context, since time.Time, events ...Event) ([]Result, error) {
	q, err := s.QueueGrouped(ctx, since, events...)
	if err != nil {
		return nil, err
	}
	return q.Wait()
}

// QueueGrouped is AppendGrouped that returns once the append is queued
// for the commit loop, before it is committed: a caller may queue its
// next events while this append waits for company, so that they share
// its commit rather than wait for it and then for their own. Appends
// queued by one goroutine are committed in the order queued. It fails,
// and queues nothing, with ErrInvalid for an event the commit would
// refuse whatever the ledger holds, with ErrClosed, or with ctx's error.
func (s *Store) QueueGrouped(ctx context.Context, since time.Time, events ...Event) (*Queued, error) {
	// A caller with this many at once is busy: waiting would hold it back,
	// and its events already share a commit.
	lazy := s.lazy() && len(events) < groupedBusy
	for i := range events {
		lazy = lazy && s.opts.Classes.Of(events[i].Type).Droppable
		// Refused now, not at the commit: the appends queued after this
		// one would be committed before the caller could write it again.
		if err := checkAlone(events[i]); err != nil {
			return nil, fmt.Errorf("%w: event %d (%s): %v", ErrInvalid, i, events[i].Type, err)
		}
	}
	r := &request{ctx: ctx, cmd: appendCmd(events), lazy: lazy, by: s.commitBy(since), done: make(chan struct{})}
	if err := s.enqueue(r); err != nil {
		return nil, err
	}
	return &Queued{s: s, r: r}, nil
}

// checkAlone is what the commit's check of an event will say of it, as far
// as the event alone decides: with the defaults the commit fills in.
func checkAlone(e Event) error {
	if e.ID.IsZero() {
		e.ID = UUID{1}
	}
	if e.SchemaVersion == 0 {
		e.SchemaVersion = SchemaVersion
	}
	return e.check()
}

// Queued is an append handed to the commit loop (QueueGrouped).
type Queued struct {
	s *Store
	r *request
}

// Done is closed once the append is answered: committed, refused, or
// ErrClosed when the store closed first.
func (q *Queued) Done() <-chan struct{} { return q.r.done }

// Wait returns the append's results once it is committed, its refusal,
// ErrClosed when the store closed before it was committed, or the error
// of the context it was queued with.
func (q *Queued) Wait() ([]Result, error) { return q.s.await(q.r) }
