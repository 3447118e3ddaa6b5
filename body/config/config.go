// Package config reads the body's configuration: versioned, strict JSON in
// layers (built-in defaults < the image's defaults < /etc < --config FILE
// < flags), each layer checked against config.schema.json, the contract
// that ships in the repository and in the binary.
//
// Errors name the file, line, JSON path and what was expected, and never
// repeat a value from a file. Fields the schema marks "x-sensitive" are of
// type Secret, which prints, logs and marshals as "[redacted]".
package config

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/tobe-body/tobe-body/board/strictjson"
)

//go:embed config.schema.json
var schemaJSON []byte

// SchemaJSON returns the schema the config is checked against.
func SchemaJSON() []byte { return slices.Clone(schemaJSON) }

// schema is the compiled schema, kept only while in use (the embedded
// schema is tested).
var schema = strictjson.Lazy("config.schema.json", schemaJSON)

// Schema returns the compiled schema.
func Schema() *strictjson.Schema { return schema() }

// Where the layers live on a device.
const (
	ImageDefaultPath = "/usr/share/tobe-body/config.default.json"
	EtcPath          = "/etc/tobe-body/config.json"
)

// Config is the whole configuration. Field names follow the JSON.
type Config struct {
	Version int     `json:"version"`
	Board   string  `json:"board"`
	DataDir string  `json:"data_dir"`
	Log     Log     `json:"log"`
	Body    Body    `json:"body"`
	Sim     Sim     `json:"sim"`
	Monitor Monitor `json:"monitor"`
	Ledger  Ledger  `json:"ledger"`
	Sense   Sense   `json:"sense"`
	Act     Act     `json:"act"`
	Agent   Agent   `json:"agent"`
	Gate    Gate    `json:"gate"`
	MQTT    MQTT    `json:"mqtt"`
	World   World   `json:"world"`
	// Evidence is what the body keeps to be looked at (camera.snapshot,
	// audio.clip), and for how long.
	Evidence Evidence `json:"evidence"`
}

// World configures the world model's entities (see the schema).
type World struct {
	Defaults bool                   `json:"defaults"`
	Entities map[string]WorldEntity `json:"entities"`
}

// WorldEntity declares one entity of the world model.
type WorldEntity struct {
	Kind         string        `json:"kind"`
	Sources      []WorldSource `json:"sources"`
	ExpireAfterS *int          `json:"expire_after_s,omitempty"`
	Area         string        `json:"area,omitempty"`
}

// WorldSource is a channel that feeds an entity, and a camera's zone.
type WorldSource struct {
	Channel string `json:"channel"`
	Zone    string `json:"zone,omitempty"`
}

// Gate configures the control plane's gate: which events wake the agent
// (see the schema).
type Gate struct {
	ItemBudget       Budget            `json:"item_budget"`
	GlobalBudget     Budget            `json:"global_budget"`
	Quiet            []QuietPeriod     `json:"quiet"`
	MergeS           int               `json:"merge_s"`
	AnswerWithinS    int               `json:"answer_within_s"`
	NoveltyHalfLifeS int               `json:"novelty_half_life_s"`
	NoveltyRepeats   float64           `json:"novelty_repeats"`
	MinTrust         string            `json:"min_trust"`
	Bands            map[string]string `json:"bands"`
	NoisePool        NoisePool         `json:"noise_pool"`
	StaleAfterS      int               `json:"stale_after_s"`
	TickS            int               `json:"tick_s"`
}

// Budget bounds interruptions: at most Max in any window of WindowS.
type Budget struct {
	Max     int `json:"max"`
	WindowS int `json:"window_s"`
}

// QuietPeriod is a quiet period of each day, HH:MM to HH:MM local time.
type QuietPeriod struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// NoisePool sizes the gate's sample of what no rule wanted.
type NoisePool struct {
	Per     int `json:"per"`
	TTLS    int `json:"ttl_s"`
	MaxKeys int `json:"max_keys"`
}

// Agent configures the agent socket: the MCP server an agent reaches
// over `ssh body tobe-body stdio`.
type Agent struct {
	Enabled     bool   `json:"enabled"`
	SocketGroup string `json:"socket_group"`
	HeartbeatMS int    `json:"heartbeat_ms"`
	// Observations say what the agent is told of the body's events.
	Observations Observations `json:"observations"`
	// Principals map peers of the socket, as the kernel names them, to
	// agent principals.
	Principals []AgentPrincipal `json:"principals"`
}

