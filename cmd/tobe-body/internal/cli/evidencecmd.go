package cli

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/admin"
	"github.com/tobe-body/tobe-body/body/evidence"
)

const evidenceUsage = `usage: tobe-body evidence <command> [flags]

  list [--source S] [--kind snapshot|clip] [--json]
                            what the body keeps to be looked at: who kept it, why, its
                            hash, and how much of its lifetime is left
  get ID FILE|-             the piece's bytes (a JPEG, a WAV), written to FILE by this
                            command (never in the body's data directory) or to stdout;
                            the look is recorded in the ledger (evidence.viewed)
  delete ID [--why TEXT]    delete it now

A piece is kept only when camera.snapshot or audio.clip asked for it
through the runner (tobe-body do camera.snapshot camera.front), under its
own grant, and ends at its lifetime on the body's running clock
(evidence.snapshot_lifetime_min, evidence.clip_lifetime_min). Looking is
a grant of its own: an agent needs evidence.view on the source
(grant add --subject agent:pi --capability evidence.view --scope camera.front).
`

// evidenceTimeout bounds one evidence call.
const evidenceTimeout = time.Minute

// Evidence is 'tobe-body evidence': list, get and delete what the body
// kept to be looked at, through the admin socket.
func Evidence(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, evidenceUsage)
		return &ExitError{Code: 2}
	}
	sub, rest := args[0], args[1:]
	var c Common
	fs := NewFlagSet("evidence "+sub, stderr, &c, true)
	var list awareness.EvidenceListIn
	var asJSON *bool
	var why *string
	nargs := 0
	switch sub {
	case "list":
		fs.StringVar(&list.Source, "source", "", "only from the channel `S` (camera.front)")
		fs.Func("kind", "only of `K`: snapshot or clip", func(v string) error {
			if v != string(evidence.Snapshot) && v != string(evidence.Clip) {
				return fmt.Errorf("want snapshot or clip")
			}
			list.Kind = evidence.Kind(v)
			return nil
		})
		asJSON = fs.Bool("json", false, "print JSON")
	case "get":
		nargs = 2
	case "delete":
		why = fs.String("why", "", "why, for the record")
		nargs = 1
	default:
		fmt.Fprint(stderr, evidenceUsage)
		return UsageError("evidence: unknown command %q", sub)
	}
	pos, err := Parse(fs, rest, nargs)
	if err != nil {
		return err
	}
	if len(pos) != nargs {
		if sub == "get" {
			return UsageError("evidence get: want an evidence ID and a FILE (or - for stdout)")
		}
		return UsageError("evidence %s: want one evidence ID", sub)
	}
	cl, err := c.client(evidenceTimeout)
	if err != nil {
		return err
	}
	switch sub {
	case "list":
		out, err := admin.Call(ctx, cl, awareness.OpEvidenceList, list)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(stdout, out.Evidence)
		}
		printEvidence(stdout, out.Evidence)
	case "delete":
		it, err := admin.Call(ctx, cl, awareness.OpEvidenceDelete, awareness.EvidenceDeleteIn{ID: pos[0], Why: *why})
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "deleted %s: the %s of %s kept by %s\n", it.ID, it.Kind, it.Source, it.By)
	case "get":
		return getEvidence(ctx, cl, pos[0], pos[1], stdout, stderr)
	}
	return nil
}

// getEvidence receives piece id into dst ("-": stdout) as a backup is
// received: a temporary file beside dst, checked against the piece's
// size and SHA-256, renamed over it; never in the data directory.
func getEvidence(ctx context.Context, cl *admin.Client, id, dst string, stdout, stderr io.Writer) error {
	b := &backupFile{out: stdout}
	report := stdout
	if dst != "-" {
		st, err := admin.Call(ctx, cl, awareness.OpStatus, awareness.None{})
		if err != nil {
			return fmt.Errorf("evidence get: %w", err)
		}
		abs, err := filepath.Abs(dst)
		if err != nil {
			return fmt.Errorf("evidence get: %w", err)
		}
		if err := refuseDataDir("evidence get", abs, st.DataDir); err != nil {
			return err
		}
		b.dst = abs
	} else {
		report = stderr // stdout is the piece
	}
	defer b.abort()
	out, err := admin.CallStream(ctx, cl, awareness.OpEvidenceGet, awareness.EvidenceGetIn{ID: id}, nil,
		func(out awareness.EvidenceGet, r io.Reader) error {
			w, err := b.open(out.Bytes)
			if err != nil {
				return err
			}
			_, err = io.Copy(w, io.LimitReader(r, out.Bytes))
			return err
		})
	if err != nil {
		return fmt.Errorf("evidence get: %w", err)
	}
	if err := b.finish(out.Bytes, out.SHA256); err != nil {
		return fmt.Errorf("evidence get: %w", err)
	}
	where := "stdout"
	if b.dst != "" {
		where = b.dst
	}
	fmt.Fprintf(report, "evidence %s: %s, the %s %s of %s, %d bytes, sha256 %s\n", out.ID, where, out.MediaType(), out.Kind, out.Source, out.Bytes, out.SHA256)
	return nil
}

func printEvidence(w io.Writer, list []awareness.EvidenceEntry) {
	if len(list) == 0 {
		fmt.Fprintln(w, "no evidence is kept")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tSOURCE\tBYTES\tBY\tCAPTURED\tENDS IN\tVIEWS\tWHY")
	for _, e := range list {
		kind := string(e.Kind)
		if e.Frozen {
			kind += " (frozen)"
		}
		captured := e.CapturedAt.Local().Format(time.RFC3339)
		if e.Unsynced {
			captured += " (clock unsynced)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%d\t%s\n", e.ID, kind, e.Source, e.Bytes, e.By, captured,
			(time.Duration(e.EndsInS) * time.Second).String(), e.Views, e.Why)
	}
	tw.Flush()
}
