package ledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		crashChild()
		return
	}
	goleak.VerifyTestMain(m)
}

var (
	testAgent = UUID{1}
	testBody  = UUID{2}
)

func openTest(t testing.TB, path string, mod ...func(*Options)) *Store {
	t.Helper()
	opts := Options{Path: path, AgentID: testAgent, BodyID: testBody, CheckAtOpen: true,
		Projections: []Projection{TypeCounts{Follow: []string{"grant.", "estop.", "ledger."}}}}
	for _, m := range mod {
		m(&opts)
	}
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func tempPath(t testing.TB) string { return filepath.Join(t.TempDir(), "ledger.db") }

func motion(i int) Event {
	return Event{Type: "camera.motion_started", ChannelID: "camera.front", Provenance: Observed, SourceSequence: uint64(i)}
}

func TestAppendAndRead(t *testing.T) {
	s := openTest(t, tempPath(t))
	res, err := s.Append(t.Context(), motion(1), motion(2))
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].Seq != 1 || res[1].Seq != 2 || res[0].Duplicate {
		t.Fatalf("results %+v", res)
	}
	evs, err := s.Events(Filter{})
	if err != nil || len(evs) != 2 {
		t.Fatalf("events %v %v", evs, err)
	}
	e := evs[1]
	if e.ID != res[1].ID || e.AgentID != testAgent || e.BodyID != testBody || e.SchemaVersion != SchemaVersion || e.IngestedAt == 0 || e.SourceSequence != 2 {
		t.Errorf("stored %+v", e)
	}
	if evs, _ := s.Events(Filter{After: 1}); len(evs) != 1 || evs[0].Seq != 2 {
		t.Errorf("after 1: %+v", evs)
	}
	if evs, _ := s.Events(Filter{Types: []string{"audio."}}); len(evs) != 0 {
		t.Errorf("type filter: %+v", evs)
	}
}

func TestRefusesInvalidEvents(t *testing.T) {
	s := openTest(t, tempPath(t))
	_, err := s.Append(t.Context(), motion(1), Event{Type: "Bad Type"})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "event 1") {
		t.Errorf("got %v, want ErrInvalid naming event 1", err)
	}
	if evs, _ := s.Events(Filter{}); len(evs) != 0 {
		t.Errorf("a refused request wrote %d events", len(evs))
	}
}

func TestDedupe(t *testing.T) {
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	s := openTest(t, tempPath(t), func(o *Options) { o.Now = clock })
	first := motion(1)
	first.ID = NewID()
	first.DedupeKey = "front:1"
	r1, err := s.Append(t.Context(), first)
	if err != nil {
		t.Fatal(err)
	}
	// The same event id again, and another event with the same dedupe key.
	again := motion(1)
	again.DedupeKey = "front:1"
	r2, err := s.Append(t.Context(), first, again)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range r2 {
		if !r.Duplicate || r.Seq != r1[0].Seq {
			t.Errorf("repeat %d: %+v, want a duplicate of seq %d", i, r, r1[0].Seq)
		}
	}
	// Within one request.
	a, b := motion(2), motion(2)
	a.DedupeKey, b.DedupeKey = "front:2", "front:2"
	r3, _ := s.Append(t.Context(), a, b)
	if r3[0].Duplicate || !r3[1].Duplicate || r3[1].Seq != r3[0].Seq {
		t.Errorf("in one request: %+v", r3)
	}
	// A day later the key still holds: it lives as long as its event.
	now = now.Add(25 * time.Hour)
	later := motion(1)
	later.DedupeKey = "front:1"
	if r, _ := s.Append(t.Context(), later); !r[0].Duplicate || r[0].Seq != r1[0].Seq {
		t.Errorf("a day later: %+v, want a duplicate of seq %d", r[0], r1[0].Seq)
	}
	// Once retention deleted the event (its TTL run out on the running
	// clock), the key is free again.
	now = now.Add(ClassTelemetry.TTL)
	if res, err := s.Retain(t.Context()); err != nil || res.Events != 2 || res.InboxKeys != 2 {
		t.Fatalf("retain: %+v %v, want both events and their keys", res, err)
	}
	late := motion(1)
	late.DedupeKey = "front:1"
	r4, _ := s.Append(t.Context(), late)
	if r4[0].Duplicate {
		t.Errorf("after retention: %+v", r4)
	}
	if evs, _ := s.Events(Filter{}); len(evs) != 2 {
		t.Errorf("%d events stored, want 2 (ledger.retained and the new one)", len(evs))
	}
	verifyOK(t, s) // the key used again is counted once
}

