package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/admin"
)

const doUsage = `usage: tobe-body do CAPABILITY TARGET [key=value ...] [--mode live|shadow|simulation] [--key K] [--caused-by EVENT_ID] [--json]

  tobe-body do gpio.set gpio.relay1 state=on
  tobe-body do gpio.pulse gpio.buzzer duration_ms=200
  tobe-body do audio.tone audio.speaker freq_hz=440 ms=300 [level_dbfs=-20]
  tobe-body do audio.play audio.speaker clip=chime.wav
  tobe-body do --list

Acts as a local administrator, through the same policy and verification
as every other principal; the result says what became of it. Shadow
records what would happen and touches nothing; simulation runs against a
simulated twin of each output, never the hardware. An R3
capability waits for approval (tobe-body approvals, approve, deny).
--caused-by names the event that caused the action (its id, as tobe-body
ledger events shows it): the policy weighs its trust and evidence, and
refuses R2 and above caused by an inferred state the body observed
nothing of (inferred_cause).
`

// Do is 'tobe-body do': one action as a local administrator.
func Do(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c Common
	fs := NewFlagSet("do", stderr, &c, true)
	mode := fs.String("mode", "", "live (the default); shadow: record only; simulation: a simulated twin, never the hardware")
	key := fs.String("key", "", "idempotency key: a repeat returns the first result")
	causedBy := fs.String("caused-by", "", "the id of the event (`EVENT_ID`) that caused the action, whose trust and evidence the policy weighs")
	list := fs.Bool("list", false, "list the capabilities")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := Parse(fs, args, -1)
	if err != nil {
		return err
	}
	cl, err := c.client(time.Minute)
	if err != nil {
		return err
	}
	if *list {
		caps, err := admin.Call(ctx, cl, awareness.OpCapabilities, awareness.None{})
		if err != nil {
			return err
		}
		for _, cp := range caps.Capabilities {
			fmt.Fprintf(stdout, "%-12s %s  verified by %s\n", cp.Name, cp.Risk, cp.Verify)
		}
		return nil
	}
	if len(pos) < 2 {
		fmt.Fprint(stderr, doUsage)
		return UsageError("do needs a capability and a target")
	}
	in := awareness.DoIn{Capability: pos[0], Target: pos[1], Params: map[string]string{}, Mode: act.Mode(*mode), IdempotencyKey: *key,
		CausedBy: *causedBy}
	for _, kv := range pos[2:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return UsageError("parameter %q: want key=value", kv)
		}
		in.Params[k] = v
	}
	res, err := admin.Call(ctx, cl, awareness.OpDo, in)
	if err != nil && awareness.ErrorOf(err).Record == nil { // a refused action is printed as any other
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(res)
	}
	printResult(stdout, res)
	if res.Status != act.Succeeded {
		return &ExitError{Code: 1}
	}
	return nil
}

// printResult shows what became of an invocation, for people.
func printResult(w io.Writer, res act.Result) {
	fmt.Fprintf(w, "%s %s", res.ActionID, res.Status)
	if res.Reason != "" {
		fmt.Fprintf(w, " (%s)", res.Reason)
	}
	if res.Detail != "" {
		fmt.Fprintf(w, ": %s", res.Detail)
	}
	fmt.Fprintln(w)
	if res.Receipt != "" {
		fmt.Fprintf(w, "  did:      %s\n", res.Receipt)
	}
	if v := res.Verification; v != nil {
		fmt.Fprintf(w, "  verified: %s: %s\n", v.Result, v.Evidence)
	}
}
