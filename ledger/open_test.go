package ledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// crash stops the store as a kill after its last commit would: the file
// is left without a close record.
func (s *Store) crash() error { return s.shutdown(false) }

// openQuick opens without CheckAtOpen, as the body does.
func openQuick(t testing.TB, path string, mod ...func(*Options)) *Store {
	t.Helper()
	return openTest(t, path, append([]func(*Options){func(o *Options) { o.CheckAtOpen = false }}, mod...)...)
}

// fill appends n motion events, a hundred to a command, each with a
// dedupe key of its number.
func fill(t testing.TB, s *Store, n int) {
	t.Helper()
	for i := 0; i < n; i += 100 {
		var evs appendCmd
		for j := i; j < min(i+100, n); j++ {
			e := motion(j)
			e.DedupeKey = dedupeKey(j)
			evs = append(evs, e)
		}
		if _, err := s.Execute(t.Context(), evs); err != nil {
			t.Fatal(err)
		}
	}
}

func dedupeKey(i int) string { return fmt.Sprintf("dk-%05d", i) }

func verifyOK(t testing.TB, s *Store) {
	t.Helper()
	if r, err := s.Verify(t.Context()); err != nil || !r.OK() {
		t.Errorf("verify: %v %v", r.Problems, err)
	}
}

// metaTxids reads the transaction ids of both meta pages.
func metaTxids(t testing.TB, data []byte) (ps int, txid [2]uint64) {
	t.Helper()
	m, err := parseMeta(data)
	if err != nil {
		t.Fatal(err)
	}
	ps = int(m.pageSize)
	for i := range 2 {
		m, err := parseMeta(data[i*ps:])
		if err != nil {
			t.Fatalf("meta page %d: %v", i, err)
		}
		txid[i] = m.txid
	}
	return ps, txid
}

