package ledger

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// openProjection keeps, per action id, its record while the action is
// not closed, and forgets the action once the archive takes its closing
// record: what act's action_results does.
type openProjection struct{}

func (openProjection) Name() string    { return "test_actions" }
func (openProjection) Types() []string { return []string{"action."} }
func (openProjection) Apply(kv KV, e *Event) error {
	return kv.Put([]byte(e.AggregateID), []byte(e.Type))
}
func (openProjection) Closes(e *Event) bool { return e.Type == "action.succeeded" }
func (openProjection) Forget(kv KV, e *Event) error {
	if e.Type == "action.succeeded" && string(kv.Get([]byte(e.AggregateID))) == e.Type {
		return kv.Delete([]byte(e.AggregateID))
	}
	return nil
}

// archiveClock is a wall clock moved by hand.
type archiveClock struct{ now time.Time }

func (c *archiveClock) Now() time.Time { return c.now }

func archiveOpts(c *archiveClock, mod ...func(*Options)) func(*Options) {
	return func(o *Options) {
		o.Now = c.Now
		o.NoOutbox = true
		o.AuditKeep = 30 * 24 * time.Hour
		o.ArchiveSegment = 1 // whatever is due
		o.Projections = append(o.Projections, openProjection{})
		for _, m := range mod {
			m(o)
		}
	}
}

