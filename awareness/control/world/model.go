package world

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tobe-body/tobe-body/ledger"
)

// Kind is what an entity is, and so which values its state takes.
type Kind string

// Kinds of entity.
const (
	// Room is a room or zone: active or quiet, from camera zones and
	// microphones.
	Room Kind = "room"
	// Door, Window: a contact, open or closed, from an input line.
	Door   Kind = "door"
	Window Kind = "window"
	// Presence: someone present or absent, from an input line (a
	// presence sensor's output).
	Presence Kind = "presence"
	// Air: temperature, humidity and pressure with their uncertainty,
	// from an environment sensor.
	Air Kind = "air"
	// Output: on or off, as the action runner read it back.
	Output Kind = "output"
	// Self: the body itself, its level of degradation.
	Self Kind = "body"
)

// Values an entity's state takes besides Unknown, by kind; air has
// readings instead.
var kindValues = map[Kind][]string{
	Room:     {"active", "quiet"},
	Door:     {"open", "closed"},
	Window:   {"open", "closed"},
	Presence: {"present", "absent"},
	Air:      nil,
	Output:   {"on", "off"},
	Self:     {"normal", "constrained", "degraded", "critical"},
}

// Unknown is the value of a state nothing tells: no source has observed
// it, or what they observed expired.
const Unknown = "unknown"

// Values lists the values a kind's state takes besides unknown.
func (k Kind) Values() []string { return slices.Clone(kindValues[k]) }

func (k Kind) valid() bool { _, ok := kindValues[k]; return ok }

// prefix is the start of the ids of a kind's entities.
func (k Kind) prefix() string {
	switch k {
	case Door, Window, Presence:
		return "contact"
	}
	return string(k)
}

// Kinds lists every kind.
func Kinds() []Kind { return []Kind{Room, Door, Window, Presence, Air, Output, Self} }

// Source is where an entity's state comes from: a channel, and for a
// camera the zone.
type Source struct {
	Channel string `json:"channel"`
	Zone    string `json:"zone,omitempty"`
}

// ID names the source in records: "camera.front#left", "audio.mic".
func (s Source) ID() string {
	if s.Zone != "" {
		return s.Channel + "#" + s.Zone
	}
	return s.Channel
}

// Entity is a thing of the surroundings (or the body) whose state the
// model keeps.
type Entity struct {
	// ID is "room.kitchen", "contact.front_door", "air.hall",
	// "output.relay1" or "body".
	ID   string `json:"id"`
	Kind Kind   `json:"kind"`
	// Name is its name in the configuration.
	Name    string   `json:"name"`
	Sources []Source `json:"sources"`
	// ExpireAfter: a source's state not observed again within this, on
	// the ledger's running clock, is unknown; 0 never expires (a state
	// only a change of it changes: a line the kernel watches, an output
	// the runner drives).
	ExpireAfter time.Duration `json:"-"`
	// Privacy: rooms and presence are sensitive (people, and the home's
	// layout); the rest internal.
	Privacy ledger.Privacy `json:"-"`
	// Area is where it is, for a home server's dashboard ("" unsaid).
	Area string `json:"area,omitempty"`
}

// Model is the entities a body keeps, and which sources feed which. It
// does not change while the body runs and is safe for concurrent use.
type Model struct {
	entities []Entity
	byID     map[string]int
	// feeds maps a source id to the entities it feeds; channels maps a
	// channel to the entities any of its sources feed.
	feeds    map[string][]int
	channels map[string][]int
	// sourceIDs interns the ids of the sources that feed entities.
	sourceIDs map[string]string
	// outputs: some entity is an output (action and e-stop records
	// matter).
	outputs bool
	// gen moves on before anything but the Deriver writes the model's
	// events (see Deriver).
	gen atomic.Uint64
}

// Entities returns the entities, ordered by id.
func (m *Model) Entities() []Entity { return slices.Clone(m.entities) }

// Entity returns the entity of an id.
func (m *Model) Entity(id string) (Entity, bool) {
	i, ok := m.byID[id]
	if !ok {
		return Entity{}, false
	}
	return m.entities[i], true
}

// Facts are what a body has that entities are fed by: the channels by
// kind, each camera's zones, and how often the channels that summarise
// do (for the default expiries).
type Facts struct {
	// Cameras maps a camera's channel to its zones ("frame" when it has
	// none).
	Cameras map[string][]string
	// Microphones, Lines (GPIO inputs that are not buttons, feedback or
	// the e-stop), EnvSensors and Outputs (GPIO outputs) are channel ids.
	Microphones, Lines, EnvSensors, Outputs []string
	// CameraSummary, MicSummary and EnvSummary are the summaries'
	// periods (camera.summary, audio.level, env.reading).
	CameraSummary, MicSummary, EnvSummary time.Duration
}

