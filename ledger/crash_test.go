package ledger

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The crash test runs this test binary as a child that appends as fast as
// it can and reports every acknowledged event on stdout; the parent kills
// it with SIGKILL at a random moment, then checks the file.
const crashChildEnv = "LEDGER_CRASH_CHILD"

// crashArchiveEnv set: the child appends audit records with dedupe keys
// on a running clock a hundred thousand times as fast, and runs the archive's
// pass all the while, so the kills come in its every step too.
const crashArchiveEnv = "LEDGER_CRASH_ARCHIVE"

// crashOptions are the options of the child and of the parent's reopen.
func crashOptions(path string, archive bool) Options {
	o := Options{Path: path, AgentID: testAgent, BodyID: testBody,
		Projections: []Projection{TypeCounts{Follow: []string{"grant.", "estop.", "ledger."}}}}
	if archive {
		o.NoOutbox, o.AuditKeep, o.ArchiveSegment = true, time.Minute, 1
		// A budget the archive soon outgrows: deletions are killed too.
		o.JournalSize, o.DiskBudget = 64<<10, 1200<<10
	}
	return o
}

// crashRuns is how many times the child is killed; -crash.runs changes it.
var crashRuns = 200

func crashChild() {
	path := os.Getenv(crashChildEnv)
	archive := os.Getenv(crashArchiveEnv) != ""
	opts := crashOptions(path, archive)
	if archive {
		start := time.Now()
		opts.Now = func() time.Time { return start.Add(100_000 * time.Since(start)) }
	}
	s, err := Open(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(3)
	}
	var mu sync.Mutex
	out := os.Stdout // unbuffered: a line written is in the pipe
	var wg sync.WaitGroup
	if archive {
		go func() {
			for {
				if _, err := s.Archive(context.Background()); err != nil {
					fmt.Fprintln(os.Stderr, "child archive:", err)
					os.Exit(5)
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				e := motion(i)
				e.ID = NewID()
				if w == 0 && i%10 == 0 { // some commands on aggregates, too
					e = Event{ID: NewID(), Type: "grant.added", AggregateID: "crash-" + strconv.Itoa(i%7)}
				}
				if archive {
					e = Event{ID: e.ID, Type: "action.test", Provenance: Told, DedupeKey: e.ID.String(), Payload: mustPayload(map[string]int{"i": i})}
					time.Sleep(time.Millisecond) // room for the archive's passes
				}
				r, err := s.Append(context.Background(), e)
				if err != nil {
					fmt.Fprintln(os.Stderr, "child append:", err)
					os.Exit(4)
				}
				mu.Lock()
				fmt.Fprintf(out, "%s %d\n", e.ID, r[0].Seq)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

func TestCrashKill9(t *testing.T) { crashTest(t, false, crashRuns) }

// TestCrashKill9Archive: the same, with the archive's pass running: a
// kill between a segment and its transaction, or in a deletion, loses
// nothing acknowledged and leaves an archive that verifies.
func TestCrashKill9Archive(t *testing.T) { crashTest(t, true, crashRuns/2) }

func crashTest(t *testing.T, archive bool, runs int) {
	if testing.Short() {
		t.Skip("the crash test starts 200 processes")
	}
	if n, err := strconv.Atoi(os.Getenv("LEDGER_CRASH_RUNS")); err == nil {
		runs = n
	}
	crashRuns := runs
	path := filepath.Join(t.TempDir(), "crash.db")
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0))
	t.Logf("seed %d, %d runs", seed, crashRuns)
	acked := map[UUID]uint64{}
	var killedMidWrite, deleted int
	for run := range crashRuns {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
		if archive {
			cmd.Env = append(cmd.Env, crashArchiveEnv+"=1")
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			if errors.Is(err, syscall.ENOEXEC) {
				// A test binary of another architecture run by qemu-user
				// cannot exec itself without binfmt_misc.
				t.Skipf("cannot re-exec the test binary here: %v", err)
			}
			t.Fatal(err)
		}
		lines := bufio.NewReader(stdout)
		// Kill after the first acknowledgement plus a random while, so
		// every run kills a process that is busy appending.
		first, err := lines.ReadString('\n')
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("run %d: the child acknowledged nothing: %v\n%s", run, err, stderr.String())
		}
		window := 40_000
		if archive {
			window = 150_000 // past the passes' first steps
		}
		time.Sleep(time.Duration(rng.IntN(window)) * time.Microsecond) // the moment of the kill
		cmd.Process.Signal(syscall.SIGKILL)
		var got []string
		got = append(got, first)
		for {
			l, err := lines.ReadString('\n')
			if err != nil {
				if l != "" {
					killedMidWrite++ // a line cut by the kill: not known as acknowledged
				}
				break
			}
			got = append(got, l)
		}
		cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("run %d: the child ended by %v, not SIGKILL\n%s", run, cmd.ProcessState, stderr.String())
		}
		for _, l := range got {
			f := strings.Fields(l)
			id, err := ParseUUID(f[0])
			if err != nil {
				t.Fatalf("run %d: bad line %q", run, l)
			}
			seq, _ := strconv.ParseUint(f[1], 10, 64)
			acked[id] = seq
		}

		opts := crashOptions(path, archive)
		opts.CheckAtOpen = true
		s, err := Open(opts)
		if err != nil {
			t.Fatalf("run %d: reopen: %v", run, err)
		}
		if d := s.Damage(); d != nil {
			s.Close()
			t.Fatalf("run %d: the file was damaged by a kill: %v", run, d)
		}
		r, err := s.Verify(t.Context())
		if err != nil || !r.OK() {
			s.Close()
			t.Fatalf("run %d: verify: %v %v", run, r.Problems, err)
		}
		seen := map[UUID]uint64{}
		var after uint64
		for {
			evs, err := s.Events(Filter{After: after, Limit: 10000, Archive: true})
			if err != nil {
				s.Close()
				t.Fatalf("run %d: reading events: %v", run, err)
			}
			if len(evs) == 0 {
				break
			}
			for _, e := range evs {
				if _, dup := seen[e.ID]; dup {
					s.Close()
					t.Fatalf("run %d: event %s stored twice", run, e.ID)
				}
				seen[e.ID] = e.Seq
				after = e.Seq
			}
		}
		as, _ := s.ArchiveStats()
		s.Close()
		for id, seq := range acked {
			if seq <= as.DeletedThrough {
				delete(acked, id) // deleted over the budget, recorded
				deleted++
				continue
			}
			if got, ok := seen[id]; !ok || got != seq {
				t.Fatalf("run %d: acknowledged event %s (seq %d) is %v after the kill", run, id, seq, got)
			}
		}
	}
	t.Logf("%d kills, %d acknowledged events all present once, %d acknowledgement lines cut by the kill, %d deleted over the disk budget", crashRuns, len(acked), killedMidWrite, deleted)
	if archive {
		s, err := Open(crashOptions(path, true))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		st, _ := s.ArchiveStats()
		t.Logf("archive: %d events in %d segments; running %v", st.Events, st.Segments, s.Running())
		if st.Events == 0 || st.Deleted == 0 {
			t.Errorf("%+v: the kills never met the archive, or its deletions", st)
		}
	}
}
