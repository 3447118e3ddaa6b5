package ledger

// Damage: a file Open moved aside, and damage a running store meets (a
// panic of bbolt it contains, what CheckAll finds), noted in the file so
// that the next Open moves it aside.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Damage says what was wrong with a file Open moved aside.
type Damage struct {
	Reason  string    `json:"reason"`
	MovedTo string    `json:"moved_to"`
	At      time.Time `json:"at"`
}

func (d *Damage) Error() string {
	return fmt.Sprintf("the ledger was damaged (%s); it was moved to %s and a new one started", d.Reason, d.MovedTo)
}

// moveAside renames the damaged file at opts.Path beside itself, with
// the time in its name, for Open to start a new one; cause is why.
func moveAside(opts Options, cause error) (*Damage, error) {
	now := opts.Now().UTC()
	to := fmt.Sprintf("%s.corrupt.%s", opts.Path, now.Format("20060102T150405.000000000Z"))
	if err := os.Rename(opts.Path, to); err != nil {
		return nil, fmt.Errorf("ledger: %v, and moving it aside failed: %w", cause, err)
	}
	// Its journal, its archive and the note of its damage go with it: a
	// new ledger's tidy would take the archive's segments for its own
	// leftovers.
	for _, p := range []string{JournalPath(opts.Path), DamagePath(opts.Path), ArchiveDir(opts.Path)} {
		if err := os.Rename(p, strings.Replace(p, opts.Path, to, 1)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("ledger: %v, and moving %s aside failed: %w", cause, p, err)
		}
	}
	reason := strings.TrimPrefix(cause.Error(), ErrDamaged.Error()+": ")
	return &Damage{Reason: reason, MovedTo: to, At: now}, nil
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
	if err := writeDamageNote(s.opts.Path, note); err != nil {
		s.opts.Log.Error("ledger: noting the damage for the next start", "err", err)
	}
}

// DamagePath is where a running store notes the damage it met, beside
// the ledger at path: a file of its own, written whatever state the
// ledger's transactions are in.
func DamagePath(path string) string { return path + ".damaged" }

func writeDamageNote(path, note string) error {
	tmp := DamagePath(path) + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	_, err = f.WriteString(note)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, DamagePath(path))
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	return err
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
	// What bbolt holds, as its file has it: the open transaction's pages
	// are not on disk before the fold.
	err = s.db.View(func(tx *bolt.Tx) error {
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
