package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/ledger"
)

// fill writes what the daemon opens: an identity and a ledger with its
// options, holding the events asked for.
func TestFill(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := run(t.Context(), []string{"fill", dir, "-events", "1200", "-payload", "100"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	id, created, err := body.LoadIdentity(dir, time.Now())
	if err != nil || created {
		t.Fatalf("got the identity %+v, created %v, %v; want the one fill made", id, created, err)
	}
	opts, err := body.LedgerOptions(config.Default().Ledger, dir, id, nil, awareness.Projections()...)
	if err != nil {
		t.Fatal(err)
	}
	store, err := ledger.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	evs, err := store.Events(ledger.Filter{Types: []string{"bench.sample"}, Limit: 5000})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1200 || len(evs[0].Payload) < 100 {
		t.Errorf("got %d events (the first with %d bytes of payload), want 1200 with at least 100", len(evs), len(evs[0].Payload))
	}
}

// sample reads this process's memory from /proc.
func TestSample(t *testing.T) {
	m, err := sample(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if m.rss <= 0 || m.anon <= 0 || m.hwm < m.rss {
		t.Errorf("got %+v, want VmRSS and RssAnon above 0 and VmHWM at least VmRSS", m)
	}
}
