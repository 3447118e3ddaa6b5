package body

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/hal/haltest/stepclock"
	"github.com/tobe-body/tobe-body/ledger"
)

// A step of the wall clock is logged (a warning from a second on),
// recorded, followed by a retention pass, and handed on; a step while
// one waits to be taken is dropped, not waited for.
func TestClockStepsLogRecordAndHandOn(t *testing.T) {
	sc := stepclock.New()
	c, err := newClock(stepSource(sc, true))
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(&lockedWriter{w: &logged, mu: &mu}, nil))
	opts, err := LedgerOptions(config.Default().Ledger, t.TempDir(), Identity{AgentID: "01890000-0000-7000-8000-000000000001", BodyID: "01890000-0000-7000-8000-000000000002"}, log)
	if err != nil {
		t.Fatal(err)
	}
	store, err := ledger.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	stepped := make(chan time.Duration, 1)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { ClockSteps{Clock: c, Store: store, Log: log, Stepped: stepped, Every: time.Hour}.Run(ctx) })
	defer func() {
		cancel()
		wg.Wait()
	}()

	sc.Step(25 * time.Hour)
	select {
	case got := <-stepped:
		if d := (got - 25*time.Hour).Abs(); d > 5*time.Millisecond {
			t.Errorf("handed on %v, want 25h", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no step was handed on")
	}
	want := []string{"level=WARN msg=\"the wall clock was set\"", "msg=\"ledger retention after the clock step\""}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		out := logged.String()
		mu.Unlock()
		if strings.Contains(out, want[0]) && strings.Contains(out, want[1]) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log %q lacks %q", out, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	evs, err := store.Events(ledger.Filter{Types: []string{EventClockStepped}})
	if err != nil || len(evs) != 1 {
		t.Errorf("recorded %d %s (%v), want one", len(evs), EventClockStepped, err)
	}

	// Nobody takes the next two: one waits, the other is dropped, and
	// Run goes on (it stops when the test ends).
	sc.Step(time.Minute)
	sc.Step(time.Minute)
	if got := <-stepped; got <= 0 {
		t.Errorf("handed on %v", got)
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