// Observations configure what the agent is told: rules before the
// built-in ones, how long low and medium ones wait to be pushed together,
// and each session's drain queue.
type Observations struct {
	BatchMS int               `json:"batch_ms"`
	Queue   int               `json:"queue"`
	Rules   []ObservationRule `json:"rules"`
}

// ObservationRule turns events into observations (see the schema).
type ObservationRule struct {
	Type      string            `json:"type"`
	Channel   string            `json:"channel,omitempty"`
	When      map[string]string `json:"when,omitempty"`
	Actor     string            `json:"actor"`
	Attention string            `json:"attention"`
	Trust     string            `json:"trust"`
	Text      string            `json:"text,omitempty"`
}

// AgentPrincipal is one rule of who may connect as an agent: exactly one
// of UID, User, GID and Group, and the principal such a peer gets.
type AgentPrincipal struct {
	Name    string `json:"name"`
	Subject string `json:"subject"`
	UID     *int   `json:"uid,omitempty"`
	User    string `json:"user,omitempty"`
	GID     *int   `json:"gid,omitempty"`
	Group   string `json:"group,omitempty"`
	Trust   string `json:"trust"`
}

// Act configures the action runner's safety: what the policy forbids
// beyond its built-in rules, rate limits, per-output limits, channel and
// capability modes, who the local administrators are, and the controls
// that belong to a person. What can be checked without the board is
// checked by Load; the names of outputs, channels and controls are checked
// against the board at start.
type Act struct {
	Safety          Safety            `json:"safety"`
	RateLimits      RateLimits        `json:"rate_limits"`
	Outputs         map[string]Output `json:"outputs"`
	ChannelModes    map[string]string `json:"channel_modes"`
	CapabilityModes map[string]string `json:"capability_modes"`
	Principals      []Principal       `json:"principals"`
	HumanControls   []HumanControl    `json:"human_controls"`
	// Speakers configure audio.tone and audio.play, by speaker.
	Speakers map[string]Speaker `json:"speakers"`
	// LEDs take over (true) or leave to the system (false) the board's
	// own LEDs, by the profile's name, above the profile's take.
	LEDs map[string]bool `json:"leds"`
}

// Speaker configures audio.tone and audio.play on one speaker. Absent
// fields take the schema's defaults.
type Speaker struct {
	MaxLevelDBFS *float64 `json:"max_level_dbfs"`
	ClipsDir     string   `json:"clips_dir"`
	MaxClipMS    int      `json:"max_clip_ms"`
}

// Safety are the global safety rules.
type Safety struct {
	ForbidR3  bool        `json:"forbid_r3"`
	Forbidden []Forbidden `json:"forbidden"`
	// UnsyncedClockRefuseFrom is the lowest risk class refused while the
	// wall clock is not synchronised: R1, R2, R3 or never.
	UnsyncedClockRefuseFrom string `json:"unsynced_clock_refuse_from"`
}

// Forbidden forbids capabilities matching Capability on targets matching
// Scope (patterns as in grants).
type Forbidden struct {
	Capability string `json:"capability"`
	Scope      string `json:"scope"`
}

// RateLimits are token buckets per principal and capability, and the
// admission limit per principal.
type RateLimits struct {
	// PerPrincipal is the admission limit: every request to act takes a
	// token of its principal's bucket before anything of it is recorded.
	PerPrincipal RateLimit            `json:"per_principal"`
	Default      RateLimit            `json:"default"`
	ByCapability map[string]RateLimit `json:"by_capability"`
}

// RateLimit is one token bucket.
type RateLimit struct {
	Burst     int     `json:"burst"`
	PerSecond float64 `json:"per_second"`
}

// Output configures one GPIO output by the profile's name. Absent fields
// keep the built-in behaviour.
type Output struct {
	// Risk raises the output's risk class ("R1".."R3"); it may never
	// lower it below the built-in one.
	Risk         string   `json:"risk,omitempty"`
	MaxOnS       *float64 `json:"max_on_s,omitempty"`
	MinIntervalS *float64 `json:"min_interval_s,omitempty"`
}

// MaxOn is MaxOnS as a duration; 0 when unset.
func (o Output) MaxOn() time.Duration { return seconds(o.MaxOnS) }

// MinInterval is MinIntervalS as a duration; 0 when unset.
func (o Output) MinInterval() time.Duration { return seconds(o.MinIntervalS) }

