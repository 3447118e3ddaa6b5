package ledger

import (
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// tmpfs mounts a small tmpfs for the test, or skips when this process
// may not mount (not root, no CAP_SYS_ADMIN).
func tmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

func remount(t *testing.T, dir string, flags uintptr, data string) {
	t.Helper()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT|flags, data); err != nil {
		t.Fatal(err)
	}
}

func TestDiskFullAndReadOnly(t *testing.T) {
	dir := tmpfs(t, "256k")
	path := filepath.Join(dir, "ledger.db")
	// A small journal: it is allocated whole at open.
	s, err := Open(Options{Path: path, AgentID: testAgent, BodyID: testBody, CheckAtOpen: true, JournalSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	acked := map[UUID]uint64{}
	var failure error
	for i := 0; i < 100000; i++ {
		e := motion(i)
		e.ID = NewID()
		e.Payload = mustPayload(strings.Repeat("x", 400))
		r, err := s.Append(t.Context(), e)
		if err != nil {
			failure = err
			break
		}
		acked[e.ID] = r[0].Seq
	}
	if failure == nil {
		t.Fatal("a 256 KiB disk never filled")
	}
	if !errors.Is(failure, syscall.ENOSPC) && !strings.Contains(failure.Error(), "no space left") {
		t.Errorf("the error does not say the disk is full: %v", failure)
	}
	t.Logf("disk full after %d acknowledged appends: %v", len(acked), failure)
	// Space comes back: the same store works again.
	remount(t, dir, 0, "size=8m")
	if _, err := s.Append(t.Context(), motion(2)); err != nil {
		t.Fatalf("after space returned: %v", err)
	}
	s.Close()

	// Read-only. Linux refuses to remount a filesystem read-only while a
	// file on it is open for writing (EBUSY), so the ledger is closed
	// first: the body starting on a read-only data partition.
	remount(t, dir, syscall.MS_RDONLY, "")
	_, err = Open(Options{Path: path, AgentID: testAgent, BodyID: testBody, JournalSize: 64 << 10})
	if err == nil {
		t.Fatal("the ledger opened for writing on a read-only filesystem")
	}
	if !errors.Is(err, syscall.EROFS) || errors.Is(err, ErrDamaged) {
		t.Errorf("got %v, want EROFS and not ErrDamaged", err)
	}
	if left, _ := filepath.Glob(path + ".corrupt.*"); len(left) != 0 {
		t.Errorf("a read-only file was taken for damaged: %v", left)
	}
	remount(t, dir, 0, "")
	// Every acknowledged event is there, the file verifies.
	s, err = Open(Options{Path: path, AgentID: testAgent, BodyID: testBody, CheckAtOpen: true, JournalSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Damage() != nil {
		t.Fatalf("damaged: %v", s.Damage())
	}
	evs, _ := s.Events(Filter{Limit: 1 << 20})
	have := map[UUID]uint64{}
	for _, e := range evs {
		have[e.ID] = e.Seq
	}
	for id, seq := range acked {
		if have[id] != seq {
			t.Fatalf("acknowledged %s seq %d is %d after reopening", id, seq, have[id])
		}
	}
	if r, err := s.Verify(t.Context()); err != nil || !r.OK() {
		t.Errorf("verify: %v %v", r.Problems, err)
	}
}

// On a disk too full for the journal the ledger still opens, and commits
// each batch to its file at once, as before it had a journal: what it
// acknowledged is there after a crash.
func TestNoRoomForTheJournal(t *testing.T) {
	dir := tmpfs(t, "256k")
	path := filepath.Join(dir, "ledger.db")
	s, err := Open(Options{Path: path, AgentID: testAgent, BodyID: testBody, JournalSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if s.jr.size >= 1<<20 {
		t.Fatalf("a journal of %d bytes on a 256 KiB disk", s.jr.size)
	}
	for i := range 10 {
		if _, err := s.Append(t.Context(), motion(i)); err != nil {
			t.Fatal(err)
		}
	}
	s.crash()
	s, err = Open(Options{Path: path, AgentID: testAgent, BodyID: testBody, JournalSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if evs, _ := s.Events(Filter{}); len(evs) != 10 {
		t.Errorf("%d events after the crash, want 10", len(evs))
	}
}
