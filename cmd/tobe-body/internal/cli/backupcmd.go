package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/admin"
)

// Seams of the backup, which the command's tests set: the free space at
// its destination, and the size from which it shows its progress.
var (
	DestFree         = freeSpace
	ShowProgressFrom = int64(64 << 20)
)

// runBackup writes a consistent copy of the ledger to dst, or to stdout
// when dst is "-". The daemon, when one runs, takes the snapshot and
// sends it over the admin socket; without one the ledger opened here is
// copied. Either way this process, with the rights of the user who runs
// it, writes the file: the daemon never writes where a client says.
//
// The copy is written to a temporary file beside dst (mode 0600, owned
// by this user: a ledger holds what the body saw), synced, checked
// against the snapshot's size and SHA-256, and renamed over dst; on any
// error it is removed and dst is as it was. A destination in the
// daemon's data directory is refused: replacing its live files is what
// a backup must never do. Symlinks in dst's path are followed as for any
// file this user writes; the check of the data directory sees through
// them.
func runBackup(ctx context.Context, l *ledgerAccess, dst string, stdout, stderr io.Writer) error {
	var dataDir string
	var client *admin.Client
	if l.socket != "" {
		client = &admin.Client{Path: l.socket, Timeout: 5 * time.Minute}
		st, err := admin.Call(ctx, client, awareness.OpStatus, awareness.None{})
		if err != nil {
			return fmt.Errorf("ledger backup: %w", err)
		}
		dataDir = st.DataDir
	} else {
		dataDir = filepath.Dir(l.path)
	}
	b := &backupFile{out: stdout}
	report := stdout
	if dst != "-" {
		abs, err := filepath.Abs(dst)
		if err != nil {
			return fmt.Errorf("ledger backup: %w", err)
		}
		if err := refuseDataDir("ledger backup", abs, dataDir); err != nil {
			return err
		}
		b.dst = abs
	} else {
		report = stderr // stdout is the backup
	}
	defer b.abort()

	var info awareness.Backup
	taking := &progressLine{w: stderr, what: "taking the snapshot"}
	if client != nil {
		var err error
		info, err = admin.CallStream(ctx, client, awareness.OpLedgerBackup, awareness.None{}, taking.show,
			func(out awareness.Backup, r io.Reader) error {
				taking.end()
				w, err := b.open(out.Bytes)
				if err != nil {
					return err
				}
				got := &progressLine{w: stderr, what: "receiving"}
				defer got.end()
				_, err = io.Copy(w, &countingReader{r: r, n: out.Bytes, show: got.show})
				return err
			})
		taking.end()
		if err != nil {
			return fmt.Errorf("ledger backup: %w", err)
		}
	} else {
		sn, err := l.store.WriteSnapshot(ctx, b.open, taking.show)
		taking.end()
		if err != nil {
			return fmt.Errorf("ledger backup: %w", err)
		}
		info = awareness.Backup{Bytes: sn.Size, SHA256: hex.EncodeToString(sn.SHA256[:]), LastSeq: sn.LastSeq, TakenAt: time.Now().UTC()}
	}
	if err := b.finish(info.Bytes, info.SHA256); err != nil {
		return fmt.Errorf("ledger backup: %w", err)
	}
	where := "stdout"
	if b.dst != "" {
		where = b.dst
	}
	fmt.Fprintf(report, "backup: %s, %d bytes, last seq %d, sha256 %s\n", where, info.Bytes, info.LastSeq, info.SHA256)
	return nil
}