func seconds(s *float64) time.Duration {
	if s == nil {
		return 0
	}
	return time.Duration(*s * float64(time.Second))
}

// DaemonIdentity in a Principal's user or group stands for the daemon's
// own user or group (the owner and group of the admin socket).
const DaemonIdentity = "@daemon"

// Principal maps a peer of the admin socket, as the kernel names it, to
// a local administrator's trust. Exactly one of UID, User, GID and Group
// is set.
type Principal struct {
	UID   *int   `json:"uid,omitempty"`
	User  string `json:"user,omitempty"`
	GID   *int   `json:"gid,omitempty"`
	Group string `json:"group,omitempty"`
	// Trust is off, low, medium, high or max; off refuses the peer.
	Trust string `json:"trust"`
}

// Release says when a person's hold on a resource ends.
type Release string

// Releases.
const (
	ReleaseOnRelease  Release = "release"     // when the control is let go
	ReleasePressAgain Release = "press_again" // on the next press
	ReleaseAfter      Release = "after"       // AfterS after the last press
)

// HumanControl marks a control as a person's: pressing it takes
// Resources over.
type HumanControl struct {
	// Control is the channel of a GPIO button ("gpio.button") or of an
	// input device ("input.keypad"), with Key naming the key.
	Control   string   `json:"control"`
	Key       string   `json:"key,omitempty"`
	Resources []string `json:"resources"`
	Release   Release  `json:"release"`
	AfterS    float64  `json:"after_s,omitempty"`
}

// After is AfterS as a duration.
func (h HumanControl) After() time.Duration { return time.Duration(h.AfterS * float64(time.Second)) }

// Sense configures the sense channels.
type Sense struct {
	Queue       int                   `json:"queue"`
	Self        SelfState             `json:"self"`
	Buttons     Buttons               `json:"buttons"`
	Inputs      Inputs                `json:"inputs"`
	Cameras     map[string]Camera     `json:"cameras"`
	Microphones map[string]Microphone `json:"microphones"`
	Env         Env                   `json:"env"`
	Privacy     Privacy               `json:"privacy"`
}

// Privacy configures what shows the privacy state.
type Privacy struct {
	// Indicator is the channel id of a board LED (light.NAME) or GPIO
	// output (gpio.NAME) that shows it; "" for none.
	Indicator string `json:"indicator"`
}

// Env configures the environment sensors' channels (see the schema).
type Env struct {
	IntervalS  int            `json:"interval_s"`
	SummaryS   int            `json:"summary_s"`
	Thresholds []EnvThreshold `json:"thresholds"`
}

// EnvThreshold is a value of a quantity that env.changed reports the
// crossing of: Above or Below it (one of them), and back past it by
// Hysteresis before it counts as crossed again.
type EnvThreshold struct {
	Quantity   string   `json:"quantity"`
	Above      *float64 `json:"above,omitempty"`
	Below      *float64 `json:"below,omitempty"`
	Hysteresis float64  `json:"hysteresis"`
}

// SelfState configures the self-state channel and the limits it judges by.
type SelfState struct {
	IntervalS      int     `json:"interval_s"`
	HotC           float64 `json:"hot_c"`
	CriticalC      float64 `json:"critical_c"`
	DiskLowMB      int     `json:"disk_low_mb"`
	DiskCriticalMB int     `json:"disk_critical_mb"`
}

// Buttons configures press detection on GPIO buttons.
type Buttons struct {
	LongPressMS   int `json:"long_press_ms"`
	DoublePressMS int `json:"double_press_ms"`
}

// Inputs configures input device channels.
type Inputs struct {
	ActivityWindowS int `json:"activity_window_s"`
}

// Camera configures motion detection on one camera. Absent fields take
// the schema's defaults.
type Camera struct {
	Zones       []Zone     `json:"zones"`
	Sensitivity *float64   `json:"sensitivity"`
	MinArea     *float64   `json:"min_area"`
	MaxFPS      *float64   `json:"max_fps"`
	Privacy     string     `json:"privacy"`
	Snapshots   *Snapshots `json:"snapshots"`
	// SummaryS is how often camera.summary is emitted, in seconds; 0
	// (absent) is the schema's default.
	SummaryS int `json:"summary_s"`
}

// Zone is a named polygon in normalised frame coordinates.
type Zone struct {
	Name    string       `json:"name"`
	Polygon [][2]float64 `json:"polygon"`
}

