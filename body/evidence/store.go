package evidence

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tobe-body/tobe-body/ledger"
)

// Errors of the store. Callers branch on them with errors.Is.
var (
	// ErrUnknown: no piece of evidence has that id (it was never kept,
	// or it ended).
	ErrUnknown = errors.New("evidence: no such evidence")
	// ErrFull: keeping it would take the store over its byte budget.
	ErrFull = errors.New("evidence: the store is full")
	// ErrDamaged: a file's bytes are not those its record names.
	ErrDamaged = errors.New("evidence: file does not match its record")
	// ErrInvalid: what was given to keep is malformed (Detail in the
	// message).
	ErrInvalid = errors.New("evidence: invalid")
)

// Defaults of the store.
const (
	DefaultLifetime = 24 * time.Hour
	DefaultMaxBytes = 256 << 20
	// MaxItemBytes bounds one piece: a 30 s clip at 48 kHz stereo is
	// 5.8 MB, a full-size JPEG a few.
	MaxItemBytes = 16 << 20
)

// mediaTypes are the media a store keeps, with their files' extension.
var mediaTypes = map[string]string{"image/jpeg": ".jpg", "audio/wav": ".wav"}

// OnRevoke is what a revoked grant does to what was captured under it.
type OnRevoke string

// What a revoked grant does.
const (
	RevokeDeletes OnRevoke = "delete" // the default
	RevokeFreezes OnRevoke = "freeze"
)

// Options configure a Store.
type Options struct {
	// Dir is the directory of the files (the data directory's
	// "evidence"); made with mode 0750 when missing.
	Dir    string
	Ledger *ledger.Store
	// Lifetimes by kind; a kind not named lives DefaultLifetime.
	Lifetimes map[Kind]time.Duration
	// MaxBytes bounds the bytes of every piece kept at once; 0:
	// DefaultMaxBytes.
	MaxBytes int64
	// OnRevoke: "" is RevokeDeletes.
	OnRevoke OnRevoke
	Log      *slog.Logger
}

// Store keeps the evidence of one body; see the package doc.
type Store struct {
	dir      string
	led      *ledger.Store
	life     map[Kind]time.Duration
	maxBytes int64
	onRevoke OnRevoke
	log      *slog.Logger

	// mu serialises what writes files and records: keeping, ending,
	// freezing.
	mu   sync.Mutex
	wake chan struct{} // tells Run a piece was kept
}

