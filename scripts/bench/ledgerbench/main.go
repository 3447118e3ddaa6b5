// Package main is ledgerbench, the Go half of scripts/bench/ledger-open.sh.
//
//	ledgerbench make DIR [-events N] [-payload B]   build DIR/big/ledger.db and DIR/empty/ledger.db
//	ledgerbench crash DIR                           leave DIR/ledger.db as a kill after a commit does
//
// make writes a ledger of N events (nine in ten camera.motion_started with
// a payload of about B bytes, one in ten action.succeeded of an aggregate
// of its own, as the action runner writes them) and an empty one (its
// layout only), both closed cleanly, with the projection the body keeps,
// so that opening them changes nothing.
//
// crash opens a ledger, appends one event and exits without closing it:
// the file is left as a kill -9 after that commit leaves it, without the
// record of a clean stop.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/ledger"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "ledgerbench:", err)
		os.Exit(1)
	}
}

// options are the options of the ledger at path as the body opens it, its
// projections included: a look with `tobe-body ledger` then finds the
// file as it left it, and builds nothing.
func options(path string) ledger.Options {
	opts, err := body.LedgerOptions(config.Default().Ledger, filepath.Dir(path), body.Identity{}, slog.New(slog.DiscardHandler), awareness.Projections()...)
	if err != nil {
		panic(err) // the defaults are tested
	}
	opts.Path = path
	return opts
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) < 2 {
		return errors.New("usage: ledgerbench make DIR [-events N] [-payload B] | crash DIR")
	}
	cmd, dir := args[0], args[1]
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	events := fs.Int("events", 500_000, "events in the big ledger")
	payload := fs.Int("payload", 360, "bytes of padding in a motion event's payload")
	if err := fs.Parse(args[2:]); err != nil {
		return err
	}
	switch cmd {
	case "make":
		for _, c := range []struct {
			name string
			n    int
		}{{"empty", 0}, {"big", *events}} {
			start := time.Now()
			path := filepath.Join(dir, c.name, "ledger.db")
			if err := build(ctx, path, c.n, *payload); err != nil {
				return err
			}
			fi, err := os.Stat(path)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%s: %d events, %.1f MiB, built in %.1f s\n", path, c.n, float64(fi.Size())/(1<<20), time.Since(start).Seconds())
		}
		return nil
	case "crash":
		s, err := ledger.Open(options(filepath.Join(dir, "ledger.db")))
		if err != nil {
			return err
		}
		if _, err := s.Append(ctx, ledger.Event{Type: "camera.motion_started", ChannelID: "camera.front", Provenance: ledger.Observed}); err != nil {
			return err
		}
		os.Exit(0) // no Close: the commit is on disk, the clean stop is not
	}
	return fmt.Errorf("unknown command %q", cmd)
}

// build writes a ledger of n events, a thousand to a command.
func build(ctx context.Context, path string, n, pad int) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	os.Remove(path)
	s, err := ledger.Open(options(path))
	if err != nil {
		return err
	}
	motion, err := ledger.MarshalPayload(map[string]any{"zone": "left", "area": 0.12, "pad": strings.Repeat("x", pad)})
	if err != nil {
		return err
	}
	result, err := ledger.MarshalPayload(map[string]any{"verified": "verified", "capability": "gpio.set", "target": "gpio.relay1"})
	if err != nil {
		return err
	}
	base := time.Now().Add(-time.Duration(n) * time.Second).UnixNano()
	for i := 0; i < n; i += 1000 {
		batch := make([]ledger.Event, 0, 1000)
		for j := i; j < min(i+1000, n); j++ {
			e := ledger.Event{Type: "camera.motion_started", ChannelID: "camera.front", Provenance: ledger.Observed,
				OccurredAt: base + int64(j)*int64(time.Second), SourceSequence: uint64(j), Payload: motion}
			if j%10 == 9 {
				e = ledger.Event{Type: "action.succeeded", ChannelID: "gpio.relay1", Provenance: ledger.Verified,
					OccurredAt: e.OccurredAt, AggregateID: fmt.Sprintf("action-%d", j), Payload: result}
			}
			batch = append(batch, e)
		}
		if _, err := s.Append(ctx, batch...); err != nil {
			s.Close()
			return err
		}
	}
	return s.Close()
}
