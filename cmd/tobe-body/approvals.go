package main

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
	"github.com/tobe-body/tobe-body/ledger"
)

// The approval methods act as the local administrator the admin socket's
// peer credentials name (adminSubject): only such a caller approves or
// denies an R3 invocation that waits. The agent and MQTT reach the runner
// through their own transports, as principals of their own kinds, which
// the runner refuses and records.

type approvalParams struct {
	ActionID string `json:"action_id"`
	Why      string `json:"why,omitempty"` // deny only
}

// approvalTimeout bounds an approve: the invocation runs before the answer
// (its own timeout is 30 s unless it says otherwise).
const approvalTimeout = time.Minute

func approvalMethods(r *act.Runner) map[string]method {
	admin := func(ctx context.Context) act.Principal {
		return act.Principal{Kind: act.LocalAdmin, Subject: adminSubject(ctx), Session: "admin", Trust: ledger.High}
	}
	return map[string]method{
		"approval.list": func(ctx context.Context, raw json.RawMessage) (any, error) {
			var p struct{}
			if err := decodeParams(raw, &p); err != nil {
				return nil, err
			}
			// Expired ones are left out of the list whether or not their
			// records could be written now.
			r.SweepApprovals(ctx)
			return r.Waiting(), nil
		},
		"approval.approve": func(ctx context.Context, raw json.RawMessage) (any, error) {
			var p approvalParams
			if err := decodeParams(raw, &p); err != nil {
				return nil, err
			}
			if p.Why != "" {
				return nil, fmt.Errorf("params: why: only a deny takes a reason")
			}
			return r.Approve(ctx, p.ActionID, admin(ctx))
		},
		"approval.deny": func(ctx context.Context, raw json.RawMessage) (any, error) {
			var p approvalParams
			if err := decodeParams(raw, &p); err != nil {
				return nil, err
			}
			return r.Deny(ctx, p.ActionID, admin(ctx), p.Why)
		},
	}
}

const approvalsUsage = `usage: tobe-body approvals [--json]
       tobe-body approve ACTION_ID [--json]
       tobe-body deny ACTION_ID [--why TEXT] [--json]

An R3 action (irreversible or dangerous) that passes every other check
waits for a local administrator: 'approvals' lists what waits, with what
it would do and until when; 'approve' records the approval, bound to that
one action, and runs it with the policy checked again now; 'deny' cancels
it. What nobody approves within 5 minutes is cancelled (approval_expired).
`

// runApprovals is 'tobe-body approvals'.
func runApprovals(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c common
	fs := newFlagSet("approvals", stderr, &c, true)
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	path, err := c.socketPath()
	if err != nil {
		return err
	}
	var list []act.WaitingInvocation
	if err := callAdminParams(ctx, path, "approval.list", struct{}{}, &list, 5*time.Second); err != nil {
		return err
	}
	if *asJSON {
		if list == nil {
			list = []act.WaitingInvocation{}
		}
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

// runDecide is 'tobe-body approve' and 'tobe-body deny'.
func runDecide(ctx context.Context, verb string, args []string, stdout, stderr io.Writer) error {
	var c common
	fs := newFlagSet(verb, stderr, &c, true)
	asJSON := fs.Bool("json", false, "print JSON")
	var why *string
	if verb == "deny" {
		why = fs.String("why", "", "why, for the record")
	}
	pos, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fmt.Fprint(stderr, approvalsUsage)
		return usageError("%s: want one ACTION_ID (tobe-body approvals lists them)", verb)
	}
	path, err := c.socketPath()
	if err != nil {
		return err
	}
	p := approvalParams{ActionID: pos[0]}
	if why != nil {
		p.Why = *why
	}
	var res act.Result
	if err := callAdminParams(ctx, path, "approval."+verb, p, &res, approvalTimeout); err != nil {
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
		return &exitError{code: 1}
	}
	return nil
}
