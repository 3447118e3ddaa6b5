package uplink

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/tobe-body/tobe-body/ledger"
)

// The retained state documents, JSON on .../state/<name>: what a
// dashboard shows now. Home Assistant's entities read their fields (see
// Discovery), so a field's name and meaning are part of the contract.

// Made is when a document was made and whether the body's wall clock
// was synchronised then (when not, made_at may be off by any amount):
// every document carries it. A document is made from what it says: a
// channel's document at the channel's event (a summary's time, even when
// nothing in it changed), the board's at its sample, the e-stop's, the
// privacy state's and the outbox's when they are read. So a dashboard
// tells a stale value from a fresh one by made_at, and Home Assistant's
// sensors by expire_after, without relying on the body's connection.
type Made struct {
	At          time.Time `json:"made_at"`
	ClockSynced bool      `json:"clock_synced"`
}

func (m *Made) made() *Made { return m }

// Stamped is a document that carries its Made.
type Stamped interface{ made() *Made }

// State names.
const (
	StateEStop  = "estop"
	StateSelf   = "body.self"
	StateOutbox = "outbox"
	// StatePrivacy is whether the cameras and microphones are paused.
	StatePrivacy = "privacy"
)

// PrivacyDoc is whether the body's cameras and microphones are paused
// (state/privacy): by the hardware switch (Switch), or a pause; Why says
// it for people.
type PrivacyDoc struct {
	Made
	Paused bool   `json:"paused"`
	Switch bool   `json:"switch"`
	Why    string `json:"why,omitempty"`
}

// EStopState is the e-stop's state (state/estop).
type EStopState struct {
	Made
	// State is "armed" or "latched".
	State   string `json:"state"`
	Latched bool   `json:"latched"`
	// Why says what latched it; WiringFault a contact's fault.
	Why         string `json:"why,omitempty"`
	WiringFault string `json:"wiring_fault,omitempty"`
	Main        string `json:"main"`
	Second      string `json:"second,omitempty"`
	Trips       uint64 `json:"trips"`
}

// MotionState is a camera's motion now (state/<camera channel>): in
// each of its zones, and anywhere.
type MotionState struct {
	Made
	Motion bool            `json:"motion"`
	Zones  map[string]bool `json:"zones"`
}

// SoundState is a microphone's sound (state/<microphone channel>): the
// last summary's levels, and whether a voice or a loud sound is on now.
type SoundState struct {
	Made
	LevelDBFS *float64 `json:"level_dbfs"`
	PeakDBFS  *float64 `json:"peak_dbfs"`
	Voice     bool     `json:"voice"`
	Loud      bool     `json:"loud"`
}

// SelfDoc is the board's own state (state/body.self).
type SelfDoc struct {
	Made
	Level      string   `json:"level"`
	Why        []string `json:"why,omitempty"`
	CPU        float64  `json:"cpu"`
	Load1      float64  `json:"load1"`
	CPUTempC   *float64 `json:"cpu_temp_c"`
	DiskFreeMB float64  `json:"disk_free_mb"`
	MemFreeMB  float64  `json:"mem_available_mb"`
	Throttled  bool     `json:"throttled"`
}

// OutboxState is what waits for the uplink (state/outbox).
type OutboxState struct {
	Made
	Rows  uint64 `json:"rows"`
	Bytes uint64 `json:"bytes"`
}

// EnvDoc is an environment sensor's last reading (state/<env channel>):
// each quantity it measures, null until its first env.reading.
type EnvDoc struct {
	Made
	TemperatureC *float64 `json:"temperature_c"`
	HumidityPct  *float64 `json:"humidity_pct"`
	PressureHPA  *float64 `json:"pressure_hpa"`
}

// Tracker follows the body's events and keeps the motion, sound and air
// documents they make. It starts with no motion, no voice, no level and
// no reading. A channel's summary (camera.summary, audio.level,
// env.reading) makes its document again, changed or not, so the
// document's age is the channel's.
type Tracker struct {
	motion map[string]*MotionState
	sound  map[string]*SoundState
	env    map[string]*EnvDoc
}

