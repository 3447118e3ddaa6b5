package ledger

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// append writes one record of body, as appendOps writes a writer's.
func (j *journal) append(body []byte) error { return j.write(append(j.head(), body...)) }

// body is the record's body, as appendOps writes it.
func (r *jrec) body() []byte { return r.appendBody(nil) }

// journalFile is a journal's bytes with the records given, of tag and gen
// numbered from 0, and size bytes long.
func journalFile(t testing.TB, size int64, tag, gen uint64, bodies ...[]byte) []byte {
	t.Helper()
	path := t.TempDir() + "/j"
	j, _, _, err := openJournal(path, size, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	j.tag = tag
	j.restart(gen)
	for _, b := range bodies {
		if err := j.append(b); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// A scan takes the generation's records in order from the start, and
// stops at the first that is not the next one whole.
func TestJournalFraming(t *testing.T) {
	a, b, c := []byte("first"), []byte("second record"), []byte("third")
	whole := journalFile(t, 64<<10, 7, 3, a, b, c)
	recLen := func(body []byte) int { return journalHeader + len(body) }
	for _, tc := range []struct {
		name  string
		data  func() []byte
		tag   uint64
		gen   uint64
		want  int
		bytes int
	}{
		{"whole", func() []byte { return whole }, 7, 3, 3, recLen(a) + recLen(b) + recLen(c)},
		{"another generation", func() []byte { return whole }, 7, 4, 0, 0},
		{"another ledger's", func() []byte { return whole }, 8, 3, 0, 0},
		{"torn in the last body", func() []byte { return bytes.Clone(whole)[:recLen(a)+recLen(b)+recLen(c)-2] }, 7, 3, 2, recLen(a) + recLen(b)},
		{"a byte of the second flipped", func() []byte {
			d := bytes.Clone(whole)
			d[recLen(a)+journalHeader+3] ^= 1
			return d
		}, 7, 3, 1, recLen(a)},
		{"a length past the end", func() []byte {
			d := bytes.Clone(whole)
			d[recLen(a)] = 0xff
			return d
		}, 7, 3, 1, recLen(a)},
		{"a later generation written over the start", func() []byte {
			d := bytes.Clone(whole)
			copy(d, journalFile(t, 64<<10, 7, 4, c)[:recLen(c)])
			return d
		}, 7, 4, 1, recLen(c)},
		{"the earlier generation after it is not taken", func() []byte {
			d := bytes.Clone(whole)
			copy(d, journalFile(t, 64<<10, 7, 4, c)[:recLen(c)])
			return d
		}, 7, 3, 0, 0},
		{"empty", func() []byte { return make([]byte, 4096) }, 7, 3, 0, 0},
		{"short", func() []byte { return whole[:10] }, 7, 3, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bodies, end := journalRecords(tc.data(), tc.tag, tc.gen)
			if len(bodies) != tc.want || end != int64(tc.bytes) {
				t.Errorf("%d records ending at %d, want %d ending at %d", len(bodies), end, tc.want, tc.bytes)
			}
			for i, body := range bodies {
				if want := [][]byte{a, b, c}[i]; tc.name != "a later generation written over the start" && !bytes.Equal(body, want) {
					t.Errorf("record %d is %q, want %q", i, body, want)
				}
			}
		})
	}
	// A record that does not fit is refused, and the journal is unchanged.
	path := t.TempDir() + "/j"
	j, _, _, err := openJournal(path, 64<<10, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	if err := j.append(make([]byte, 64<<10)); err == nil || j.off != 0 || j.n != 0 {
		t.Errorf("a record larger than the journal: %v, at %d, record %d", err, j.off, j.n)
	}
}

// An open reads the records of the generation it replays, and no further:
// after a fold, the journal still holds the generation folded, and a
// start reads one header of it, not its megabytes.
func TestJournalOpenReadsOnlyItsGeneration(t *testing.T) {
	path := t.TempDir() + "/j"
	j, _, _, err := openJournal(path, 64<<10, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	j.tag = 7
	j.restart(3)
	for range 3 {
		if err := j.append(make([]byte, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	// Folded: generation 4 writes one record over the first of 3.
	j.restart(4)
	if err := j.append([]byte("next")); err != nil {
		t.Fatal(err)
	}
	j.close()
	for _, tc := range []struct {
		name     string
		tag, gen uint64
		want     int
	}{
		{"the generation after the fold", 7, 4, journalHeader + 4},
		{"the generation folded: nothing", 7, 3, 0},
		{"another ledger's: nothing", 8, 4, 0},
		{"a clean stop's (the next generation): nothing", 7, 5, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, data, _, err := openJournal(path, 64<<10, tc.tag, tc.gen)
			if err != nil {
				t.Fatal(err)
			}
			j.close()
			if len(data) != tc.want {
				t.Errorf("read %d bytes, want %d", len(data), tc.want)
			}
		})
	}
}

// A body says what the writer did, in order: it parses back to the same
// operations, on the same paths.
func TestJournalBody(t *testing.T) {
	var r jrec
	events := r.path([][]byte{bEvents})
	proj := r.path([][]byte{bProj, []byte("grants")})
	if again := r.path([][]byte{bEvents}); again != events {
		t.Fatalf("a path added twice: %d and %d", events, again)
	}
	r.sequence(events, 42)
	r.put(events, u64(42), []byte("record"))
	r.put(proj, []byte("g1"), nil)
	r.delete(proj, []byte("g0"))
	type op struct {
		kind       byte
		path       string
		key, value string
		seq        uint64
	}
	var got []op
	err := parseJournal(r.body(), func(o journalOp) error {
		got = append(got, op{o.kind, string(bytes.Join(o.path, []byte("/"))), string(o.key), string(o.value), o.seq})
		return nil
	})
	want := []op{
		{opSequence, "events", "", "", 42},
		{opPut, "events", string(u64(42)), "record", 0},
		{opPut, "projections/grants", "g1", "", 0},
		{opDelete, "projections/grants", "g0", "", 0},
	}
	if err != nil || len(got) != len(want) {
		t.Fatalf("parsed %+v, %v; want %+v", got, err, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("operation %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	for _, bad := range [][]byte{{}, {1}, {1, 1, 0}, append(bytes.Clone(r.body()), 'x'), append(bytes.Clone(r.body()), opPut, 9)} {
		if err := parseJournal(bad, func(journalOp) error { return nil }); !errors.Is(err, errJournal) {
			t.Errorf("%q parsed: %v", bad, err)
		}
	}
}

// FuzzJournal: no journal file, however torn or forged, makes the scan
// or the parse of its records panic or read past a record.
func FuzzJournal(f *testing.F) {
	var r jrec
	p := r.path([][]byte{bEvents})
	r.sequence(p, 1)
	r.put(p, u64(1), []byte("x"))
	r.delete(p, u64(0))
	f.Add(journalFile(f, 64<<10, 1, 1, r.body(), r.body())[:200], uint64(1), uint64(1))
	f.Add([]byte{0, 0, 0, 5}, uint64(0), uint64(0))
	f.Fuzz(func(t *testing.T, data []byte, tag, gen uint64) {
		bodies, end := journalRecords(data, tag, gen)
		if end > int64(len(data)) {
			t.Fatalf("the records end at %d of %d bytes", end, len(data))
		}
		for _, b := range append(bodies, data) {
			parseJournal(b, func(op journalOp) error {
				if len(op.path) == 0 {
					t.Fatal("an operation without a path")
				}
				return nil
			})
		}
	})
}

// What a crash left in the journal is in the ledger at the next open, up
// to the first record it tore; the ledger verifies and goes on from it.
func TestJournalRecoversWhatACrashLeft(t *testing.T) {
	path := tempPath(t)
	s := openTest(t, path)
	var ids []UUID
	for i := range 20 {
		res, err := s.Execute(t.Context(), grantCmd{id: "g", expected: uint64(i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res[0].ID)
	}
	last := s.jr.off
	s.crash()
	// The last record torn, as a power cut in its write would leave it.
	data, _ := os.ReadFile(JournalPath(path))
	data[last-1] ^= 0xff
	os.WriteFile(JournalPath(path), data, 0o640)
	s = openTest(t, path)
	evs, err := s.Events(Filter{Types: []string{"grant.added"}})
	if err != nil || len(evs) != 19 {
		t.Fatalf("%d grants after the crash, want 19: %v", len(evs), err)
	}
	for i, e := range evs {
		if e.ID != ids[i] || e.AggregateVersion != uint64(i+1) {
			t.Errorf("grant %d is %s version %d, want %s version %d", i, e.ID, e.AggregateVersion, ids[i], i+1)
		}
	}
	verifyOK(t, s)
	// It goes on from the last record whole.
	if _, err := s.Execute(t.Context(), grantCmd{id: "g", expected: 19}); err != nil {
		t.Fatalf("the version after the torn record: %v", err)
	}
	if res, _ := s.Append(t.Context(), motion(1)); res[0].Seq != uint64(len(evs))+2 {
		t.Errorf("the next sequence is %d, want %d", res[0].Seq, len(evs)+2)
	}
	verifyOK(t, s)
}

// A journal beside a ledger is only that ledger's: one left by a file
// that is gone is not replayed into a new one.
func TestJournalOfAnotherLedgerIsNotReplayed(t *testing.T) {
	path := tempPath(t)
	s := openTest(t, path)
	appendAll(t, s, grantEvent(1), grantEvent(2))
	s.crash()
	os.Remove(path)
	s = openTest(t, path)
	if evs, _ := s.Events(Filter{}); len(evs) != 0 {
		t.Errorf("a new ledger has %d events from another's journal", len(evs))
	}
	verifyOK(t, s)
}

// The open transaction is folded into bbolt FoldEvery after its first
// record, without a Close; readers see every append before.
func TestFoldEvery(t *testing.T) {
	s := openTest(t, tempPath(t), func(o *Options) { o.FoldEvery = 50 * time.Millisecond })
	appendAll(t, s, grantEvent(1))
	if evs, _ := s.Events(Filter{}); len(evs) != 1 {
		t.Fatalf("a reader sees %d events before the fold, want 1", len(evs))
	}
	inFile := func() (n int) {
		s.db.View(func(tx *bolt.Tx) error {
			n = tx.Bucket(bEvents).Stats().KeyN
			return nil
		})
		return n
	}
	deadline := time.Now().Add(10 * time.Second)
	for inFile() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("not folded within 10 s of a 50 ms FoldEvery")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The commit is seen before the fold restarts the journal; the fold
	// holds txMu until it is done.
	s.txMu.Lock()
	off, n := s.jr.off, s.jr.n
	s.txMu.Unlock()
	if off != 0 || n != 0 {
		t.Errorf("the journal after the fold: %d bytes, %d records", off, n)
	}
	verifyOK(t, s)
}

// failing is a projection that writes, then fails, on grant.failing: the
// batch it is in must be undone whole, and what the journal holds from
// before it kept.
type failing struct{}

func (failing) Name() string    { return "failing" }
func (failing) Types() []string { return []string{"action.", "grant."} }
func (failing) Apply(kv KV, e *Event) error {
	if err := kv.Put([]byte(e.ID.String()), []byte(e.Type)); err != nil {
		return err
	}
	if e.Type == "grant.failing" {
		return errors.New("this one fails")
	}
	return nil
}

func TestABatchThatFailsIsUndone(t *testing.T) {
	s := openTest(t, tempPath(t), func(o *Options) { o.Projections = append(o.Projections, failing{}) })
	appendAll(t, s, grantEvent(1), grantEvent(2))
	if _, err := s.Append(t.Context(), grantEvent(3), Event{Type: "grant.failing", Provenance: Told}); err == nil {
		t.Fatal("the failing append was taken")
	}
	appendAll(t, s, grantEvent(4))
	evs, _ := s.Events(Filter{})
	if len(evs) != 3 || evs[2].Seq != 3 {
		t.Fatalf("%d events after a failed batch (last seq %d), want 3, the last at 3", len(evs), evs[len(evs)-1].Seq)
	}
	n := 0
	s.ReadProjection("failing", func(kv ReadKV) error { return kv.ForEach(func(_, _ []byte) error { n++; return nil }) })
	if n != 3 {
		t.Errorf("the projection has %d keys, want 3: the failed batch's stayed", n)
	}
	verifyOK(t, s)
}

// What the body senses is seen at once, before it is on disk, and the
// uplink gets it only once it is; a record put on disk puts every one
// before it there too, so a record of what was decided about a sensed
// event (the gate's) never outlives the event in a crash.
func TestSensedEventsAreSeenAtOnceAndKeptWithWhatFollows(t *testing.T) {
	path := tempPath(t)
	s := openTest(t, path, func(o *Options) { o.GroupCommit = time.Hour })
	q, err := s.QueueGrouped(t.Context(), time.Time{}, motion(1))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.held.Load() < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the grouped append never waited")
		}
		time.Sleep(time.Millisecond)
	}
	if evs, _ := s.Events(Filter{}); len(evs) != 1 {
		t.Fatalf("a reader sees %d events while the grouped one waits, want 1", len(evs))
	}
	if rows, _ := s.OutboxNext(0, 10); len(rows) != 0 {
		t.Errorf("the uplink is offered %d rows not yet on disk", len(rows))
	}
	select {
	case <-q.Done():
		t.Fatal("the grouped append was answered before it was on disk")
	default:
	}
	// The decision about it: on disk before its caller goes on, and the
	// sensed event with it.
	appendAll(t, s, grantEvent(1))
	if _, err := q.Wait(); err != nil {
		t.Fatal(err)
	}
	if rows, _ := s.OutboxNext(0, 10); len(rows) != 2 {
		t.Errorf("the uplink is offered %d rows once on disk, want 2", len(rows))
	}
	s.crash()
	s = openTest(t, path)
	if evs, _ := s.Events(Filter{}); len(evs) != 2 || evs[0].Type != "camera.motion_started" {
		t.Errorf("after the crash: %d events, want the sensed one and the record after it", len(evs))
	}
}

// ExecuteSoon answers once its command is applied, refusals as Execute
// does, and its events are on disk within GroupCommit without another
// append to take them there.
func TestExecuteSoon(t *testing.T) {
	s := openTest(t, tempPath(t), func(o *Options) { o.GroupCommit = 200 * time.Millisecond })
	before := s.commits.Load()
	if _, err := s.ExecuteSoon(t.Context(), grantCmd{id: "g"}); err != nil {
		t.Fatal(err)
	}
	if evs, _ := s.Events(Filter{}); len(evs) != 1 {
		t.Fatalf("a reader sees %d events once it returned, want 1", len(evs))
	}
	no := errors.New("not allowed")
	if _, err := s.ExecuteSoon(t.Context(), grantCmd{id: "g", expected: 1, refuse: no}); !errors.Is(err, no) {
		t.Errorf("a refusal: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.durable.Load() < 1 {
		if time.Now().After(deadline) {
			t.Fatal("not on disk within 10 s of a 200 ms GroupCommit")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := s.commits.Load() - before; n != 1 {
		t.Errorf("%d syncs, want 1", n)
	}
}

// A record synced costs the disk the page or two it is on, not more: the
// head of a new journal is written with zeros a page at a time, so no
// page-cache folio around a record is larger than a page (a 64 KiB zero
// write once made each sync write 64 KiB). Counted by the kernel's
// write_bytes of this process; skipped where the files are on no disk.
func TestJournalSyncWritesAPage(t *testing.T) {
	j, _, _, err := openJournal(t.TempDir()+"/j", 8<<20, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	before := processWriteBytes(t)
	rec := make([]byte, 700)
	const n = 100
	for range n {
		if err := j.append(rec); err != nil {
			t.Fatal(err)
		}
		if err := j.sync(); err != nil {
			t.Fatal(err)
		}
	}
	wrote := processWriteBytes(t) - before
	if wrote == 0 {
		t.Skip("write_bytes counts nothing here (no disk under the test's files)")
	}
	t.Logf("%d records synced one by one: %d bytes written, %d a sync", n, wrote, wrote/n)
	if wrote/n > 16<<10 {
		t.Errorf("%d bytes written a sync of a %d-byte record, want a page or two", wrote/n, len(rec)+journalHeader)
	}
}

func processWriteBytes(t *testing.T) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skipf("no /proc/self/io: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "write_bytes: "); ok {
			n, _ := strconv.ParseUint(v, 10, 64)
			return n
		}
	}
	t.Skip("no write_bytes in /proc/self/io")
	return 0
}
