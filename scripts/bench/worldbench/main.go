// Package main is worldbench, the Go half of scripts/bench/world.sh.
//
//	worldbench at DIR [-queries N] [-seed S] [-cold]
//
// at opens the ledger of a body's data directory (filled by
// startupbench, with what feeds the world model over its days) as the
// daemon opens it, and asks world.at of N questions: an entity of the
// sim board's model, a valid time anywhere in the model's history, as
// the body knows it now (four in five) or as it knew it at a sequence
// of the ledger (the fifth). It prints each question's time's median,
// 99th percentile and maximum in milliseconds, and the answer's values
// counted, on one line:
//
//	at: queries=N p50_ms=… p99_ms=… max_ms=… unknown=… history_days=…
//
// -cold drops the ledger's file from the page cache first, as a body
// after a reboot has it: the questions read it from the disk.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/control/world"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/ledger"
	"github.com/tobe-body/tobe-body/scripts/bench/simworld"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "worldbench:", err)
		os.Exit(1)
	}
}

var errUsage = errors.New("usage: worldbench at DIR [-queries N] [-seed S] [-cold]")

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) < 2 || args[0] != "at" {
		return errUsage
	}
	fs := flag.NewFlagSet("at", flag.ContinueOnError)
	queries := fs.Int("queries", 10000, "questions to ask")
	seed := fs.Uint64("seed", 1, "random seed")
	cold := fs.Bool("cold", false, "drop the ledger from the page cache first")
	dir := args[1]
	if err := fs.Parse(args[2:]); err != nil {
		return err
	}
	id, _, err := body.LoadIdentity(dir, time.Now())
	if err != nil {
		return err
	}
	opts, err := body.LedgerOptions(config.Default().Ledger, dir, id, slog.New(slog.DiscardHandler), awareness.Projections()...)
	if err != nil {
		return err
	}
	opts.OutboxAsIs = true
	if *cold {
		if err := evict(opts.Path); err != nil {
			return fmt.Errorf("-cold: %w", err)
		}
	}
	s, err := ledger.Open(opts)
	if err != nil {
		return err
	}
	defer s.Close()
	// The sim board's model with its defaults, as startupbench fills it.
	m, err := simworld.Model()
	if err != nil {
		return err
	}
	st, err := s.Stats()
	if err != nil {
		return err
	}
	first, err := s.Events(ledger.Filter{Types: []string{"world."}, Limit: 1})
	if err != nil || len(first) == 0 {
		return fmt.Errorf("%s holds nothing of the world model (%v)", dir, err)
	}
	from, to := first[0].OccurredAt, time.Now().UnixNano()
	var ids []string
	for _, e := range m.Entities() {
		ids = append(ids, e.ID)
	}
	r := &world.Reader{Store: s, Model: m}
	rng := rand.New(rand.NewPCG(*seed, 2))
	took := make([]time.Duration, 0, *queries)
	unknown := 0
	for i := 0; i < *queries; i++ {
		ent := ids[rng.IntN(len(ids))]
		at := time.Unix(0, from+rng.Int64N(to-from))
		var knownAt uint64
		if i%5 == 4 {
			knownAt = 1 + rng.Uint64N(st.LastSeq)
		}
		t0 := time.Now()
		state, err := r.At(ent, at, knownAt)
		took = append(took, time.Since(t0))
		if err != nil {
			return fmt.Errorf("world.at %s %s known at %d: %w", ent, at.Format(time.RFC3339), knownAt, err)
		}
		if state.Value == world.Unknown {
			unknown++
		}
	}
	slices.Sort(took)
	q := func(p float64) float64 {
		return float64(took[min(len(took)-1, int(p*float64(len(took))))].Microseconds()) / 1000
	}
	fmt.Fprintf(out, "at: queries=%d p50_ms=%.3f p99_ms=%.3f max_ms=%.3f unknown=%d history_days=%.0f\n",
		len(took), q(0.5), q(0.99), float64(took[len(took)-1].Microseconds())/1000, unknown, float64(to-from)/float64(24*time.Hour))
	return nil
}
