package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/board"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/ledger"
)

// newRunner builds the action runner over the outputs the devices opened:
// gpio.set and gpio.pulse, a relay at R2 and anything else at R1 unless
// the config raises it, with the config's limits per output, each
// verified by read-back and by its feedback input where the profile wires
// one; audio.tone and audio.play on the speaker, verified through the
// microphone where there is one; body.notify with a ledger. Safety rules,
// rate limits and capability modes come from the config (s; nil: the
// defaults). The e-stop cancels through it.
func newRunner(ds *devices, p *board.Profile, estop *act.EStop, sn *senses, reg *body.Registry, store *ledger.Store, grants *act.Grants, s *actSettings, dataDir string) *act.Runner {
	if s == nil {
		s = defaultActSettings()
	}
	kinds := map[string]string{}
	if p.GPIO != nil {
		for _, o := range p.GPIO.Outputs {
			kinds[o.Name] = o.Kind
		}
	}
	feedback := map[string]inputLine{}
	if p.GPIO != nil {
		for _, in := range p.GPIO.Inputs {
			if in.FeedbackOf == "" {
				continue
			}
			for _, l := range ds.ins {
				if l.id == channelID("gpio-in", in.Name) {
					feedback[in.FeedbackOf] = l
				}
			}
		}
	}
	var outs []*act.GPIOOutput
	for _, o := range ds.outs {
		g := &act.GPIOOutput{Name: o.name, Channel: o.id, Line: o.line, Risk: outputRisk(kinds[o.name])}
		if st, ok := s.outputs[o.name]; ok {
			if st.set {
				g.Risk = st.risk
			}
			g.MaxOn, g.MinInterval = st.cfg.MaxOn(), st.cfg.MinInterval()
		}
		if fb, ok := feedback[o.name]; ok {
			g.Feedback, g.FeedbackActive = fb.line, fb.active
		}
		outs = append(outs, g)
	}
	leases := s.leases
	env := act.Environment{EStop: estop, Registry: reg, Leases: leases, Rules: s.rules, CapabilityModes: s.capModes,
		Health: func() body.Degradation {
			if st, ok := sn.self.Last(); ok {
				return st.Level
			}
			return body.LevelCritical
		}}
	if grants != nil {
		env.Grants = grants.All
	}
	if l, err := act.NewLimiter(s.limits, nil); err == nil {
		env.Limiter = l
	}
	var j act.Journal = noJournal{}
	if store != nil {
		j = store
	}
	r := act.NewRunner(env, j)
	set, pulse := act.NewGPIOActions(outs, nil)
	r.Register(set)
	r.Register(pulse)
	if err := registerSimulated(r, outs); err != nil {
		slog.Warn("no simulation mode for the GPIO outputs", "err", err)
	}
	if spk := newSpeaker(ds, sn, s.raw, dataDir); spk != nil {
		tone, play := act.NewAudioActions([]*act.Speaker{spk})
		r.Register(tone)
		r.Register(play)
	}
	if store != nil {
		r.Register(act.NewNotify(store))
	}
	for _, a := range testActions {
		r.Register(a)
	}
	if estop != nil {
		estop.SetRunner(r, leases)
	}
	return r
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
func newSpeaker(ds *devices, sn *senses, acfg config.Act, dataDir string) *act.Speaker {
	if ds.speaker == nil {
		return nil
	}
	name := strings.TrimPrefix(ds.spkID, "audio.")
	c := acfg.Speakers[name]
	spk := &act.Speaker{Name: name, Channel: ds.spkID, Out: ds.speaker, Clips: cmp.Or(c.ClipsDir, filepath.Join(dataDir, "clips")),
		MaxLevel: act.DefaultMaxLevel, MaxClip: time.Duration(c.MaxClipMS) * time.Millisecond}
	if c.MaxLevelDBFS != nil {
		spk.MaxLevel = *c.MaxLevelDBFS
	}
	switch {
	case sn != nil && sn.mic != nil:
		ch := sn.mic.ch
		spk.Mic = &act.Mic{Name: sn.mic.id, Listen: func() (act.Listening, error) { return ch.Listen(), nil }}
	case ds.mic != nil:
		spk.Mic = act.CaptureMic(ds.micID, ds.mic)
	}
	return spk
}

// noJournal stands in when the ledger could not be opened: nothing whose
// record cannot be written runs.
type noJournal struct{}

func (noJournal) Append(context.Context, ...ledger.Event) ([]ledger.Result, error) {
	return nil, errors.New("the ledger is not open")
}

// submitRequest is the admin socket's action.submit.
type submitRequest struct {
	Capability     string            `json:"capability"`
	Target         string            `json:"target"`
	Params         map[string]string `json:"params"`
	IdempotencyKey string            `json:"idempotency_key"`
	Mode           string            `json:"mode"`
	TimeoutMS      int               `json:"timeout_ms"`
	Note           string            `json:"note"`
}

// runnerMethods: a local administrator acts through the same runner and
// policy as everyone else. Its session's trust is max, the body's
// highest: whoever reaches the admin socket can grant anything anyway, and
// an R3 capability still needs a grant of its own and waits for an
// approval.
func runnerMethods(r *act.Runner) map[string]method {
	return map[string]method{
		"action.submit": func(ctx context.Context, params json.RawMessage) (any, error) {
			var req submitRequest
			dec := json.NewDecoder(strings.NewReader(string(params)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&req); err != nil {
				return nil, fmt.Errorf("action.submit: %w", err)
			}
			inv := act.Invocation{
				Principal:  adminPrincipal(ctx),
				Capability: req.Capability, Target: req.Target, Params: req.Params, IdempotencyKey: req.IdempotencyKey,
				Mode: act.Mode(req.Mode), Timeout: time.Duration(req.TimeoutMS) * time.Millisecond, Note: req.Note,
			}
			return r.Submit(ctx, inv), nil
		},
		"action.capabilities": func(context.Context, json.RawMessage) (any, error) { return r.Capabilities(), nil },
	}
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
	path, err := c.socketPath()
	if err != nil {
		return err
	}
	if *list {
		var caps []act.Capability
		if err := callAdmin(ctx, path, "action.capabilities", &caps); err != nil {
			return err
		}
		for _, cp := range caps {
			fmt.Fprintf(stdout, "%-12s %s  verified by %s\n", cp.Name, cp.Risk, cp.Verify)
		}
		return nil
	}
	if len(pos) < 2 {
		fmt.Fprint(stderr, doUsage)
		return usageError("do needs a capability and a target")
	}
	req := submitRequest{Capability: pos[0], Target: pos[1], Params: map[string]string{}, Mode: *mode, IdempotencyKey: *key}
	for _, kv := range pos[2:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return usageError("parameter %q: want key=value", kv)
		}
		req.Params[k] = v
	}
	var res act.Result
	if err := callAdminParams(ctx, path, "action.submit", req, &res, time.Minute); err != nil {
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
