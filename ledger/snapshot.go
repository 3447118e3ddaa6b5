package ledger

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
)

// SnapshotInfo describes a snapshot of the ledger.
type SnapshotInfo struct {
	// Size is the image's length in bytes.
	Size int64
	// LastSeq is the sequence of the last event in it; 0 when it holds
	// none.
	LastSeq uint64
	// SHA256 is the digest of the image's bytes.
	SHA256 [sha256.Size]byte
}

// snapshotStep is how many bytes a snapshot copies between two calls of
// its progress function.
var snapshotStep int64 = 1 << 20

// WriteSnapshot writes a consistent image of the ledger (a bbolt file that
// opens as a ledger, with every event committed when it began) inside one
// read transaction, and returns what it wrote.
//
// open is called first, inside the transaction, with the image's size in
// bytes; it returns where the image goes, or an error, which ends the
// snapshot before a byte is written and is returned wrapped. progress,
// when not nil, is called on the calling goroutine while the transaction
// is open, about every MiB and once more with done equal to total; it
// must not block, since appends that grow the file wait for the
// transaction to end. ctx ends the copy between two writes. The
// transaction is closed when WriteSnapshot returns, on every path; what
// open returned is the caller's to close.
//
// A slow writer holds the transaction open: write to a local file (see
// Snapshot), not to a peer. It is safe to call concurrently with appends
// and reads.
func (s *Store) WriteSnapshot(ctx context.Context, open func(size int64) (io.Writer, error), progress func(done, total int64)) (SnapshotInfo, error) {
	var info SnapshotInfo
	err := s.readFolded(func(tx *bolt.Tx) error {
		info.Size = tx.Size()
		if k, _ := tx.Bucket(bEvents).Cursor().Last(); k != nil {
			info.LastSeq = getU64(k)
		}
		w, err := open(info.Size)
		if err != nil {
			return err
		}
		cw := &copyWriter{ctx: ctx, w: w, h: sha256.New(), total: info.Size, progress: progress, next: snapshotStep}
		n, err := tx.WriteTo(cw)
		if err != nil {
			return err
		}
		if n != info.Size {
			return fmt.Errorf("wrote %d bytes of %d", n, info.Size)
		}
		if progress != nil && cw.reported != n {
			progress(n, info.Size)
		}
		cw.h.Sum(info.SHA256[:0])
		return nil
	})
	if err != nil {
		if ctx.Err() != nil { // bbolt's copy does not wrap what stopped it
			err = ctx.Err()
		}
		return SnapshotInfo{}, fmt.Errorf("ledger: snapshot: %w", err)
	}
	return info, nil
}

// copyWriter counts and hashes what it passes to w, reports progress
// every snapshotStep bytes, and stops once ctx ends.
type copyWriter struct {
	ctx      context.Context
	w        io.Writer
	h        hash.Hash
	n, total int64
	next     int64 // report when n reaches it
	reported int64
	progress func(done, total int64)
}

func (c *copyWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := c.w.Write(p)
	c.h.Write(p[:n])
	c.n += int64(n)
	if c.progress != nil && c.n >= c.next {
		c.progress(c.n, c.total)
		c.reported = c.n
		c.next = c.n + snapshotStep
	}
	return n, err
}

// Snapshot is a consistent image of the ledger in a file of its own that
// has no name: it goes when Close closes it, or when the process ends.
// Read reads the image from its start. A Snapshot is not safe for
// concurrent use.
type Snapshot struct {
	SnapshotInfo
	f *os.File
}

// Read reads the image.
func (sn *Snapshot) Read(p []byte) (int, error) { return sn.f.Read(p) }

// Close releases the file, and with it the space the image takes.
func (sn *Snapshot) Close() error { return sn.f.Close() }

// Snapshot copies a consistent image of the ledger (see WriteSnapshot)
// into an unnamed file in dir, and returns it open at its start. Nobody
// can open that file by a name, and nothing is left in dir when the
// process ends, whatever way it does: the file is made with O_TMPFILE
// where the filesystem has it, else created with a name of its own,
// O_EXCL, O_NOFOLLOW and mode 0600, and that name removed at once.
//
// Before a byte is written, the space dir's filesystem has free for
// unprivileged users must cover the image and a reserve for the ledger
// to go on growing (a sixteenth of the image, at least 16 MiB): less is
// an error wrapping ErrNoRoom that names both figures. One snapshot is
// copied at a time (a second waits, or ends with ctx), so the check sees
// what the ones before it took. The read transaction ends when the copy
// does, before Snapshot returns: reading the returned Snapshot slowly
// holds up nobody. The caller must Close it; on error there is nothing
// to close.
func (s *Store) Snapshot(ctx context.Context, dir string, progress func(done, total int64)) (*Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("ledger: snapshot: %w", err)
	}
	select {
	case s.snapshots <- struct{}{}:
		defer func() { <-s.snapshots }()
	case <-ctx.Done():
		return nil, fmt.Errorf("ledger: snapshot: %w", ctx.Err())
	}
	var f *os.File
	info, err := s.WriteSnapshot(ctx, func(size int64) (io.Writer, error) {
		if err := checkRoom(dir, size); err != nil {
			return nil, err
		}
		var err error
		f, err = unnamedFile(dir)
		return f, err
	}, progress)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		return nil, err
	}
	return &Snapshot{SnapshotInfo: info, f: f}, nil
}

// snapshotReserve is the least free space a snapshot leaves to the ledger.
const snapshotReserve = 16 << 20

// checkRoom says whether dir's filesystem has room for a snapshot of size
// bytes and the reserve.
func checkRoom(dir string, size int64) error {
	free, err := freeSpace(dir)
	if err != nil {
		return fmt.Errorf("free space in %s: %w", dir, err)
	}
	need := size + max(size/16, snapshotReserve)
	if free < need {
		return fmt.Errorf("%w: %s has %d bytes free, and a snapshot of %d bytes needs %d (its size and a reserve for the ledger to grow)", ErrNoRoom, dir, free, size, need)
	}
	return nil
}

// unnamedFile makes a file in dir that has no name, open for reading and
// writing: O_TMPFILE where dir's filesystem has it, else namedThenRemoved.
func unnamedFile(dir string) (*os.File, error) {
	f, err := openTmpfile(dir)
	if errors.Is(err, errNoTmpfile) {
		return namedThenRemoved(dir)
	}
	return f, err
}

// errNoTmpfile: the filesystem (or the kernel, or the platform) has no
// O_TMPFILE.
var errNoTmpfile = errors.New("no O_TMPFILE here")

// namedThenRemoved makes a file in dir with a random name of its own
// (O_EXCL, so neither a file nor a symlink there is ever opened, and
// O_NOFOLLOW where there is one; mode 0600) and removes the name at once.
func namedThenRemoved(dir string) (*os.File, error) {
	for range 10 {
		var b [12]byte
		rand.Read(b[:])
		path := filepath.Join(dir, ".snapshot-"+hex.EncodeToString(b[:]))
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|oNoFollow, 0o600)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if err := os.Remove(path); err != nil {
			f.Close()
			return nil, err
		}
		return f, nil
	}
	return nil, fmt.Errorf("no free name for a temporary file in %s", dir)
}