// Config is the world section of the configuration (body/config's
// World), as the model reads it.
type Config struct {
	// Defaults: entities made from the board (see Build); nil is true.
	Defaults *bool
	Entities map[string]EntityConfig
}

// EntityConfig declares one entity.
type EntityConfig struct {
	Kind         string
	Sources      []Source
	ExpireAfterS *int
	Area         string
}

// Build makes the model of a body from its configuration and facts. With
// defaults on, every camera zone is a room named after its camera and
// zone ("front-left"; a camera without zones "front"), every microphone
// a room named after it, every environment sensor an air named after
// it, every output an output, and the body itself; an entity the
// configuration declares with the id of a default replaces it, and a
// source it names is no longer a default's. Contacts are declared only.
// An error names the entity and the field at fault (its path in the
// configuration) and every one found.
func Build(c Config, f Facts) (*Model, error) {
	var errs []string
	bad := func(path, format string, args ...any) {
		errs = append(errs, fmt.Sprintf("$.world.entities.%s: %s", path, fmt.Sprintf(format, args...)))
	}
	exists := map[string]bool{}
	for ch := range f.Cameras {
		exists[ch] = true
	}
	for _, list := range [][]string{f.Microphones, f.Lines, f.EnvSensors, f.Outputs} {
		for _, ch := range list {
			exists[ch] = true
		}
	}
	declared := map[string]Entity{}
	claimed := map[string]string{} // source id -> an entity that declared it
	names := make([]string, 0, len(c.Entities))
	for name := range c.Entities {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		ec := c.Entities[name]
		k := Kind(ec.Kind)
		if !k.valid() {
			bad(name+".kind", "%q is not a kind; want one of %s", ec.Kind, kindList())
			continue
		}
		if !validName(name) {
			bad(name, "a name is lower-case letters, digits, - and _, at most 64")
			continue
		}
		e := Entity{ID: k.prefix() + "." + name, Kind: k, Name: name, Area: ec.Area, Privacy: privacyOf(k)}
		if k == Self {
			bad(name+".kind", "the body is one entity, which the model always keeps (id body): it cannot be declared")
			continue
		}
		if len(ec.Sources) == 0 {
			bad(name+".sources", "an entity needs at least one source")
		}
		for i, s := range ec.Sources {
			at := fmt.Sprintf("%s.sources[%d]", name, i)
			if why := sourceFits(k, s, f, exists); why != "" {
				bad(at, "%s", why)
				continue
			}
			if slices.Contains(e.Sources, s) {
				bad(at, "%s is named twice", s.ID())
				continue
			}
			claimed[s.ID()] = name
			e.Sources = append(e.Sources, s)
		}
		e.ExpireAfter = defaultExpiry(k, e.Sources, f)
		if ec.ExpireAfterS != nil {
			if *ec.ExpireAfterS < 0 {
				bad(name+".expire_after_s", "%d is negative; 0 never expires", *ec.ExpireAfterS)
			}
			e.ExpireAfter = time.Duration(*ec.ExpireAfterS) * time.Second
		}
		if other, dup := declared[e.ID]; dup {
			bad(name, "its id %s is the id of %s too", e.ID, other.Name)
			continue
		}
		declared[e.ID] = e
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("world: %s", strings.Join(errs, "; "))
	}
	all := map[string]Entity{}
	all["body"] = Entity{ID: "body", Kind: Self, Name: "body", Sources: []Source{{Channel: selfChannel}}, Privacy: ledger.Internal}
	if c.Defaults == nil || *c.Defaults {
		for _, e := range defaults(f) {
			// A source the configuration gave an entity is no longer
			// the default's.
			e.Sources = slices.DeleteFunc(e.Sources, func(s Source) bool { _, ok := claimed[s.ID()]; return ok })
			if len(e.Sources) > 0 {
				all[e.ID] = e
			}
		}
	}
	for id, e := range declared {
		all[id] = e
	}
	m := &Model{byID: map[string]int{}, feeds: map[string][]int{}, channels: map[string][]int{}, sourceIDs: map[string]string{}}
	for _, e := range all {
		m.entities = append(m.entities, e)
	}
	sort.Slice(m.entities, func(i, j int) bool { return m.entities[i].ID < m.entities[j].ID })
	for i, e := range m.entities {
		m.byID[e.ID] = i
		for _, s := range e.Sources {
			m.feeds[s.ID()] = append(m.feeds[s.ID()], i)
			m.sourceIDs[s.ID()] = s.ID()
			if !slices.Contains(m.channels[s.Channel], i) {
				m.channels[s.Channel] = append(m.channels[s.Channel], i)
			}
		}
	}
	for _, e := range m.entities {
		m.outputs = m.outputs || e.Kind == Output
	}
	return m, nil
}

