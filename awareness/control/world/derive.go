package world

import (
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/ledger"
	"github.com/tobe-body/tobe-body/sense"
)

// observation is what one event says of one source.
type observation struct {
	source, channel string
	// value is the kind-free word: "active"/"quiet" (rooms), "on"/"off"
	// (outputs), a level (the body); line is a line's state instead,
	// which each kind of contact words in its own way.
	value    string
	line     *bool
	readings map[string]Reading
	conf     float64
	prov     ledger.Provenance
	// end: the source's state ends for this reason.
	end string
	// confirm: it only confirms what the source holds, whatever its
	// value, and says value when the source holds nothing.
	confirm bool
	// by and expireMS: a told assertion's teller and expiry.
	by       string
	expireMS int64
}

// valueFor is the observation's value as an entity of kind k says it.
func (o *observation) valueFor(k Kind) string {
	if o.line == nil {
		return o.value
	}
	words := map[Kind][2]string{Door: {"open", "closed"}, Window: {"open", "closed"}, Presence: {"present", "absent"}}[k]
	if words[0] == "" {
		return ""
	}
	if *o.line {
		return words[0]
	}
	return words[1]
}

// The confidence of what each source observes: how often its word is
// right in a home, by the kind of detector (ours; no standard gives
// them). Motion is a change of light as well as a person; silence is
// not absence.
const (
	confMotion     = 0.8
	confStill      = 0.7
	confVoice      = 0.7
	confNoVoice    = 0.6
	confLevelQuiet = 0.5
	confLine       = 0.95
	confAir        = 0.9
	confReadBack   = 0.99
	confSelf       = 1.0
)

// The air's uncertainties: a BME280's absolute accuracy (Bosch's
// datasheet, BST-BME280-DS002: ±1 °C, ±3 %RH, ±1 hPa).
var airQuantities = []struct {
	name, unit  string
	uncertainty float64
	of          func(*sense.EnvReading) *float64
}{
	{"temperature_c", "°C", 1, func(r *sense.EnvReading) *float64 { return r.Temperature }},
	{"humidity_pct", "%", 3, func(r *sense.EnvReading) *float64 { return r.Humidity }},
	{"pressure_hpa", "hPa", 1, func(r *sense.EnvReading) *float64 { return r.Pressure }},
}

// Types are the event types the model follows.
var Types = []string{"camera.motion_started", "camera.motion_ended", "camera.summary",
	"audio.voice_started", "audio.voice_ended", "audio.level",
	"gpio.changed", "gpio.level", "env.reading",
	"action.succeeded", "action.failed", "action.unknown",
	"estop.tripped", "estop.stop_again", "body.degradation"}

// zoneSource is the source id of a camera's zone, when the model has it
// (a zone no entity is fed by says nothing), without building the id.
func (m *Model) zoneSource(ch, zone string) (string, bool) {
	var buf [128]byte
	k := append(append(append(buf[:0], ch...), '#'), zone...)
	id, ok := m.sourceIDs[string(k)]
	return id, ok
}

// one appends an observation of the event's channel (unless it names
// its own) to out.
func one(out []observation, ch string, o observation) []observation {
	if o.channel == "" {
		o.channel = ch
	}
	if o.source == "" {
		o.source = o.channel
	}
	if o.prov == 0 {
		o.prov = ledger.Observed
	}
	return append(out, o)
}