// actions appends n finished actions: a proposal with a dedupe key and a
// success, of aggregate "action:<i>".
func actions(t *testing.T, s *Store, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		id := "action:" + strconv.Itoa(i)
		_, err := s.Append(t.Context(),
			Event{Type: "action.proposed", Provenance: Told, AggregateID: id, DedupeKey: "key-" + strconv.Itoa(i), Payload: mustPayload(map[string]any{"pad": strings.Repeat("x", 200), "i": i})},
			Event{Type: "action.succeeded", Provenance: Told, AggregateID: id, Payload: mustPayload(map[string]any{"i": i})})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// newArchiveClock is a clock at the start of 2026.
func newArchiveClock() *archiveClock {
	return &archiveClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

// aged moves the clock past audit_keep (30 days in archiveOpts) and
// appends an event, whose commit writes the checkpoint that shows the
// events before it old enough.
func aged(t *testing.T, s *Store, c *archiveClock) {
	t.Helper()
	c.now = c.now.Add(31 * 24 * time.Hour)
	if _, err := s.Append(t.Context(), Event{Type: "grant.added", Provenance: Told}); err != nil {
		t.Fatal(err)
	}
}

func TestArchive(t *testing.T) {
	path := tempPath(t)
	c := newArchiveClock()
	s := openTest(t, path, archiveOpts(c))
	actions(t, s, 0, 3000)
	// Younger than audit_keep: nothing moves.
	c.now = c.now.Add(29 * 24 * time.Hour)
	if res, err := s.Archive(t.Context()); err != nil || res.Events != 0 {
		t.Fatalf("day 29: %+v %v, want nothing archived", res, err)
	}
	c.now = c.now.Add(2 * 24 * time.Hour)
	actions(t, s, 3000, 10) // young: stays in the file
	res, err := s.Archive(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Events != 6000 || res.Segments < 2 || res.Keys != 3000 {
		t.Fatalf("day 31: %+v, want the 6000 records of the first 3000 actions in more than one segment, and their 3000 keys", res)
	}
	all, err := s.Events(Filter{Archive: true, Limit: 100000})
	if err != nil || len(all) != 6020 {
		t.Fatalf("events with the archive: %d %v, want 6020", len(all), err)
	}
	for i, e := range all {
		if e.Seq != uint64(i+1) {
			t.Fatalf("event %d has sequence %d: the archive's events and the file's are not one sequence", i, e.Seq)
		}
	}
	if file, _ := s.Events(Filter{Limit: 100000}); len(file) != 20 || file[0].Seq != 6001 {
		t.Fatalf("the file holds %d events from %d, want the 20 young ones from 6001", len(file), file[0].Seq)
	}
	// Paged reads cross from the archive into the file.
	var paged []Stored
	after := uint64(0)
	for {
		evs, next, more, err := s.Scan(Filter{Archive: true, After: after, Limit: 700, Types: []string{"action.proposed"}})
		if err != nil {
			t.Fatal(err)
		}
		paged = append(paged, evs...)
		if !more {
			break
		}
		after = next
	}
	if len(paged) != 3010 {
		t.Errorf("paged proposals: %d, want 3010", len(paged))
	}
	st, _ := s.Stats()
	if st.InboxKeys != 10 || st.Aggregates != 10 || st.Events != 20 {
		t.Errorf("stats %+v: want the young 10 keys, 10 aggregates, 20 events", st)
	}
	checkArchived := func(s *Store) {
		t.Helper()
		r, err := s.Append(t.Context(), Event{Type: "action.proposed", Provenance: Told, DedupeKey: "key-17", AggregateID: "action:new"})
		if err != nil || !r[0].Duplicate || !r[0].Archived || r[0].Seq != 0 {
			t.Errorf("a repeat of an archived key: %+v %v, want a duplicate of an archived event", r, err)
		}
		var kept int
		s.ReadProjection("test_actions", func(kv ReadKV) error {
			return kv.ForEach(func(k, v []byte) error { kept++; return nil })
		})
		if kept != 10 {
			t.Errorf("the projection keeps %d actions, want the 10 young", kept)
		}
		if r, err := s.Verify(t.Context()); err != nil || !r.OK() || r.Archived != 6000 || r.Events != 20 || r.NotRebuilt != "" {
			t.Errorf("verify: %+v %v", r, err)
		}
		if r, err := s.VerifyArchive(t.Context()); err != nil || !r.OK() || r.Archived != 6000 {
			t.Errorf("verify the archive: %+v %v", r, err)
		}
	}
	checkArchived(s)
	s.Close()
	// After a restart, from the file and the archive.
	s = openTest(t, path, archiveOpts(c))
	checkArchived(s)
	as, _ := s.ArchiveStats()
	if as.Events != 6000 || as.PastKeys != 3000 || as.PastFalseRate <= 0 || as.PastFalseRate > 1e-6 || as.Bytes <= 0 {
		t.Errorf("archive stats %+v", as)
	}
	s.Close()
	// A projection added later is built from the archive too.
	s = openTest(t, path, archiveOpts(c, func(o *Options) {
		o.Projections = append(o.Projections, proposals{})
	}))
	var n uint64
	s.ReadProjection("test_proposals", func(kv ReadKV) error { n = getU64(kv.Get([]byte("n"))); return nil })
	if n != 3010 {
		t.Errorf("a projection built at open counts %d proposals, want 3010", n)
	}
}

// proposals counts the proposals.
type proposals struct{}

func (proposals) Name() string    { return "test_proposals" }
func (proposals) Types() []string { return []string{"action.proposed"} }
func (proposals) Apply(kv KV, e *Event) error {
	return kv.Put([]byte("n"), u64(getU64(kv.Get([]byte("n")))+1))
}

// archivedTwo is a closed ledger whose archive took 3,000 actions in two
// segments at least, and the clock it was written on.
func archivedTwo(t *testing.T) (string, *archiveClock) {
	t.Helper()
	path := tempPath(t)
	c := newArchiveClock()
	s := openTest(t, path, archiveOpts(c))
	actions(t, s, 0, 3000)
	aged(t, s, c)
	if res, err := s.Archive(t.Context()); err != nil || res.Segments < 2 {
		t.Fatalf("%+v %v, want two segments at least", res, err)
	}
	s.Close()
	return path, c
}

func TestArchiveIsChecked(t *testing.T) {
	path, c := archivedTwo(t)
	dir := ArchiveDir(path)
	seg := filepath.Join(dir, segName(1))
	orig, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		do   func()
		want string
	}{
		{"a byte changed", func() {
			b := bytes.Clone(orig)
			b[len(b)/2] ^= 1
			os.WriteFile(seg, b, 0o640)
		}, "its hash does not match"},
		{"a segment missing", func() { os.Remove(seg) }, "segment 1 is missing"},
		{"a segment cut short", func() { os.WriteFile(seg, orig[:len(orig)-40], 0o640) }, "segment 1"},
		{"another segment in its place", func() {
			// Well formed, its hash right, but not the one the chain
			// names.
			other, err := writeSegment(t.TempDir(), 0, 1, [32]byte{1}, []archived{{seq: 2000, rec: []byte{0xa0}}})
			if err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(other.Path)
			os.WriteFile(seg, b, 0o640)
		}, "does not follow the one before it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.do()
			defer os.WriteFile(seg, orig, 0o640)
			s := openTest(t, path, archiveOpts(c))
			defer s.Close()
			r, err := s.VerifyArchive(t.Context())
			if err != nil || r.OK() || !strings.Contains(strings.Join(r.Problems, "\n"), tc.want) {
				t.Errorf("verify the archive: %v %v, want a problem saying %q", r.Problems, err, tc.want)
			}
			if r, err := s.Verify(t.Context()); err != nil || r.OK() {
				t.Errorf("verify: %v %v, want problems", r.Problems, err)
			}
		})
	}
	s := openTest(t, path, archiveOpts(c))
	if r, err := s.VerifyArchive(t.Context()); err != nil || !r.OK() {
		t.Errorf("put back: %v %v", r.Problems, err)
	}
}

func TestArchiveDiskBudget(t *testing.T) {
	path := tempPath(t)
	c := newArchiveClock()
	s := openTest(t, path, archiveOpts(c))
	actions(t, s, 0, 3000)
	aged(t, s, c)
	if _, err := s.Archive(t.Context()); err != nil {
		t.Fatal(err)
	}
	before, _ := s.ArchiveStats()
	s.Close()
	// A budget the file alone and a segment or two fit in (the files as
	// Close left them: it folds the journal into the file).
	var files int64
	for _, p := range []string{path, JournalPath(path)} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		files += fi.Size()
	}
	budget := files + before.Bytes - before.Bytes/2
	s = openTest(t, path, archiveOpts(c, func(o *Options) { o.DiskBudget = budget }))
	res, err := s.Archive(t.Context())
	if err != nil || len(res.Deleted) == 0 {
		t.Fatalf("%+v %v, want segments deleted", res, err)
	}
	after, _ := s.ArchiveStats()
	if after.DiskBytes > budget || after.Deleted == 0 || after.Segments == 0 || after.FirstKept <= 1 {
		t.Errorf("after: %+v (budget %d), want under it with the newest segments kept", after, budget)
	}
	evs, _ := s.Events(Filter{Types: []string{"ledger.archive_deleted"}})
	if len(evs) != len(res.Deleted) {
		t.Fatalf("%d deletions recorded, %d done", len(evs), len(res.Deleted))
	}
	var d ArchiveDeleted
	if err := UnmarshalPayload(evs[0].Payload, &d); err != nil || d.From != 1 || d.Events == 0 || d.Reason != "over the disk budget" {
		t.Errorf("recorded %+v %v", d, err)
	}
	// What is left still verifies, from the chain's new start; the
	// projections cannot be rebuilt without the deleted history, and
	// verify says so.
	if r, err := s.VerifyArchive(t.Context()); err != nil || !r.OK() {
		t.Errorf("verify the archive: %v %v", r.Problems, err)
	}
	if r, err := s.Verify(t.Context()); err != nil || !r.OK() || r.NotRebuilt == "" {
		t.Errorf("verify: %+v %v", r, err)
	}
	// Repeats of keys whose events were deleted are still refused.
	if r, _ := s.Append(t.Context(), Event{Type: "action.proposed", Provenance: Told, DedupeKey: "key-1"}); !r[0].Archived {
		t.Errorf("a key of a deleted segment: %+v", r)
	}
	// An administrator deletes the rest.
	d, err = s.DeleteArchive(after.FirstKept+after.Segments-1, "admin:uid=0")
	if err != nil || d.By != "admin:uid=0" {
		t.Fatalf("%+v %v", d, err)
	}
	if st, _ := s.ArchiveStats(); st.Segments != 0 || st.Bytes != 0 {
		t.Errorf("after deleting all: %+v", st)
	}
	if _, err := s.DeleteArchive(1, "admin"); err == nil {
		t.Error("deleting a segment already gone: no error")
	}
}

