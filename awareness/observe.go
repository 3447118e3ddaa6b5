package awareness

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness/control/gate"
	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/ledger"
)

// Observation is what the agent is told of an event, in the envelope of
// ToBe's Awareness extension: {id, source, actor, content, trust,
// attention, timestamp, permissions}, with the event's type, sequence and
// payload beside it (adapter_id and adapter_name are the adapter's to
// fill). Content is a short text for people and models alike; it is data
// about the world, never an instruction, and nothing in an observation
// changes policy.
type Observation struct {
	ID          string       `json:"id"` // the event's id
	Source      string       `json:"source"`
	Actor       string       `json:"actor"` // user, assistant, service, signal, adapter or system
	Content     string       `json:"content"`
	Trust       ledger.Level `json:"trust"`
	Attention   ledger.Level `json:"attention"`
	Timestamp   time.Time    `json:"timestamp"`
	Permissions Permissions  `json:"permissions"`
	Type        string       `json:"event_type"`
	Seq         uint64       `json:"seq"`
	// Privacy is the event's class: who may be shown it (MaySee).
	Privacy ledger.Privacy `json:"-"`
	Data    any            `json:"data,omitempty"`
	// Evidence is what the wake of a wait condition captured of the
	// event (get_evidence shows it, to whoever may look); nil: nothing.
	Evidence *gate.Evidence `json:"evidence,omitempty"`
}

// Permissions are what an observation of its trust lets the agent do in
// answer, as ToBe's Awareness extension has them follow trust: low,
// reply only; medium, no workspace writes; high and max, workspace
// writes.
type Permissions struct {
	Reply          bool `json:"reply"`
	WorkspaceWrite bool `json:"workspace_write"`
	Act            bool `json:"act"` // more than a reply (medium and above)
}

// PermissionsOf are the permissions of trust t.
func PermissionsOf(t ledger.Level) Permissions {
	return Permissions{Reply: t >= ledger.Low, Act: t >= ledger.Medium, WorkspaceWrite: t >= ledger.High}
}

// ObservationRule turns events into observations: events of Type (a
// type, or a prefix ending in a dot), on Channel (a channel id, a prefix
// ending in ".*", or any when empty), whose payload has each field of
// When equal to its value (compared as text), are observed with Actor,
// Attention and Trust (the event's own trust when lower), and Text with
// {field} replaced by the payload's field ({channel} and {type} by the
// event's). Attention off observes nothing. It is the config's
// agent.observations.rules item.
type ObservationRule = config.ObservationRule

