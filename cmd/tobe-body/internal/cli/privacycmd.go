package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/admin"
	"github.com/tobe-body/tobe-body/sense"
)

const privacyUsage = `usage: tobe-body privacy <command> [flags]

  status [--json]                   whether the cameras and microphones are paused, and why
  pause [--for D] [--reason TEXT]   pause them (closed, not read, nothing captured) for D (30m,
                                    2h; at most 168h), or until resumed
  resume                            end every pause

While the board's privacy switch is on, every camera and microphone is
paused whatever is asked: nothing overrides it. A local administrator
pauses and resumes; an agent may pause (privacy_pause) but never resume.
Every change is recorded in the ledger (privacy.changed).
`

// Privacy is 'tobe-body privacy': the privacy state, a pause and a
// resume, through the admin socket.
func Privacy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, privacyUsage)
		return &ExitError{Code: 2}
	}
	sub, rest := args[0], args[1:]
	var c Common
	fs := NewFlagSet("privacy "+sub, stderr, &c, true)
	var in awareness.PrivacyPauseIn
	var asJSON *bool
	switch sub {
	case "status":
		asJSON = fs.Bool("json", false, "print JSON")
	case "pause":
		fs.StringVar(&in.For, "for", "", "for `D` (30m, 2h); none: until resumed")
		fs.StringVar(&in.Reason, "reason", "", "why, for the record")
	case "resume":
	default:
		fmt.Fprint(stderr, privacyUsage)
		return UsageError("privacy: unknown command %q", sub)
	}
	if _, err := Parse(fs, rest, 0); err != nil {
		return err
	}
	cl, err := c.client(30 * time.Second)
	if err != nil {
		return err
	}
	var st sense.PrivacyState
	switch sub {
	case "status":
		st, err = admin.Call(ctx, cl, awareness.OpPrivacyStatus, awareness.None{})
		if err == nil && *asJSON {
			return writeJSON(stdout, st)
		}
	case "pause":
		st, err = admin.Call(ctx, cl, awareness.OpPrivacyPause, in)
	case "resume":
		st, err = admin.Call(ctx, cl, awareness.OpPrivacyResume, awareness.None{})
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, privacyLine(st))
	return nil
}

// privacyLine says the privacy state in a line.
func privacyLine(st sense.PrivacyState) string {
	devs := strings.Join(st.Devices, ", ")
	if devs == "" {
		devs = "no camera or microphone"
	}
	if !st.Paused {
		sw := "no switch"
		if st.HasSwitch {
			sw = "switch off"
		}
		return fmt.Sprintf("sensing (%s; %s)", devs, sw)
	}
	return fmt.Sprintf("PAUSED: %s (%s closed, not read)", st.Why, devs)
}