// NewTracker tracks cameras (channel id → its zones), microphones and
// environment sensors.
func NewTracker(cameras map[string][]string, mics, envs []string) *Tracker {
	t := &Tracker{motion: map[string]*MotionState{}, sound: map[string]*SoundState{}, env: map[string]*EnvDoc{}}
	for id, zones := range cameras {
		m := &MotionState{Zones: map[string]bool{}}
		for _, z := range zones {
			m.Zones[z] = false
		}
		t.motion[id] = m
	}
	for _, id := range mics {
		t.sound[id] = &SoundState{}
	}
	for _, id := range envs {
		t.env[id] = &EnvDoc{}
	}
	return t
}

// Docs returns every document: name → document.
func (t *Tracker) Docs() map[string]Stamped {
	out := map[string]Stamped{}
	for id, m := range t.motion {
		out[id] = m
	}
	for id, s := range t.sound {
		out[id] = s
	}
	for id, e := range t.env {
		out[id] = e
	}
	return out
}

// Types are the event types Event reads, as a ledger.Filter selects
// them (a prefix ends in a dot).
func (t *Tracker) Types() []string {
	return []string{"camera.motion_started", "camera.motion_ended", "camera.summary", "audio.", "env.reading"}
}

// payloadFields are the fields of the payloads the tracker reads; the
// rest of a payload is left alone (the ledger's own decoder refuses
// fields a struct does not name).
type payloadFields struct {
	Zone        string   `cbor:"zone"`
	RMS         *float64 `cbor:"rms_dbfs"`
	Peak        *float64 `cbor:"peak_dbfs"`
	Temperature *float64 `cbor:"temperature_c"`
	Humidity    *float64 `cbor:"humidity_pct"`
	Pressure    *float64 `cbor:"pressure_hpa"`
}

func readFields(raw []byte, p *payloadFields) error { return cbor.Unmarshal(raw, p) }

// MadeOf is the Made of a document made at e: its time, and whether the
// body's clock was synchronised when it was stamped.
func MadeOf(e *ledger.Event) Made {
	return Made{At: e.Occurred(), ClockSynced: !e.ClockUnsynced}
}

// Event updates the documents from e and returns the one it made, stamped
// with e's time.
func (t *Tracker) Event(e ledger.Event) (name string, doc Stamped, changed bool) {
	var p payloadFields
	switch {
	case e.Type == "camera.summary":
		m := t.motion[e.ChannelID]
		if m == nil {
			return "", nil, false
		}
		m.Made = MadeOf(&e)
		return e.ChannelID, m, true
	case strings.HasPrefix(e.Type, "camera.motion_"):
		m := t.motion[e.ChannelID]
		if m == nil || readFields(e.Payload, &p) != nil || p.Zone == "" {
			return "", nil, false
		}
		on := e.Type == "camera.motion_started"
		if e.Type != "camera.motion_started" && e.Type != "camera.motion_ended" {
			return "", nil, false
		}
		if was, ok := m.Zones[p.Zone]; ok && was == on {
			return "", nil, false
		}
		m.Zones[p.Zone] = on
		m.Motion = slices.Contains(slices.Collect(maps.Values(m.Zones)), true)
		m.Made = MadeOf(&e)
		return e.ChannelID, m, true
	case strings.HasPrefix(e.Type, "audio."):
		s := t.sound[e.ChannelID]
		if s == nil {
			return "", nil, false
		}
		switch e.Type {
		case "audio.level":
			if readFields(e.Payload, &p) != nil || p.RMS == nil {
				return "", nil, false
			}
			s.LevelDBFS, s.PeakDBFS = p.RMS, p.Peak
		case "audio.voice_started", "audio.voice_ended":
			s.Voice = e.Type == "audio.voice_started"
		case "audio.loud", "audio.loud_ended":
			s.Loud = e.Type == "audio.loud"
		default:
			return "", nil, false
		}
		s.Made = MadeOf(&e)
		return e.ChannelID, s, true
	case e.Type == "env.reading":
		d := t.env[e.ChannelID]
		if d == nil || readFields(e.Payload, &p) != nil {
			return "", nil, false
		}
		// What the reading holds: a quantity it lacks is null, not the
		// last one made new.
		d.TemperatureC, d.HumidityPct, d.PressureHPA = p.Temperature, p.Humidity, p.Pressure
		d.Made = MadeOf(&e)
		return e.ChannelID, d, true
	}
	return "", nil, false
}