// observations appends what an event says of the model's sources to
// out. A payload that cannot be read says nothing.
func (m *Model) observations(e *ledger.Event, out []observation) []observation {
	ch := e.ChannelID
	switch e.Type {
	case "camera.motion_started", "camera.motion_ended":
		var zone string
		var cut bool
		if e.Type == "camera.motion_started" {
			var p sense.MotionStarted
			if ledger.UnmarshalPayload(e.Payload, &p) != nil {
				return out
			}
			zone = p.Zone
		} else {
			var p sense.MotionEnded
			if ledger.UnmarshalPayload(e.Payload, &p) != nil {
				return out
			}
			zone, cut = p.Zone, p.Cut
		}
		src, ok := m.zoneSource(ch, zone)
		switch {
		case !ok:
			return out
		case e.Type == "camera.motion_started":
			return one(out, ch, observation{source: src, value: "active", conf: confMotion})
		case cut:
			return one(out, ch, observation{source: src, end: EndSourceLost})
		}
		return one(out, ch, observation{source: src, value: "quiet", conf: confStill})
	case "camera.summary":
		zones, moving, ok := summaryZones(e.Payload)
		if !ok {
			return out
		}
		for _, z := range zones {
			src, ok := m.zoneSource(ch, z)
			if !ok {
				continue
			}
			o := observation{source: src, channel: ch, value: "quiet", conf: confStill, prov: ledger.Observed}
			if slices.Contains(moving, z) {
				o.value, o.conf = "active", confMotion
			}
			out = append(out, o)
		}
		return out
	case "audio.voice_started":
		return one(out, ch, observation{value: "active", conf: confVoice})
	case "audio.voice_ended":
		var p sense.Voice
		if ledger.UnmarshalPayload(e.Payload, &p) != nil {
			return out
		}
		if p.Cut {
			return one(out, ch, observation{end: EndSourceLost})
		}
		return one(out, ch, observation{value: "quiet", conf: confNoVoice})
	case "audio.level":
		// A summary confirms what the microphone holds; with nothing
		// held (after a start) it says quiet: a voice would have
		// started. Nothing in it is read: the most common event a body
		// records costs the model no decoding.
		return one(out, ch, observation{value: "quiet", conf: confLevelQuiet, confirm: true})
	case "gpio.changed", "gpio.level":
		var p body.LineChanged
		if ledger.UnmarshalPayload(e.Payload, &p) != nil {
			return out
		}
		active := p.Active
		return one(out, ch, observation{line: &active, conf: confLine})
	case "env.reading":
		var p sense.EnvReading
		if ledger.UnmarshalPayload(e.Payload, &p) != nil {
			return out
		}
		rs := map[string]Reading{}
		for _, q := range airQuantities {
			if v := q.of(&p); v != nil {
				rs[q.name] = Reading{Value: *v, Uncertainty: q.uncertainty, Unit: q.unit}
			}
		}
		if len(rs) == 0 {
			return out
		}
		return one(out, ch, observation{readings: rs, conf: confAir})
	case "action.succeeded", "action.failed", "action.unknown":
		var p struct { // the runner's record of an outcome
			Status     string         `cbor:"status"`
			Invocation act.Invocation `cbor:"invocation"`
			Result     act.Result     `cbor:"result"`
		}
		if ledger.UnmarshalPayload(e.Payload, &p) != nil || p.Invocation.Mode != act.Live {
			return out
		}
		// The target is the output's channel ("gpio.relay1"), as the
		// runner takes it.
		output := p.Invocation.Target
		var value string
		switch p.Invocation.Capability {
		case "gpio.set":
			value = p.Invocation.Params["state"]
		case "gpio.pulse":
			value = "off" // a pulse ends at the safe level
		default:
			return out
		}
		if v := p.Result.Verification; v == nil || v.Result != "verified" || value != "on" && value != "off" {
			return one(out, ch, observation{channel: output, end: EndUnverified})
		}
		return one(out, ch, observation{channel: output, value: value, conf: confReadBack, prov: ledger.Verified})
	case "estop.tripped", "estop.stop_again":
		var p act.Trip
		if ledger.UnmarshalPayload(e.Payload, &p) != nil {
			return out
		}
		for _, o := range p.Outputs {
			ob := observation{source: "gpio." + o.Name, channel: "gpio." + o.Name, value: "off", conf: confReadBack, prov: ledger.Verified}
			if o.ReadBack != o.Safe {
				ob.value, ob.end = "", EndUnverified
			}
			out = append(out, ob)
		}
		return out
	case "body.degradation":
		var p sense.LevelChange
		if ledger.UnmarshalPayload(e.Payload, &p) != nil {
			return out
		}
		return append(out, observation{source: selfChannel, channel: selfChannel, value: p.Level, conf: confSelf, prov: ledger.Observed})
	}
	return out
}

