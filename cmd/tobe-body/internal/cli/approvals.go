package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/admin"
)

// approvalTimeout bounds an approve: the invocation runs before the answer
// (its own timeout is 30 s unless it says otherwise).
const approvalTimeout = time.Minute

const approvalsUsage = `usage: tobe-body approvals [--json]
       tobe-body approve ACTION_ID [--json]
       tobe-body deny ACTION_ID [--why TEXT] [--json]

An R3 action (irreversible or dangerous) that passes every other check
waits for a local administrator: 'approvals' lists what waits, with what
it would do and until when; 'approve' records the approval, bound to that
one action, and runs it with the policy checked again now; 'deny' cancels
it. What nobody approves within 5 minutes is cancelled (approval_expired).
`

// Approvals is 'tobe-body approvals'.
func Approvals(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c Common
	fs := NewFlagSet("approvals", stderr, &c, true)
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := Parse(fs, args, 0); err != nil {
		return err
	}
	cl, err := c.client(0)
	if err != nil {
		return err
	}
	out, err := admin.Call(ctx, cl, awareness.OpApprovals, awareness.None{})
	if err != nil {
		return err
	}
	list := out.Waiting
	if *asJSON {
		return writeJSON(stdout, list)
	}
	if len(list) == 0 {
		fmt.Fprintln(stdout, "nothing waits for approval")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ACTION_ID\tCAPABILITY\tRISK\tTARGET\tPARAMS\tASKED BY\tEXPIRES\tNOTE")
	for _, w := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", w.ActionID, w.Capability, w.Risk, w.Target, paramList(w.Params), w.Principal,
			w.Expires.Local().Format(time.RFC3339), oneLine(w.Note))
	}
	return tw.Flush()
}

func paramList(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%q", k, m[k])
	}
	return oneLine(b.String())
}

// oneLine keeps a table row on one line.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// Decide is 'tobe-body approve' and 'tobe-body deny'.
func Decide(ctx context.Context, verb string, args []string, stdout, stderr io.Writer) error {
	var c Common
	fs := NewFlagSet(verb, stderr, &c, true)
	asJSON := fs.Bool("json", false, "print JSON")
	var why *string
	if verb == "deny" {
		why = fs.String("why", "", "why, for the record")
	}
	pos, err := Parse(fs, args, 1)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fmt.Fprint(stderr, approvalsUsage)
		return UsageError("%s: want one ACTION_ID (tobe-body approvals lists them)", verb)
	}
	cl, err := c.client(approvalTimeout)
	if err != nil {
		return err
	}
	var res act.Result
	if verb == "deny" {
		res, err = admin.Call(ctx, cl, awareness.OpDeny, awareness.DenyIn{ActionID: pos[0], Why: *why})
	} else {
		res, err = admin.Call(ctx, cl, awareness.OpApprove, awareness.ApproveIn{ActionID: pos[0]})
	}
	if err != nil && awareness.ErrorOf(err).Record == nil { // a refused action is printed as any other
		return err
	}
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(res); err != nil {
			return err
		}
	} else {
		printResult(stdout, res)
	}
	want := act.Succeeded
	if verb == "deny" {
		want = act.Cancelled
	}
	if res.Status != want {
		return &ExitError{Code: 1}
	}
	return nil
}
