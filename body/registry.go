package body

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// State is where a channel is in its capability lifecycle.
type State string

// The lifecycle states.
const (
	Discovered State = "discovered" // found; not yet allowed to run
	Disabled   State = "disabled"   // turned off by config or an administrator
	Shadow     State = "shadow"     // runs, but actions are only recorded
	Enabled    State = "enabled"    // runs
	Degraded   State = "degraded"   // runs with a problem (dropped frames, slow)
	Offline    State = "offline"    // the device went away; retrying
	Paused     State = "paused"     // let go for privacy (the switch, a pause); Health says why
	Revoked    State = "revoked"    // taken away by an administrator
	Error      State = "error"      // failed; needs a person
)

// transitions lists where each state may go.
var transitions = map[State][]State{
	Discovered: {Disabled, Shadow, Enabled, Offline, Error, Revoked},
	Disabled:   {Shadow, Enabled, Revoked},
	Shadow:     {Enabled, Disabled, Degraded, Offline, Paused, Error, Revoked},
	Enabled:    {Shadow, Disabled, Degraded, Offline, Paused, Error, Revoked},
	Degraded:   {Enabled, Shadow, Disabled, Offline, Paused, Error, Revoked},
	Offline:    {Discovered, Enabled, Shadow, Degraded, Disabled, Paused, Error, Revoked},
	Paused:     {Enabled, Shadow, Degraded, Offline, Disabled, Error, Revoked},
	Error:      {Discovered, Disabled, Offline, Revoked},
	Revoked:    {Disabled},
}

// Valid tells whether s is a lifecycle state.
func (s State) Valid() bool { _, ok := transitions[s]; return ok }

// Errors of the registry.
var (
	ErrDuplicate  = errors.New("body: channel already registered")
	ErrSealed     = errors.New("body: registry is sealed")
	ErrNoChannel  = errors.New("body: no such channel")
	ErrTransition = errors.New("body: state change not allowed")
)

// Channel is one sense or action channel and its state.
type Channel struct {
	ID     string `json:"id"`     // kind.name: camera.front, gpio.relay1
	Kind   string `json:"kind"`   // camera, audio-capture, gpio-in, ...
	Device string `json:"device"` // what it reads or drives
	// Driver is how the device fared at start: Loaded, Skipped or Failed.
	Driver string    `json:"driver"`
	State  State     `json:"state"`
	Health string    `json:"health"` // "ok" or what is wrong
	Since  time.Time `json:"since"`  // when State was entered
}

// Registry holds the channels. Registration happens while the body starts;
// Seal ends it, and a later Register is refused, so nothing appears behind
// the policy's back. State changes go on for the body's life. A Registry is
// safe for concurrent use.
type Registry struct {
	now func() time.Time

	mu     sync.Mutex
	byID   map[string]*Channel
	order  []string
	sealed bool
	// changed is closed, and replaced, when a channel's state or health
	// changes (Changed).
	changed chan struct{}
}

// NewRegistry returns an empty registry; now stamps state changes.
func NewRegistry(now func() time.Time) *Registry {
	return &Registry{now: now, byID: map[string]*Channel{}, changed: make(chan struct{})}
}

// Changed returns a channel that is closed when a channel's state or
// health next changes: read it, then Snapshot, and nothing is missed.
func (r *Registry) Changed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}

// Register adds a channel in its initial state.
func (r *Registry) Register(c Channel) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.sealed:
		return fmt.Errorf("%w: cannot register %q after start", ErrSealed, c.ID)
	case c.ID == "":
		return errors.New("body: a channel needs an id")
	case !c.State.Valid():
		return fmt.Errorf("body: channel %q: unknown state %q", c.ID, c.State)
	}
	if _, dup := r.byID[c.ID]; dup {
		return fmt.Errorf("%w: %q", ErrDuplicate, c.ID)
	}
	if c.Health == "" {
		c.Health = "ok"
	}
	c.Since = r.now()
	r.byID[c.ID] = &c
	r.order = append(r.order, c.ID)
	return nil
}

// Seal ends registration.
func (r *Registry) Seal() {
	r.mu.Lock()
	r.sealed = true
	r.mu.Unlock()
}

// Set moves a channel to state with a health note ("ok" when healthy).
// Staying in the same state only updates the health.
func (r *Registry) Set(id string, state State, health string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.byID[id]
	if !ok {
		return fmt.Errorf("%w: %q", ErrNoChannel, id)
	}
	if health == "" {
		health = "ok"
	}
	if state == c.State && health == c.Health {
		return nil
	}
	if state != c.State {
		if !slices.Contains(transitions[c.State], state) {
			return fmt.Errorf("%w: %s from %s to %s", ErrTransition, id, c.State, state)
		}
		c.State = state
		c.Since = r.now()
	}
	c.Health = health
	close(r.changed)
	r.changed = make(chan struct{})
	return nil
}

// Get returns a copy of one channel.
func (r *Registry) Get(id string) (Channel, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.byID[id]
	if !ok {
		return Channel{}, fmt.Errorf("%w: %q", ErrNoChannel, id)
	}
	return *c, nil
}

// Snapshot returns copies of every channel in registration order.
func (r *Registry) Snapshot() []Channel {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Channel, 0, len(r.order))
	for _, id := range r.order {
		c := *r.byID[id]
		c.Since = c.Since.UTC() // on the wire, times are UTC
		out = append(out, c)
	}
	return out
}