func TestOpenReadsEveryPageOnlyAfterAnUncleanStop(t *testing.T) {
	path := tempPath(t)
	s := openQuick(t, path)
	fill(t, s, 500)
	if err := s.OutboxAck(1, 2, 3); err != nil {
		t.Fatal(err)
	}
	st0, _ := s.Stats()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	type want struct{ clean, whole bool }
	check := func(t *testing.T, s *Store, w want) {
		t.Helper()
		if got := (want{s.openedClean, s.openedWhole}); got != w {
			t.Errorf("opened clean %v, read whole %v; want %v, %v", got.clean, got.whole, w.clean, w.whole)
		}
		if s.Damage() != nil {
			t.Errorf("damage %v", s.Damage())
		}
		st, err := s.Stats()
		if err != nil || st.Events < 500 || st.OutboxRows < st0.OutboxRows {
			t.Errorf("stats %+v %v, after the first close %+v", st, err, st0)
		}
		verifyOK(t, s) // the outbox's counts taken from the close record are compared with the rows
	}

	t.Run("closed cleanly", func(t *testing.T) {
		s := openQuick(t, path)
		check(t, s, want{clean: true})
		s.Close()
	})
	t.Run("a look leaves the file as it was", func(t *testing.T) {
		before, _ := os.ReadFile(path)
		s := openQuick(t, path)
		if evs, err := s.Events(Filter{Limit: 5}); err != nil || len(evs) != 5 {
			t.Errorf("events: %d %v", len(evs), err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
			t.Error("a look wrote the file")
		}
	})
	fresh := func(t *testing.T, s *Store, n int) {
		t.Helper()
		for i := range n {
			if _, err := s.Append(t.Context(), motion(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Run("killed after a fold", func(t *testing.T) {
		s := openQuick(t, path)
		fresh(t, s, 10)
		if err := s.foldNow(); err != nil {
			t.Fatal(err)
		}
		s.crash()
		s = openQuick(t, path)
		check(t, s, want{whole: true})
		s.Close()
		s = openQuick(t, path)
		check(t, s, want{clean: true})
		s.Close()
	})
	t.Run("killed with records in the journal only", func(t *testing.T) {
		// bbolt's file is as the last Close left it, so it is not read
		// whole; the journal's records are folded in at open, and the
		// counts counted.
		s := openQuick(t, path)
		st0, _ := s.Stats()
		fresh(t, s, 10)
		s.crash()
		s = openQuick(t, path)
		check(t, s, want{})
		if st, err := s.Stats(); err != nil || st.Events != st0.Events+10 {
			t.Errorf("%d events after the crash, want %d: %v", st.Events, st0.Events+10, err)
		}
		s.Close()
	})
	t.Run("killed before any commit", func(t *testing.T) {
		// The file is as the last Close left it: nothing to read whole.
		s := openQuick(t, path)
		s.crash()
		s = openQuick(t, path)
		check(t, s, want{clean: true})
		s.Close()
	})
	t.Run("asked to", func(t *testing.T) {
		s := openTest(t, path)
		check(t, s, want{whole: true})
		s.Close()
	})
	t.Run("the last meta page torn", func(t *testing.T) {
		// A power cut while Close wrote its meta page: bbolt takes the
		// other, of the transaction before, which has no record.
		data, _ := os.ReadFile(path)
		ps, txid := metaTxids(t, data)
		last := 0
		if txid[1] > txid[0] {
			last = 1
		}
		data[last*ps+pageHeader+60] ^= 0xff // in the checksum
		os.WriteFile(path, data, 0o600)
		s := openQuick(t, path)
		check(t, s, want{whole: true})
		s.Close()
	})
	t.Run("written by another program", func(t *testing.T) {
		db, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bMeta).Put([]byte("note"), []byte("x")) })
		db.Close()
		s := openQuick(t, path)
		check(t, s, want{whole: true})
		s.Close()
	})
}

// leafOf returns the leaf page of a top-level bucket that holds key, by
// the branch pages from the bucket's root.
func leafOf(t testing.TB, path string, bucket, key []byte) (id uint64, pageSize int) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	db.View(func(tx *bolt.Tx) error {
		id = uint64(tx.Bucket(bucket).Root())
		return nil
	})
	pageSize = db.Info().PageSize
	db.Close()
	data, _ := os.ReadFile(path)
	for depth := 0; ; depth++ {
		p := data[int(id)*pageSize:]
		flags, count := le.Uint16(p[8:]), int(le.Uint16(p[10:]))
		if flags == flagLeaf {
			if depth == 0 {
				t.Fatalf("bucket %s is one leaf: fill it more", bucket)
			}
			return id, pageSize
		}
		next := le.Uint64(p[pageHeader+8:])
		for i := range count {
			e := pageHeader + i*elemSize
			pos, ksize := int(le.Uint32(p[e:])), int(le.Uint32(p[e+4:]))
			if bytes.Compare(p[e+pos:e+pos+ksize], key) > 0 {
				break
			}
			next = le.Uint64(p[e+8:])
		}
		id = next
	}
}

// TestDamageBelowTheQuickCheck damages one page deep in the events of a
// cleanly closed file, where Open's quick check does not look. The file
// opens; what does not touch the page works; what does gets an error
// wrapping ErrDamaged and nothing panics; CheckAll finds it; the next Open
// reads every page and moves the file aside. With CheckAtOpen, Open finds
// it at once.
func TestDamageBelowTheQuickCheck(t *testing.T) {
	good := tempPath(t)
	s := openQuick(t, good)
	fill(t, s, 3000)
	s.Close()
	mid, ps := leafOf(t, good, bEvents, u64(1500))
	inbox, _ := leafOf(t, good, bInbox, []byte(dedupeKey(1500)))
	damaged := func(t *testing.T, page uint64) string {
		data, _ := os.ReadFile(good)
		le.PutUint64(data[int(page)*ps:], page+1000) // the page says it is another
		path := tempPath(t)
		os.WriteFile(path, data, 0o600)
		return path
	}
	movedAside := func(t *testing.T, path string) {
		t.Helper()
		s := openQuick(t, path)
		if d := s.Damage(); d == nil || !strings.HasPrefix(d.MovedTo, path+".corrupt.") {
			t.Fatalf("reopened: damage %v, want the file moved aside", d)
		}
	}
	isDamage := func(t *testing.T, what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrDamaged) {
			t.Errorf("%s: got %v, want an error wrapping ErrDamaged", what, err)
		}
	}

	t.Run("read", func(t *testing.T) {
		path := damaged(t, mid)
		s := openQuick(t, path)
		if s.Damage() != nil || s.openedWhole {
			t.Fatalf("a cleanly closed file was read whole (damage %v)", s.Damage())
		}
		if evs, err := s.Events(Filter{Limit: 5}); err != nil || len(evs) != 5 {
			t.Errorf("the first five events: %d %v", len(evs), err)
		}
		_, err := s.Events(Filter{Limit: 10000})
		isDamage(t, "reading every event", err)
		if _, err := s.Append(t.Context(), motion(1)); err != nil {
			t.Errorf("an append away from the damage: %v", err)
		}
		err = s.CheckAll(t.Context())
		isDamage(t, "CheckAll", err)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprint(mid)) {
			t.Errorf("CheckAll does not name page %d: %v", mid, err)
		}
		if r, err := s.Verify(t.Context()); err != nil || r.OK() {
			t.Errorf("verify: %v %v, want a problem", r.Problems, err)
		}
		s.Close()
		movedAside(t, path)
	})
	t.Run("found by CheckAll alone", func(t *testing.T) {
		path := damaged(t, mid)
		s := openQuick(t, path)
		isDamage(t, "CheckAll", s.CheckAll(t.Context()))
		s.Close()
		movedAside(t, path)
	})
	// A later commit may copy the damaged page anew (bbolt copies a page
	// it writes), leaving nothing a whole read would find: the damage
	// the run met is noted in the file, and the next Open moves it aside
	// all the same, saying so.
	t.Run("the page written anew after", func(t *testing.T) {
		path := damaged(t, mid)
		s := openQuick(t, path)
		isDamage(t, "CheckAll", s.CheckAll(t.Context()))
		data, _ := os.ReadFile(good)
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteAt(data[int(mid)*ps:int(mid+1)*ps], int64(mid)*int64(ps)) // the page as it was
		f.Close()
		if err := s.checkAll(t.Context()); err != nil {
			t.Fatalf("the page restored, a whole read still finds %v", err)
		}
		s.Close()
		s = openQuick(t, path)
		if d := s.Damage(); d == nil || !strings.Contains(d.Reason, "the last run met damage") || !strings.Contains(d.Reason, fmt.Sprint(mid)) {
			t.Fatalf("reopened: damage %+v, want the file moved aside for the damage the last run met", d)
		}
	})
	t.Run("append", func(t *testing.T) {
		// An append whose dedupe key's check reads the damaged page.
		// bbolt's db.Update would roll it back by reading every page
		// again, to rebuild the free list, in a goroutine of its own
		// that dies on the damaged one; a commit first makes the file
		// one without a written free list.
		path := damaged(t, inbox)
		s := openQuick(t, path)
		if s.Damage() != nil {
			t.Fatalf("found at open: %v", s.Damage())
		}
		if err := s.OutboxAck(4); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			e := motion(1)
			e.DedupeKey = dedupeKey(1500)
			_, err := s.Append(t.Context(), e)
			isDamage(t, "an append that reads the damaged page", err)
		}
		if _, err := s.Append(t.Context(), motion(1)); err != nil {
			t.Errorf("an append away from the damage: %v", err)
		}
		if evs, err := s.Events(Filter{Limit: 5}); err != nil || len(evs) != 5 {
			t.Errorf("the first five events: %d %v", len(evs), err)
		}
		s.Close()
		movedAside(t, path)
	})
	t.Run("asked to check at open", func(t *testing.T) {
		path := damaged(t, mid)
		s := openTest(t, path)
		if d := s.Damage(); d == nil || !strings.Contains(d.Reason, fmt.Sprint(mid)) {
			t.Errorf("damage %v, want page %d named", d, mid)
		}
	})
}