// Deriver keeps the model: from each event of its Types it derives the
// steps of the entities it tells of (their new records and ends, and
// the changes of state they make) and the seen marks of its channel, in
// the event's transaction (see ledger.Deriver). Between events it keeps
// what it read of the projection and what it derived, as long as no one
// else wrote the model and the ledger lost none of its derivations
// (ledger.Derivation.Lost), so an event that confirms what is held costs
// no read of it. The model's events are written only by its Deriver and
// by this package's commands (Tell, the Keeper's rounds), each given the
// Model, whose generation they move on before they decide: the Model a
// Deriver is given must be the one they are given. It is safe for
// concurrent use.
type Deriver struct {
	Model *Model

	mu    sync.Mutex
	cache *cache
	obs   []observation // reused from event to event
	input []byte        // likewise
	ch    change
}

func (*Deriver) Name() string    { return "world" }
func (*Deriver) Types() []string { return Types }

// Derive implements ledger.Deriver.
func (d *Deriver) Derive(v *ledger.View, e *ledger.Event, at ledger.Derivation) ([]ledger.Event, error) {
	if !d.feeds(e) {
		return nil, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if gen := d.Model.gen.Load(); d.cache == nil || d.cache.gen != gen || d.cache.lost != at.Lost {
		d.cache = newCache(gen, at.Lost) // written by another, or a derivation lost
	}
	run, occurred := at.Running.Milliseconds(), e.OccurredAt
	if occurred == 0 {
		occurred = e.IngestedAt
	}
	in, calmable := calmInput(d.input[:0], e.Type, e.Payload)
	d.input = in
	if q := d.cache.calm[e.ChannelID]; calmable && q.holds(e.Type, in, run) {
		if p := q.sighting; p != nil { // the sighting the next mark marks
			p.at, p.run, p.seq, p.id = occurred, run, at.Seq, e.ID
		}
		return nil, nil
	}
	d.obs = d.Model.observations(e, d.obs[:0])
	obs := d.obs
	if len(obs) == 0 {
		return nil, nil
	}
	kv := v.Projection(ProjectionName)
	c := &d.ch
	c.reset(kv, d.Model, run, ledger.Event{OccurredAt: occurred}, d.cache)
	c.cause = e
	c.causeSeq = at.Seq
	for i := range obs {
		for _, ix := range d.Model.feeds[obs[i].source] {
			if err := c.observe(d.Model.entities[ix], &obs[i]); err != nil {
				d.cache = nil
				return nil, err
			}
		}
	}
	if err := c.settle(); err != nil {
		d.cache = nil
		return nil, err
	}
	c.keep(at.Seq + 1)
	if len(c.out) == 0 && !c.unsettled && calmable {
		q := d.cache.calmOf(e.ChannelID)
		q.ok, q.at, q.typ, q.input, q.untilMS = true, q.epoch, e.Type, append(q.input[:0], in...), c.calmUntil
		q.sighting = d.cache.sighted[e.ChannelID]
	} else if q := d.cache.calm[e.ChannelID]; q != nil {
		q.ok = false // it may have sighted the channel anew
	}
	return c.out, nil
}

// sightingOf is a channel's sighting not yet marked.
type sightingOf struct {
	channel string
	sighting
}

// takeSightings hands over the sightings of channels not yet marked, in
// the order of their channels, and forgets them: the keeper marks them
// (see Keeper.Round). None when what the Deriver keeps is not what the
// ledger holds: the model's generation is not gen (another wrote it),
// or a derivation was lost since (lost, as View.Lost says).
func (d *Deriver) takeSightings(gen, lost uint64) []sightingOf {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cache == nil || d.cache.gen != gen || d.cache.lost != lost {
		return nil
	}
	var out []sightingOf
	for _, ch := range slices.Sorted(maps.Keys(d.cache.sighted)) {
		out = append(out, sightingOf{ch, *d.cache.sighted[ch]})
	}
	clear(d.cache.sighted)
	return out
}

// sighted tells whether a channel has a sighting not yet marked.
func (d *Deriver) sighted(channel string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cache != nil && d.cache.sighted[channel] != nil
}

// feeds tells quickly whether an event can say anything of the model:
// most events a body records do not.
func (d *Deriver) feeds(e *ledger.Event) bool {
	switch {
	case strings.HasPrefix(e.Type, "action."), strings.HasPrefix(e.Type, "estop."):
		return d.Model.outputs
	case e.Type == "body.degradation":
		return true
	}
	_, ok := d.Model.channels[e.ChannelID]
	return ok
}