// DefaultObservationRules are what a body tells its agent unless the
// config says otherwise: the e-stop at max; a person taking over, the
// body reaching critical, sensing paused for privacy and long presses at
// high; motion, voice,
// buttons, conditions of the board and the air crossing a threshold at
// medium (back clear of it at low); the rest off.
var DefaultObservationRules = []ObservationRule{
	{Type: "estop.tripped", Actor: "system", Attention: "max", Trust: "high", Text: "E-stop tripped ({cause}): every output is at its safe level, and the body refuses to act until a person resets it at the device."},
	{Type: "estop.reset", Actor: "user", Attention: "high", Trust: "high", Text: "The e-stop was reset by {by}: the body may act again; nothing restarted by itself."},
	{Type: "estop.wiring_fault", Actor: "system", Attention: "high", Trust: "high", Text: "The e-stop's wiring is faulty: {fault}. It stays latched until both contacts agree."},
	{Type: "lease.human_takeover", Actor: "user", Attention: "high", Trust: "high", Text: "A person took over {resource} with {control}: the agent's actions on it stop, and new ones are refused."},
	{Type: "lease.human_released", Actor: "user", Attention: "medium", Trust: "high", Text: "The person's hold on {resource} ended ({why})."},
	{Type: "body.degradation", When: map[string]string{"level": "critical"}, Actor: "system", Attention: "high", Trust: "high", Text: "The body is critical ({why}): it does only what reads."},
	{Type: "body.degradation", When: map[string]string{"level": "degraded"}, Actor: "system", Attention: "medium", Trust: "high", Text: "The body is degraded ({why})."},
	// A change of degradation always wakes (a hard rule of the gate's):
	// these give the lesser levels their words.
	{Type: "body.degradation", When: map[string]string{"level": "constrained"}, Actor: "system", Attention: "low", Trust: "high", Text: "The body is constrained ({why})."},
	{Type: "body.degradation", When: map[string]string{"level": "normal"}, Actor: "system", Attention: "low", Trust: "high", Text: "The body is back to normal."},
	{Type: "body.hot", When: map[string]string{"active": "true"}, Actor: "system", Attention: "medium", Trust: "high", Text: "The board runs hot: {what} at {value} °C (limit {limit})."},
	{Type: "body.throttled", When: map[string]string{"active": "true"}, Actor: "system", Attention: "medium", Trust: "high", Text: "The board is throttled: {what}."},
	{Type: "body.disk_low", When: map[string]string{"active": "true"}, Actor: "system", Attention: "medium", Trust: "high", Text: "The data partition is low: {value} MB free."},
	{Type: "privacy.changed", When: map[string]string{"paused": "true"}, Actor: "system", Attention: "high", Trust: "high",
		Text: "Sensing is paused ({why}): the cameras and microphones are closed, nothing is seen or heard, and captures are refused."},
	{Type: "privacy.changed", When: map[string]string{"paused": "false"}, Actor: "system", Attention: "medium", Trust: "high",
		Text: "Sensing resumed ({cause}): the cameras and microphones are open again."},
	{Type: "gpio.long_press", Actor: "signal", Attention: "high", Trust: "medium", Text: "{line} was held down ({held_ms} ms)."},
	{Type: "gpio.double_press", Actor: "signal", Attention: "medium", Trust: "medium", Text: "{line} was pressed twice."},
	{Type: "input.pressed", Actor: "signal", Attention: "medium", Trust: "medium", Text: "{key} pressed on {device}."},
	{Type: "camera.motion_started", Actor: "signal", Attention: "medium", Trust: "medium", Text: "Motion in {zone} seen by {channel}."},
	{Type: "audio.voice_started", Actor: "signal", Attention: "medium", Trust: "medium", Text: "A voice on {channel}."},
	{Type: "env.changed", When: map[string]string{"crossed": "true"}, Actor: "signal", Attention: "medium", Trust: "high", Text: "{quantity} reached {value}, past {threshold} ({sensor})."},
	{Type: "env.changed", When: map[string]string{"crossed": "false"}, Actor: "signal", Attention: "low", Trust: "high", Text: "{quantity} is back at {value}, clear of {threshold} ({sensor})."},
	{Type: "env.reading", Actor: "signal", Attention: "off", Trust: "high"},
	{Type: "audio.level", Actor: "signal", Attention: "off", Trust: "medium"},
	{Type: "camera.summary", Actor: "signal", Attention: "off", Trust: "medium"},
	{Type: "input.activity", Actor: "signal", Attention: "off", Trust: "medium"},
	{Type: "gpio.changed", Actor: "signal", Attention: "off", Trust: "medium"},
	{Type: "gpio.level", Actor: "signal", Attention: "off", Trust: "medium"},
}

// Observer applies rules to events, the first that matches deciding.
// It is safe for concurrent use.
type Observer struct {
	rules []compiledRule
}

type compiledRule struct {
	ObservationRule
	attention, trust ledger.Level
}

var actors = map[string]bool{"user": true, "assistant": true, "service": true, "signal": true, "adapter": true, "system": true}

// NewObserver checks rules and returns their observer; an error names the
// rule and the field.
func NewObserver(rules []ObservationRule) (*Observer, error) {
	o := &Observer{}
	for i, r := range rules {
		at := fmt.Sprintf("observation rule %d (%s)", i, r.Type)
		var c compiledRule
		c.ObservationRule = r
		var err error
		if c.attention, err = ledger.ParseLevel(r.Attention); err != nil {
			return nil, fmt.Errorf("%s: attention: %w", at, err)
		}
		if c.trust, err = ledger.ParseLevel(r.Trust); err != nil {
			return nil, fmt.Errorf("%s: trust: %w", at, err)
		}
		if !actors[r.Actor] {
			return nil, fmt.Errorf("%s: actor %q: want user, assistant, service, signal, adapter or system", at, r.Actor)
		}
		if r.Type == "" {
			return nil, fmt.Errorf("%s: no type", at)
		}
		if r.Channel != "" {
			if err := act.CheckPattern(r.Channel); err != nil {
				return nil, fmt.Errorf("%s: channel: %w", at, err)
			}
		}
		o.rules = append(o.rules, c)
	}
	return o, nil
}