// refuseDataDir refuses a destination of what (a command) in dataDir or
// below it. The
// destination's directory is looked at with its symlinks resolved, and
// it and each of its parents compared with dataDir by device and inode,
// so neither a symlink nor a second path to the same directory gets
// past; a data directory this user cannot look at is compared by path.
func refuseDataDir(what, dst, dataDir string) error {
	dir, err := filepath.EvalSymlinks(filepath.Dir(dst))
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if fi, err := os.Lstat(dst); err == nil && fi.IsDir() {
		return fmt.Errorf("%s: %s is a directory; name the file to write", what, dst)
	}
	inside := false
	if root, err := os.Stat(dataDir); err == nil {
		for d := dir; ; d = filepath.Dir(d) {
			if fi, err := os.Stat(d); err == nil && os.SameFile(fi, root) {
				inside = true
				break
			}
			if d == filepath.Dir(d) {
				break
			}
		}
	} else {
		root := dataDir
		if r, err := filepath.EvalSymlinks(dataDir); err == nil {
			root = r
		}
		rel, err := filepath.Rel(root, dir)
		inside = err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
	}
	if inside {
		return fmt.Errorf("%s: %s is in the body's data directory %s; nothing is written there (it would replace the live files): choose a file elsewhere", what, dst, dataDir)
	}
	return nil
}

// backupFile is a file received from the body (a backup, a piece of
// evidence) being written: to a temporary file beside dst, or to out
// when dst is empty.
type backupFile struct {
	dst string
	out io.Writer
	f   *os.File // the temporary file, once open
	h   hash.Hash
	n   int64
}

// open checks that dst's filesystem has room for size bytes and creates
// the temporary file; it returns the writer the copy goes to. Nothing is
// created when there is no room.
func (b *backupFile) open(size int64) (io.Writer, error) {
	b.h = sha256.New()
	if b.dst == "" {
		return io.MultiWriter(&countingWriter{w: b.out, n: &b.n}, b.h), nil
	}
	dir := filepath.Dir(b.dst)
	free, err := DestFree(dir)
	if err != nil {
		return nil, fmt.Errorf("free space in %s: %w", dir, err)
	}
	if free < size {
		return nil, fmt.Errorf("%s has %d bytes free, and the file needs %d: nothing was written", dir, free, size)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(b.dst)+".tmp-*")
	if err != nil {
		return nil, err
	}
	b.f = f
	return io.MultiWriter(&countingWriter{w: f, n: &b.n}, b.h), nil
}

// finish checks what was written against size and the hex sha, and puts
// the file in place: synced, renamed over dst, the directory synced.
func (b *backupFile) finish(size int64, sha string) error {
	if b.h == nil {
		return errors.New("nothing was written")
	}
	if b.n != size {
		return fmt.Errorf("wrote %d bytes, want %d", b.n, size)
	}
	if got := hex.EncodeToString(b.h.Sum(nil)); got != sha {
		return fmt.Errorf("the copy's sha256 is %s, want %s", got, sha)
	}
	if b.f == nil {
		return nil
	}
	if err := b.f.Sync(); err != nil {
		return err
	}
	if err := b.f.Close(); err != nil {
		return err
	}
	if err := os.Rename(b.f.Name(), b.dst); err != nil {
		return err
	}
	b.f = nil
	if d, err := os.Open(filepath.Dir(b.dst)); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return fmt.Errorf("sync %s: %w", filepath.Dir(b.dst), err)
		}
	}
	return nil
}

// abort removes the temporary file unless finish put it in place.
func (b *backupFile) abort() {
	if b.f != nil {
		b.f.Close()
		os.Remove(b.f.Name())
		b.f = nil
	}
}

type countingWriter struct {
	w io.Writer
	n *int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	*c.n += int64(n)
	return n, err
}

// countingReader shows how much of n bytes it has read.
type countingReader struct {
	r    io.Reader
	n    int64
	done int64
	show func(done, total int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.done += int64(k)
	c.show(c.done, c.n)
	return k, err
}

// progressLine shows progress on one line of w for totals of at least
// ShowProgressFrom bytes, a whole percent at a time.
type progressLine struct {
	w       io.Writer
	what    string
	percent int
	shown   bool
}

func (p *progressLine) show(done, total int64) {
	if total < ShowProgressFrom || total <= 0 {
		return
	}
	pc := int(100 * done / total)
	if p.shown && pc == p.percent {
		return
	}
	p.shown, p.percent = true, pc
	fmt.Fprintf(p.w, "\r%s: %d of %d MiB (%d%%)", p.what, done>>20, total>>20, pc)
}

// end ends the line, if one was shown.
func (p *progressLine) end() {
	if p.shown {
		fmt.Fprintln(p.w)
		p.shown = false
	}
}