// TestCheckAllWhileAppending: CheckAll reads one snapshot while appends
// go on, and finds nothing on a sound file.
func TestCheckAllWhileAppending(t *testing.T) {
	s := openQuick(t, tempPath(t))
	fill(t, s, 2000)
	done := make(chan error, 1)
	go func() {
		for range 20 {
			if err := s.CheckAll(t.Context()); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	fill(t, s, 2000)
	if err := <-done; err != nil {
		t.Errorf("CheckAll of a sound file: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.CheckAll(ctx); err == nil {
		t.Error("CheckAll with a cancelled context returned nil")
	}
	s.Close()
	if err := s.CheckAll(t.Context()); !errors.Is(err, ErrClosed) {
		t.Errorf("after close: %v", err)
	}
}

// TestQuickOpenSurvivesRandomDamage flips random bytes of a cleanly
// closed ledger and opens it without CheckAtOpen, as the body does: open,
// CheckAll, reads, an append, verify and a reopen must not panic, fault or
// hang. CheckAll must find what reading the file whole finds, and then the
// next Open must move the file aside.
func TestQuickOpenSurvivesRandomDamage(t *testing.T) {
	if testing.Short() {
		t.Skip("three hundred damaged files")
	}
	seedPath := filepath.Join(t.TempDir(), "seed.db")
	s := openQuick(t, seedPath)
	fill(t, s, 2000)
	s.Execute(t.Context(), grantCmd{id: "g"})
	s.Close()
	good, _ := os.ReadFile(seedPath)
	runDamaged(t, good, 300, func(t *testing.T, path string, _ []byte) {
		_, truth := precheck(path, 0)
		s, err := Open(Options{Path: path, AgentID: testAgent, BodyID: testBody, LockTimeout: time.Second})
		if err != nil {
			return
		}
		if s.Damage() != nil {
			s.Close()
			return
		}
		found := s.CheckAll(t.Context())
		if (truth != nil) != (found != nil) || found != nil && !errors.Is(found, ErrDamaged) {
			t.Errorf("read whole: %v; CheckAll after a quick open: %v", truth, found)
		}
		s.Events(Filter{Limit: 100000})
		s.Stats()
		s.Append(t.Context(), motion(1))
		s.Verify(t.Context())
		s.Close()
		s, err = Open(Options{Path: path, AgentID: testAgent, BodyID: testBody, LockTimeout: time.Second})
		if err != nil {
			return
		}
		defer s.Close()
		if found != nil && s.Damage() == nil {
			t.Errorf("CheckAll found %v, but the next open did not move the file aside", found)
		}
	})
}
