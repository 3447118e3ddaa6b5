package ledger

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// seedFile makes a small ledger file for the open fuzzer's corpus.
func seedFile(f *testing.F) []byte {
	path := filepath.Join(f.TempDir(), "seed.db")
	s, err := Open(Options{Path: path, AgentID: testAgent, BodyID: testBody})
	if err != nil {
		f.Fatal(err)
	}
	for i := range 5 { // a small file: the fuzzer mutates it faster
		s.Append(f.Context(), motion(i))
	}
	s.Execute(f.Context(), grantCmd{id: "g"})
	s.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// FuzzOpen feeds the open path damaged files: it must never crash, and
// what it opens must be a working ledger (the damage moved aside, or none).
func FuzzOpen(f *testing.F) {
	good := seedFile(f)
	f.Add(good)
	f.Add(good[:4096])
	f.Add(good[:len(good)/2])
	flipped := append([]byte(nil), good...)
	for i := 3 * 4096; i < len(flipped); i += 131 {
		flipped[i] ^= 0xa5
	}
	f.Add(flipped)
	f.Add([]byte("not a database at all"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "f.db")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		// A damaged file must not hang the open either: the fuzzer does not
		// notice a hang by itself.
		type opened struct {
			s   *Store
			err error
		}
		ch := make(chan opened, 1)
		go func() {
			s, err := Open(Options{Path: path, AgentID: testAgent, BodyID: testBody, CheckAtOpen: true, LockTimeout: time.Second})
			ch <- opened{s, err}
		}()
		var o opened
		select {
		case o = <-ch:
		case <-time.After(20 * time.Second):
			t.Fatalf("Open of a %d-byte file did not return in 20 s", len(data))
		}
		s, err := o.s, o.err
		if err != nil {
			return // refused with an error: another body, a newer schema
		}
		defer s.Close()
		if _, err := s.Append(t.Context(), motion(1)); err != nil {
			t.Fatalf("opened (damage %v) but cannot append: %v", s.Damage(), err)
		}
		if r, err := s.Verify(t.Context()); err != nil || (s.Damage() != nil && !r.OK()) {
			t.Fatalf("after damage %v the fresh ledger verifies %v %v", s.Damage(), r.Problems, err)
		}
	})
}