// Snapshots configures the owner's motion snapshots, kept as evidence.
type Snapshots struct {
	Enabled  bool `json:"enabled"`
	TTLHours int  `json:"ttl_hours"`
	Width    int  `json:"width"`
}

// Microphone configures sound analysis on one microphone.
type Microphone struct {
	SummaryS   int      `json:"summary_s"`
	LoudDBFS   *float64 `json:"loud_dbfs"`
	VoiceSNRDB *float64 `json:"voice_snr_db"`
	// VoiceDetector is "silero" or "periodicity"; empty (absent) is the
	// schema's default.
	VoiceDetector string `json:"voice_detector"`
	// VoiceHangoverMS: nil (absent) is the schema's default.
	VoiceHangoverMS *int   `json:"voice_hangover_ms"`
	Privacy         string `json:"privacy"`
	// RingS is how many seconds of what it heard are kept in memory for
	// audio.clip; nil (absent) is the schema's default.
	RingS *int `json:"ring_s"`
}

// Evidence configures the evidence store: lifetimes by kind on the
// ledger's running clock, a byte budget, what a revoked grant does, and
// the bounds of a snapshot.
type Evidence struct {
	SnapshotLifetimeMin int    `json:"snapshot_lifetime_min"`
	ClipLifetimeMin     int    `json:"clip_lifetime_min"`
	MaxMB               int    `json:"max_mb"`
	OnRevoke            string `json:"on_revoke"`
	SnapshotMaxWidth    int    `json:"snapshot_max_width"`
	SnapshotMaxKB       int    `json:"snapshot_max_kb"`
}

// Ledger configures the event ledger.
type Ledger struct {
	OutboxMaxRows        int               `json:"outbox_max_rows"`
	OutboxAuditWaitDays  int               `json:"outbox_audit_wait_days"`
	TelemetryCommitMS    int               `json:"telemetry_commit_ms"`
	FoldS                int               `json:"fold_s"`
	OutboxMaxMB          int               `json:"outbox_max_mb"`
	TelemetryTTLDays     int               `json:"telemetry_ttl_days"`
	RetentionIntervalMin int               `json:"retention_interval_min"`
	CompactFreeMB        int               `json:"compact_free_mb"`
	AuditKeepDays        int               `json:"audit_keep_days"`
	DiskBudgetMB         int               `json:"disk_budget_mb"`
	PastKeys             int               `json:"past_keys"`
	Classes              map[string]string `json:"classes"`
}

// Log configures logging.
type Log struct {
	Level  string `json:"level"`
	Format string `json:"format"`
}

// SlogLevel converts Level.
func (l Log) SlogLevel() slog.Level {
	var v slog.Level
	if err := v.UnmarshalText([]byte(l.Level)); err != nil {
		return slog.LevelInfo
	}
	return v
}

// Body names the body.
type Body struct {
	Name string `json:"name"`
	// Area is the room or area the body is in ("" unsaid).
	Area string `json:"area"`
}

// Sim configures the simulated board.
type Sim struct {
	Seed           uint64 `json:"seed"`
	ButtonPeriodMS int    `json:"button_period_ms"`
}

// Monitor configures what run prints of the devices.
type Monitor struct {
	IntervalMS int    `json:"interval_ms"`
	Print      string `json:"print"` // terminal, always or never
	Quiet      bool   `json:"quiet"`
}

// Prints tells whether run prints the line of what the devices see, its
// standard output a terminal or not.
func (m Monitor) Prints(terminal bool) bool {
	switch {
	case m.Quiet || m.Print == "never":
		return false
	case m.Print == "always":
		return true
	}
	return terminal
}

// Interval is IntervalMS as a duration.
func (m Monitor) Interval() time.Duration { return time.Duration(m.IntervalMS) * time.Millisecond }

// MQTT configures the uplink to the home server's broker.
type MQTT struct {
	Enabled     bool      `json:"enabled"`
	Broker      string    `json:"broker"`
	ClientID    string    `json:"client_id"`
	Username    string    `json:"username"`
	Password    Secret    `json:"password"`
	KeepaliveS  int       `json:"keepalive_s"`
	TLS         MQTTTLS   `json:"tls"`
	TopicPrefix string    `json:"topic_prefix"`
	Window      int       `json:"window"`
	AckCommitMS int       `json:"ack_commit_ms"`
	Reconnect   Reconnect `json:"reconnect"`
	JSONMirror  []string  `json:"json_mirror"`
	// EmbeddedBroker starts a broker inside the daemon on 127.0.0.1.
	EmbeddedBroker bool          `json:"embedded_broker"`
	EmbeddedPort   int           `json:"embedded_port"`
	HomeAssistant  HomeAssistant `json:"home_assistant"`
	Commands       MQTTCommands  `json:"commands"`
	// BacklogH: when the uplink starts on a ledger that had none, the
	// events of the last this many hours go too.
	BacklogH int `json:"backlog_h"`
}

