// Package board holds the board profiles: which GPIO chip (by label) and
// lines (by name) a board has, how its e-stop is wired, the safe levels of
// its outputs, its camera, audio and input defaults, and where its
// temperatures and throttling are read. Profiles are JSON files checked
// against profile.schema.json; the built-in ones are embedded, and a user
// adds or replaces one by dropping NAME.json into /etc/tobe-body/boards/.
//
// Detect picks the profile for the machine from /proc/device-tree/model,
// DMI and the architecture; Check reports, for each device a profile
// names, whether it is Loaded, Skipped (absent on this board) or Failed
// (present but unusable, with the error).
package board

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tobe-body/tobe-body/board/strictjson"
	"github.com/tobe-body/tobe-body/hal"
)

//go:embed profile.schema.json
var schemaJSON []byte

//go:embed profiles/*.json
var builtin embed.FS

// UserDir is where a user's profiles live.
const UserDir = "/etc/tobe-body/boards"

// SchemaJSON returns the profile schema.
func SchemaJSON() []byte { return slices.Clone(schemaJSON) }

// schema is the compiled profile schema, kept only while in use (the
// embedded schema is tested).
var schema = strictjson.Lazy("profile.schema.json", schemaJSON)

// Profile is one board. Field names follow the JSON file.
type Profile struct {
	Version     int      `json:"version"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Drivers     string   `json:"drivers"`
	Match       Match    `json:"match"`
	GPIO        *GPIO    `json:"gpio,omitempty"`
	EStop       *EStop   `json:"estop,omitempty"`
	Cameras     []Camera `json:"cameras,omitempty"`
	Audio       Audio    `json:"audio"`
	Inputs      []Input  `json:"inputs,omitempty"`
	I2C         *I2C     `json:"i2c,omitempty"`
	LEDs        []LED    `json:"leds,omitempty"`
	Thermal     Thermal  `json:"thermal"`
	// Source is where the profile was read from ("built-in" or a path).
	Source string `json:"-"`
}

// Match says how a board is detected.
type Match struct {
	DeviceTreeModel []string   `json:"device_tree_model,omitempty"`
	DMI             []DMIMatch `json:"dmi,omitempty"`
	Arch            string     `json:"arch,omitempty"`
}

// DMIMatch holds substrings of DMI fields.
type DMIMatch struct {
	SysVendor   string `json:"sys_vendor,omitempty"`
	ProductName string `json:"product_name,omitempty"`
}

// GPIO is the board's GPIO chip and the lines the body uses on it.
type GPIO struct {
	Chip    string       `json:"chip"`
	Inputs  []InputLine  `json:"inputs,omitempty"`
	Outputs []OutputLine `json:"outputs,omitempty"`
}

// Level is "low" or "high" in a profile.
type Level string

// HAL converts to the hal level.
func (l Level) HAL() hal.Level { return hal.Level(l == "high") }

// Pull is "up", "down" or "none" in a profile.
type Pull string

// HAL converts to the hal pull.
func (p Pull) HAL() hal.Pull {
	switch p {
	case "up":
		return hal.PullUp
	case "down":
		return hal.PullDown
	}
	return hal.Float
}

// InputLine is a named GPIO input.
type InputLine struct {
	Name       string `json:"name"`
	Line       string `json:"line"`
	Pull       Pull   `json:"pull"`
	Active     Level  `json:"active"`
	DebounceMS int    `json:"debounce_ms,omitempty"`
	Role       string `json:"role,omitempty"`
	FeedbackOf string `json:"feedback_of,omitempty"`
}

// Debounce is the debounce window.
func (l InputLine) Debounce() time.Duration { return time.Duration(l.DebounceMS) * time.Millisecond }

// OutputLine is a named GPIO output with its safe level.
type OutputLine struct {
	Name string `json:"name"`
	Line string `json:"line"`
	Safe Level  `json:"safe"`
	Kind string `json:"kind,omitempty"`
}

// EStop is the e-stop wiring.
type EStop struct {
	Line       string        `json:"line"`
	Wiring     string        `json:"wiring"`
	Pull       Pull          `json:"pull"`
	StopLevel  Level         `json:"stop_level"`
	DebounceMS int           `json:"debounce_ms,omitempty"`
	Second     *EStopChannel `json:"second,omitempty"`
	Reset      *ResetInput   `json:"reset,omitempty"`
}

// EStopChannel is the second channel of a two-channel e-stop.
type EStopChannel struct {
	Line          string `json:"line"`
	Pull          Pull   `json:"pull"`
	StopLevel     Level  `json:"stop_level"`
	DiscrepancyMS int    `json:"discrepancy_ms,omitempty"`
}

// ResetInput is the local reset button.
type ResetInput struct {
	Line       string `json:"line"`
	Pull       Pull   `json:"pull"`
	Active     Level  `json:"active"`
	MinPressMS int    `json:"min_press_ms,omitempty"`
	MaxPressMS int    `json:"max_press_ms,omitempty"`
}

// Camera is a camera default.
type Camera struct {
	Name   string   `json:"name"`
	Device string   `json:"device,omitempty"`
	Driver string   `json:"driver,omitempty"`
	Needs  string   `json:"needs,omitempty"`
	Format []string `json:"format,omitempty"`
	Width  int      `json:"width,omitempty"`
	Height int      `json:"height,omitempty"`
	FPS    int      `json:"fps,omitempty"`
}

// Audio holds the capture and playback defaults.
type Audio struct {
	Capture  *AudioDevice `json:"capture,omitempty"`
	Playback *AudioDevice `json:"playback,omitempty"`
}

// AudioDevice is an audio device default.
type AudioDevice struct {
	Name     string `json:"name"`
	Device   string `json:"device"`
	PCM      int    `json:"pcm,omitempty"`
	RateHz   int    `json:"rate_hz,omitempty"`
	Channels int    `json:"channels,omitempty"`
	FrameMS  int    `json:"frame_ms,omitempty"`
}

// Input is an input device the body reads.
type Input struct {
	Name  string `json:"name"`
	Match string `json:"match"`
	Role  string `json:"role"`
	Grab  bool   `json:"grab,omitempty"`
}

// I2C is what the body reads on I²C buses.
type I2C struct {
	Sensors []I2CSensor `json:"sensors"`
}

// I2CSensor is a sensor on an I²C bus.
type I2CSensor struct {
	Name string `json:"name"`
	// Chip is the driver: bme280 (a BME280 or a BMP280).
	Chip string `json:"chip"`
	// Bus is the bus's number, periph's name for it, or its adapter's.
	Bus string `json:"bus"`
	// Address is the 7-bit address in hex ("0x76").
	Address string `json:"address"`
}

// Addr is the sensor's address as a number (the schema checked its form).
func (s I2CSensor) Addr() uint16 {
	v, _ := strconv.ParseUint(strings.TrimPrefix(s.Address, "0x"), 16, 8)
	return uint16(v)
}

// LED is one of the board's own LEDs that the body may take over.
type LED struct {
	Name string `json:"name"`
	// LED is its name under /sys/class/leds.
	LED string `json:"led"`
	// Take: the body takes it unless the config says otherwise.
	Take bool `json:"take,omitempty"`
	// Note says what it shows while the system keeps it.
	Note string `json:"note,omitempty"`
}

// TakeLEDs returns the profile with its LEDs' Take set from take, by the
// profile's name, where take names them (the config's act.leds); a name
// the profile has no LED of is an error naming those it has.
func (p *Profile) TakeLEDs(take map[string]bool) (*Profile, error) {
	if len(take) == 0 {
		return p, nil
	}
	q := *p
	q.LEDs = slices.Clone(p.LEDs)
	for name, t := range take {
		i := slices.IndexFunc(q.LEDs, func(l LED) bool { return l.Name == name })
		if i < 0 {
			names := make([]string, len(q.LEDs))
			for j, l := range q.LEDs {
				names[j] = l.Name
			}
			return nil, fmt.Errorf("act.leds.%s: board %s has no LED named %s (its LEDs: %s)", name, p.Name, name, strings.Join(names, ", "))
		}
		q.LEDs[i].Take = t
	}
	return &q, nil
}

// Thermal says where temperatures and throttling are read.
type Thermal struct {
	Zones    []string `json:"zones"`
	Throttle Throttle `json:"throttle"`
}

// Throttle is the throttling source.
type Throttle struct {
	Source string `json:"source"`
	Path   string `json:"path,omitempty"`
}

// ErrUnknown is returned by Load for a name no profile has.
var ErrUnknown = errors.New("board: no profile")

// Parse reads one profile file: strictly, against the schema, then the
// rules a schema cannot say (unique names, lines used once).
func Parse(file string, data []byte) (*Profile, error) {
	doc, err := strictjson.Decode(file, data)
	if err != nil {
		return nil, err
	}
	if err := schema().Validate(doc); err != nil {
		return nil, err
	}
	var p Profile
	if err := strictjson.Into(doc, &p); err != nil {
		return nil, err
	}
	if stem := strings.TrimSuffix(filepath.Base(file), ".json"); stem != p.Name {
		return nil, &strictjson.Error{File: file, Path: "$.name", Reason: fmt.Sprintf("the profile is named %q but its file is %q; they must agree", p.Name, filepath.Base(file))}
	}
	if err := p.check(file); err != nil {
		return nil, err
	}
	return &p, nil
}

func (p *Profile) check(file string) error {
	var errs strictjson.Errors
	bad := func(path, format string, args ...any) {
		errs = append(errs, &strictjson.Error{File: file, Path: path, Reason: fmt.Sprintf(format, args...)})
	}
	names := map[string]string{}
	name := func(path, n string) {
		if prev, dup := names[n]; dup {
			bad(path, "name %q is already used at %s", n, prev)
		}
		names[n] = path
	}
	lines := map[string]string{}
	line := func(path, l string) {
		if prev, dup := lines[l]; dup {
			bad(path, "line %q is already used at %s", l, prev)
		}
		lines[l] = path
	}
	if p.GPIO != nil {
		for i, in := range p.GPIO.Inputs {
			path := fmt.Sprintf("$.gpio.inputs[%d]", i)
			name(path+".name", in.Name)
			line(path+".line", in.Line)
			if (in.Role == "feedback") != (in.FeedbackOf != "") {
				bad(path, "role feedback and feedback_of go together")
			}
		}
		for i, out := range p.GPIO.Outputs {
			path := fmt.Sprintf("$.gpio.outputs[%d]", i)
			name(path+".name", out.Name)
			line(path+".line", out.Line)
		}
		for i, in := range p.GPIO.Inputs {
			if in.FeedbackOf != "" && !slices.ContainsFunc(p.GPIO.Outputs, func(o OutputLine) bool { return o.Name == in.FeedbackOf }) {
				bad(fmt.Sprintf("$.gpio.inputs[%d].feedback_of", i), "no output is named %q", in.FeedbackOf)
			}
		}
	}
	if e := p.EStop; e != nil {
		if p.GPIO == nil {
			bad("$.estop", "an e-stop needs the gpio section that names its chip")
		}
		line("$.estop.line", e.Line)
		if e.Second != nil {
			line("$.estop.second.line", e.Second.Line)
		}
		if r := e.Reset; r != nil {
			line("$.estop.reset.line", r.Line)
			if r.MinPressMS != 0 && r.MaxPressMS != 0 && r.MinPressMS >= r.MaxPressMS {
				bad("$.estop.reset", "min_press_ms %d must be less than max_press_ms %d", r.MinPressMS, r.MaxPressMS)
			}
		}
	}
	for i, c := range p.Cameras {
		path := fmt.Sprintf("$.cameras[%d]", i)
		name(path+".name", c.Name)
		if (c.Device == "") == (c.Driver == "") {
			bad(path, "give exactly one of device and driver")
		}
	}
	for _, a := range []*AudioDevice{p.Audio.Capture, p.Audio.Playback} {
		if a != nil {
			name("$.audio", a.Name)
		}
	}
	for i, in := range p.Inputs {
		name(fmt.Sprintf("$.inputs[%d].name", i), in.Name)
	}
	if p.I2C != nil {
		at := map[string]string{}
		for i, sn := range p.I2C.Sensors {
			path := fmt.Sprintf("$.i2c.sensors[%d]", i)
			name(path+".name", sn.Name)
			k := sn.Bus + " " + strings.ToLower(sn.Address)
			if prev, dup := at[k]; dup {
				bad(path+".address", "bus %s address %s is already used at %s", sn.Bus, sn.Address, prev)
			}
			at[k] = path
		}
	}
	leds := map[string]string{}
	for i, l := range p.LEDs {
		path := fmt.Sprintf("$.leds[%d]", i)
		name(path+".name", l.Name)
		if prev, dup := leds[l.LED]; dup {
			bad(path+".led", "LED %q is already used at %s", l.LED, prev)
		}
		leds[l.LED] = path
	}
	if t := p.Thermal.Throttle; t.Source != "none" && t.Path == "" {
		bad("$.thermal.throttle", "source %q needs a path", t.Source)
	} else if t.Path != "" && (path.Clean(t.Path) != t.Path || !strings.HasPrefix(t.Path, "/sys/")) {
		bad("$.thermal.throttle.path", "must be a clean path under /sys/ (no .., no //, no trailing /)")
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// Set is every profile known: the built-in ones and the user's.
type Set struct {
	byName map[string]*Profile
	// Replaced lists built-in names a user's file replaced.
	Replaced []string
}

// Builtin returns the embedded profiles.
func Builtin() (*Set, error) { return LoadSet("") }

// LoadSet reads the embedded profiles, then every *.json in userDir (when
// userDir is not "" and exists). A user's profile replaces a built-in one
// of the same name. One bad file fails the whole set: a body must not run
// on half a profile.
func LoadSet(userDir string) (*Set, error) {
	s := &Set{byName: map[string]*Profile{}}
	entries, err := fs.ReadDir(builtin, "profiles")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		data, err := fs.ReadFile(builtin, "profiles/"+e.Name())
		if err != nil {
			return nil, err
		}
		p, err := Parse(e.Name(), data)
		if err != nil {
			return nil, fmt.Errorf("board: built-in profile: %w", err)
		}
		p.Source = "built-in"
		s.byName[p.Name] = p
	}
	if userDir == "" {
		return s, nil
	}
	files, err := filepath.Glob(filepath.Join(userDir, "*.json"))
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		data, err := strictjson.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("board: %w", err)
		}
		p, err := Parse(f, data)
		if err != nil {
			return nil, fmt.Errorf("board: %w", err)
		}
		p.Source = f
		if _, ok := s.byName[p.Name]; ok {
			s.Replaced = append(s.Replaced, p.Name)
		}
		s.byName[p.Name] = p
	}
	return s, nil
}

// Names lists the profiles, sorted.
func (s *Set) Names() []string {
	var out []string
	for n := range s.byName {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Get returns the named profile, or an error wrapping ErrUnknown that
// lists the names there are.
func (s *Set) Get(name string) (*Profile, error) {
	p, ok := s.byName[name]
	if !ok {
		return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknown, name, strings.Join(s.Names(), ", "))
	}
	return p, nil
}