// A crash between writing a segment and committing its transaction leaves
// the segment and the events: the next pass removes the segment and
// writes it again.
func TestArchiveAfterACrash(t *testing.T) {
	path := tempPath(t)
	c := newArchiveClock()
	s := openTest(t, path, archiveOpts(c))
	actions(t, s, 0, 100)
	aged(t, s, c)
	s.Close()
	dir := ArchiveDir(path)
	if _, err := writeSegment(dir, 1, 1, [32]byte{}, []archived{{seq: 1, rec: []byte{0xa0}}}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, segName(2)+".tmp"), []byte("half"), 0o640)
	s = openTest(t, path, archiveOpts(c))
	res, err := s.Archive(t.Context())
	if err != nil || res.Events != 200 {
		t.Fatalf("%+v %v", res, err)
	}
	if r, err := s.Verify(t.Context()); err != nil || !r.OK() || r.Archived != 200 {
		t.Errorf("verify: %+v %v", r, err)
	}
	if _, other, _ := segmentIndexes(dir); len(other) != 0 {
		t.Errorf("left in the archive: %v", other)
	}
}

// An audit record still waiting for the uplink stays in the file.
func TestArchiveWaitsForTheOutbox(t *testing.T) {
	c := newArchiveClock()
	s := openTest(t, tempPath(t), archiveOpts(c, func(o *Options) { o.NoOutbox = false }))
	actions(t, s, 0, 10)
	aged(t, s, c)
	if res, err := s.Archive(t.Context()); err != nil || res.Events != 0 {
		t.Fatalf("%+v %v, want nothing archived while it waits", res, err)
	}
	s.OutboxAck(1, 2, 3, 4)
	if res, err := s.Archive(t.Context()); err != nil || res.Events != 4 {
		t.Fatalf("%+v %v, want the 4 sent", res, err)
	}
}

