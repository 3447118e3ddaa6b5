package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/admin"
)

const estopUsage = `usage: tobe-body estop <command> [flags]

  status [--json]   latched or not, why, the lines, a wiring fault
  trip              stop now: every output to its safe level, actions cancelled
                    (--reason TEXT, --note TEXT, --key KEY: a repeat stops nothing)
  reset             clear the latch (a local administrator; the line must be healthy)

The agent and MQTT may trip the e-stop but never reset it.
`

// EStop is 'tobe-body estop': status, trip and reset, through the admin
// socket.
func EStop(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, estopUsage)
		return &ExitError{Code: 2}
	}
	sub, rest := args[0], args[1:]
	var c Common
	fs := NewFlagSet("estop "+sub, stderr, &c, true)
	asJSON := fs.Bool("json", false, "print JSON")
	var trip awareness.TripIn
	if sub == "trip" {
		fs.StringVar(&trip.Reason, "reason", "", "why, for the record and the cause (trip)")
		fs.StringVar(&trip.Note, "note", "", "a note for the record (trip)")
		fs.StringVar(&trip.IdempotencyKey, "key", "", "an idempotency key: a repeat returns the first stop and stops nothing (trip)")
	}
	if _, err := Parse(fs, rest, 0); err != nil {
		return err
	}
	cl, err := c.client(0)
	if err != nil {
		return err
	}
	switch sub {
	case "status", "reset":
		op := awareness.OpEStopStatus
		if sub == "reset" {
			op = awareness.OpEStopReset
		}
		st, err := admin.Call(ctx, cl, op, awareness.None{})
		if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(stdout).Encode(st)
		}
		printEStop(stdout, st)
		return nil
	case "trip":
		t, err := admin.Call(ctx, cl, awareness.OpEStopTrip, trip)
		if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(stdout).Encode(t)
		}
		if t.Repeated {
			fmt.Fprintf(stdout, "a repeat of key %q: nothing stopped now; latched now: %v. The first stop:\n", t.Key, t.LatchedNow)
		}
		fmt.Fprintf(stdout, "tripped: %s; outputs safe: %v\n", t.Cause, t.AllSafe)
		for _, o := range t.Outputs {
			fmt.Fprintf(stdout, "  %-10s safe %-4s read back %s %s\n", o.Name, o.Safe, o.ReadBack, o.Err)
		}
		if len(t.Cancelled) > 0 {
			fmt.Fprintf(stdout, "cancelled %v\n", t.Cancelled)
		}
		return nil
	}
	fmt.Fprint(stderr, estopUsage)
	return UsageError("unknown estop command %q", sub)
}

func printEStop(w io.Writer, st act.EStopStatus) {
	state := "armed: actions may run"
	if st.Latched {
		state = "LATCHED: " + st.Why
	}
	fmt.Fprintf(w, "e-stop    %s\n", state)
	fmt.Fprintf(w, "line      main %s", st.Main)
	if st.Second != "" {
		fmt.Fprintf(w, ", second %s", st.Second)
	}
	fmt.Fprintf(w, "; verified %v; %d trips since start\n", st.Verified, st.Trips)
	if st.Fault != "" {
		fmt.Fprintf(w, "fault     %s\n", st.Fault)
	}
	if st.Path != "" {
		fmt.Fprintf(w, "halts     %s\n", st.Path)
	}
}
