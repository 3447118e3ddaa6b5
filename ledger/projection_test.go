package ledger

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// typeCounts reads the type_counts projection through ReadProjection.
func typeCounts(t *testing.T, s *Store) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	err := s.ReadProjection(TypeCounts{}.Name(), func(kv ReadKV) error {
		return kv.ForEach(func(k, v []byte) error {
			out[string(k)] = getU64(v)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestReadProjection(t *testing.T) {
	s := openTest(t, tempPath(t))
	if got := typeCounts(t, s); len(got) != 0 {
		t.Errorf("a new ledger counts %v", got)
	}
	s.Execute(t.Context(), grantCmd{id: "g"})
	s.Append(t.Context(), motion(1), Event{Type: "estop.tripped", Provenance: Observed})
	if got := typeCounts(t, s); len(got) != 2 || got["grant.added"] != 1 || got["estop.tripped"] != 1 {
		t.Errorf("counts %v", got)
	}
	stop := errors.New("stop")
	if err := s.ReadProjection(TypeCounts{}.Name(), func(ReadKV) error { return stop }); err != stop {
		t.Errorf("fn's error: %v", err)
	}
	if err := s.ReadProjection("nobody_keeps_it", func(ReadKV) error { return nil }); !errors.Is(err, ErrUnknownProjection) {
		t.Errorf("an unknown projection: %v, want ErrUnknownProjection", err)
	}
	s.Close()
	if err := s.ReadProjection(TypeCounts{}.Name(), func(ReadKV) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("closed: %v, want ErrClosed", err)
	}
}

// A projection new to a file that holds events is built from them once,
// at open, and logged; later opens leave it to the appends.
func TestNewProjectionIsBuiltFromTheEvents(t *testing.T) {
	path := tempPath(t)
	s := openTest(t, path, func(o *Options) { o.Projections = nil })
	s.Execute(t.Context(), grantCmd{id: "g"})
	s.Append(t.Context(), motion(1), Event{Type: "estop.tripped", Provenance: Observed}, Event{Type: "estop.tripped", Provenance: Observed})
	s.Close()

	var log bytes.Buffer
	withLog := func(o *Options) { o.Log = slog.New(slog.NewTextHandler(&log, nil)) }
	s = openTest(t, path, withLog)
	if got := typeCounts(t, s); len(got) != 2 || got["grant.added"] != 1 || got["estop.tripped"] != 2 {
		t.Errorf("built %v", got)
	}
	if !strings.Contains(log.String(), "projections built") || !strings.Contains(log.String(), "type_counts") {
		t.Errorf("the build was not logged: %s", log.String())
	}
	if r, err := s.Verify(t.Context()); err != nil || !r.OK() {
		t.Errorf("verify: %+v %v", r, err)
	}
	s.Append(t.Context(), Event{Type: "estop.reset", Provenance: Observed})
	s.Close()

	log.Reset()
	s = openTest(t, path, withLog)
	if got := typeCounts(t, s); len(got) != 3 || got["estop.tripped"] != 2 || got["estop.reset"] != 1 {
		t.Errorf("after a second open %v", got)
	}
	if strings.Contains(log.String(), "projections built") {
		t.Errorf("built a second time: %s", log.String())
	}
}

// countsByAnotherName is type_counts in a later form, under a name of
// its own, that takes the place of the first.
type countsByAnotherName struct{ TypeCounts }

func (countsByAnotherName) Name() string      { return "type_counts_2" }
func (countsByAnotherName) Retires() []string { return []string{"type_counts", "never_kept"} }

// A projection that takes the place of another is built at open, and the
// other's bucket goes in the same transaction; one a store still keeps
// under the retired name stays.
func TestAProjectionRetiresTheOneItReplaces(t *testing.T) {
	follow := []string{"grant.", "estop.", "ledger."}
	path := tempPath(t)
	s := openTest(t, path)
	s.Append(t.Context(), Event{Type: "estop.tripped", Provenance: Observed}, Event{Type: "estop.tripped", Provenance: Observed})
	s.Close()
	has := func(s *Store, name string) (ok bool) {
		s.db.View(func(tx *bolt.Tx) error { ok = tx.Bucket(bProj).Bucket([]byte(name)) != nil; return nil })
		return ok
	}

	// Kept beside it, the old stays.
	s = openTest(t, path, func(o *Options) {
		o.Projections = append(o.Projections, countsByAnotherName{TypeCounts{Follow: follow}})
	})
	if !has(s, "type_counts") || !has(s, "type_counts_2") {
		t.Fatal("a projection still kept was retired, or the new one not made")
	}
	s.Close()

	path2 := tempPath(t)
	s = openTest(t, path2)
	s.Append(t.Context(), Event{Type: "estop.tripped", Provenance: Observed})
	s.Close()
	var log bytes.Buffer
	s = openTest(t, path2, func(o *Options) {
		o.Projections = []Projection{countsByAnotherName{TypeCounts{Follow: follow}}}
		o.Log = slog.New(slog.NewTextHandler(&log, nil))
	})
	if has(s, "type_counts") || !has(s, "type_counts_2") {
		t.Fatalf("after the open: type_counts %v, type_counts_2 %v", has(s, "type_counts"), has(s, "type_counts_2"))
	}
	if !strings.Contains(log.String(), "a projection retired") {
		t.Errorf("the retirement was not logged: %s", log.String())
	}
	got := map[string]uint64{}
	s.ReadProjection("type_counts_2", func(kv ReadKV) error {
		return kv.ForEach(func(k, v []byte) error { got[string(k)] = getU64(v); return nil })
	})
	if got["estop.tripped"] != 1 {
		t.Errorf("the new one built %v", got)
	}
	if r, err := s.Verify(t.Context()); err != nil || !r.OK() {
		t.Errorf("verify: %+v %v", r, err)
	}
}

// A new file makes the buckets and builds nothing.
func TestNewFileBuildsNothing(t *testing.T) {
	var log bytes.Buffer
	s := openTest(t, tempPath(t), func(o *Options) { o.Log = slog.New(slog.NewTextHandler(&log, nil)) })
	if got := typeCounts(t, s); len(got) != 0 {
		t.Errorf("counts %v", got)
	}
	if strings.Contains(log.String(), "projections") {
		t.Errorf("logged %s", log.String())
	}
}

// Two projections of one name would both write its bucket.
func TestOpenRefusesTwoProjectionsOfOneName(t *testing.T) {
	_, err := Open(Options{Path: tempPath(t), Projections: []Projection{TypeCounts{}, TypeCounts{Follow: []string{"grant."}}}})
	if err == nil || !strings.Contains(err.Error(), "type_counts") {
		t.Errorf("got %v, want a refusal naming the projection", err)
	}
}

// seqs is a projection that keeps, by event id, the sequence SeqOf gave.
type seqs struct{}

func (seqs) Name() string    { return "seqs" }
func (seqs) Types() []string { return []string{"estop."} }
func (seqs) Apply(kv KV, e *Event) error {
	seq, ok := SeqOf(kv)
	if !ok {
		return errors.New("no sequence")
	}
	return kv.Put(e.ID[:], u64(seq))
}

// TestSeqOf: Apply is told the sequence of the event it applies, as the
// writer appends it, as a build at open applies it, and as verify does
// (a projection that differs would be reported).
func TestSeqOf(t *testing.T) {
	path := tempPath(t)
	s := openTest(t, path, func(o *Options) { o.Projections = nil })
	s.Append(t.Context(), Event{Type: "estop.tripped", Provenance: Observed}, motion(1), Event{Type: "estop.reset", Provenance: Observed})
	s.Close()
	check := func(s *Store) {
		t.Helper()
		evs, err := s.Events(Filter{Types: []string{"estop."}})
		if err != nil || len(evs) < 2 {
			t.Fatalf("events: %v %d", err, len(evs))
		}
		err = s.ReadProjection("seqs", func(kv ReadKV) error {
			for _, e := range evs {
				if got := kv.Get(e.ID[:]); len(got) != 8 || getU64(got) != e.Seq {
					t.Errorf("%s: seq %v, want %d", e.Type, got, e.Seq)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	withSeqs := func(o *Options) { o.Projections = append(o.Projections, seqs{}) }
	s = openTest(t, path, withSeqs) // built at open
	check(s)
	s.Append(t.Context(), Event{Type: "estop.tripped", Provenance: Observed}) // by the writer
	check(s)
	if r, err := s.Verify(t.Context()); err != nil || !r.OK() {
		t.Errorf("verify: %+v %v", r, err)
	}
	if _, ok := SeqOf(MemKV{}); ok {
		t.Error("a bucket of no ledger has a sequence")
	}
}

// The projections and derivers that follow an event type are found once
// a type, in their order; a type past the bound is matched each time,
// alike.
func TestFollowers(t *testing.T) {
	grants, estops := TypeCounts{Follow: []string{"grant."}}, seqs{}
	both := countsByAnotherName{TypeCounts{Follow: []string{"estop.tripped", "grant.added"}}}
	s := &Store{opts: Options{Projections: []Projection{grants, estops, both},
		Derivers: []Deriver{namedDeriver{"on grants", []string{"grant."}}, namedDeriver{"on a trip", []string{"estop.tripped"}}}}}
	names := func(f followedBy) (out []string) {
		for _, p := range f.projections {
			out = append(out, p.Name())
		}
		for _, d := range f.derivers {
			out = append(out, d.Name())
		}
		return out
	}
	for _, tc := range []struct {
		typ  string
		want []string
	}{
		{"grant.added", []string{"type_counts", "type_counts_2", "on grants"}},
		{"grant.revoked", []string{"type_counts", "on grants"}},
		{"estop.tripped", []string{"seqs", "type_counts_2", "on a trip"}},
		{"estop.reset", []string{"seqs"}},
		{"camera.summary", nil},
		{"grant.added", []string{"type_counts", "type_counts_2", "on grants"}}, // again, as kept
	} {
		if got := names(s.followers(tc.typ)); !slices.Equal(got, tc.want) {
			t.Errorf("%s: followed by %v, want %v", tc.typ, got, tc.want)
		}
	}
	for i := len(s.followed); i < maxFollowedTypes; i++ {
		s.followers(fmt.Sprintf("other.%d", i))
	}
	if got := names(s.followers("estop.stop_again")); len(s.followed) != maxFollowedTypes || !slices.Equal(got, []string{"seqs"}) {
		t.Errorf("past the bound: %d types kept, estop.stop_again followed by %v", len(s.followed), got)
	}
}

// namedDeriver follows types and derives nothing.
type namedDeriver struct {
	name  string
	types []string
}

func (d namedDeriver) Name() string                                    { return d.name }
func (d namedDeriver) Types() []string                                 { return d.types }
func (namedDeriver) Derive(*View, *Event, Derivation) ([]Event, error) { return nil, nil }
