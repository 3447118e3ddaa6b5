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

// crashRuns is how many times the child is killed; -crash.runs changes it.
var crashRuns = 200

func crashChild() {
	path := os.Getenv(crashChildEnv)
	s, err := Open(Options{Path: path, AgentID: testAgent, BodyID: testBody,
		Projections: []Projection{TypeCounts{Follow: []string{"grant.", "estop.", "ledger."}}}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(3)
	}
	var mu sync.Mutex
	out := os.Stdout // unbuffered: a line written is in the pipe
	var wg sync.WaitGroup
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

func TestCrashKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("the crash test starts 200 processes")
	}
	if n, err := strconv.Atoi(os.Getenv("LEDGER_CRASH_RUNS")); err == nil {
		crashRuns = n
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0))
	t.Logf("seed %d, %d runs", seed, crashRuns)
	acked := map[UUID]uint64{}
	var killedMidWrite int
	for run := range crashRuns {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
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
		time.Sleep(time.Duration(rng.IntN(40_000)) * time.Microsecond) // the moment of the kill
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

		s, err := Open(Options{Path: path, AgentID: testAgent, BodyID: testBody, CheckAtOpen: true,
			Projections: []Projection{TypeCounts{Follow: []string{"grant.", "estop.", "ledger."}}}})
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
			evs, err := s.Events(Filter{After: after, Limit: 10000})
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
		s.Close()
		for id, seq := range acked {
			if got, ok := seen[id]; !ok || got != seq {
				t.Fatalf("run %d: acknowledged event %s (seq %d) is %v after the kill", run, id, seq, got)
			}
		}
	}
	t.Logf("%d kills, %d acknowledged events all present once, %d acknowledgement lines cut by the kill", crashRuns, len(acked), killedMidWrite)
}
