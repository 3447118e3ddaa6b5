package uplink

import (
	"fmt"
	"time"

	"github.com/fxamacker/cbor/v2"
)

// The world model's documents: one retained document per entity of the
// body's world model (the awareness layer's), on
// .../state/world/<entity id>, set at Start from the model's state now
// and again at each world.changed event. The uplink does not import the
// model: what it needs of it is here, the entities and their state now
// handed in by whoever composes the body, and the world.changed payload
// read by its field names (the event's recorded contract, as the motion
// and sound documents read theirs).

// EventWorldChanged is the type of the event that records a change of an
// entity's state as the world model fuses its sources.
const EventWorldChanged = "world.changed"

// StateWorld is the state name of an entity's document: "world/<id>",
// so a subscriber takes every entity's on .../state/world/#.
func StateWorld(entity string) string { return "world/" + entity }

// WorldEntity is an entity of the world model, as discovery announces it.
type WorldEntity struct {
	// ID is the model's: "room.front", "contact.front_door", "air.hall",
	// "output.relay1", "body".
	ID string
	// Kind is room, door, window, presence, air, output or body.
	Kind string
	// Name is its name in the configuration; Area where it is ("" unsaid).
	Name, Area string
}

// WorldReading is one quantity of the air, with its uncertainty, in Unit.
type WorldReading struct {
	Value       float64 `cbor:"value" json:"value"`
	Uncertainty float64 `cbor:"uncertainty" json:"uncertainty"`
	Unit        string  `cbor:"unit" json:"unit"`
}

// WorldState is an entity's state as the model fuses its sources.
type WorldState struct {
	Entity string `json:"entity"`
	Kind   string `json:"kind"`
	// Value is one of the kind's values, or "unknown": nothing observed
	// it, or what was observed expired. Air has Readings instead.
	Value    string                  `json:"value"`
	Readings map[string]WorldReading `json:"readings,omitempty"`
	// Confidence is 0..1; Provenance observed, verified, told, or
	// inferred when the sources disagree (Conflict).
	Confidence float64 `json:"confidence"`
	Provenance string  `json:"provenance"`
	Conflict   bool    `json:"conflict"`
	// Since is when the value became this (null: not known).
	Since *time.Time `json:"since"`
}

// WorldDoc is an entity's retained document (state/world/<id>): its
// state, when the document was made, and whether the body's wall clock
// was synchronised then (when not, made_at and since may be off by any
// amount).
type WorldDoc struct {
	WorldState
	Made
}

// worldChanged are the fields of a world.changed payload the documents
// read; the rest (was, observed, sources, records, at) is left alone.
type worldChanged struct {
	Entity     string                  `cbor:"entity"`
	Kind       string                  `cbor:"kind"`
	Value      string                  `cbor:"value"`
	Readings   map[string]WorldReading `cbor:"readings"`
	Confidence float64                 `cbor:"confidence"`
	Provenance string                  `cbor:"provenance"`
	Conflict   bool                    `cbor:"conflict"`
	Since      int64                   `cbor:"since"`
}

// DecodeWorldChanged reads the state a world.changed payload (CBOR)
// says. An error says the payload is not one: not CBOR of a map, or no
// entity.
func DecodeWorldChanged(payload []byte) (WorldState, error) {
	var c worldChanged
	if err := cbor.Unmarshal(payload, &c); err != nil {
		return WorldState{}, fmt.Errorf("uplink: %s payload: %w", EventWorldChanged, err)
	}
	if c.Entity == "" {
		return WorldState{}, fmt.Errorf("uplink: %s payload names no entity", EventWorldChanged)
	}
	st := WorldState{Entity: c.Entity, Kind: c.Kind, Value: c.Value, Readings: c.Readings, Confidence: c.Confidence,
		Provenance: c.Provenance, Conflict: c.Conflict}
	if c.Since != 0 {
		t := time.Unix(0, c.Since).UTC()
		st.Since = &t
	}
	return st, nil
}
