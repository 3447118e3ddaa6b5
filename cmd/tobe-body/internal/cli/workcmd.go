package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/admin"
	"github.com/tobe-body/tobe-body/awareness/control/gate"
	"github.com/tobe-body/tobe-body/awareness/control/wait"
)

const workUsage = `usage: tobe-body work <command> [flags]

  list [--all] [--json]          the work items the agent left on the body; --all adds
                                 closed and cancelled ones
  show ID [--json]               one work item as it stands
  close ID --version N [--reason TEXT]
                                 close a running or verifiable item (its criteria met)

These talk to the running body through its admin socket. Work items are
kept in its ledger (work.created, work.changed, work.moved, work.due,
work.stale); the agent makes and changes them with its tools.
`

const waitUsage = `usage: tobe-body wait <command> [flags]

  list [--all] [--json]          the wait conditions that wait; --all adds removed ones
  add --owner ITEM --type T [--type T...] [--channel C...] [--match JSON]
      [--priority P] [--cooldown D] (--expires-in D | --expires-at TIME) [--id ID]
      [--follow-up GOAL --done-when CRITERION...]
                                 wait for events of types T (a name, or a prefix ending
                                 in a dot) on channels C for work item ITEM; JSON is a list
                                 of clauses ([{"zone":{"names":["door"]}}], equals, in,
                                 prefix, above, below); P low, medium, high or max; each
                                 wake makes a follow-up work item under ITEM with GOAL
  remove ID [--why TEXT]         remove a wait condition
`

const gateUsage = `usage: tobe-body gate explain EVENT_ID [--json]

Why the body woke its agent for an event, or did not: the gate's decision
and the path of rules that led to it.
`

// controlTimeout bounds one call: a change waits for its record.
const controlTimeout = 30 * time.Second

// Work is 'tobe-body work': list, show and close work items.
func Work(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, workUsage)
		return &ExitError{Code: 2}
	}
	sub, rest := args[0], args[1:]
	var c Common
	fs := NewFlagSet("work "+sub, stderr, &c, true)
	asJSON := fs.Bool("json", false, "print JSON")
	var all *bool
	var version *uint64
	var reason *string
	maxArgs := 1
	switch sub {
	case "list":
		all = fs.Bool("all", false, "closed and cancelled items too")
		maxArgs = 0
	case "show":
	case "close":
		version = fs.Uint64("version", 0, "the item's version `N` (work show says it)")
		reason = fs.String("reason", "", "why, for the record")
	default:
		fmt.Fprint(stderr, workUsage)
		return UsageError("work: unknown command %q", sub)
	}
	pos, err := Parse(fs, rest, maxArgs)
	if err != nil {
		return err
	}
	if sub != "list" && len(pos) != 1 {
		return UsageError("work %s: want one work item ID", sub)
	}
	cl, err := c.client(controlTimeout)
	if err != nil {
		return err
	}
	switch sub {
	case "list":
		out, err := admin.Call(ctx, cl, awareness.OpWorkList, awareness.WorkListIn{All: *all})
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(stdout, out.Items)
		}
		if len(out.Items) == 0 {
			fmt.Fprintln(stdout, "no work items")
			return nil
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tSTATUS\tVERSION\tOWNER\tSTALE\tGOAL")
		for _, it := range out.Items {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%v\t%s\n", it.ID, it.Status, it.Version, it.Owner, it.Stale, oneLine(it.Goal))
		}
		return tw.Flush()
	case "show":
		it, err := admin.Call(ctx, cl, awareness.OpWorkShow, awareness.IDIn{ID: pos[0]})
		if err != nil {
			return err
		}
		return writeJSON(stdout, it)
	default:
		it, err := admin.Call(ctx, cl, awareness.OpWorkClose, awareness.WorkCloseIn{ID: pos[0], Version: *version, Reason: *reason})
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "closed %s (version %d)\n", it.ID, it.Version)
		return nil
	}
}