// grantCmd is a command on an aggregate that expects a version.
type grantCmd struct {
	id       string
	expected uint64
	refuse   error
}

func (c grantCmd) Decide(v *View) ([]Event, error) {
	if c.refuse != nil {
		return nil, c.refuse
	}
	return []Event{{Type: "grant.added", AggregateID: c.id, AggregateVersion: c.expected + 1, Provenance: Told}}, nil
}

func TestCommandsAndConflicts(t *testing.T) {
	s := openTest(t, tempPath(t))
	if _, err := s.Execute(t.Context(), grantCmd{id: "g1", expected: 0}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Execute(t.Context(), grantCmd{id: "g1", expected: 0}); !errors.Is(err, ErrConflict) {
		t.Errorf("stale version: %v, want ErrConflict", err)
	}
	if _, err := s.Execute(t.Context(), grantCmd{id: "g1", expected: 1}); err != nil {
		t.Errorf("current version: %v", err)
	}
	no := errors.New("not allowed")
	if _, err := s.Execute(t.Context(), grantCmd{id: "g1", expected: 2, refuse: no}); !errors.Is(err, no) {
		t.Errorf("refusal: %v", err)
	}
	aggs, _ := s.Aggregates()
	if aggs["g1"] != 2 {
		t.Errorf("aggregates %v", aggs)
	}
	st, _ := s.Stats()
	if st.ByType["grant.added"] != 2 {
		t.Errorf("type counts %v", st.ByType)
	}
}

func TestGroupCommitUnderConcurrency(t *testing.T) {
	s := openTest(t, tempPath(t))
	const writers, each = 16, 50
	var wg sync.WaitGroup
	seqs := make(chan uint64, writers*each)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				r, err := s.Append(context.Background(), motion(w*each+i))
				if err != nil {
					t.Error(err)
					return
				}
				seqs <- r[0].Seq
			}
		}()
	}
	// Conflicting commands in the same batches: exactly one of each pair wins.
	var wins, conflicts int
	var mu sync.Mutex
	for i := range 20 {
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := s.Execute(context.Background(), grantCmd{id: fmt.Sprint("g", i)})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					wins++
				case errors.Is(err, ErrConflict):
					conflicts++
				default:
					t.Error(err)
				}
			}()
		}
	}
	wg.Wait()
	close(seqs)
	seen := map[uint64]bool{}
	for q := range seqs {
		if seen[q] {
			t.Fatalf("seq %d acknowledged twice", q)
		}
		seen[q] = true
	}
	if len(seen) != writers*each || wins != 20 || conflicts != 20 {
		t.Errorf("%d appends, %d wins, %d conflicts", len(seen), wins, conflicts)
	}
	r, err := s.Verify(t.Context())
	if err != nil || !r.OK() {
		t.Errorf("verify: %v %v", r.Problems, err)
	}
}

