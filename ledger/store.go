package ledger

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
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
	kFolded     = []byte("folded")           // the journal's last generation folded into the file
	kDamaged    = []byte("damaged")          // damage a running store met: the next Open moves the file aside
	kArchive    = []byte("archive")          // the archive's head: see archiveHead
	kForgetting = []byte("forgetting")       // the projections that forgot what the archive took: see catchUpForgetting
)

// counts are what the outbox's budget and Stats need to know of the whole
// file. They are kept in memory: writing them with every commit would cost
// a page a commit, counting them reads every page.
type counts struct {
	outboxRows, outboxBytes       uint64
	events, inboxKeys, aggregates uint64
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
	// Derivers append what they conclude from the events they follow, in
	// the same transaction (see Deriver).
	Derivers []Deriver
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
	//
	// To commit is to write the records to the journal and fdatasync it
	// (see journal.go): readers see an append as soon as it is in the
	// open transaction, the uplink only once it is on disk.
	GroupCommit time.Duration
	// FoldEvery: the open transaction, whose records the journal holds,
	// is committed to bbolt (folded) this long after its first record,
	// or sooner when the journal is half full, at Close, and before a
	// snapshot or a verify. Zero: 10 minutes.
	FoldEvery time.Duration
	// JournalSize is the journal file's size, allocated once. Zero: 8 MiB.
	JournalSize int64
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
	// never (call Retain). The archive's pass runs after it (Archive).
	RetainEvery time.Duration
	// AuditKeep: the events of classes without a TTL older than this by
	// the running clock are moved from the file into the archive (see
	// archive.go). 0: they stay in the file for ever. It must be at
	// least every class's TTL.
	AuditKeep time.Duration
	// ArchiveSegment: a segment is written once this many bytes of
	// events (as stored) are due, so the archive is made of few files,
	// each compressed as a whole; until then the events due wait in the
	// file. A segment holds at most a MiB of them (or this, if more), so
	// a read from some sequence on inflates little before the events it
	// wants. Zero: DefaultArchiveSegment.
	ArchiveSegment int
	// DiskBudget bounds the bytes of the file, its journal and the
	// archive: over it, the archive's oldest segments are deleted,
	// each deletion recorded (ledger.archive_deleted). 0: no bound.
	DiskBudget int64
	// PastKeys is how many keys the past keys are sized for (see
	// pastkeys.go), fixed when the first is added. 0: DefaultPastKeys.
	PastKeys int
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
	if o.FoldEvery <= 0 {
		o.FoldEvery = 10 * time.Minute
	}
	if o.JournalSize <= 0 {
		o.JournalSize = 8 << 20
	}
	o.JournalSize = max(o.JournalSize, 64<<10)
	if o.OutboxMaxBytes <= 0 {
		o.OutboxMaxBytes = 64 << 20
	}
	if o.ArchiveSegment <= 0 {
		o.ArchiveSegment = DefaultArchiveSegment
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

// Result is what an append did with one event.
type Result struct {
	Seq       uint64
	ID        UUID
	Duplicate bool // already stored: Seq is the stored one
	// Archived: a duplicate of an event the archive took (its key is
	// among the past keys); Seq is 0.
	Archived bool
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
	// w is the writer whose transaction it is, which keeps the
	// projections' buckets it looked up.
	w *writer
}

// AggregateVersion returns the version of an aggregate (0: none yet).
func (v *View) AggregateVersion(id string) uint64 {
	return getU64(v.tx.Bucket(bAggregates).Get([]byte(id)))
}

// Lost is the count of derivations that may not be in the ledger, as a
// Deriver is told it (Derivation.Lost): a command that takes over what
// a deriver keeps between events checks it as the deriver would.
func (v *View) Lost() uint64 { return v.s.derivedLost.Load() }

// Get reads a projection's key; the slice is valid during Decide only.
func (v *View) Get(projection string, key []byte) []byte {
	b := v.tx.Bucket(bProj).Bucket([]byte(projection))
	if b == nil {
		return nil
	}
	return b.Get(key)
}

// Projection is a projection's bucket as of the transaction (empty when
// the store keeps no projection of that name); what it returns is valid
// during Decide or Derive only.
func (v *View) Projection(name string) ReadKV {
	if v.w != nil {
		if b, ok := v.w.buckets[name]; ok {
			return b
		}
	}
	b := v.tx.Bucket(bProj).Bucket([]byte(name))
	if b == nil {
		return MemKV{}
	}
	if v.w != nil {
		if v.w.buckets == nil {
			v.w.buckets = map[string]*bolt.Bucket{}
		}
		v.w.buckets[name] = b
	}
	return b
}

// appendCmd appends events as they are: the sense path.
type appendCmd []Event

func (c appendCmd) Decide(*View) ([]Event, error) { return c, nil }

// Store is an open ledger. Its methods are safe for concurrent use.
type Store struct {
	// held is how many applied appends wait to be put on disk with
	// company, for tests; commits counts what the commit loop put on
	// disk: syncs of the journal and folds.
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
	// derivedLost: see Derivation.Lost.
	derivedLost atomic.Uint64

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

	// followed are the projections and derivers that follow each event
	// type written (see Store.followers).
	followMu sync.Mutex
	followed map[string]followedBy

	// Between two folds the commit loop keeps one write transaction open
	// (tx; nil before the loop starts and after it stops), journals what
	// each batch writes to it, and commits it to bbolt at the fold.
	// txMu is held by the loop while it writes to tx, and by a reader
	// while it reads it: readers see every append at once.
	txMu sync.Mutex
	tx   *bolt.Tx
	jr   *journal
	// arenas are what the open transaction's puts point into, kept until
	// it commits; arena is the last, which the next batch's writer goes
	// on filling (see writer.keep).
	arenas [][]byte
	arena  []byte
	// jops is the buffer a batch's journal record is put together in,
	// kept from batch to batch (apply's).
	jops []byte
	// waiting are applied lazy appends, answered once on disk (the loop's).
	waiting []*request
	// genSince is when the generation's first record was written (zero:
	// none yet); applied is the last sequence the open transaction
	// holds (the loop's); durable the last on disk.
	genSince time.Time
	// foldAfter: no fold before it (one failed). syncBy: when what soon
	// requests applied must be on disk (zero: nothing waits).
	foldAfter time.Time
	syncBy    time.Time
	applied   uint64
	durable   atomic.Uint64
	// archMu: archive passes and deletions take turns (Lock), and a read
	// of the archive with the file sees neither half done (RLock).
	archMu sync.RWMutex
	// archBytes: the bytes of the archive's kept segments.
	archBytes atomic.Int64
	// created is the file's creation time: its tag in the journal and the
	// archive.
	created uint64
	// folded is the last fold's transaction and the counts it left
	// (under countsMu), which Verify compares with what it reads.
	folded folded
}

type folded struct {
	txid uint64
	n    counts
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

// errUnchanged ends a write transaction that has nothing to commit: it is
// rolled back, and write returns nil.
var errUnchanged = errors.New("ledger: nothing to commit")

// update runs fn with a writer in the open transaction, through the
// commit loop, and returns once what it wrote is on disk. An error of fn
// undoes what it wrote (errUnchanged: fn wrote nothing).
func (s *Store) update(fn func(w *writer) error) error {
	_, err := s.submit(&request{ctx: context.Background(), fn: fn, done: make(chan struct{})})
	return err
}

// updateSoon is update that returns once what fn wrote is applied:
// readers see it, and it is on disk with the next sync of the journal or
// fold, for what a crash only has done again.
func (s *Store) updateSoon(fn func(w *writer) error) error {
	_, err := s.submit(&request{ctx: context.Background(), fn: fn, soon: true, by: s.commitBy(time.Time{}), done: make(chan struct{})})
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
//
// It reads the commit loop's open transaction, so it sees every append
// applied, on disk or not yet (see Options.GroupCommit); fn must not call
// the store (the loop waits for fn to end, and fn would wait for it).
func (s *Store) read(fn func(tx *bolt.Tx) error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer s.contain(&err)
	s.txMu.Lock()
	defer s.txMu.Unlock()
	if s.tx != nil {
		return fn(s.tx)
	}
	err = s.db.View(fn)
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	return err
}

// readFolded runs fn in a read transaction of what bbolt holds, after a
// fold: what was applied before the call, and nothing applied after.
// Appends go on meanwhile.
func (s *Store) readFolded(fn func(tx *bolt.Tx) error) (err error) {
	if err := s.foldNow(); err != nil {
		return err
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer s.contain(&err)
	err = s.db.View(fn)
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	return err
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

// ExecuteSoon runs a command and returns once it is applied: readers see
// its events at once, and they are on disk with the next sync of the
// journal, at most Options.GroupCommit later (or with the next append
// that must be on disk, which puts every record before it there too). A
// power cut before that may take them, so it is for what nothing else
// hangs on (the gate's record of an event it did not push); a refusal is
// returned as Execute returns it.
func (s *Store) ExecuteSoon(ctx context.Context, cmd Command) ([]Result, error) {
	return s.submit(&request{ctx: ctx, cmd: cmd, soon: true, by: s.commitBy(time.Time{}), done: make(chan struct{})})
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