// Wait is 'tobe-body wait': list, add and remove wait conditions.
func Wait(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, waitUsage)
		return &ExitError{Code: 2}
	}
	sub, rest := args[0], args[1:]
	var c Common
	fs := NewFlagSet("wait "+sub, stderr, &c, true)
	asJSON := fs.Bool("json", false, "print JSON")
	var all *bool
	var why, match, cooldown, followUp *string
	var add awareness.WaitAddIn
	var types, chans, doneWhen typesFlag
	maxArgs := 0
	switch sub {
	case "list":
		all = fs.Bool("all", false, "removed conditions too")
	case "add":
		fs.StringVar(&add.ID, "id", "", "the condition's `ID` (default: one is made)")
		fs.StringVar(&add.Owner, "owner", "", "the work `ITEM` it belongs to")
		fs.Var(&types, "type", "event `TYPE`, or a prefix ending in a dot; may repeat")
		fs.Var(&chans, "channel", "`CHANNEL`, or a prefix ending in a dot; may repeat (default: any)")
		match = fs.String("match", "", "clauses over the payload, a JSON `LIST`")
		fs.StringVar((*string)(&add.Priority), "priority", "", "`P`: low, medium (the default), high or max")
		cooldown = fs.String("cooldown", "", "matches within `D` of the last are recorded, not woken (30s, 5m)")
		fs.StringVar(&add.ExpiresIn, "expires-in", "", "it ends after `D` (10m, 2h)")
		fs.StringVar(&add.ExpiresAt, "expires-at", "", "it ends at `TIME` (RFC 3339)")
		followUp = fs.String("follow-up", "", "each wake makes a work item under the owner with this `GOAL`")
		fs.Var(&doneWhen, "done-when", "the follow-up's acceptance `CRITERION`; may repeat (at least one with --follow-up)")
	case "remove":
		why = fs.String("why", "", "why, for the record")
		maxArgs = 1
	default:
		fmt.Fprint(stderr, waitUsage)
		return UsageError("wait: unknown command %q", sub)
	}
	pos, err := Parse(fs, rest, maxArgs)
	if err != nil {
		return err
	}
	if sub == "remove" && len(pos) != 1 {
		return UsageError("wait remove: want one condition ID")
	}
	if sub == "add" {
		add.EventTypes, add.Channels = types, chans
		if *match != "" {
			if err := json.Unmarshal([]byte(*match), &add.Match); err != nil {
				return UsageError("wait add: --match: a JSON list of clauses: %v", err)
			}
		}
		switch {
		case *followUp != "":
			add.FollowUp = &wait.FollowUp{Goal: *followUp, DoneWhen: doneWhen}
		case len(doneWhen) > 0:
			return UsageError("wait add: --done-when is the criterion of a --follow-up")
		}
		if *cooldown != "" {
			d, err := time.ParseDuration(*cooldown)
			if err != nil || d < 0 {
				return UsageError("wait add: --cooldown %q: a duration (30s, 5m)", *cooldown)
			}
			add.CooldownMS = d.Milliseconds()
		}
	}
	cl, err := c.client(controlTimeout)
	if err != nil {
		return err
	}
	switch sub {
	case "list":
		out, err := admin.Call(ctx, cl, awareness.OpWaitList, awareness.WaitListIn{All: *all})
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(stdout, out.Conditions)
		}
		printConditions(stdout, out.Conditions)
		return nil
	case "add":
		cond, err := admin.Call(ctx, cl, awareness.OpWaitAdd, add)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "waiting: %s for work item %s, until %s\n", cond.ID, cond.Owner, time.UnixMilli(cond.ExpiresAt).Local().Format(time.RFC3339))
		return nil
	default:
		cond, err := admin.Call(ctx, cl, awareness.OpWaitRemove, awareness.WaitRemoveIn{ID: pos[0], Why: *why})
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "removed %s: %s\n", cond.ID, cond.Removed)
		return nil
	}
}

func printConditions(w io.Writer, cs []wait.Condition) {
	if len(cs) == 0 {
		fmt.Fprintln(w, "no wait conditions")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tOWNER\tTYPES\tCHANNELS\tPRIORITY\tEXPIRES\tMATCHES\tENDED")
	for _, c := range cs {
		chans := strings.Join(c.Channels, ",")
		if chans == "" {
			chans = "any"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", c.ID, c.Owner, strings.Join(c.Types, ","), chans, c.Priority,
			time.UnixMilli(c.ExpiresAt).Local().Format(time.RFC3339), c.Matches, c.Removed)
	}
	tw.Flush()
}

// Gate is 'tobe-body gate explain': the gate's decision on an event.
func Gate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "explain" {
		fmt.Fprint(stderr, gateUsage)
		return &ExitError{Code: 2}
	}
	var c Common
	fs := NewFlagSet("gate explain", stderr, &c, true)
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := Parse(fs, args[1:], 1)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return UsageError("gate explain: want one EVENT_ID")
	}
	cl, err := c.client(controlTimeout)
	if err != nil {
		return err
	}
	d, err := admin.Call(ctx, cl, awareness.OpExplain, awareness.ExplainIn{EventID: pos[0]})
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(stdout, d)
	}
	printDecision(stdout, d)
	return nil
}

func printDecision(w io.Writer, d gate.Decision) {
	fmt.Fprintf(w, "event     %s", d.Event)
	if d.Type != "" {
		fmt.Fprintf(w, " (%s, seq %d)", d.Type, d.Seq)
	}
	fmt.Fprintln(w)
	out := string(d.Outcome)
	if d.Attention != "" {
		out += " at " + d.Attention
	}
	fmt.Fprintf(w, "decision  %s\n", out)
	if d.Condition != "" {
		fmt.Fprintf(w, "for       wait condition %s of work item %s (band %s)\n", d.Condition, d.WorkItem, d.Band)
	}
	if d.Reason != "" {
		fmt.Fprintf(w, "why       %s\n", d.Reason)
	}
	for i, s := range d.Path {
		fmt.Fprintf(w, "%2d. %-11s %s\n", i+1, s.Rule, s.Said)
	}
}