func TestOutboxAckAndBudget(t *testing.T) {
	s := openTest(t, tempPath(t), func(o *Options) { o.OutboxMaxRows = 10 })
	// An audit event first, then more telemetry than the budget holds.
	if _, err := s.Execute(t.Context(), grantCmd{id: "g"}); err != nil {
		t.Fatal(err)
	}
	for i := range 15 {
		if _, err := s.Append(t.Context(), motion(i)); err != nil {
			t.Fatal(err)
		}
	}
	items, err := s.OutboxNext(0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	last := uint64(0)
	for _, it := range items {
		if it.Seq <= last {
			t.Fatalf("outbox out of order: %d after %d", it.Seq, last)
		}
		last = it.Seq
		types = append(types, it.Event.Type)
	}
	if types[0] != "grant.added" {
		t.Errorf("the audit row was dropped: %v", types)
	}
	if len(items) > 10 {
		t.Errorf("%d rows, budget 10", len(items))
	}
	drops, _ := s.Events(Filter{Types: []string{"ledger.outbox_dropped"}})
	if len(drops) == 0 {
		t.Fatal("no ledger.outbox_dropped event")
	}
	var p struct {
		Rows uint64 `cbor:"rows"`
	}
	UnmarshalPayload(drops[0].Payload, &p)
	st, _ := s.Stats()
	if p.Rows == 0 || st.OutboxDropped < p.Rows {
		t.Errorf("drop payload %+v, stats %+v", p, st)
	}
	// Ack removes rows; Nack counts attempts.
	if err := s.OutboxNack(items[1].Seq); err != nil {
		t.Fatal(err)
	}
	if err := s.OutboxAck(items[0].Seq, items[0].Seq, 9999); err != nil {
		t.Fatal(err)
	}
	rest, _ := s.OutboxNext(0, 100)
	if len(rest) != len(items)-1 || rest[0].Seq != items[1].Seq || rest[0].Attempts != 1 {
		t.Errorf("after ack: %d rows, first %+v", len(rest), rest[0].Seq)
	}
	if r, err := s.Verify(t.Context()); err != nil || !r.OK() {
		t.Errorf("verify: %v %v", r.Problems, err)
	}
}

func TestVerifyFindsTampering(t *testing.T) {
	path := tempPath(t)
	s := openTest(t, path)
	s.Execute(t.Context(), grantCmd{id: "g"})
	s.Append(t.Context(), motion(1))
	s.Close()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bolt.Tx) error {
		tx.Bucket(bProj).Bucket([]byte("type_counts")).Put([]byte("grant.added"), u64(7))
		tx.Bucket(bAggregates).Put([]byte("g"), u64(5))
		return tx.Bucket(bIDs).Put([]byte("forged-id-000000"), u64(99))
	})
	db.Close()
	s = openTest(t, path)
	r, err := s.Verify(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"projection type_counts: key \"grant.added\"", "aggregate g: stored version 5", "the id index has 3 entries for 2 events"}
	for _, w := range want {
		found := false
		for _, p := range r.Problems {
			found = found || strings.Contains(p, w)
		}
		if !found {
			t.Errorf("verify did not report %q: %v", w, r.Problems)
		}
	}
}

func TestOpenRefuses(t *testing.T) {
	path := tempPath(t)
	s := openTest(t, path)
	s.Close()
	if _, err := Open(Options{Path: path, BodyID: UUID{9}}); err == nil || !strings.Contains(err.Error(), "belongs to body_id") {
		t.Errorf("another body's ledger: %v", err)
	}
	db, _ := bolt.Open(path, 0o600, nil)
	db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bMeta).Put(kSchema, u64(Schema+1)) })
	db.Close()
	if _, err := Open(Options{Path: path}); !errors.Is(err, ErrNewerSchema) {
		t.Errorf("newer schema: %v", err)
	}
	// A locked file is not damaged: it is left alone.
	p2 := tempPath(t)
	held := openTest(t, p2)
	_, err := Open(Options{Path: p2, LockTimeout: 50 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "locked by another process") {
		t.Errorf("locked: %v", err)
	}
	held.Close()
	if left, _ := filepath.Glob(p2 + ".corrupt.*"); len(left) != 0 {
		t.Errorf("a locked file was moved aside: %v", left)
	}
}

