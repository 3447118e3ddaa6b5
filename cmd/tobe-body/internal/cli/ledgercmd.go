package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/admin"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/ledger"
)

const ledgerUsage = `usage: tobe-body ledger <command> [flags]

  stats [--json]                 counts, sizes, the outbox backlog and the archive
  verify [--archive]             bbolt's check, and every projection rebuilt from the events (the
                                 archive's and the file's) and compared; --archive: the archive
                                 alone, its segments' hashes and their chain
  backup FILE|-                  a consistent copy, taken while the body runs, written by this
                                 command with your rights (0600), never in the data directory;
                                 - writes it to stdout
  events [--follow] [--type T] [--since D] [--limit N] [--archive] [--json]
                                 events for people (or JSON Lines with --json); --type may repeat and
                                 end in a dot (camera.); --since is a duration (1h) or an RFC 3339 time;
                                 --archive: the archived events too (with --json, an export)
  compact                        rewrite the file without its free pages; only while the body is stopped
  archive-delete --through N     delete the archive's segments up to N, oldest first, recorded as
                                 ledger.archive_deleted; only while the body is stopped

While the body runs these go through its admin socket; otherwise they open
the ledger in the data directory.
`

// typesFlag is a repeatable --type.
type typesFlag []string

func (t *typesFlag) String() string     { return strings.Join(*t, ",") }
func (t *typesFlag) Set(v string) error { *t = append(*t, v); return nil }