func TestPastKeys(t *testing.T) {
	// Sized for 10,000: every key added is found, and of 200,000 others
	// about none (one in a million or less expected).
	s := openTest(t, tempPath(t), func(o *Options) { o.PastKeys = 10_000 })
	err := s.update(func(w *writer) error {
		for i := range 10_000 {
			if err := w.pastAdd(pastDedupe, []byte("k"+strconv.Itoa(i))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s.read(func(tx *bolt.Tx) error {
		b := tx.Bucket(bPast)
		for i := range 10_000 {
			if !pastHas(b, pastDedupe, []byte("k"+strconv.Itoa(i))) {
				t.Fatalf("key %d added, not found", i)
			}
		}
		wrong := 0
		for i := range 200_000 {
			if pastHas(b, pastDedupe, []byte(fmt.Sprintf("other-%d", i))) {
				wrong++
			}
		}
		if wrong > 5 {
			t.Errorf("%d of 200,000 keys never added found", wrong)
		}
		return nil
	})
}

func FuzzSegment(f *testing.F) {
	dir := f.TempDir()
	seg, err := writeSegment(dir, 7, 1, [32]byte{}, []archived{{seq: 3, rec: []byte{0xa1, 0x01, 0x02}}, {seq: 9, rec: []byte{0xa0}}})
	if err != nil {
		f.Fatal(err)
	}
	b, _ := os.ReadFile(seg.Path)
	f.Add(b)
	f.Add(b[:segHeaderLen])
	f.Add([]byte(segMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		d := t.TempDir()
		if err := os.WriteFile(filepath.Join(d, segName(1)), data, 0o640); err != nil {
			t.Fatal(err)
		}
		var last uint64
		got, err := readSegment(d, 1, 0, func(seq uint64, rec []byte) error {
			if seq <= last && last != 0 {
				t.Fatalf("event %d after %d", seq, last)
			}
			last = seq
			return nil
		})
		if err == nil && (got.Count == 0 || last != got.Last) {
			t.Fatalf("read %+v without error, last %d", got, last)
		}
		readSegmentHeader(d, 1)
	})
}

// A segment is written once a segment's worth is due: a pass every few
// minutes does not make a file each.
func TestArchiveWaitsForASegmentsWorth(t *testing.T) {
	c := newArchiveClock()
	s := openTest(t, tempPath(t), archiveOpts(c, func(o *Options) { o.ArchiveSegment = 0 }))
	actions(t, s, 0, 100)
	aged(t, s, c)
	if res, err := s.Archive(t.Context()); err != nil || res.Events != 0 {
		t.Fatalf("%+v %v, want nothing yet", res, err)
	}
	c.now = c.now.Add(-31 * 24 * time.Hour) // a step back: the running clock goes on
	actions(t, s, 100, 3000)
	c.now = c.now.Add(62 * 24 * time.Hour)
	s.Append(t.Context(), Event{Type: "grant.added", Provenance: Told})
	res, err := s.Archive(t.Context())
	if err != nil || res.Segments < 1 || res.Events < 3000 {
		t.Fatalf("%+v %v, want segments of at least half a MiB", res, err)
	}
	st, _ := s.ArchiveStats()
	if st.Bytes/int64(st.Segments) < 32<<10 {
		t.Errorf("%+v: segments of %d bytes", st, st.Bytes/int64(st.Segments))
	}
}

// Only the classes that keep past keys (audit, safety) keep them: the
// keys of the control plane's own records go with their events.
func TestArchiveKeepsOnlyTheKeysOfItsClasses(t *testing.T) {
	c := newArchiveClock()
	s := openTest(t, tempPath(t), archiveOpts(c))
	if _, err := s.Append(t.Context(), Event{Type: "gate.decided", Provenance: Inferred, DedupeKey: "gate/1"},
		Event{Type: "action.proposed", Provenance: Told, AggregateID: "action:x", DedupeKey: "action:1"}); err != nil {
		t.Fatal(err)
	}
	aged(t, s, c)
	if res, err := s.Archive(t.Context()); err != nil || res.Events != 2 || res.Keys != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	r, _ := s.Append(t.Context(), Event{Type: "gate.decided", Provenance: Inferred, DedupeKey: "gate/1"},
		Event{Type: "action.proposed", Provenance: Told, AggregateID: "action:x", DedupeKey: "action:1"})
	if r[0].Duplicate || !r[1].Archived {
		t.Errorf("%+v: want the gate's key free again, the action's refused", r)
	}
}

// The archive's record keeps its segments' bytes, so an open need not
// stat each one; a record from before it kept them has them summed from
// the files at open, and the next pass records them. Verify compares the
// record with the files.
func TestArchiveRecordsItsBytes(t *testing.T) {
	path, c := archivedTwo(t)
	var s *Store
	files := func() int64 {
		var n int64
		idx, _, _ := segmentIndexes(ArchiveDir(path))
		for _, i := range idx {
			fi, err := os.Stat(filepath.Join(ArchiveDir(path), segName(i)))
			if err != nil {
				t.Fatal(err)
			}
			n += fi.Size()
		}
		return n
	}
	// setHead rewrites the archive's record in the file with f.
	setHead := func(f func([]byte) []byte) {
		t.Helper()
		db, err := bolt.Open(path, 0o640, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := db.Update(func(tx *bolt.Tx) error {
			m := tx.Bucket(bMeta)
			return m.Put(kArchive, f(bytes.Clone(m.Get(kArchive))))
		}); err != nil {
			t.Fatal(err)
		}
	}
	head := func() archiveHead {
		t.Helper()
		s := openTest(t, path, archiveOpts(c))
		defer s.Close()
		h, err := s.archiveHead()
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	if h := head(); !h.HasBytes || int64(h.Bytes) != files() {
		t.Fatalf("the record: %d bytes (kept: %v), the files %d", h.Bytes, h.HasBytes, files())
	}

	// A record without them.
	setHead(func(b []byte) []byte { return b[:archiveHeadOld] })
	s = openTest(t, path, archiveOpts(c))
	if st, err := s.ArchiveStats(); err != nil || st.Bytes != files() {
		t.Fatalf("from an older record: %d bytes %v, want the files' %d", st.Bytes, err, files())
	}
	// A pass with nothing to archive records them.
	if res, err := s.Archive(t.Context()); err != nil || res.Segments != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	s.Close()
	if h := head(); !h.HasBytes || int64(h.Bytes) != files() {
		t.Fatalf("after a pass: %d bytes (kept: %v), the files %d", h.Bytes, h.HasBytes, files())
	}
	// And follow what the next segments add.
	s = openTest(t, path, archiveOpts(c))
	actions(t, s, 3000, 2000)
	aged(t, s, c)
	if res, err := s.Archive(t.Context()); err != nil || res.Segments == 0 {
		t.Fatalf("%+v %v", res, err)
	}
	s.Close()
	if h := head(); !h.HasBytes || int64(h.Bytes) != files() {
		t.Fatalf("after a segment more: %d bytes (kept: %v), the files %d", h.Bytes, h.HasBytes, files())
	}

	// A record that does not match the files.
	setHead(func(b []byte) []byte {
		binary.BigEndian.PutUint64(b[archiveHeadOld:], 12345)
		return b
	})
	s = openTest(t, path, archiveOpts(c))
	defer s.Close()
	r, err := s.VerifyArchive(t.Context())
	if err != nil || r.OK() || !strings.Contains(strings.Join(r.Problems, "\n"), "the ledger recorded 12345") {
		t.Errorf("verify: %v %v, want the bytes recorded named", r.Problems, err)
	}
}

// An archive is deleted only by a recorded deletion: a damaged ledger's
// moves aside with it, and one beside a file that is not its ledger's
// (the file removed by hand) is moved aside whole, never taken for a
// crash's leftovers.
func TestArchiveIsNeverTakenForLeftovers(t *testing.T) {
	t.Run("damaged", func(t *testing.T) {
		path, c := archivedTwo(t)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i := 16; i < 32; i++ { // both meta pages' magic
			b[i] ^= 0xff
			b[4096+i] ^= 0xff
		}
		os.WriteFile(path, b, 0o640)
		s := openTest(t, path, archiveOpts(c))
		d := s.Damage()
		if d == nil {
			t.Fatal("the damage was not detected")
		}
		if idx, _, _ := segmentIndexes(ArchiveDir(d.MovedTo)); len(idx) < 2 {
			t.Errorf("the damaged ledger's archive holds %v beside it, want its segments", idx)
		}
		if _, err := os.Stat(ArchiveDir(path)); err == nil {
			if idx, _, _ := segmentIndexes(ArchiveDir(path)); len(idx) != 0 {
				t.Errorf("the new ledger's archive holds %v", idx)
			}
		}
	})
	t.Run("another ledger's", func(t *testing.T) {
		path, c := archivedTwo(t)
		before, _, _ := segmentIndexes(ArchiveDir(path))
		os.Remove(path)
		os.Remove(JournalPath(path))
		s := openTest(t, path, archiveOpts(c))
		if _, err := s.Archive(t.Context()); err != nil {
			t.Fatal(err)
		}
		moved, _ := filepath.Glob(ArchiveDir(path) + ".foreign.*")
		if len(moved) != 1 {
			t.Fatalf("moved aside: %v, want the old archive's directory", moved)
		}
		if idx, _, _ := segmentIndexes(moved[0]); !slices.Equal(idx, before) {
			t.Errorf("the old archive holds %v, had %v", idx, before)
		}
		if r, err := s.VerifyArchive(t.Context()); err != nil || !r.OK() {
			t.Errorf("the new ledger's archive: %v %v", r.Problems, err)
		}
	})
}

// keptProjection is openProjection as an earlier body kept it: it neither
// forgot what the archive took nor closed its actions.
type keptProjection struct{}

func (keptProjection) Name() string                { return openProjection{}.Name() }
func (keptProjection) Types() []string             { return openProjection{}.Types() }
func (keptProjection) Apply(kv KV, e *Event) error { return openProjection{}.Apply(kv, e) }

// A projection that forgets (and closes), opened on a file whose archive
// was written while it did not, forgets what the archive holds once, at
// open: the file then is what verify rebuilds.
func TestForgettingIsCaughtUp(t *testing.T) {
	path := tempPath(t)
	c := newArchiveClock()
	earlier := archiveOpts(c, func(o *Options) { o.Projections[len(o.Projections)-1] = keptProjection{} })
	s := openTest(t, path, earlier)
	actions(t, s, 0, 300)
	aged(t, s, c)
	if res, err := s.Archive(t.Context()); err != nil || res.Events != 600 {
		t.Fatalf("archive: %+v %v", res, err)
	}
	s.Close()
	kept := func(s *Store) (n int) {
		t.Helper()
		if err := s.ReadProjection("test_actions", func(kv ReadKV) error {
			return kv.ForEach(func(k, v []byte) error { n++; return nil })
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	s = openTest(t, path, earlier)
	if n := kept(s); n != 300 {
		t.Fatalf("the earlier projection keeps %d actions, want the 300 archived", n)
	}
	s.Close()

	s = openTest(t, path, archiveOpts(c))
	if n := kept(s); n != 0 {
		t.Errorf("after the catch-up the projection keeps %d actions, want none", n)
	}
	if r, err := s.Verify(t.Context()); err != nil || !r.OK() {
		t.Errorf("verify: %v %v", r.Problems, err)
	}
	if st, err := s.Stats(); err != nil || st.Aggregates != 0 {
		t.Errorf("aggregates: %d %v, want the 300 closed ones dropped", st.Aggregates, err)
	}
	s.Close()
	if got := string(readMeta(t, path, kForgetting)); got != "test_actions" {
		t.Errorf("meta forgetting: %q", got)
	}
}

// readMeta reads key of the meta bucket of the closed ledger at path.
func readMeta(t *testing.T, path string, key []byte) []byte {
	t.Helper()
	db, err := bolt.Open(path, 0o640, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v []byte
	db.View(func(tx *bolt.Tx) error {
		v = bytes.Clone(tx.Bucket(bMeta).Get(key))
		return nil
	})
	return v
}
