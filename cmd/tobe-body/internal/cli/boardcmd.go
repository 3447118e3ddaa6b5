package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/tobe-body/tobe-body/board"
)

// Board is 'tobe-body board': the board's profile, how it was chosen, and
// each device's state.
func Board(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c Common
	fs := NewFlagSet("board", stderr, &c, false)
	asJSON := fs.Bool("json", false, "print the profile and the device reports as JSON")
	if _, err := Parse(fs, args, 0); err != nil {
		return err
	}
	cfg, err := c.LoadConfig()
	if err != nil {
		return err
	}
	p, why, err := ResolveBoard(&cfg.Config)
	if err != nil {
		return err
	}
	drivers, finder := DriversFor(p, cfg.Sim)
	reports := board.Check(p, drivers, finder)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Profile  *board.Profile `json:"profile"`
			Source   string         `json:"source"`
			ChosenBy string         `json:"chosen_by"`
			Drivers  string         `json:"drivers"`
			Devices  []board.Report `json:"devices"`
		}{p, p.Source, why, drivers.Name, reports})
	}
	fmt.Fprintf(stdout, "board    %s: %s\n", p.Name, p.Description)
	fmt.Fprintf(stdout, "profile  %s, %s\n", p.Source, why)
	fmt.Fprintf(stdout, "drivers  %s\n", drivers.Name)
	if g := p.GPIO; g != nil {
		fmt.Fprintf(stdout, "gpio     chip labelled %s\n", g.Chip)
	}
	if e := p.EStop; e != nil {
		fmt.Fprintf(stdout, "e-stop   line %s, %s, pull %s, stop when %s", e.Line, e.Wiring, e.Pull, e.StopLevel)
		if e.Second != nil {
			fmt.Fprintf(stdout, "; second channel %s", e.Second.Line)
		}
		if e.Reset != nil {
			fmt.Fprintf(stdout, "; reset %s (%d-%d ms press)", e.Reset.Line, e.Reset.MinPressMS, e.Reset.MaxPressMS)
		}
		fmt.Fprintln(stdout)
	} else {
		fmt.Fprintln(stdout, "e-stop   none on this board: nothing above read-only may act")
	}
	fmt.Fprintf(stdout, "devices  %s\n\n", board.Summary(reports))
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAME\tSTATUS\tWHAT\tDETAIL")
	for _, r := range reports {
		detail := r.Found
		if r.Status != board.Loaded {
			detail = r.Reason
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Kind, r.Name, r.Status, r.Target, detail)
	}
	return tw.Flush()
}