// MQTTCommands configures the operations the broker may call, and as whom.
type MQTTCommands struct {
	Enabled bool   `json:"enabled"`
	Subject string `json:"subject"`
	Trust   string `json:"trust"`
}

// HomeAssistant configures the uplink's Home Assistant discovery.
type HomeAssistant struct {
	Enabled          bool       `json:"enabled"`
	Prefix           string     `json:"prefix"`
	PerEntity        bool       `json:"per_entity"`
	ConfigurationURL string     `json:"configuration_url"`
	Buttons          []HAButton `json:"buttons"`
}

// HAButton is an action Home Assistant may press.
type HAButton struct {
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	Capability string            `json:"capability"`
	Target     string            `json:"target"`
	Params     map[string]string `json:"params"`
}

// MQTTTLS names the files of the uplink's TLS.
type MQTTTLS struct {
	CAFile     string `json:"ca_file"`
	CertFile   string `json:"cert_file"`
	KeyFile    string `json:"key_file"`
	ServerName string `json:"server_name"`
}

// Reconnect bounds the uplink's backoff between sessions.
type Reconnect struct {
	MinMS int `json:"min_ms"`
	MaxMS int `json:"max_ms"`
}

// Secret holds a value the schema marks sensitive. It never prints: not
// with fmt, not in JSON, not in logs. Reveal gives the value to the one
// place that needs it.
type Secret string

const redacted = "[redacted]"

// Reveal returns the secret.
func (s Secret) Reveal() string { return string(s) }

func (s Secret) mask() string {
	if s == "" {
		return ""
	}
	return redacted
}

func (s Secret) String() string                { return s.mask() }
func (s Secret) GoString() string              { return `config.Secret("` + s.mask() + `")` }
func (s Secret) LogValue() slog.Value          { return slog.StringValue(s.mask()) }
func (s Secret) MarshalJSON() ([]byte, error)  { return json.Marshal(s.mask()) }
func (s Secret) MarshalText() ([]byte, error)  { return []byte(s.mask()), nil }
func (s *Secret) UnmarshalJSON(b []byte) error { return json.Unmarshal(b, (*string)(s)) }
func (s Secret) Format(f fmt.State, verb rune) { fmt.Fprint(f, s.mask()) }

