package ledger

import (
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// A file of schema 0 is a bbolt file with nothing of the ledger in it yet:
// what a crash between bbolt's creation of the file and the first
// migration leaves. Migration 0 -> 1 makes the layout in it.
func TestMigrateFromSchema0(t *testing.T) {
	path := tempPath(t)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	s := openTest(t, path)
	if s.Damage() != nil {
		t.Fatalf("an empty bbolt file was called damaged: %v", s.Damage())
	}
	st, _ := s.Stats()
	if st.Schema != Schema {
		t.Errorf("schema %d, want %d", st.Schema, Schema)
	}
	if _, err := s.Append(t.Context(), motion(1)); err != nil {
		t.Fatal(err)
	}
}

// A file with events but no schema version was not written by a ledger.
func TestMigrateRefusesEventsWithoutSchema(t *testing.T) {
	path := tempPath(t)
	db, _ := bolt.Open(path, 0o600, nil)
	db.Update(func(tx *bolt.Tx) error {
		b, _ := tx.CreateBucket(bEvents)
		return b.Put(u64(1), []byte{0xa0})
	})
	db.Close()
	s := openTest(t, path)
	d := s.Damage()
	if d == nil || !strings.Contains(d.Reason, "no schema version") {
		t.Fatalf("damage %v, want it to say there is no schema version", d)
	}
}
