package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/admin"
	"github.com/tobe-body/tobe-body/board"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/ledger"
	"github.com/tobe-body/tobe-body/sense"
)

// newRunner builds the action runner over the outputs the devices opened:
// gpio.set and gpio.pulse, each output at its kind's risk unless the
// config raises it, with the config's limits per output, each verified by
// read-back and by its feedback input where the profile wires one, and a
// simulated twin of each for simulation mode; audio.tone and audio.play
// on the speaker, verified through the microphone where there is one;
// body.notify with a ledger. Safety rules, rate limits and capability
// modes come from the settings. The e-stop cancels through it. A rate
// limiter or a capability that cannot be set up stops the start.
func newRunner(ds *body.Devices, p *board.Profile, estop *act.EStop, sn *sense.Group, reg *body.Registry, j act.Journal, grants *act.Grants, s *act.Settings, dataDir string) (*act.Runner, error) {
	feedback := map[string]body.InputLine{}
	if p.GPIO != nil {
		for _, in := range p.GPIO.Inputs {
			for _, l := range ds.Ins {
				if in.FeedbackOf != "" && l.ID == body.ChannelID("gpio-in", in.Name) {
					feedback[in.FeedbackOf] = l
				}
			}
		}
	}
	var outs []*act.GPIOOutput
	for _, o := range ds.Outs {
		g := &act.GPIOOutput{Name: o.Name, Channel: o.ID, Line: o.Line, Risk: act.OutputRisk(o.Kind)}
		if st, ok := s.Outputs[o.Name]; ok {
			if st.Raised {
				g.Risk = st.Risk
			}
			g.MaxOn, g.MinInterval = st.Config.MaxOn(), st.Config.MinInterval()
		}
		if fb, ok := feedback[o.Name]; ok {
			g.Feedback, g.FeedbackActive = fb.Line, fb.Active
		}
		outs = append(outs, g)
	}
	limiter, err := act.NewLimiter(s.Limits, nil)
	if err != nil {
		return nil, fmt.Errorf("act.rate_limits: %w", err)
	}
	env := act.Environment{EStop: estop, Registry: reg, Leases: s.Leases, Rules: s.Rules, CapabilityModes: s.CapModes, Limiter: limiter,
		Health: func() body.Degradation {
			if st, ok := sn.Self(); ok {
				return st.Level
			}
			return body.LevelCritical
		}}
	if grants != nil {
		env.Grants = grants.All
	}
	r := act.NewRunner(env, j)
	set, pulse := act.NewGPIOActions(outs, nil)
	actions := []act.Action{set, pulse}
	if spk := newSpeaker(ds, sn, s, dataDir); spk != nil {
		tone, play := act.NewAudioActions([]*act.Speaker{spk})
		actions = append(actions, tone, play)
	}
	if store, ok := j.(*ledger.Store); ok {
		actions = append(actions, act.NewNotify(store))
	}
	for _, a := range append(actions, testActions...) {
		if err := r.Register(a); err != nil {
			return nil, err
		}
	}
	if err := act.RegisterSimulatedGPIO(r, outs); err != nil {
		return nil, fmt.Errorf("the GPIO outputs' simulated twins: %w", err)
	}
	if estop != nil {
		estop.SetRunner(r, s.Leases)
	}
	return r, nil
}

// testActions are capabilities a test adds to the daemon's runner; no
// board has an R3 capability, and the approval commands need one to be
// tested whole. Nil outside tests.
var testActions []act.Action

// newSpeaker is the speaker the devices opened, as the audio channels
// drive it, or nil when there is none. Its sounds are verified through
// the microphone: through the microphone channel's taps when that
// channel runs (it is the microphone's one reader), else straight from
// the capture.
func newSpeaker(ds *body.Devices, sn *sense.Group, s *act.Settings, dataDir string) *act.Speaker {
	if ds.Speaker == nil {
		return nil
	}
	name := body.ChannelName(ds.SpeakerID)
	c := s.Speaker(name)
	spk := &act.Speaker{Name: name, Channel: ds.SpeakerID, Out: ds.Speaker, Clips: cmp.Or(c.ClipsDir, filepath.Join(dataDir, "clips")),
		MaxLevel: act.DefaultMaxLevel, MaxClip: time.Duration(c.MaxClipMS) * time.Millisecond}
	if c.MaxLevelDBFS != nil {
		spk.MaxLevel = *c.MaxLevelDBFS
	}
	switch {
	case sn != nil && sn.Mic != nil:
		ch := sn.Mic.Ch
		spk.Mic = &act.Mic{Name: sn.Mic.ID, Listen: func() (act.Listening, error) { return ch.Listen(), nil }}
	case ds.Mic != nil:
		spk.Mic = act.CaptureMic(ds.MicID, ds.Mic)
	}
	return spk
}

// noJournal stands in when the ledger could not be opened: nothing whose
// record cannot be written runs.
type noJournal struct{}

func (noJournal) Append(context.Context, ...ledger.Event) ([]ledger.Result, error) {
	return nil, errors.New("the ledger is not open")
}

const doUsage = `usage: tobe-body do CAPABILITY TARGET [key=value ...] [--mode live|shadow|simulation] [--key K] [--json]

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
`

func runDo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c common
	fs := newFlagSet("do", stderr, &c, true)
	mode := fs.String("mode", "", "live (the default); shadow: record only; simulation: a simulated twin, never the hardware")
	key := fs.String("key", "", "idempotency key: a repeat returns the first result")
	list := fs.Bool("list", false, "list the capabilities")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parse(fs, args, -1)
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
		return usageError("do needs a capability and a target")
	}
	in := awareness.DoIn{Capability: pos[0], Target: pos[1], Params: map[string]string{}, Mode: act.Mode(*mode), IdempotencyKey: *key}
	for _, kv := range pos[2:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return usageError("parameter %q: want key=value", kv)
		}
		in.Params[k] = v
	}
	res, err := admin.Call(ctx, cl, awareness.OpDo, in)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(res)
	}
	printResult(stdout, res)
	if res.Status != act.Succeeded {
		return &exitError{code: 1}
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