// Default returns the built-in defaults, the lowest layer. They are the
// schema's "default" values; a test keeps the two equal.
func Default() Config {
	return Config{
		Version: 1,
		Board:   "auto",
		DataDir: "/var/lib/tobe-body",
		Log:     Log{Level: "info", Format: "auto"},
		Body:    Body{Name: "tobe-body"},
		Sim:     Sim{Seed: 1, ButtonPeriodMS: 30000},
		Monitor: Monitor{IntervalMS: 1000, Print: "terminal"},
		Ledger: Ledger{OutboxMaxRows: 100000, OutboxMaxMB: 64, OutboxAuditWaitDays: 7, TelemetryCommitMS: 15000, FoldS: 600, TelemetryTTLDays: 7, RetentionIntervalMin: 10, AuditKeepDays: 90, DiskBudgetMB: 2048, PastKeys: 2_000_000,
			CompactFreeMB: 64, Classes: map[string]string{}},
		Sense: Sense{Queue: 256, Self: SelfState{IntervalS: 5, HotC: 80, CriticalC: 85, DiskLowMB: 256, DiskCriticalMB: 32},
			Buttons: Buttons{LongPressMS: 1000, DoublePressMS: 400}, Inputs: Inputs{ActivityWindowS: 10},
			Cameras: map[string]Camera{}, Microphones: map[string]Microphone{},
			Env: Env{IntervalS: 10, SummaryS: 300, Thresholds: []EnvThreshold{
				{Quantity: "humidity_pct", Above: ptr(70.0), Hysteresis: 5},
				{Quantity: "temperature_c", Above: ptr(30.0), Hysteresis: 1},
				{Quantity: "temperature_c", Below: ptr(10.0), Hysteresis: 1}}}},
		Act: Act{Safety: Safety{Forbidden: []Forbidden{}, UnsyncedClockRefuseFrom: "R3"},
			RateLimits: RateLimits{PerPrincipal: RateLimit{Burst: 30, PerSecond: 2}, Default: RateLimit{Burst: 20, PerSecond: 10}, ByCapability: map[string]RateLimit{}},
			Outputs:    map[string]Output{}, ChannelModes: map[string]string{}, CapabilityModes: map[string]string{},
			Principals:    []Principal{{UID: ptr(0), Trust: "max"}, {User: DaemonIdentity, Trust: "max"}, {Group: DaemonIdentity, Trust: "max"}},
			HumanControls: []HumanControl{}, Speakers: map[string]Speaker{}, LEDs: map[string]bool{}},
		Agent: Agent{Enabled: true, HeartbeatMS: 2000, Principals: []AgentPrincipal{},
			Observations: Observations{BatchMS: 5000, Queue: 1000, Rules: []ObservationRule{}}},
		Gate: Gate{ItemBudget: Budget{Max: 6, WindowS: 3600}, GlobalBudget: Budget{Max: 30, WindowS: 3600}, Quiet: []QuietPeriod{},
			MergeS: 120, AnswerWithinS: 1800, NoveltyHalfLifeS: 600, NoveltyRepeats: 5, MinTrust: "low",
			Bands:     map[string]string{"body.hot": "medium", "body.throttled": "medium", "body.disk_low": "high"},
			NoisePool: NoisePool{Per: 8, TTLS: 86400, MaxKeys: 1024}, StaleAfterS: 86400, TickS: 60},
		MQTT: MQTT{Broker: "tcp://127.0.0.1:1883", KeepaliveS: 30, TopicPrefix: "tobe", Window: 64, AckCommitMS: 200,
			Reconnect: Reconnect{MinMS: 1000, MaxMS: 120000}, JSONMirror: []string{}, EmbeddedPort: 1883,
			HomeAssistant: HomeAssistant{Enabled: true, Prefix: "homeassistant", Buttons: []HAButton{}},
			Commands:      MQTTCommands{Subject: "mqtt:home", Trust: "low"}},
		World:    World{Defaults: true, Entities: map[string]WorldEntity{}},
		Evidence: Evidence{SnapshotLifetimeMin: 1440, ClipLifetimeMin: 1440, MaxMB: 256, OnRevoke: "delete", SnapshotMaxWidth: 1920, SnapshotMaxKB: 2048},
	}
}

func ptr[T any](v T) *T { return &v }

// Sources says where the layers are read from. A missing ImageDefault or
// Etc file is skipped; a missing File is an error.
type Sources struct {
	ImageDefault string
	Etc          string
	File         string
	// Lenient skips an optional layer this user may not read, for client
	// commands: a local administrator who may ask the daemon for its
	// status need not be able to read the file that holds its secrets.
	Lenient bool
	// Flags are the values given on the command line, as config keys
	// ({"board": "pi5", "data_dir": "/x"}). Values must already be
	// absolute where the schema wants it.
	Flags map[string]any
}

// DeviceSources are the layers of an installed body.
func DeviceSources() Sources { return Sources{ImageDefault: ImageDefaultPath, Etc: EtcPath} }

// Loaded is a configuration with the layers it came from.
type Loaded struct {
	Config
	// Layers lists the layers that were read, lowest first.
	Layers []string
}

