package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/admin"
	"github.com/tobe-body/tobe-body/awareness/control/world"
)

const worldUsage = `usage: tobe-body world <command> [flags]

  now [ENTITY...] [--json]       what the body knows of its surroundings now: each entity's
                                 state, confidence, provenance, since when, and each source's
  at ENTITY TIME [--known-at SEQ] [--json]
                                 an entity's state at TIME, as the body knows it now, or as
                                 it knew it when its ledger was at SEQ
  history ENTITY [--from TIME] [--to TIME] [--limit N] [--json]
                                 its changes of state (default the last 24 hours)
  explain ENTITY [--json]        its state with the evidence: each source's records and the
                                 events they rest on
  tell ENTITY VALUE [--for D] [--confidence C]
                                 tell the body an entity's state, kept as told (for D,
                                 default 1h), never as observed
  withdraw ENTITY                take back what you told of it

TIME is RFC 3339 (2026-12-04T15:00:00Z) or a duration before now (-90m).
Entities are rooms (active, quiet), doors and windows (open, closed),
presence (present, absent), the air (readings), outputs (on, off) and the
body; unknown means no source tells. These talk to the running body
through its admin socket.
`

// World is 'tobe-body world': the world model.
func World(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, worldUsage)
		return &ExitError{Code: 2}
	}
	sub, rest := args[0], slices.Clone(args[1:])
	var c Common
	fs := NewFlagSet("world "+sub, stderr, &c, true)
	asJSON := fs.Bool("json", false, "print JSON")
	var knownAt *uint64
	var from, to, forD *string
	var limit *int
	var conf *float64
	nargs := 1
	switch sub {
	case "now":
		nargs = -1
	case "at":
		knownAt = fs.Uint64("known-at", 0, "as known when the ledger was at sequence `SEQ` (0: now)")
		nargs = 2
	case "history":
		from = fs.String("from", "", "from `TIME` (default 24 hours before --to)")
		to = fs.String("to", "", "to `TIME` (default now)")
		limit = fs.Int("limit", 0, "at most `N` changes (default 1000)")
	case "explain", "withdraw":
	case "tell":
		forD = fs.String("for", "", "how long it holds, a `DURATION` (default 1h)")
		conf = fs.Float64("confidence", 0, "how sure, `0..1` (default 0.5)")
		nargs = 2
	default:
		fmt.Fprint(stderr, worldUsage)
		return UsageError("world: unknown command %q", sub)
	}
	max := nargs
	if max < 0 {
		max = 64
	}
	// A TIME before now (-90m) would read as a flag: it is marked as a
	// time where it stands as an argument, not as a flag's value.
	for i, a := range rest {
		if len(a) > 1 && a[0] == '-' && a[1] >= '0' && a[1] <= '9' && (i == 0 || !takesValue(fs, rest[i-1])) {
			rest[i] = "now" + a
		}
	}
	pos, err := Parse(fs, rest, max)
	if err != nil {
		return err
	}
	if nargs >= 0 && len(pos) != nargs {
		return UsageError("world %s: want %d arguments, got %d", sub, nargs, len(pos))
	}
	now := time.Now()
	when := func(flag, s string) (string, error) {
		if s == "" {
			return "", nil
		}
		if d, err := time.ParseDuration(strings.TrimPrefix(s, "now")); err == nil {
			return now.Add(d).UTC().Format(time.RFC3339Nano), nil
		}
		if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
			return "", UsageError("world %s: %s %q: want RFC 3339 (2026-12-04T15:00:00Z) or a duration before now (-90m)", sub, flag, s)
		}
		return s, nil
	}
	cl, err := c.client(controlTimeout)
	if err != nil {
		return err
	}
	switch sub {
	case "now":
		out, err := admin.Call(ctx, cl, awareness.OpWorldNow, awareness.None{})
		if err != nil {
			return err
		}
		if len(pos) > 0 {
			kept := out.States[:0]
			for _, st := range out.States {
				if slices.Contains(pos, st.Entity) {
					kept = append(kept, st)
				}
			}
			for _, id := range pos {
				if !slices.ContainsFunc(kept, func(st world.State) bool { return st.Entity == id }) {
					return fmt.Errorf("world now: no entity %q (tobe-body world now lists them)", id)
				}
			}
			out.States = kept
		}
		if *asJSON {
			return writeJSON(stdout, out)
		}
		printStates(stdout, out.States)
		if out.Withheld > 0 {
			fmt.Fprintf(stdout, "(%d entities withheld: their privacy class is above the caller's)\n", out.Withheld)
		}
		return nil
	case "at":
		at, err := when("TIME", pos[1])
		if err != nil {
			return err
		}
		st, err := admin.Call(ctx, cl, awareness.OpWorldAt, awareness.WorldAtIn{Entity: pos[0], At: at, KnownAt: *knownAt})
		return show(stdout, *asJSON, st, err, printState)
	case "history":
		f, err := when("--from", *from)
		if err != nil {
			return err
		}
		t, err := when("--to", *to)
		if err != nil {
			return err
		}
		h, err := admin.Call(ctx, cl, awareness.OpWorldHistory, awareness.WorldHistoryIn{Entity: pos[0], From: f, To: t, Limit: *limit})
		return show(stdout, *asJSON, h, err, printHistory)
	case "explain":
		x, err := admin.Call(ctx, cl, awareness.OpWorldExplain, awareness.WorldEntityIn{Entity: pos[0]})
		return show(stdout, *asJSON, x, err, printExplanation)
	default:
		in := awareness.WorldTellIn{Entity: pos[0], Withdraw: sub == "withdraw"}
		if sub == "tell" {
			in.Value, in.For, in.Confidence = pos[1], *forD, *conf
		}
		st, err := admin.Call(ctx, cl, awareness.OpWorldTell, in)
		return show(stdout, *asJSON, st, err, printState)
	}
}