// Open opens the store: it makes its directory, removes files no live
// record names (left by a crash) and temporary files, records the live
// pieces whose file is gone as deleted, and ends those whose lifetime
// is over. The ledger must keep the projection (Projections).
func Open(ctx context.Context, o Options) (*Store, error) {
	if o.Ledger == nil || o.Dir == "" {
		return nil, errors.New("evidence: a store needs a ledger and a directory")
	}
	s := &Store{dir: o.Dir, led: o.Ledger, life: map[Kind]time.Duration{}, maxBytes: o.MaxBytes, onRevoke: o.OnRevoke, log: o.Log, wake: make(chan struct{}, 1)}
	for k, d := range o.Lifetimes {
		if d <= 0 {
			return nil, fmt.Errorf("evidence: lifetime of %s: %v is not a lifetime", k, d)
		}
		s.life[k] = d
	}
	if s.maxBytes <= 0 {
		s.maxBytes = DefaultMaxBytes
	}
	switch s.onRevoke {
	case "":
		s.onRevoke = RevokeDeletes
	case RevokeDeletes, RevokeFreezes:
	default:
		return nil, fmt.Errorf("evidence: on revoke %q: want %q or %q", o.OnRevoke, RevokeDeletes, RevokeFreezes)
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(s.dir, 0o750); err != nil {
		return nil, fmt.Errorf("evidence: %w", err)
	}
	if err := s.tidy(ctx); err != nil {
		return nil, err
	}
	if _, err := s.Sweep(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Lifetime is how long a piece of kind k lives.
func (s *Store) Lifetime(k Kind) time.Duration {
	if d, ok := s.life[k]; ok {
		return d
	}
	return DefaultLifetime
}

// fileName is the file of bytes with hash sha and media type mt.
func fileName(sha, mt string) string { return sha + mediaTypes[mt] }

func (s *Store) path(it Item) string { return filepath.Join(s.dir, fileName(it.SHA256, it.MediaType)) }

// tidy removes what no live record names and records what is gone.
func (s *Store) tidy(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	items, err := s.List(Filter{})
	if err != nil {
		return err
	}
	live := map[string]bool{}
	for _, it := range items {
		live[fileName(it.SHA256, it.MediaType)] = true
	}
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("evidence: %w", err)
	}
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() && strings.HasPrefix(name, "camera.") {
			s.removeLegacy(filepath.Join(s.dir, name))
			continue
		}
		if !e.Type().IsRegular() || live[name] || !(strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".tmp") || isEvidenceName(name)) {
			continue
		}
		if err := os.Remove(filepath.Join(s.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("evidence: %w", err)
		}
		s.log.Info("evidence file removed: no live record names it", "file", name)
	}
	for _, it := range items {
		if _, err := os.Stat(s.path(it)); errors.Is(err, fs.ErrNotExist) {
			if err := s.end(ctx, TypeDeleted, it, "body", "its file is gone"); err != nil {
				return err
			}
			s.log.Warn("evidence recorded deleted: its file is gone", "id", it.ID, "file", fileName(it.SHA256, it.MediaType))
		}
	}
	return nil
}

// removeLegacy removes the motion snapshots an earlier body kept in a
// directory of their own per camera (DIR/evidence/camera.NAME/*.jpg,
// outside any record, aged by a sweep this body no longer runs), and the
// directory when that empties it.
func (s *Store) removeLegacy(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	n := 0
	for _, e := range ents {
		if e.Type().IsRegular() && filepath.Ext(e.Name()) == ".jpg" && os.Remove(filepath.Join(dir, e.Name())) == nil {
			n++
		}
	}
	os.Remove(dir) // only when empty
	if n > 0 {
		s.log.Info("motion snapshots of an earlier body removed: snapshots are kept in the evidence store now", "dir", dir, "removed", n)
	}
}

// isEvidenceName tells whether name is what the store names a file.
func isEvidenceName(name string) bool {
	ext := filepath.Ext(name)
	if len(name)-len(ext) != sha256.Size*2 {
		return false
	}
	for _, e := range mediaTypes {
		if e == ext {
			return isHex(name[:sha256.Size*2])
		}
	}
	return false
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// check says what is wrong with a record of a kept piece.
func (c Captured) check() error {
	switch {
	case func() bool { _, err := ledger.ParseUUID(c.ID); return err != nil }():
		return fmt.Errorf("id %q is not a UUID", c.ID)
	case c.Kind != Snapshot && c.Kind != Clip:
		return fmt.Errorf("kind %q: want %q or %q", c.Kind, Snapshot, Clip)
	case mediaTypes[c.MediaType] == "":
		return fmt.Errorf("media type %q: want image/jpeg or audio/wav", c.MediaType)
	case len(c.SHA256) != sha256.Size*2 || !isHex(c.SHA256):
		return fmt.Errorf("sha256 %q is not 64 lower-case hex digits", c.SHA256)
	case c.Bytes <= 0 || c.Bytes > MaxItemBytes:
		return fmt.Errorf("%d bytes: want 1 to %d", c.Bytes, MaxItemBytes)
	case c.Source == "" || c.By == "":
		return errors.New("a source and who kept it are needed")
	case c.LifetimeMS <= 0:
		return fmt.Errorf("lifetime %d ms is not a lifetime", c.LifetimeMS)
	}
	return nil
}

// Media is a piece of evidence to keep, with what its record says.
type Media struct {
	Kind      Kind
	Source    string
	MediaType string
	Data      []byte
	// Width and Height of a snapshot; Duration of a clip.
	Width, Height int
	Duration      time.Duration
	FrameSeq      uint64
	// By is who asked (a principal's subject), Why what it said, Action
	// and Grant the action and the grant that let it.
	By, Why, Action, Grant string
	Privacy                ledger.Privacy
	// Lifetime, when set, is this piece's instead of its kind's.
	Lifetime time.Duration
}

// Keep writes m's bytes to their file and records them
// (evidence.captured) with the lifetime of their kind (or m's own). It returns once
// both are on disk. Bytes over the budget are refused with ErrFull;
// malformed media with ErrInvalid. A record that cannot be written
// leaves no file behind (unless another live record names the same
// bytes).
func (s *Store) Keep(ctx context.Context, m Media) (Item, error) {
	sum := sha256.Sum256(m.Data)
	c := Captured{ID: ledger.NewID().String(), Kind: m.Kind, Source: m.Source, MediaType: m.MediaType, SHA256: hex.EncodeToString(sum[:]),
		Bytes: int64(len(m.Data)), Width: m.Width, Height: m.Height, DurationMS: m.Duration.Milliseconds(), By: m.By, Why: m.Why,
		Action: m.Action, Grant: m.Grant, Privacy: m.Privacy.String(), LifetimeMS: cmp.Or(m.Lifetime, s.Lifetime(m.Kind)).Milliseconds(), FrameSeq: m.FrameSeq}
	if err := c.check(); err != nil {
		return Item{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	total, err := s.bytes()
	if err != nil {
		return Item{}, err
	}
	if total+c.Bytes > s.maxBytes {
		return Item{}, fmt.Errorf("%w: %d bytes kept and %d more would pass its budget of %d (evidence.max_mb)", ErrFull, total, c.Bytes, s.maxBytes)
	}
	name := fileName(c.SHA256, c.MediaType)
	path := filepath.Join(s.dir, name)
	shared, err := s.named(c.SHA256)
	if err != nil {
		return Item{}, err
	}
	if !shared {
		if err := writeFile(s.dir, name, m.Data); err != nil {
			return Item{}, fmt.Errorf("evidence: %w", err)
		}
	}
	c.RunningNS = int64(s.led.Running())
	p, err := ledger.MarshalPayload(c)
	if err == nil {
		_, err = s.led.Append(context.WithoutCancel(ctx), ledger.Event{ID: ledger.NewID(), Type: TypeCaptured, ChannelID: c.Source,
			Provenance: ledger.Observed, Trust: ledger.High, Privacy: m.Privacy, Payload: p})
	}
	if err != nil {
		if !shared {
			os.Remove(path)
		}
		return Item{}, fmt.Errorf("evidence: its record: %w", err)
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
	it, ok, err := s.Lookup(c.ID)
	if err != nil || !ok {
		return Item{}, fmt.Errorf("evidence %s: recorded but not found: %v", c.ID, err)
	}
	return it, nil
}

// writeFile writes data to dir/name through a temporary file: synced,
// renamed, the directory synced; mode 0640.
func writeFile(dir, name string, data []byte) (err error) {
	tmp := filepath.Join(dir, "."+name+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	if err := f.Chmod(0o640); err != nil { // whatever the umask took
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// read calls fn with the projection as of one committed state.
func (s *Store) read(fn func(kv ledger.ReadKV) error) error {
	return s.led.ReadProjection(ProjectionName, fn)
}

// bytes is what every live piece takes.
func (s *Store) bytes() (int64, error) {
	items, err := s.List(Filter{})
	var n int64
	for _, it := range items {
		n += it.Bytes
	}
	return n, err
}

// named tells whether a live record names the file of hash sha.
func (s *Store) named(sha string) (bool, error) {
	found := false
	err := s.read(func(kv ledger.ReadKV) error {
		ledger.Range(kv, append(append([]byte{'h'}, sha...), 0), nil, false, func(k, v []byte) bool {
			found = true
			return false
		})
		return nil
	})
	return found, err
}

// Lookup returns the live piece id, and false when there is none.
func (s *Store) Lookup(id string) (Item, bool, error) {
	var it Item
	var ok bool
	err := s.read(func(kv ledger.ReadKV) (err error) {
		it, ok, err = getItem(kv, id)
		return err
	})
	return it, ok, err
}

// Filter selects pieces for List; empty fields select all.
type Filter struct {
	Source string
	Kind   Kind
	By     string
	Grant  string
}

func (f Filter) match(it Item) bool {
	return (f.Source == "" || f.Source == it.Source) && (f.Kind == "" || f.Kind == it.Kind) && (f.By == "" || f.By == it.By) && (f.Grant == "" || f.Grant == it.Grant)
}

// List returns the live pieces f selects, oldest first.
func (s *Store) List(f Filter) ([]Item, error) {
	var out []Item
	err := s.read(func(kv ledger.ReadKV) error {
		var err error
		ledger.Range(kv, []byte{'i'}, nil, false, func(k, v []byte) bool {
			var it Item
			if err = ledger.UnmarshalPayload(v, &it); err != nil {
				err = fmt.Errorf("evidence %s: %w", k[1:], err)
				return false
			}
			if f.match(it) {
				out = append(out, it)
			}
			return true
		})
		return err
	})
	slices.SortFunc(out, func(a, b Item) int { return cmpSeq(a.Seq, b.Seq) })
	return out, err
}

func cmpSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// View records that by looked at piece id through via (evidence.viewed)
// and then opens its file, checked against the record's size; the caller
// reads it and closes it. Nobody is handed a byte whose view was not
// recorded. The caller has decided that by may look (a grant, a local
// administrator): the store records, it does not authorise.
func (s *Store) View(ctx context.Context, id, by, via string) (Item, *os.File, error) {
	it, f, err := s.open(id)
	if err != nil {
		return Item{}, nil, err
	}
	if fi, err := f.Stat(); err != nil || fi.Size() != it.Bytes {
		f.Close()
		return Item{}, nil, fmt.Errorf("%w: %s: the file is not %d bytes", ErrDamaged, id, it.Bytes)
	}
	if err := s.record(ctx, TypeViewed, it, Viewed{ID: id, SHA256: it.SHA256, By: by, Via: via}); err != nil {
		f.Close()
		return Item{}, nil, fmt.Errorf("evidence %s: the view could not be recorded, so it is not shown: %w", id, err)
	}
	it.Views++
	return it, f, nil
}

// open looks up piece id and opens its file.
func (s *Store) open(id string) (Item, *os.File, error) {
	it, ok, err := s.Lookup(id)
	if err != nil {
		return Item{}, nil, err
	}
	if !ok {
		return Item{}, nil, fmt.Errorf("%w: %s", ErrUnknown, id)
	}
	f, err := os.Open(s.path(it))
	if err != nil {
		return it, nil, fmt.Errorf("evidence %s: %w", id, err)
	}
	return it, f, nil
}

// record appends one record of typ about it, with payload.
func (s *Store) record(ctx context.Context, typ string, it Item, payload any) error {
	p, err := ledger.MarshalPayload(payload)
	if err != nil {
		return err
	}
	_, err = s.led.Append(context.WithoutCancel(ctx), ledger.Event{ID: ledger.NewID(), Type: typ, ChannelID: it.Source,
		Provenance: ledger.Observed, Trust: ledger.High, Privacy: privacyOf(it), Payload: p})
	return err
}

func privacyOf(it Item) ledger.Privacy {
	for p := ledger.Public; p <= ledger.Restricted; p++ {
		if p.String() == it.Privacy {
			return p
		}
	}
	return ledger.Restricted
}

// ReadBack reads piece id's file whole and checks it against its record:
// its size and its hash (ErrDamaged when they differ). It records no
// view: it is the body checking what it wrote.
func (s *Store) ReadBack(id string) (Item, []byte, error) {
	it, f, err := s.open(id)
	if err != nil {
		return it, nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxItemBytes+1))
	if err != nil {
		return it, nil, fmt.Errorf("evidence %s: %w", id, err)
	}
	sum := sha256.Sum256(b)
	if int64(len(b)) != it.Bytes || !bytes.Equal([]byte(hex.EncodeToString(sum[:])), []byte(it.SHA256)) {
		return it, nil, fmt.Errorf("%w: %s: %d bytes of sha256 %x, recorded %d bytes of %s", ErrDamaged, id, len(b), sum, it.Bytes, it.SHA256)
	}
	return it, b, nil
}

// Delete records that by deleted piece id for why (evidence.deleted)
// and removes its file unless another live record names it.
func (s *Store) Delete(ctx context.Context, id, by, why string) (Item, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok, err := s.Lookup(id)
	if err != nil {
		return Item{}, err
	}
	if !ok {
		return Item{}, fmt.Errorf("%w: %s", ErrUnknown, id)
	}
	return it, s.end(ctx, TypeDeleted, it, by, why)
}

// end records that it ended (typ: expired or deleted), then removes its
// file unless another live record names it; s.mu is held.
func (s *Store) end(ctx context.Context, typ string, it Item, by, why string) error {
	if err := s.record(ctx, typ, it, Ended{ID: it.ID, SHA256: it.SHA256, By: by, Why: why}); err != nil {
		return fmt.Errorf("evidence %s: %s: %w", it.ID, typ, err)
	}
	shared, err := s.named(it.SHA256)
	if err != nil || shared {
		return err
	}
	if err := os.Remove(s.path(it)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("evidence %s: %w", it.ID, err)
	}
	return nil
}

// Sweep ends (evidence.expired) every piece whose lifetime is over on
// the running clock and returns them.
func (s *Store) Sweep(ctx context.Context) ([]Item, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.led.Running()
	var due []Item
	err := s.read(func(kv ledger.ReadKV) error {
		var err error
		ledger.Range(kv, []byte{'x'}, nil, false, func(k, v []byte) bool {
			if len(k) < 9 || time.Duration(beUint64(k[1:9])) > now {
				return false
			}
			var it Item
			var ok bool
			it, ok, err = getItem(kv, string(k[9:]))
			if ok {
				due = append(due, it)
			}
			return err == nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	for i, it := range due {
		if err := s.end(ctx, TypeExpired, it, "body", fmt.Sprintf("its lifetime of %v ended", time.Duration(it.LifetimeMS)*time.Millisecond)); err != nil {
			return due[:i], err
		}
	}
	return due, nil
}

func beUint64(b []byte) uint64 {
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}

// next is the running time at which the next piece expires, and false
// when none is kept.
func (s *Store) next() (time.Duration, bool, error) {
	var at time.Duration
	var ok bool
	err := s.read(func(kv ledger.ReadKV) error {
		ledger.Range(kv, []byte{'x'}, nil, false, func(k, v []byte) bool {
			if len(k) >= 9 {
				at, ok = time.Duration(beUint64(k[1:9])), true
			}
			return false
		})
		return nil
	})
	return at, ok, err
}

// maxWait bounds how long Run sleeps between sweeps.
const maxWait = time.Minute

// Run ends pieces as their lifetimes end, until ctx is done: it sleeps
// until the next one's end on the running clock (a minute at most) or
// until a piece is kept. A failed sweep is reported to report and tried
// again a minute later.
func (s *Store) Run(ctx context.Context, report func([]Item, error)) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			ended, err := s.Sweep(ctx)
			if report != nil && (len(ended) > 0 || err != nil) {
				report(ended, err)
			}
		case <-s.wake:
		}
		wait := maxWait
		if at, ok, err := s.next(); err == nil && ok {
			wait = min(maxWait, max(at-s.led.Running(), 0)+time.Millisecond)
		}
		t.Reset(wait)
	}
}

// Revoked deals with what was captured under grant: each piece is
// deleted, or frozen when the store's config says so, by by. It returns
// what it ended or froze.
func (s *Store) Revoked(ctx context.Context, grant, by string) ([]Item, error) {
	if grant == "" {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	items, err := s.List(Filter{Grant: grant})
	if err != nil {
		return nil, err
	}
	why := "the grant it was captured under, " + grant + ", was revoked"
	var done []Item
	for _, it := range items {
		switch {
		case s.onRevoke == RevokeFreezes && it.Frozen:
			continue
		case s.onRevoke == RevokeFreezes:
			err = s.freeze(ctx, it, by, why)
			it.Frozen = true
		default:
			err = s.end(ctx, TypeDeleted, it, by, why)
		}
		if err != nil {
			return done, err
		}
		done = append(done, it)
	}
	return done, nil
}

func (s *Store) freeze(ctx context.Context, it Item, by, why string) error {
	return s.record(ctx, TypeFrozen, it, Ended{ID: it.ID, SHA256: it.SHA256, By: by, Why: why})
}