// Load reads the layers of src over the defaults.
func Load(src Sources) (*Loaded, error) {
	l := &Loaded{Layers: []string{"built-in"}}
	merged := map[string]any{}
	for _, layer := range []struct {
		path     string
		optional bool
	}{{src.ImageDefault, true}, {src.Etc, true}, {src.File, false}} {
		if layer.path == "" {
			continue
		}
		doc, err := readLayer(layer.path, layer.optional, src.Lenient)
		if err != nil {
			return nil, err
		}
		if doc == nil {
			continue
		}
		merge(merged, doc.Value.(map[string]any))
		l.Layers = append(l.Layers, layer.path)
	}
	if len(src.Flags) > 0 {
		flags := map[string]any{"version": json.Number("1")}
		for k, v := range src.Flags {
			flags[k] = v
		}
		data, err := json.Marshal(flags)
		if err != nil {
			return nil, fmt.Errorf("config: flags: %w", err)
		}
		doc, err := Check("flags", data)
		if err != nil {
			var es strictjson.Errors
			if errors.As(err, &es) {
				for _, e := range es {
					e.Line, e.Col = 0, 0 // positions in a document the user never wrote
				}
			}
			return nil, err
		}
		merge(merged, doc.Value.(map[string]any))
		l.Layers = append(l.Layers, "flags")
	}
	merged["version"] = json.Number("1")
	l.Config = Default()
	// encoding/json decodes an array into the elements already there, so a
	// default list a layer replaces must go first, or its fields would
	// show through the layer's elements.
	if a, ok := merged["act"].(map[string]any); ok && a["principals"] != nil {
		l.Config.Act.Principals = nil
	}
	if a, ok := merged["agent"].(map[string]any); ok && a["principals"] != nil {
		l.Config.Agent.Principals = nil
	}
	if s, ok := merged["sense"].(map[string]any); ok {
		if e, ok := s["env"].(map[string]any); ok && e["thresholds"] != nil {
			l.Config.Sense.Env.Thresholds = nil
		}
	}
	if err := strictjson.Into(&strictjson.Doc{File: "merged config", Value: merged}, &l.Config); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := l.Config.check(); err != nil {
		return nil, err
	}
	return l, nil
}