// Ledger is 'tobe-body ledger': stats, verify, backup, events and
// compact, through the daemon when one answers, else on the file.
func Ledger(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, ledgerUsage)
		return &ExitError{Code: 2}
	}
	sub, rest := args[0], args[1:]
	var c Common
	fs := NewFlagSet("ledger "+sub, stderr, &c, true)
	asJSON := fs.Bool("json", false, "print JSON")
	var types typesFlag
	var follow *bool
	var since *string
	var limit *int
	var archive *bool
	var through *uint64
	maxArgs := 0
	switch sub {
	case "verify":
		archive = fs.Bool("archive", false, "check the archive alone")
	case "archive-delete":
		through = fs.Uint64("through", 0, "delete segments up to and including `N`")
	case "stats", "compact":
	case "backup":
		maxArgs = 1
	case "events":
		follow = fs.Bool("follow", false, "keep printing new events")
		fs.Var(&types, "type", "event `TYPE`, or a prefix ending in a dot; may repeat")
		since = fs.String("since", "", "events that occurred since `D`: a duration (90m) or an RFC 3339 time")
		limit = fs.Int("limit", 0, "at most `N` events (0: all)")
		archive = fs.Bool("archive", false, "the archived events too, before the ledger's")
	default:
		fmt.Fprint(stderr, ledgerUsage)
		return UsageError("ledger: unknown command %q", sub)
	}
	pos, err := Parse(fs, rest, maxArgs)
	if err != nil {
		return err
	}
	if sub == "backup" && len(pos) != 1 {
		return UsageError("ledger backup: want one FILE, or - for stdout")
	}
	if sub == "archive-delete" && *through == 0 {
		return UsageError("ledger archive-delete: want --through N, the last segment to delete (see ledger stats)")
	}
	l, err := openLedgerAccess(ctx, &c, sub == "compact" || sub == "archive-delete")
	if err != nil {
		return err
	}
	defer l.close()

	switch sub {
	case "stats":
		st, err := viaDaemon(ctx, l, awareness.OpLedgerStats, awareness.None{}, l.store.Stats)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(stdout, st)
		}
		printLedgerStats(stdout, st)
		return nil
	case "verify":
		op, local := awareness.OpLedgerVerify, func() (ledger.VerifyReport, error) { return l.store.Verify(ctx) }
		if *archive {
			op, local = awareness.OpLedgerVerifyArchive, func() (ledger.VerifyReport, error) { return l.store.VerifyArchive(ctx) }
		}
		r, err := viaDaemon(ctx, l, op, awareness.None{}, local)
		if err != nil {
			return err
		}
		if *asJSON {
			writeJSON(stdout, r)
		} else {
			if r.Segments > 0 || *archive {
				fmt.Fprintf(stdout, "archive: %d events read from %d segments, their hashes and chain checked\n", r.Archived, r.Segments)
			}
			if !*archive {
				fmt.Fprintf(stdout, "%d events read; projections rebuilt and compared: %s\n", r.Events, strings.Join(r.Projections, ", "))
			}
			if r.NotRebuilt != "" {
				fmt.Fprintf(stdout, "projections and aggregates not rebuilt: %s\n", r.NotRebuilt)
			}
			for _, p := range r.Problems {
				fmt.Fprintln(stdout, "problem:", p)
			}
		}
		if !r.OK() {
			return &ExitError{Code: 1, Err: fmt.Errorf("ledger verify: %d problems", len(r.Problems))}
		}
		if !*asJSON && *archive {
			fmt.Fprintln(stdout, "ok: the archive is whole")
		} else if !*asJSON {
			fmt.Fprintln(stdout, "ok: the ledger is consistent")
		}
		return nil
	case "archive-delete":
		store, err := body.LookAtLedger(l.cfg.Ledger, filepath.Dir(l.path), awareness.Projections()...)
		if err != nil {
			return err
		}
		defer store.Close()
		d, err := store.DeleteArchive(*through, fmt.Sprintf("admin:uid=%d", os.Getuid()))
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "deleted segments %d to %d: events %d to %d (%d events, %d bytes); recorded as ledger.archive_deleted\n",
			d.From, d.To, d.FirstSeq, d.LastSeq, d.Events, d.Bytes)
		return nil
	case "backup":
		return runBackup(ctx, l, pos[0], stdout, stderr)
	case "compact":
		path := l.path
		start := time.Now()
		before, after, err := ledger.CompactFile(path, func(done, total int) {
			fmt.Fprintf(stderr, "\rcompacting: %d of %d keys (%d%%)", done, total, 100*done/max(total, 1))
		})
		fmt.Fprintln(stderr)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "compacted %s: %d -> %d bytes in %s\n", path, before, after, time.Since(start).Round(time.Millisecond))
		return nil
	}
	// events
	req := awareness.EventsIn{Types: types, Limit: *limit, Archive: *archive}
	if *since != "" {
		if d, err := time.ParseDuration(*since); err == nil {
			req.Since = time.Now().Add(-d)
		} else if t, err := time.Parse(time.RFC3339, *since); err == nil {
			req.Since = t
		} else {
			return UsageError("ledger events: --since %q is neither a duration (90m) nor an RFC 3339 time", *since)
		}
	}
	printed := 0
	for calls := 0; ; calls++ {
		if *follow && calls > 0 { // past what was there: wait for more
			req.WaitMS = 10000
		}
		batch := req
		if req.Limit > 0 {
			batch.Limit = req.Limit - printed
		}
		events := func() (awareness.Events, error) { return awareness.ReadEvents(ctx, l.store, batch) }
		reply, err := viaDaemon(ctx, l, awareness.OpEvents, batch, events)
		if err != nil && ctx.Err() == nil && l.socket != "" && *follow {
			// The body stopped between two polls: what it wrote last is
			// in the file, which it has let go of.
			fmt.Fprintln(stderr, "tobe-body: the body stopped; reading the rest from the ledger file")
			l.close()
			if l, err = openLedgerAccess(ctx, &c, false); err == nil {
				defer l.close()
				batch.WaitMS = 0
				reply, err = viaDaemon(ctx, l, awareness.OpEvents, batch, events)
				*follow = false
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil // Ctrl-C ends --follow
			}
			return err
		}
		for _, e := range reply.Events {
			if *asJSON {
				b, _ := json.Marshal(e)
				fmt.Fprintf(stdout, "%s\n", b)
			} else {
				printEvent(stdout, e)
			}
			printed++
		}
		// A reply stops at its byte budget (more): the rest is asked for
		// from its last_seq on, until everything asked for is printed.
		done := req.Limit > 0 && printed >= req.Limit
		if done || !*follow && (!reply.More || reply.LastSeq == req.After) {
			return nil
		}
		req.After = reply.LastSeq
	}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printEvent(w io.Writer, e ledger.EventView) {
	at := e.OccurredAt
	if t, err := time.Parse(time.RFC3339Nano, at); err == nil {
		at = t.Local().Format("2006-01-02 15:04:05.000")
	}
	fmt.Fprintf(w, "%6d  %s  %-24s", e.Seq, at, e.Type)
	if e.ChannelID != "" {
		fmt.Fprintf(w, "  %s", e.ChannelID)
	}
	if e.Payload != nil {
		b, _ := json.Marshal(e.Payload)
		fmt.Fprintf(w, "  %s", b)
	}
	fmt.Fprintln(w)
}

