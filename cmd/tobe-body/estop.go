package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/board"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/ledger"
)

// estopChannel is the channel id the e-stop's records carry.
const estopChannel = act.EStopChannel

// newEStop builds the e-stop from the lines the devices opened; nil when
// the board has no e-stop line (then nothing above R0 may act).
func newEStop(ds *devices, p *board.Profile) (*act.EStop, error) {
	var cfg act.EStopConfig
	for _, in := range ds.ins {
		switch in.role {
		case board.RoleEStop:
			cfg.Main, cfg.MainStop = in.line, in.active
		case board.RoleEStopSecond:
			cfg.Second, cfg.SecondStop = in.line, in.active
		case board.RoleEStopReset:
			cfg.Reset, cfg.ResetActive = in.line, in.active
		}
	}
	if cfg.Main == nil {
		return nil, nil
	}
	if e := p.EStop; e != nil {
		if e.Second != nil {
			cfg.Discrepancy = ms(e.Second.DiscrepancyMS)
		}
		if r := e.Reset; r != nil {
			cfg.MinPress, cfg.MaxPress = ms(r.MinPressMS), ms(r.MaxPressMS)
		}
	}
	for _, o := range ds.outs {
		cfg.Outputs = append(cfg.Outputs, o.line)
	}
	if ds.speaker != nil {
		cfg.Speakers = append(cfg.Speakers, ds.speaker)
	}
	return act.NewEStop(cfg)
}

// estopRecorder writes what the e-stop did to the ledger, after the fact:
// the trip path never waits for it.
func estopRecorder(ctx context.Context, e *act.EStop, store *ledger.Store, clock *body.Clock, log *slog.Logger) {
	for {
		recs, err := e.Records(ctx)
		if err != nil {
			// Stopping: write what is left.
			recs, _ = e.Records(canceled())
			if len(recs) == 0 {
				return
			}
		}
		evs := make([]ledger.Event, 0, len(recs))
		for _, r := range recs {
			p, err := ledger.MarshalPayload(r.Payload)
			if err != nil {
				log.Error("e-stop record", "type", r.Type, "err", err)
				continue
			}
			ev := ledger.Event{Type: r.Type, ChannelID: estopChannel, Provenance: ledger.Observed, Trust: ledger.High, Privacy: ledger.Internal, Payload: p}
			if r.At != 0 {
				clock.Stamp(r.At).Apply(&ev)
			}
			evs = append(evs, ev)
			switch r.Type {
			case "estop.tripped":
				log.Error("E-STOP: tripped; every output safe, actions cancelled", "cause", r.Payload.(act.Trip).Cause, "all_safe", r.Payload.(act.Trip).AllSafe)
			case "estop.reset":
				log.Warn("e-stop reset", "by", r.Payload.(act.ResetDone).By)
			case "estop.reset_refused", "estop.wiring_fault":
				log.Warn("e-stop", "event", r.Type, "detail", r.Payload)
			}
		}
		if store == nil {
			continue
		}
		if _, err := store.Append(context.WithoutCancel(ctx), evs...); err != nil {
			log.Error("e-stop records not written", "err", err, "records", len(evs))
		}
		if err != nil {
			return
		}
	}
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// estopMethods are the admin socket's e-stop calls. Whoever reaches the
// admin socket is a local administrator.
func estopMethods(e *act.EStop) map[string]method {
	admin := func(ctx context.Context) act.Principal {
		return act.Principal{Kind: act.LocalAdmin, Subject: adminSubject(ctx)}
	}
	none := func() (any, error) {
		return nil, errors.New("this board has no e-stop line: nothing above read-only may act")
	}
	return map[string]method{
		"estop.status": func(context.Context, json.RawMessage) (any, error) {
			if e == nil {
				return none()
			}
			return e.Status(), nil
		},
		"estop.trip": func(ctx context.Context, _ json.RawMessage) (any, error) {
			if e == nil {
				return none()
			}
			return e.Trip("requested by "+admin(ctx).Subject, hal.MonoNow()), nil
		},
		"estop.reset": func(ctx context.Context, _ json.RawMessage) (any, error) {
			if e == nil {
				return none()
			}
			if err := e.Reset(admin(ctx)); err != nil {
				return nil, err
			}
			return e.Status(), nil
		},
	}
}

const estopUsage = `usage: tobe-body estop <command> [flags]

  status [--json]   latched or not, why, the lines, a wiring fault
  trip              stop now: every output to its safe level, actions cancelled
  reset             clear the latch (a local administrator; the line must be healthy)

The agent and MQTT may trip the e-stop but never reset it.
`

func runEStop(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, estopUsage)
		return &exitError{code: 2}
	}
	sub, rest := args[0], args[1:]
	var c common
	fs := newFlagSet("estop "+sub, stderr, &c, true)
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parse(fs, rest, 0); err != nil {
		return err
	}
	path, err := c.socketPath()
	if err != nil {
		return err
	}
	switch sub {
	case "status", "reset":
		var st act.EStopStatus
		if err := callAdmin(ctx, path, "estop."+sub, &st); err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(stdout).Encode(st)
		}
		printEStop(stdout, st)
		return nil
	case "trip":
		var t act.Trip
		if err := callAdmin(ctx, path, "estop.trip", &t); err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(stdout).Encode(t)
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
	return usageError("unknown estop command %q", sub)
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