// check is what the schema cannot say: limits that must be ordered.
func (c *Config) check() error {
	var errs strictjson.Errors
	bad := func(path, format string, args ...any) {
		errs = append(errs, &strictjson.Error{File: "merged config", Path: path, Reason: fmt.Sprintf(format, args...)})
	}
	if s := c.Sense.Self; s.CriticalC < s.HotC {
		bad("$.sense.self.critical_c", "%g °C is below hot_c (%g °C); critical must be at least hot", s.CriticalC, s.HotC)
	}
	if s := c.Sense.Self; s.DiskCriticalMB > s.DiskLowMB {
		bad("$.sense.self.disk_critical_mb", "%d MiB is above disk_low_mb (%d MiB); critical must be at most low", s.DiskCriticalMB, s.DiskLowMB)
	}
	for i, th := range c.Sense.Env.Thresholds {
		if (th.Above == nil) == (th.Below == nil) {
			bad(fmt.Sprintf("$.sense.env.thresholds[%d]", i), "a threshold is above or below a value: one of them")
		}
	}
	for name, cam := range c.Sense.Cameras {
		seen := map[string]bool{}
		for i, z := range cam.Zones {
			if seen[z.Name] {
				bad(fmt.Sprintf("$.sense.cameras.%s.zones[%d].name", name, i), "zone name %q is used twice", z.Name)
			}
			seen[z.Name] = true
		}
	}
	if l := c.Ledger; l.AuditKeepDays > 0 && l.AuditKeepDays < l.TelemetryTTLDays {
		bad("$.ledger.audit_keep_days", "%d days is below telemetry_ttl_days (%d days): the archive takes the oldest events first, and would wait for retention", l.AuditKeepDays, l.TelemetryTTLDays)
	}
	errs = append(errs, c.Act.check()...)
	errs = append(errs, c.Agent.check()...)
	for i, q := range c.Gate.Quiet {
		if q.From == q.To {
			bad(fmt.Sprintf("$.gate.quiet[%d]", i), "from and to are both %s: the period is empty", q.From)
		}
	}
	errs = append(errs, c.MQTT.check()...)
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// check is what the schema cannot say about the mqtt section.
func (m *MQTT) check() strictjson.Errors {
	var errs strictjson.Errors
	bad := func(path, format string, args ...any) {
		errs = append(errs, &strictjson.Error{File: "merged config", Path: path, Reason: fmt.Sprintf(format, args...)})
	}
	if m.Reconnect.MinMS > m.Reconnect.MaxMS {
		bad("$.mqtt.reconnect.min_ms", "%d ms is above max_ms (%d ms)", m.Reconnect.MinMS, m.Reconnect.MaxMS)
	}
	if (m.TLS.CertFile == "") != (m.TLS.KeyFile == "") {
		bad("$.mqtt.tls", "cert_file and key_file go together: a client certificate needs its key")
	}
	tlsBroker := strings.HasPrefix(m.Broker, "ssl://") || strings.HasPrefix(m.Broker, "tls://") || strings.HasPrefix(m.Broker, "wss://")
	if !tlsBroker && (m.TLS.CAFile != "" || m.TLS.CertFile != "" || m.TLS.ServerName != "") {
		bad("$.mqtt.tls", "set for %s, which is not a TLS broker URL (ssl://, tls:// or wss://): the files would not be used", m.Broker)
	}
	return errs
}

// check is what the schema cannot say about the agent section: a rule
// names exactly one identity, and names are unique.
func (a *Agent) check() strictjson.Errors {
	var errs strictjson.Errors
	seen := map[string]int{}
	for i, p := range a.Principals {
		at := fmt.Sprintf("$.agent.principals[%d]", i)
		n := 0
		for _, set := range []bool{p.UID != nil, p.User != "", p.GID != nil, p.Group != ""} {
			if set {
				n++
			}
		}
		if n != 1 {
			errs = append(errs, &strictjson.Error{File: "merged config", Path: at, Reason: fmt.Sprintf("names %d identities; want exactly one of uid, user, gid or group", n)})
		}
		if j, dup := seen[p.Name]; dup {
			errs = append(errs, &strictjson.Error{File: "merged config", Path: at + ".name", Reason: fmt.Sprintf("%q is the name of $.agent.principals[%d] too", p.Name, j)})
		}
		seen[p.Name] = i
	}
	return errs
}

// check is what the schema cannot say about the act section: a
// principal names exactly one identity, a human control's release and
// key fit its kind, and a resource belongs to one control at most.
func (a *Act) check() strictjson.Errors {
	var errs strictjson.Errors
	bad := func(path, format string, args ...any) {
		errs = append(errs, &strictjson.Error{File: "merged config", Path: path, Reason: fmt.Sprintf(format, args...)})
	}
	for i, p := range a.Principals {
		n := 0
		for _, set := range []bool{p.UID != nil, p.User != "", p.GID != nil, p.Group != ""} {
			if set {
				n++
			}
		}
		if n != 1 {
			bad(fmt.Sprintf("$.act.principals[%d]", i), "names %d identities; want exactly one of uid, user, gid or group", n)
		}
	}
	owner := map[string]int{}
	for i, h := range a.HumanControls {
		at := fmt.Sprintf("$.act.human_controls[%d]", i)
		switch {
		case h.Release == ReleaseAfter && h.AfterS <= 0:
			bad(at+".after_s", "must be > 0 with release \"after\"")
		case h.Release != ReleaseAfter && h.AfterS != 0:
			bad(at+".after_s", "only with release \"after\"")
		}
		isInput := strings.HasPrefix(h.Control, "input.")
		switch {
		case isInput && h.Key == "":
			bad(at+".key", "an input device's control needs the key (KEY_ENTER)")
		case !isInput && h.Key != "":
			bad(at+".key", "only for an input device's control (input.NAME)")
		case !isInput && !strings.HasPrefix(h.Control, "gpio."):
			bad(at+".control", "want a GPIO button (gpio.NAME) or an input device (input.NAME)")
		}
		for j, r := range h.Resources {
			if prev, ok := owner[r]; ok {
				bad(fmt.Sprintf("%s.resources[%d]", at, j), "%s already belongs to human_controls[%d]", r, prev)
				continue
			}
			owner[r] = i
		}
	}
	return errs
}

// readLayer reads and checks one file; a missing optional file is nil, and
// so is an unreadable one when lenient.
func readLayer(path string, optional, lenient bool) (*strictjson.Doc, error) {
	data, err := strictjson.ReadFile(path)
	switch {
	case optional && errors.Is(err, os.ErrNotExist):
		return nil, nil
	case optional && lenient && errors.Is(err, os.ErrPermission):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("config: %w", err)
	}
	return Check(path, data)
}

// CheckFile checks one config file on its own, as `config check` does.
func CheckFile(path string) error {
	_, err := readLayer(path, false, false)
	return err
}

// Check decodes and validates one layer. The error is a strictjson.Errors.
func Check(file string, data []byte) (*strictjson.Doc, error) {
	doc, err := strictjson.Decode(file, data)
	if err != nil {
		return nil, err
	}
	if err := schema().Validate(doc); err != nil {
		return nil, err
	}
	return doc, nil
}

// merge lays src over dst: objects merge key by key, anything else
// replaces.
func merge(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				merge(dm, sm)
				continue
			}
			cp := map[string]any{}
			merge(cp, sm)
			dst[k] = cp
			continue
		}
		dst[k] = v
	}
}

// Error is one problem of a config, at its path; Errors are all of them.
// Checks of a section made elsewhere (act's against the board) report in
// these, so every config error reads the same.
type (
	Error  = strictjson.Error
	Errors = strictjson.Errors
)