// selfChannel is the body's own channel, which feeds the body entity.
const selfChannel = "body.self"

func kindList() string {
	var out []string
	for _, k := range Kinds() {
		out = append(out, string(k))
	}
	return strings.Join(out, ", ")
}

func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || i > 0 && (c == '-' || c == '_')) {
			return false
		}
	}
	return true
}

func privacyOf(k Kind) ledger.Privacy {
	if k == Room || k == Presence {
		return ledger.Sensitive
	}
	return ledger.Internal
}

// sourceFits says what is wrong with s as a source of an entity of kind
// k on a body with facts f, or "".
func sourceFits(k Kind, s Source, f Facts, exists map[string]bool) string {
	if !exists[s.Channel] {
		return fmt.Sprintf("channel %q is not a channel of this body that feeds entities (its cameras, microphones, input lines, environment sensors and outputs)", s.Channel)
	}
	if s.Zone != "" {
		zones, camera := f.Cameras[s.Channel]
		if !camera {
			return fmt.Sprintf("zone %q: only a camera's source names a zone", s.Zone)
		}
		if !slices.Contains(zones, s.Zone) {
			return fmt.Sprintf("zone %q is not a zone of %s (it has %s)", s.Zone, s.Channel, strings.Join(zones, ", "))
		}
	}
	in := func(list []string) bool { return slices.Contains(list, s.Channel) }
	switch k {
	case Room:
		if _, camera := f.Cameras[s.Channel]; camera {
			if s.Zone == "" {
				return fmt.Sprintf("a camera feeds a room through one of its zones: name one of %s", strings.Join(f.Cameras[s.Channel], ", "))
			}
			return ""
		}
		if !in(f.Microphones) {
			return fmt.Sprintf("%s cannot tell a room's activity: a room is fed by camera zones and microphones", s.Channel)
		}
	case Door, Window, Presence:
		if !in(f.Lines) {
			return fmt.Sprintf("%s is not an input line: a %s is fed by a GPIO input (not a button, a feedback line or the e-stop)", s.Channel, k)
		}
	case Air:
		if !in(f.EnvSensors) {
			return fmt.Sprintf("%s is not an environment sensor", s.Channel)
		}
	case Output:
		if !in(f.Outputs) {
			return fmt.Sprintf("%s is not an output", s.Channel)
		}
	}
	return ""
}

// defaultExpiry is how long a kind's state lasts without being seen
// again: three of its sources' longest summary period for what is
// summarised (rooms, air), never for what only a change changes
// (contacts the kernel watches, outputs the runner drives, the body).
func defaultExpiry(k Kind, sources []Source, f Facts) time.Duration {
	var period time.Duration
	for _, s := range sources {
		switch {
		case f.Cameras[s.Channel] != nil:
			period = max(period, f.CameraSummary)
		case slices.Contains(f.Microphones, s.Channel):
			period = max(period, f.MicSummary)
		case slices.Contains(f.EnvSensors, s.Channel):
			period = max(period, f.EnvSummary)
		}
	}
	switch k {
	case Room, Air:
		// At least ten minutes: seen marks are kept once three
		// quarters of it (see markAfter), and a short one writes them
		// often.
		return max(3*period, MinExpiry)
	}
	return 0
}

// MinExpiry is the least default expiry of a room's or the air's state.
const MinExpiry = 10 * time.Minute

// defaults are the entities made from the board.
func defaults(f Facts) []Entity {
	var out []Entity
	add := func(k Kind, name string, s ...Source) {
		e := Entity{ID: k.prefix() + "." + name, Kind: k, Name: name, Sources: s, Privacy: privacyOf(k)}
		e.ExpireAfter = defaultExpiry(k, s, f)
		out = append(out, e)
	}
	cams := make([]string, 0, len(f.Cameras))
	for ch := range f.Cameras {
		cams = append(cams, ch)
	}
	sort.Strings(cams)
	for _, ch := range cams {
		for _, z := range f.Cameras[ch] {
			name := nameOf(ch)
			if z != "frame" {
				name += "-" + slug(z)
			}
			add(Room, name, Source{Channel: ch, Zone: z})
		}
	}
	for _, ch := range f.Microphones {
		add(Room, nameOf(ch), Source{Channel: ch})
	}
	for _, ch := range f.EnvSensors {
		add(Air, nameOf(ch), Source{Channel: ch})
	}
	for _, ch := range f.Outputs {
		add(Output, nameOf(ch), Source{Channel: ch})
	}
	return out
}

func nameOf(channel string) string {
	_, name, _ := strings.Cut(channel, ".")
	return slug(name)
}

// slug makes a zone's or channel's name an entity's: lower case, other
// characters as -.
func slug(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}