func printLedgerStats(w io.Writer, st ledger.Stats) {
	fmt.Fprintf(w, "file     %s: %d bytes, %d free (schema %d)\n", st.Path, st.FileBytes, st.FreeBytes, st.Schema)
	fmt.Fprintf(w, "events   %d (last seq %d)\n", st.Events, st.LastSeq)
	fmt.Fprintf(w, "outbox   %d rows, %d bytes waiting for the uplink; %d dropped over budget so far\n", st.OutboxRows, st.OutboxBytes, st.OutboxDropped)
	fmt.Fprintf(w, "inbox    %d dedupe keys; %d aggregates\n", st.InboxKeys, st.Aggregates)
	a := st.Archive
	if a.Events == 0 {
		fmt.Fprintf(w, "archive  %s: nothing yet\n", a.Dir)
	} else {
		fmt.Fprintf(w, "archive  %s: %d events to %d in %d segments (from %d), %d bytes; %d events of deleted segments\n",
			a.Dir, a.Events-a.Deleted, a.Through-1, a.Segments, a.FirstKept, a.Bytes, a.Deleted)
	}
	fmt.Fprintf(w, "past     %d keys of archived events (sized for %d; a new key taken for a past one: %.1g)\n", a.PastKeys, a.PastCapacity, a.PastFalseRate)
	fmt.Fprintf(w, "disk     %d bytes in all", a.DiskBytes)
	if a.DiskBudget > 0 {
		fmt.Fprintf(w, " of a budget of %d", a.DiskBudget)
	}
	fmt.Fprintln(w)
	if st.Damage != nil {
		fmt.Fprintf(w, "damage   %s\n", st.Damage.Error())
	}
	if len(st.ByType) > 0 {
		fmt.Fprintln(w, "\naudit events by type:")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		keys := make([]string, 0, len(st.ByType))
		for k := range st.ByType {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(tw, "  %s\t%d\n", k, st.ByType[k])
		}
		tw.Flush()
	}
}

// ledgerAccess reaches the ledger through the running daemon, or opens it.
type ledgerAccess struct {
	socket string // non-empty: the daemon answers here
	store  *ledger.Store
	path   string
	cfg    *config.Loaded
}

// openLedgerAccess asks the daemon when one answers; otherwise it opens the
// ledger file itself (which must exist: a look is not a reason to make
// one). offline wants the file with no daemon (compaction).
func openLedgerAccess(ctx context.Context, c *Common, offline bool) (*ledgerAccess, error) {
	sock, err := c.socketPath()
	if err != nil {
		return nil, err
	}
	if conn, err := net.DialTimeout("unix", sock, time.Second); err == nil {
		conn.Close()
		if offline {
			return nil, errors.New("tobe-body is running on this data directory; stop it first (systemctl stop tobe-body)")
		}
		return &ledgerAccess{socket: sock}, nil
	}
	cfg, err := c.LoadConfig()
	if err != nil {
		return nil, err
	}
	dataDir := cfg.DataDir
	if c.data == "" && c.socket != "" {
		dataDir = filepath.Dir(sock)
	}
	path := filepath.Join(dataDir, body.LedgerFile)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("no ledger at %s (and no tobe-body answering at %s): %w", path, sock, err)
	}
	if offline {
		return &ledgerAccess{path: path, cfg: cfg}, nil
	}
	store, err := body.LookAtLedger(cfg.Ledger, dataDir, awareness.Projections()...)
	if err != nil {
		return nil, err
	}
	if d := store.Damage(); d != nil {
		fmt.Fprintln(os.Stderr, "tobe-body: warning:", d.Error())
	}
	return &ledgerAccess{store: store, path: path}, nil
}

// viaDaemon runs op on the daemon when one answers, or local on the
// opened ledger.
func viaDaemon[In, Out any](ctx context.Context, l *ledgerAccess, op awareness.Op[In, Out], in In, local func() (Out, error)) (Out, error) {
	if l.socket != "" {
		return admin.Call(ctx, &admin.Client{Path: l.socket, Timeout: 5 * time.Minute}, op, in)
	}
	return local()
}

func (l *ledgerAccess) close() {
	if l.store != nil {
		l.store.Close()
	}
}
