package ledger

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// TestOpenSurvivesRandomDamage flips a few random bytes of a ledger file,
// a thousand times, and opens, appends to and verifies each: nothing may
// panic, fault or hang. (The open fuzzer does the same with coverage, but
// cannot see a hang; this found three kinds of damage bbolt trusts.)
func TestOpenSurvivesRandomDamage(t *testing.T) {
	if testing.Short() {
		t.Skip("a thousand damaged files")
	}
	path0 := filepath.Join(t.TempDir(), "seed.db")
	s, err := Open(Options{Path: path0, AgentID: testAgent, BodyID: testBody})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		s.Append(t.Context(), motion(i))
	}
	s.Execute(t.Context(), grantCmd{id: "g"})
	s.Close()
	good, _ := os.ReadFile(path0)
	runDamaged(t, good, 1000, func(t *testing.T, path string, _ []byte) {
		s, err := Open(Options{Path: path, AgentID: testAgent, BodyID: testBody, CheckAtOpen: true, LockTimeout: time.Second})
		if err != nil {
			return
		}
		defer s.Close()
		if _, err := s.Append(t.Context(), motion(1)); err != nil {
			t.Errorf("opened (damage %v) but cannot append: %v", s.Damage(), err)
		}
		s.Verify(t.Context())
	})
}

// runDamaged flips one to six random bytes of good, n times, writes each
// copy to a file and calls try with it: try must return within 30 s.
func runDamaged(t *testing.T, good []byte, n int, try func(t *testing.T, path string, data []byte)) {
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 1))
	for iter := range n {
		data := append([]byte(nil), good...)
		for range 1 + rng.IntN(6) {
			data[rng.IntN(len(data))] ^= byte(1 + rng.IntN(255))
		}
		path := filepath.Join(t.TempDir(), "f.db")
		os.WriteFile(path, data, 0o600)
		done := make(chan bool)
		go func() {
			defer close(done)
			ok := t.Run(fmt.Sprint(iter), func(t *testing.T) { try(t, path, data) })
			if !ok {
				t.Logf("iteration %d of seed %d failed", iter, seed)
			}
		}()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			keep := filepath.Join(os.TempDir(), "ledger-hang.db")
			os.WriteFile(keep, data, 0o600)
			buf := make([]byte, 1<<20)
			t.Fatalf("iteration %d (seed %d) hung; the file is kept at %s:\n%s", iter, seed, keep, buf[:runtime.Stack(buf, true)])
		}
	}
}
