package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/admin"
)

const grantUsage = `usage: tobe-body grant <command> [flags]

  add --subject S --capability C --scope T [--expires E] [--reason TEXT]
                            let the principal S (agent:pi, mqtt:home, rule:night-light)
                            use the capabilities C on the targets T; C and T are a name
                            (gpio.relay1), a prefix ending in .* (gpio.*), or *; E is a
                            duration (24h, 30d), an RFC 3339 time, or never (the default);
                            until the body's clock is synchronised (NTP) a duration is
                            refused and a time is taken from a local administrator only
  list [--all] [--json]     the grants in force; --all adds expired, revoked and
                            suspended ones (of another boot, until the clock is synchronised)
  revoke ID [--reason TEXT] take a grant back

These talk to the running body through its admin socket; grants are kept
in its ledger as grant.added, grant.expired and grant.revoked events. An
expiry is kept on the wall clock and on the monotonic clock of the boot
it was given in: a step of the wall clock can end a grant early (noted
in grant.expired), never late.
`

// grantTimeout bounds one grant call: a change waits for its record to
// be on disk.
const grantTimeout = 30 * time.Second

// Grant is 'tobe-body grant': add, list and revoke grants, through the
// admin socket.
func Grant(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, grantUsage)
		return &ExitError{Code: 2}
	}
	sub, rest := args[0], args[1:]
	var c Common
	fs := NewFlagSet("grant "+sub, stderr, &c, true)
	var add awareness.GrantAddIn
	var all, asJSON *bool
	var reason *string
	maxArgs := 0
	switch sub {
	case "add":
		fs.StringVar(&add.Subject, "subject", "", "the principal's subject `S` (agent:pi)")
		fs.StringVar(&add.Capability, "capability", "", "capability `C`: a name, a prefix ending in .*, or *")
		fs.StringVar(&add.Scope, "scope", "", "targets `T`: a name, a prefix ending in .*, or *")
		fs.StringVar(&add.Expires, "expires", "", "expiry `E`: a duration (24h, 30d), an RFC 3339 time, or never; a duration needs the body's clock synchronised")
		fs.StringVar(&add.Reason, "reason", "", "why, for the record")
	case "list":
		all = fs.Bool("all", false, "expired and revoked grants too")
		asJSON = fs.Bool("json", false, "print JSON")
	case "revoke":
		reason = fs.String("reason", "", "why, for the record")
		maxArgs = 1
	default:
		fmt.Fprint(stderr, grantUsage)
		return UsageError("grant: unknown command %q", sub)
	}
	pos, err := Parse(fs, rest, maxArgs)
	if err != nil {
		return err
	}
	if sub == "add" {
		for _, f := range []struct{ name, v string }{{"subject", add.Subject}, {"capability", add.Capability}, {"scope", add.Scope}} {
			if f.v == "" {
				return UsageError("grant add: --%s is required", f.name)
			}
		}
	}
	if sub == "revoke" && len(pos) != 1 {
		return UsageError("grant revoke: want one grant ID")
	}
	cl, err := c.client(grantTimeout)
	if err != nil {
		return err
	}
	switch sub {
	case "add":
		g, err := admin.Call(ctx, cl, awareness.OpGrantAdd, add)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "granted %s: %s may use %s on %s until %s\n", g.ID, g.Subject, g.Capability, g.Scope, expiry(g.Expires))
	case "revoke":
		g, err := admin.Call(ctx, cl, awareness.OpGrantRevoke, awareness.GrantRevokeIn{ID: pos[0], Reason: *reason})
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "revoked %s: %s may no longer use %s on %s\n", g.ID, g.Subject, g.Capability, g.Scope)
	case "list":
		out, err := admin.Call(ctx, cl, awareness.OpGrantList, awareness.GrantListIn{All: *all})
		if err != nil {
			return err
		}
		list := out.Grants
		if *asJSON {
			return writeJSON(stdout, list)
		}
		printGrants(stdout, list, *all)
	}
	return nil
}

func expiry(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.Local().Format(time.RFC3339)
}

func printGrants(w io.Writer, list []awareness.GrantView, all bool) {
	if len(list) == 0 {
		if all {
			fmt.Fprintln(w, "no grants")
		} else {
			fmt.Fprintln(w, "no grants in force")
		}
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSUBJECT\tCAPABILITY\tSCOPE\tEXPIRES\tSTATE\tBY\tREASON")
	for _, g := range list {
		why := g.Reason
		if g.State == "revoked" && g.RevokeReason != "" {
			why = "revoked: " + g.RevokeReason
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.ID, g.Subject, g.Capability, g.Scope, expiry(g.Expires), g.State, g.By, strings.ReplaceAll(why, "\t", " "))
	}
	tw.Flush()
}