func TestDamagedFilesAreMovedAside(t *testing.T) {
	healthy := func(t *testing.T) []byte {
		path := tempPath(t)
		s := openTest(t, path)
		for i := range 200 {
			s.Append(t.Context(), motion(i))
		}
		s.Close()
		b, _ := os.ReadFile(path)
		return b
	}
	good := healthy(t)
	for _, tc := range []struct {
		name   string
		damage func([]byte) []byte
		reason string
	}{
		{"empty first creation", func([]byte) []byte { return nil }, ""},
		{"crash during first creation", func(b []byte) []byte { return b[:1000] }, "meta page 1: EOF"},
		{"truncated", func(b []byte) []byte { return b[:len(b)/2] }, ""},
		{"wrong magic", func(b []byte) []byte {
			c := append([]byte(nil), b...)
			for i := 16; i < 32; i++ { // both meta pages' magic live here and at page 2
				c[i] ^= 0xff
				c[4096+i] ^= 0xff
			}
			return c
		}, "invalid"},
		{"flipped bytes in the data", func(b []byte) []byte {
			c := append([]byte(nil), b...)
			for i := 4 * 4096; i < len(c); i += 97 {
				c[i] ^= 0x5a
			}
			return c
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := tempPath(t)
			data := tc.damage(good)
			os.WriteFile(path, data, 0o600)
			s := openTest(t, path)
			d := s.Damage()
			if len(data) == 0 {
				// An empty file is a first creation that never started:
				// bbolt makes it a new ledger.
				if d != nil {
					t.Errorf("an empty file was called damaged: %v", d)
				}
				return
			}
			if d == nil {
				t.Fatal("the damage was not detected")
			}
			if !strings.Contains(d.Reason, tc.reason) || !strings.HasPrefix(d.MovedTo, path+".corrupt.") {
				t.Errorf("damage %+v", d)
			}
			if kept, err := os.ReadFile(d.MovedTo); err != nil || len(kept) != len(data) {
				t.Errorf("the damaged file was not kept whole: %v", err)
			}
			evs, _ := s.Events(Filter{})
			if len(evs) != 1 || evs[0].Type != "ledger.recovered" {
				t.Errorf("the fresh ledger holds %+v, want one ledger.recovered", evs)
			}
			if r, err := s.Verify(t.Context()); err != nil || !r.OK() {
				t.Errorf("fresh ledger verify: %v %v", r.Problems, err)
			}
		})
	}
}

