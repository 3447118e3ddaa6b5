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
	"github.com/tobe-body/tobe-body/body"
)

// Status is 'tobe-body status': the running daemon's answer, for people
// or as JSON.
func Status(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c Common
	fs := NewFlagSet("status", stderr, &c, true)
	asJSON := fs.Bool("json", false, "print the daemon's answer as JSON")
	if _, err := Parse(fs, args, 0); err != nil {
		return err
	}
	cl, err := c.client(0)
	if err != nil {
		return err
	}
	st, err := admin.Call(ctx, cl, awareness.OpStatus, awareness.None{})
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	printStatus(stdout, st)
	return nil
}

// clockLine says whether the wall clock can be trusted, and what waits
// for it when it cannot.
func clockLine(c body.ClockSync) string {
	if c.Synced {
		return fmt.Sprintf("synchronised (the kernel's maximum error %v)", c.MaxError)
	}
	return "NOT synchronised: the wall clock may be off by any amount; requests at act.safety.unsynced_clock_refuse_from (R3 by default) and above, and grants with relative expiries, wait for it"
}

func printStatus(w io.Writer, st awareness.Status) {
	healthy := 0
	for _, ch := range st.Channels {
		if ch.Health == "ok" && (ch.State == "enabled" || ch.State == "shadow") {
			healthy++
		}
	}
	uptime := time.Duration(st.UptimeS * float64(time.Second)).Round(time.Second)
	fmt.Fprintf(w, "body      %s (body %s, agent %s)\n", st.Body, st.BodyID, st.AgentID)
	fmt.Fprintf(w, "board     %s: %s\n", st.Board, st.BoardDesc)
	fmt.Fprintf(w, "          %s profile, %s, %s drivers\n", st.BoardFrom, st.BoardWhy, st.Drivers)
	fmt.Fprintf(w, "uptime    %s since %s (pid %d, version %s)\n", uptime, st.StartedAt.Format(time.RFC3339), st.PID, st.Version)
	fmt.Fprintf(w, "data      %s; config %s\n", st.DataDir, strings.Join(st.Config, " < "))
	fmt.Fprintf(w, "safety    %s\n", st.Safety)
	if p := st.Privacy; p != nil {
		fmt.Fprintf(w, "privacy   %s\n", privacyLine(*p))
	}
	if e := st.EStop; e != nil {
		fmt.Fprintf(w, "estop     %s; verified %v\n", e, e.Verified)
	} else {
		fmt.Fprintln(w, "estop     none on this board: nothing above read-only may act")
	}
	if st.Ledger.Error != "" {
		fmt.Fprintf(w, "ledger    %s: %s\n", st.Ledger.Path, st.Ledger.Error)
	} else {
		fmt.Fprintf(w, "ledger    %d events (last seq %d), outbox %d rows / %d bytes waiting\n", st.Ledger.Events, st.Ledger.LastSeq, st.Ledger.OutboxRows, st.Ledger.OutboxBytes)
	}
	switch u := st.Uplink; {
	case u == nil:
		fmt.Fprintln(w, "uplink    off (mqtt.enabled is false): nothing is queued for one")
	case u.Connected:
		fmt.Fprintf(w, "uplink    connected to %s since %s; %d events published, %d acknowledged (%d sessions)\n",
			u.Broker, u.Since.UTC().Format(time.RFC3339), u.Published, u.Acked, u.Sessions)
	default:
		fmt.Fprintf(w, "uplink    not connected to %s: %s; %d acknowledged (%d sessions)\n", u.Broker, u.LastError, u.Acked, u.Sessions)
	}
	if self := st.Self; self != nil {
		fmt.Fprintf(w, "self      %s", self.Level)
		if len(self.Why) > 0 {
			fmt.Fprintf(w, ": %s", strings.Join(self.Why, "; "))
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "clock     %s\n", clockLine(self.Clock))
	}
	if len(st.Events) > 0 {
		var q, wr, shed uint64
		for _, e := range st.Events {
			q, wr, shed = q+e.Queued, wr+e.Written, shed+e.Shed
		}
		fmt.Fprintf(w, "senses    %d events queued, %d written, %d shed by %d channels\n", q, wr, shed, len(st.Events))
	}
	fmt.Fprintf(w, "channels  %d, %d healthy\n\n", len(st.Channels), healthy)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHANNEL\tKIND\tDRIVER\tSTATE\tHEALTH\tDEVICE")
	for _, ch := range st.Channels {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", ch.ID, ch.Kind, ch.Driver, ch.State, ch.Health, ch.Device)
	}
	tw.Flush()
}
