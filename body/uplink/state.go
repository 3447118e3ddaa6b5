package uplink

import (
	"maps"
	"slices"
	"strings"

	"github.com/fxamacker/cbor/v2"

	"github.com/tobe-body/tobe-body/ledger"
)

// The retained state documents, JSON on .../state/<name>: what a
// dashboard shows now. Home Assistant's entities read their fields (see
// Discovery), so a field's name and meaning are part of the contract.

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
	Paused bool   `json:"paused"`
	Switch bool   `json:"switch"`
	Why    string `json:"why,omitempty"`
}

// EStopState is the e-stop's state (state/estop).
type EStopState struct {
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
	Motion bool            `json:"motion"`
	Zones  map[string]bool `json:"zones"`
}

// SoundState is a microphone's sound (state/<microphone channel>): the
// last summary's levels, and whether a voice or a loud sound is on now.
type SoundState struct {
	LevelDBFS *float64 `json:"level_dbfs"`
	PeakDBFS  *float64 `json:"peak_dbfs"`
	Voice     bool     `json:"voice"`
	Loud      bool     `json:"loud"`
}

// SelfDoc is the board's own state (state/body.self).
type SelfDoc struct {
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
	Rows  uint64 `json:"rows"`
	Bytes uint64 `json:"bytes"`
}

// Tracker follows the body's events and keeps the motion and sound
// documents they make. It starts with no motion, no voice and no level.
type Tracker struct {
	motion map[string]*MotionState
	sound  map[string]*SoundState
}

// NewTracker tracks cameras (channel id → its zones) and microphones.
func NewTracker(cameras map[string][]string, mics []string) *Tracker {
	t := &Tracker{motion: map[string]*MotionState{}, sound: map[string]*SoundState{}}
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
	return t
}

// Docs returns every document: name → document.
func (t *Tracker) Docs() map[string]any {
	out := map[string]any{}
	for id, m := range t.motion {
		out[id] = m
	}
	for id, s := range t.sound {
		out[id] = s
	}
	return out
}

// Types are the event types Event reads, as a ledger.Filter selects
// them (a prefix ends in a dot).
func (t *Tracker) Types() []string {
	return []string{"camera.motion_started", "camera.motion_ended", "audio."}
}

// payloadFields are the fields of the payloads the tracker reads; the
// rest of a payload is left alone (the ledger's own decoder refuses
// fields a struct does not name).
type payloadFields struct {
	Zone string   `cbor:"zone"`
	RMS  *float64 `cbor:"rms_dbfs"`
	Peak *float64 `cbor:"peak_dbfs"`
}

func readFields(raw []byte, p *payloadFields) error { return cbor.Unmarshal(raw, p) }

// Event updates the documents from e and returns the one it changed.
func (t *Tracker) Event(e ledger.Event) (name string, doc any, changed bool) {
	var p payloadFields
	switch {
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
		return e.ChannelID, s, true
	}
	return "", nil, false
}
