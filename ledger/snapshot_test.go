package ledger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("counts descriptors in /proc/self/fd")
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// lsDir lists dir's names.
func lsDir(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// A snapshot taken while appends go on opens as a ledger, verifies, and
// holds what its info says; it leaves no name in its directory and no
// descriptor once closed.
func TestSnapshotIsConsistent(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("free space is known on Linux only")
	}
	path := tempPath(t)
	s := openTest(t, path)
	for i := range 100 {
		s.Append(t.Context(), motion(i))
	}
	dir := filepath.Dir(path)
	before, fds := lsDir(t, dir), openFDs(t)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { // appends go on during the snapshot
		for i := 0; ctx.Err() == nil; i++ {
			s.Append(ctx, motion(1000+i))
		}
	})
	sn, err := s.Snapshot(t.Context(), dir, nil)
	cancel()
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if got := lsDir(t, dir); strings.Join(got, " ") != strings.Join(before, " ") {
		t.Errorf("the directory holds %v during the snapshot, want %v: the snapshot has no name", got, before)
	}
	dst := filepath.Join(t.TempDir(), "copy.db")
	f, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), sn)
	f.Close()
	if err != nil || n != sn.Size {
		t.Fatalf("read %d bytes (%v), want %d", n, err, sn.Size)
	}
	if got := [sha256.Size]byte(h.Sum(nil)); got != sn.SHA256 {
		t.Errorf("sha256 %x, want %x", got, sn.SHA256)
	}
	if err := sn.Close(); err != nil {
		t.Error(err)
	}
	if got := openFDs(t); got != fds {
		t.Errorf("%d descriptors open after Close, want %d", got, fds)
	}
	b := openTest(t, dst)
	if r, err := b.Verify(t.Context()); err != nil || !r.OK() {
		t.Errorf("snapshot verify: %v %v", r.Problems, err)
	}
	st, _ := b.Stats()
	if st.Events < 100 || st.LastSeq != sn.LastSeq {
		t.Errorf("the copy has %d events up to %d, want at least 100 up to %d", st.Events, st.LastSeq, sn.LastSeq)
	}
}

// Too little free space refuses the snapshot before anything is
// written, naming both figures; nothing stays open.
func TestSnapshotWithoutRoom(t *testing.T) {
	path := tempPath(t)
	s := openTest(t, path)
	s.Append(t.Context(), motion(1))
	dir := filepath.Dir(path)
	old := freeSpace
	t.Cleanup(func() { freeSpace = old })
	freeSpace = func(string) (int64, error) { return 1 << 20, nil }
	before, fds := lsDir(t, dir), openFDs(t)
	opened := false
	_, err := s.WriteSnapshot(t.Context(), func(size int64) (io.Writer, error) {
		if err := checkRoom(dir, size); err != nil {
			return nil, err
		}
		opened = true
		return io.Discard, nil
	}, nil)
	if err == nil {
		t.Fatal("got a snapshot, want ErrNoRoom")
	}
	var size int64
	fmt.Sscanf(err.Error()[strings.Index(err.Error(), "a snapshot of ")+1:], " snapshot of %d bytes", &size)
	want := fmt.Sprintf("ledger: snapshot: not enough free space: %s has %d bytes free, and a snapshot of %d bytes needs %d (its size and a reserve for the ledger to grow)", dir, 1<<20, size, size+16<<20)
	if !errors.Is(err, ErrNoRoom) || err.Error() != want || size == 0 || opened {
		t.Errorf("got %v (opened %v), want ErrNoRoom: %q", err, opened, want)
	}
	sn, err := s.Snapshot(t.Context(), dir, nil)
	if !errors.Is(err, ErrNoRoom) || sn != nil {
		t.Errorf("Snapshot: got %v, want ErrNoRoom", err)
	}
	if got := lsDir(t, dir); strings.Join(got, " ") != strings.Join(before, " ") {
		t.Errorf("the directory holds %v, want %v", got, before)
	}
	if got := openFDs(t); got != fds {
		t.Errorf("%d descriptors open, want %d", got, fds)
	}
	freeSpace = func(string) (int64, error) { return 0, errors.New("statfs: no such device") }
	if _, err := s.Snapshot(t.Context(), dir, nil); err == nil || !strings.Contains(err.Error(), "free space in "+dir+": statfs: no such device") {
		t.Errorf("unknown free space: got %v", err)
	}
}

// Progress comes every step, rising, and last with done equal to total.
func TestSnapshotProgress(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("free space is known on Linux only")
	}
	path := tempPath(t)
	s := openTest(t, path)
	for i := range 200 {
		s.Append(t.Context(), motion(i))
	}
	old := snapshotStep
	t.Cleanup(func() { snapshotStep = old })
	snapshotStep = 4096
	var calls [][2]int64
	sn, err := s.Snapshot(t.Context(), filepath.Dir(path), func(done, total int64) { calls = append(calls, [2]int64{done, total}) })
	if err != nil {
		t.Fatal(err)
	}
	defer sn.Close()
	if len(calls) < 2 {
		t.Fatalf("got %d progress calls for %d bytes at a step of 4096, want several", len(calls), sn.Size)
	}
	for i, c := range calls {
		if c[1] != sn.Size || c[0] > c[1] || i > 0 && c[0] <= calls[i-1][0] {
			t.Errorf("call %d: done %d of %d after %v", i, c[0], c[1], calls[max(i-1, 0)])
		}
	}
	if last := calls[len(calls)-1]; last[0] != sn.Size {
		t.Errorf("last call %v, want done = total = %d", last, sn.Size)
	}
}

// A snapshot whose context ends stops, and leaves nothing open.
func TestSnapshotCancelled(t *testing.T) {
	path := tempPath(t)
	s := openTest(t, path)
	s.Append(t.Context(), motion(1))
	fds := openFDs(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Snapshot(ctx, filepath.Dir(path), nil); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
	// Once the copy has begun.
	ctx, cancel = context.WithCancel(t.Context())
	defer cancel()
	_, err := s.WriteSnapshot(ctx, func(int64) (io.Writer, error) { return &cancelAfter{cancel: cancel}, nil }, nil)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled during the copy: got %v, want context.Canceled", err)
	}
	if got := openFDs(t); got != fds {
		t.Errorf("%d descriptors open, want %d", got, fds)
	}
}

// cancelAfter takes one write, then cancels.
type cancelAfter struct {
	cancel context.CancelFunc
	buf    bytes.Buffer
}

func (c *cancelAfter) Write(p []byte) (int, error) {
	c.cancel()
	return c.buf.Write(p)
}

// Where there is no O_TMPFILE, the file gets a name only for as long as
// it takes to remove it; a symlink at that name is never followed.
func TestNamedThenRemoved(t *testing.T) {
	dir := t.TempDir()
	f, err := namedThenRemoved(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if names := lsDir(t, dir); len(names) != 0 {
		t.Errorf("the directory holds %v, want nothing", names)
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v (%v), want 0600", fi.Mode(), err)
	}
	if _, err := f.WriteString("x"); err != nil {
		t.Error(err)
	}
}

// An unnamed file made with O_TMPFILE has mode 0600 and no name.
func TestUnnamedFile(t *testing.T) {
	dir := t.TempDir()
	f, err := unnamedFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if names := lsDir(t, dir); len(names) != 0 {
		t.Errorf("the directory holds %v, want nothing", names)
	}
	if fi, err := f.Stat(); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v (%v), want 0600", fi.Mode(), err)
	}
}