func TestCloseAndContext(t *testing.T) {
	s := openTest(t, tempPath(t))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Append(ctx, motion(1)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	s.Close()
	if _, err := s.Append(t.Context(), motion(1)); !errors.Is(err, ErrClosed) {
		t.Errorf("after close: %v", err)
	}
}

func TestFollow(t *testing.T) {
	s := openTest(t, tempPath(t))
	s.Append(t.Context(), motion(1))
	ctx, cancel := context.WithCancel(t.Context())
	got := make(chan uint64, 10)
	done := make(chan error, 1)
	go func() {
		done <- s.Follow(ctx, Filter{Types: []string{"camera."}}, func(e Stored) error {
			got <- e.Seq
			return nil
		})
	}()
	if seq := <-got; seq != 1 {
		t.Errorf("first %d", seq)
	}
	s.Append(t.Context(), Event{Type: "audio.level"}, motion(2))
	if seq := <-got; seq != 3 {
		t.Errorf("followed %d, want 3 (the audio event filtered out)", seq)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("follow ended with %v", err)
	}
}

func TestIDIndexWrittenBehindSurvivesReopen(t *testing.T) {
	path := tempPath(t)
	s := openTest(t, path)
	first := motion(1)
	first.ID = NewID()
	r1, _ := s.Append(t.Context(), first)
	// Enough appends to write the waiting ids once, then one more waiting.
	for i := range idFlushAt + 10 {
		s.Append(t.Context(), motion(i))
	}
	late := motion(2)
	late.ID = NewID()
	r2, _ := s.Append(t.Context(), late)
	s.crash() // the last ids only in memory (Close writes them)
	s = openTest(t, path)
	for _, tc := range []struct {
		e   Event
		seq uint64
	}{{first, r1[0].Seq}, {late, r2[0].Seq}} {
		r, err := s.Append(t.Context(), tc.e)
		if err != nil || !r[0].Duplicate || r[0].Seq != tc.seq {
			t.Errorf("repeat of seq %d after reopen: %+v %v", tc.seq, r, err)
		}
	}
	if r, err := s.Verify(t.Context()); err != nil || !r.OK() {
		t.Errorf("verify: %v %v", r.Problems, err)
	}
}

// TestOutboxBudgetOverAuditRows: audit rows alone over the budget stay;
// the droppable rows that come after them, over several commits and a
// reopen, are dropped oldest first, from where the droppable ones start.
func TestOutboxBudgetOverAuditRows(t *testing.T) {
	path := tempPath(t)
	budget := func(o *Options) { o.OutboxMaxRows = 5 }
	s := openTest(t, path, budget)
	for i := range 8 {
		if _, err := s.Execute(t.Context(), grantCmd{id: fmt.Sprintf("g%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if _, err := s.Append(t.Context(), motion(i)); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	s = openTest(t, path, budget)
	for i := 3; i < 6; i++ {
		if _, err := s.Append(t.Context(), motion(i)); err != nil {
			t.Fatal(err)
		}
	}
	items, err := s.OutboxNext(0, 100)
	if err != nil {
		t.Fatal(err)
	}
	grants, motions := 0, 0
	for _, it := range items {
		switch it.Event.Type {
		case "grant.added":
			grants++
		case "camera.motion_started":
			motions++
		}
	}
	// Each droppable row is dropped as the next commit finds the outbox
	// over budget: at most the newest one waits.
	if grants != 8 || motions > 1 {
		t.Errorf("outbox holds %d grants and %d motions, want 8 and at most 1: %d rows", grants, motions, len(items))
	}
	if r, err := s.Verify(t.Context()); err != nil || !r.OK() {
		t.Errorf("verify: %v %v", r.Problems, err)
	}
}

// Rows of urgent classes are found ahead of the backlog, in order, and a
// row written before the flag existed (droppable or not) reads as it was.
func TestOutboxUrgent(t *testing.T) {
	s := openTest(t, tempPath(t))
	var want []uint64
	for i := range 30 {
		ev := motion(i)
		if i%7 == 3 {
			ev = Event{Type: "estop.tripped", ChannelID: "estop.main", Provenance: Observed, SourceSequence: uint64(i)}
		}
		res, err := s.Append(t.Context(), ev)
		if err != nil {
			t.Fatal(err)
		}
		if i%7 == 3 {
			want = append(want, res[0].Seq)
		}
	}
	items, last, err := s.OutboxUrgent(0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for _, it := range items {
		if it.Event.Type != "estop.tripped" {
			t.Errorf("row %d of %s came as urgent", it.Seq, it.Event.Type)
		}
		got = append(got, it.Seq)
	}
	if !slices.Equal(got, want) || last != 30 {
		t.Errorf("urgent rows %v (last %d), want %v (last 30)", got, last, want)
	}
	// In pages: the last row looked at is where the next page starts.
	items, last, _ = s.OutboxUrgent(0, 2)
	if len(items) != 2 || last != want[1] {
		t.Errorf("a page of 2: %d rows, last %d, want 2 and %d", len(items), last, want[1])
	}
	if items, last, _ = s.OutboxUrgent(30, 10); len(items) != 0 || last != 30 {
		t.Errorf("after the end: %d rows, last %d", len(items), last)
	}
	for _, b := range []byte{0, 1} {
		r := decodeOutboxRow(append([]byte{9, b}, make([]byte, 16)...))
		if r.Urgent || r.Droppable != (b == 1) {
			t.Errorf("an old row with flags %d reads %+v", b, r)
		}
	}
}