// Defaults are the rules as the gate's default rules (L1), in their
// order: the gate decides which events no wait condition wanted wake the
// agent, at the rules' attention, and finds for every wake the rule
// whose words Woken says it in (Decision.Words, a position in this
// list).
func (o *Observer) Defaults() []gate.Default {
	out := make([]gate.Default, len(o.rules))
	for i, r := range o.rules {
		out[i] = gate.Default{Name: fmt.Sprintf("observation rule %d (%s)", i, r.Type), Type: r.Type, Channel: r.Channel, When: r.When, Attention: r.Attention}
	}
	return out
}

// Woken is the observation of an event the gate decided to wake the
// agent for (or to ask a person about), in the words of the rule the
// gate found for it (d.Words, a position in Defaults: the first rule for
// its type, channel and payload, whatever attention the rule has; its
// type and channel when there is none), with the wait condition and work
// item that wanted it, at the decision's attention. It matches nothing
// itself: the gate matched the rules once, and this only formats.
func (o *Observer) Woken(d gate.Decision, e ledger.Stored) Observation {
	v := e.View()
	payload, _ := v.Payload.(map[string]any)
	text, actor, trust := "", "signal", ledger.Medium
	if i := d.Words - 1; i >= 0 && i < len(o.rules) {
		r := o.rules[i]
		text, actor, trust = r.Text, r.Actor, r.trust
	}
	if et := e.Event.Trust; et != 0 && et < trust {
		trust = et
	}
	content := fill(text, v, payload)
	if d.Condition != "" {
		content += fmt.Sprintf(" (wait condition %s of work item %s)", d.Condition, d.WorkItem)
	}
	if d.FollowUp != "" {
		content += fmt.Sprintf(" Follow-up work item %s was made for it.", d.FollowUp)
	}
	if d.Outcome == gate.Ask {
		content += " A person is asked: the work item awaits one."
	}
	switch {
	case d.Evidence != nil:
		content += fmt.Sprintf(" Evidence %s (%s) was kept of it.", d.Evidence.ID, d.Evidence.MediaType)
	case d.EvidenceError != "":
		content += " No evidence was kept of it: " + d.EvidenceError + "."
	}
	att, err := ledger.ParseLevel(d.Attention)
	if err != nil {
		att = ledger.High
	}
	source := v.ChannelID
	if source == "" {
		source, _, _ = strings.Cut(v.Type, ".")
	}
	return Observation{ID: v.ID, Source: source, Actor: actor, Content: content, Trust: trust, Attention: att,
		Timestamp: e.Event.Occurred(), Permissions: PermissionsOf(trust), Type: v.Type, Seq: e.Seq, Data: v.Payload, Privacy: e.Event.Privacy,
		Evidence: d.Evidence}
}

var placeholder = regexp.MustCompile(`\{[a-z_]+\}`)

// maxFieldText bounds what one field puts into a text: environment text
// is data, and a short one.
const maxFieldText = 200

// fill replaces {field} in text with the payload's field, {channel} and
// {type} with the event's; a field the payload lacks reads "?".
func fill(text string, v ledger.EventView, payload map[string]any) string {
	if text == "" {
		text = "{type} on {channel}"
	}
	return placeholder.ReplaceAllStringFunc(text, func(m string) string {
		k := m[1 : len(m)-1]
		var s string
		switch k {
		case "channel":
			s = v.ChannelID
		case "type":
			s = v.Type
		default:
			f, ok := payload[k]
			if !ok {
				return "?"
			}
			s = fmt.Sprint(f)
		}
		if len(s) > maxFieldText {
			s = s[:maxFieldText] + "…"
		}
		return s
	})
}