// takesValue tells whether an argument is a flag of fs that takes the
// next argument as its value (not a boolean one, nor one given -name=v).
func takesValue(fs *flag.FlagSet, a string) bool {
	name := strings.TrimLeft(a, "-")
	if name == a || strings.Contains(name, "=") {
		return false
	}
	f := fs.Lookup(name)
	if f == nil {
		return false
	}
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return !ok || !b.IsBoolFlag()
}

// show prints an answer as JSON, or in words with print.
func show[T any](w io.Writer, asJSON bool, v T, err error, print func(io.Writer, T)) error {
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(w, v)
	}
	print(w, v)
	return nil
}

func valueOf(value string, rs map[string]world.Reading) string {
	if len(rs) == 0 {
		return value
	}
	qs := make([]string, 0, len(rs))
	for q := range rs {
		qs = append(qs, q)
	}
	sort.Strings(qs)
	var parts []string
	for _, q := range qs {
		r := rs[q]
		parts = append(parts, fmt.Sprintf("%g±%g %s", r.Value, r.Uncertainty, r.Unit))
	}
	return strings.Join(parts, ", ")
}

func since(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format(time.RFC3339)
}

func printStates(w io.Writer, sts []world.State) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ENTITY\tVALUE\tCONFIDENCE\tPROVENANCE\tSINCE\tSOURCES")
	for _, st := range sts {
		var srcs []string
		for _, s := range st.Sources {
			v := valueOf(s.Value, s.Readings)
			if s.Why != "" {
				v += " (" + s.Why + ")"
			}
			srcs = append(srcs, s.Source+"="+v)
		}
		val := valueOf(st.Value, st.Readings)
		if st.Conflict {
			val += " (sources disagree)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%s\t%s\t%s\n", st.Entity, val, st.Confidence, or(st.Provenance, "-"), since(st.Since), strings.Join(srcs, " "))
	}
	tw.Flush()
}

func or(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}

func printState(w io.Writer, st world.State) {
	printStates(w, []world.State{st})
}

func printHistory(w io.Writer, h world.History) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "AT\tVALUE\tWAS\tCONFIDENCE\tPROVENANCE\tSOURCES\tRECORDED")
	row := func(c world.Change, before bool) {
		at := since(c.At)
		if before {
			at = "(before) " + at
		}
		val := valueOf(c.Value, c.Readings)
		if c.Conflict {
			val += " (sources disagree)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%s\t%s\t%d\n", at, val, or(c.Was, "-"), c.Confidence, c.Provenance, strings.Join(c.Sources, ","), c.Recorded)
	}
	if h.Before != nil {
		row(*h.Before, true)
	}
	for _, c := range h.Changes {
		row(c, false)
	}
	tw.Flush()
	if h.More {
		fmt.Fprintln(w, "(more: ask again --from the last one's time)")
	}
}

func printExplanation(w io.Writer, x world.Explanation) {
	printState(w, x.State)
	for _, ch := range x.Chains {
		fmt.Fprintf(w, "\nsource %s\n", ch.Source)
		if len(ch.Records) == 0 {
			fmt.Fprintln(w, "  no record")
		}
		for _, r := range ch.Records {
			by := ""
			if r.By != "" {
				by = " by " + r.By
			}
			until := ""
			if !r.ValidTo.IsZero() {
				until = " until " + since(r.ValidTo)
			}
			fmt.Fprintf(w, "  record %d: %s from %s%s, %s%s, confidence %.2f\n", r.Recorded, valueOf(r.Value, r.Readings), since(r.ValidFrom), until, r.Provenance, by, r.Confidence)
			for _, e := range r.Evidence {
				printCited(w, "    evidence", e)
			}
		}
		if ch.LastMark != nil {
			printCited(w, "  last seen by", *ch.LastMark)
		}
	}
}

func printCited(w io.Writer, what string, c world.Cited) {
	if c.Event == nil {
		fmt.Fprintf(w, "%s %s seq %d (%s): gone, %s\n", what, c.Type, c.Seq, c.ID, c.Gone)
		return
	}
	fmt.Fprintf(w, "%s %s seq %d (%s) at %s on %s\n", what, c.Event.Type, c.Seq, c.ID, c.Event.OccurredAt, or(c.Event.ChannelID, "-"))
}
