package uplink

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/ledger"
)

// States keeps the relay's retained state documents: the e-stop's (every
// second, and at once on an e-stop event), the board's own and the
// outbox's (every 5 s), the motion and sound documents the events after
// After make, and one document per entity of the world model (set at
// Start from WorldNow, then at each world.changed after After). Nothing
// is read from history: a document starts as the body is now (no motion,
// no voice; each entity's state as the model's projection holds it).
// With Home Assistant's discovery on, the entities are announced at
// Start and again when a grant changes (what the broker's principal may
// press).
//
// Fill it, call Start once, then run Tick and Follow, each on its own
// goroutine, until their contexts end.
type States struct {
	Relay *Relay
	Store *ledger.Store
	After uint64
	// Board is what the body has, for the documents and the entities.
	Board Board
	// HomeAssistant, when not nil, is the discovery announced.
	HomeAssistant *HomeAssistant
	// Commands: the broker may command (mqtt.commands), so Home
	// Assistant gets what commands (see commandEntities).
	Commands bool
	// Buttons are the configured buttons; MayPress says which of them,
	// of the signals and of the outputs the broker's principal may press
	// or switch now (nil: none).
	Buttons  []Button
	MayPress func(capability, target string) bool
	// EStop reads the e-stop (its State is set here); nil without one.
	EStop func() EStopState
	// Privacy reads the privacy state; nil: the body has none.
	Privacy func() PrivacyDoc
	// MayView says whether the broker's principal may look at a
	// camera's evidence (an evidence.view grant of its own), and
	// Snapshot gives it the bytes of a snapshot, recording the look
	// (evidence.viewed); nil: no snapshot goes to the broker. A camera
	// it may look at gets an image entity of its last snapshot.
	MayView  func(camera string) bool
	Snapshot func(id string) ([]byte, error)
	// Self is the last self-state sample, if there is one.
	Self func() (body.SelfState, bool)
	// WorldNow reads the state now of every entity of the world model
	// (Board.World), from its projection; nil: no world documents at
	// Start. An error is logged, and the documents wait for the
	// entities' next changes.
	WorldNow func() ([]WorldState, error)
	// Clock stamps a world document: the wall time it is made at, and
	// whether the wall clock is synchronised; nil: the wall time, not
	// known to be synchronised.
	Clock func() body.Stamp
	Log   *slog.Logger

	// Announced is the file that keeps the entities last announced
	// (their ids, platforms and areas), so that one gone since the body
	// last ran is removed from Home Assistant; "": kept in memory only.
	Announced string

	tracker *Tracker
	pressed []string // the buttons last announced
	// ever are the entities announced in this run, or last announced
	// before it (Announced): the ones gone are removed at every
	// announcement of the run, since Home Assistant may not have been
	// there for the first.
	ever map[string]Entity
	// sent is each document as last published, its Made left out, and
	// when; selfAt the self-state sample last published.
	sentMu sync.Mutex
	sent   map[string]sentDoc
	selfAt hal.Mono
	// shown is the snapshot published for each camera now, by id.
	shown map[string]string
}

// Start announces the entities, when Home Assistant's discovery is on,
// and sets every document as the body is now. An error is the
// announcement's.
func (s *States) Start() error {
	var envs []string
	for _, e := range s.Board.Env {
		envs = append(envs, e.ID)
	}
	s.tracker = NewTracker(s.Board.Cameras, s.Board.Mics, envs)
	if err := s.announce(); err != nil {
		return err
	}
	// Made now: each says the channel's state as the body starts (no
	// motion, no voice, no reading yet), which is known now.
	for name, doc := range s.tracker.Docs() {
		*doc.made() = s.now()
		s.set(name, doc, 0)
	}
	s.worldNow()
	s.estop()
	s.privacy()
	s.board()
	s.outputs()
	return nil
}

// outputs sets each output's document from its line, read back: when it
// changed, and at least every RefreshEvery.
func (s *States) outputs() {
	for _, o := range s.Board.Outputs {
		doc := OutputDocOf(o)
		doc.Made = s.now()
		s.set(StateOutput(o.ID), &doc, RefreshEvery)
	}
}

func (s *States) privacy() {
	if s.Privacy != nil {
		doc := s.Privacy()
		doc.Made = s.now()
		s.set(StatePrivacy, &doc, RefreshEvery)
	}
}

// RefreshEvery is how often the documents the body reads of itself (the
// e-stop's, the privacy state's, the outbox's) are made again when
// nothing in them changed: their period, for expire_after.
const RefreshEvery = 10 * time.Second

// Tick reads the e-stop every second, the board's sample, the outbox and
// the privacy state every 5 s, each document published when it changed
// and at least every RefreshEvery (the board's at each new sample), until
// ctx ends.
func (s *States) Tick(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.estop()
		s.outputs()
		if n%5 == 0 {
			s.board()
			s.privacy()
		}
	}
}

// Follow follows the ledger after After until ctx ends: an e-stop event
// sets its document, a grant's announces the buttons again, a camera's
// or a microphone's sets the document it changed, and a world.changed
// sets its entity's.
func (s *States) Follow(ctx context.Context) {
	types := append(s.tracker.Types(), "estop.", "grant.", "privacy.", "evidence.", EventWorldChanged)
	if len(s.Board.Outputs) > 0 {
		types = append(types, outputMovers...)
	}
	if len(s.Board.Controls) > 0 {
		types = append(types, ControlTypes...)
	}
	f := ledger.Filter{After: s.After, Types: types}
	err := s.Store.Follow(ctx, f, func(e ledger.Stored) error {
		if ce, ok := ControlEventOf(e.Event, s.Board.Controls); ok {
			s.control(e.ChannelID, ce)
			return nil
		}
		switch {
		case e.Type == EventWorldChanged:
			s.worldChanged(e.Event)
			return nil
		case strings.HasPrefix(e.Type, "estop."):
			s.estop()
			s.outputs()
			return nil
		case slices.Contains(outputMovers, e.Type):
			s.outputs()
			return nil
		case strings.HasPrefix(e.Type, "privacy."):
			s.privacy()
			return nil
		case strings.HasPrefix(e.Type, "evidence."):
			s.evidence(e.Event)
			return nil
		case strings.HasPrefix(e.Type, "grant."):
			// What the broker's principal may press has changed.
			if err := s.announce(); err != nil {
				s.Log.Error("Home Assistant buttons", "err", err)
			}
			return nil
		}
		if name, doc, ok := s.tracker.Event(e.Event); ok {
			s.set(name, doc, 0)
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		s.Log.Error("uplink state: following the ledger", "err", err)
	}
}

// evidenceFields are what the uplink reads of evidence events.
type evidenceFields struct {
	ID     string `cbor:"id"`
	Kind   string `cbor:"kind"`
	Source string `cbor:"source"`
}

// evidence publishes a new snapshot of a camera the broker's principal
// may look at (its image entity's picture), recording the look, and
// takes a camera's picture away when that snapshot ends.
func (s *States) evidence(e ledger.Event) {
	if s.MayView == nil || s.Snapshot == nil {
		return
	}
	var f evidenceFields
	if cbor.Unmarshal(e.Payload, &f) != nil || f.ID == "" {
		return
	}
	topic := func(camera string) string { return s.Relay.Options().ImageTopic(camera) }
	if e.Type != "evidence.captured" {
		for camera, id := range s.shown {
			if id == f.ID && e.Type != "evidence.viewed" {
				s.Relay.Retain(topic(camera), nil)
				delete(s.shown, camera)
			}
		}
		return
	}
	if f.Kind != "snapshot" || !s.MayView(f.Source) {
		return
	}
	b, err := s.Snapshot(f.ID)
	if err != nil {
		s.Log.Warn("a snapshot was not sent to the broker", "id", f.ID, "err", err)
		return
	}
	if s.shown == nil {
		s.shown = map[string]string{}
	}
	s.shown[f.Source] = f.ID
	s.Relay.Retain(topic(f.Source), b)
}

// announce sends Home Assistant's discovery, with the buttons the
// broker's principal may press now.
func (s *States) announce() error {
	if s.HomeAssistant == nil {
		return nil
	}
	es := s.Relay.Options().Entities(s.Board)
	if s.Commands {
		cs, err := s.Relay.Options().commandEntities(s.Board, s.MayPress)
		if err != nil {
			return err
		}
		es = append(es, cs...)
	}
	var names []string
	for _, btn := range s.pressable() {
		e, err := s.Relay.Options().ButtonEntity(btn)
		if err != nil {
			return err
		}
		es = append(es, e)
		names = append(names, btn.ID)
	}
	if !slices.Equal(names, s.pressed) {
		s.Log.Info("Home Assistant buttons", "pressable", names)
		s.pressed = names
	}
	if s.MayView != nil && s.Snapshot != nil {
		for _, camera := range slices.Sorted(maps.Keys(s.Board.Cameras)) {
			if s.MayView(camera) {
				es = append(es, s.Relay.Options().ImageEntity(camera))
			} else if _, ok := s.shown[camera]; ok {
				// The grant is gone: so is the picture.
				s.Relay.Retain(s.Relay.Options().ImageTopic(camera), nil)
				delete(s.shown, camera)
			}
		}
	}
	return s.Relay.Announce(*s.HomeAssistant, es, s.gone(es)...)
}

// announcedFile is what Announced keeps.
type announcedFile struct {
	Entities []announcedEntity `json:"entities"`
}

type announcedEntity struct {
	ID       string `json:"id"`
	Platform string `json:"p"`
	Area     string `json:"area,omitempty"`
}

// gone are the entities announced before, in this run or the last, that
// es has not, and keeps es as the last announced. A file that cannot be
// read is logged and taken as empty; one that cannot be written, logged.
func (s *States) gone(es []Entity) []Entity {
	if s.ever == nil {
		s.ever = map[string]Entity{}
		if s.Announced != "" {
			var f announcedFile
			b, err := os.ReadFile(s.Announced)
			if err == nil {
				err = json.Unmarshal(b, &f)
			}
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				s.Log.Warn("Home Assistant: the entities announced before cannot be read; one gone since will stay there until removed by hand", "file", s.Announced, "err", err)
			}
			for _, e := range f.Entities {
				s.ever[e.ID] = Entity{ID: e.ID, Platform: e.Platform, Area: e.Area}
			}
		}
	}
	now := map[string]bool{}
	var f announcedFile
	for _, e := range es {
		now[e.ID] = true
		f.Entities = append(f.Entities, announcedEntity{ID: e.ID, Platform: e.Platform, Area: e.Area})
	}
	var gone []Entity
	for _, id := range slices.Sorted(maps.Keys(s.ever)) {
		if !now[id] {
			gone = append(gone, s.ever[id])
		}
	}
	for _, e := range es {
		s.ever[e.ID] = Entity{ID: e.ID, Platform: e.Platform, Area: e.Area}
	}
	if s.Announced != "" {
		b, err := json.Marshal(f)
		if old, rerr := os.ReadFile(s.Announced); err == nil && (rerr != nil || string(old) != string(b)) {
			err = body.WriteFileAtomic(s.Announced, b, 0o640)
		}
		if err != nil {
			s.Log.Warn("Home Assistant: the entities announced cannot be kept", "file", s.Announced, "err", err)
		}
	}
	return gone
}

// outputMovers are the events after which an output may be elsewhere:
// an action's end (the runner's, a lease's) and a person's takeover.
var outputMovers = []string{"action.succeeded", "action.failed", "action.unknown", "action.cancelled", "action.compensated", "lease.human_takeover", "lease.human_released"}

// pressable are the buttons MayPress lets the broker's principal press:
// the configured ones, then the signals whose ids they do not take; none
// without commands.
func (s *States) pressable() []Button {
	if s.MayPress == nil || !s.Commands {
		return nil
	}
	var out []Button
	taken := map[string]bool{}
	for _, b := range append(slices.Clone(s.Buttons), s.Board.Signals()...) {
		if !taken[b.ID] && s.MayPress(b.Capability, b.Target) {
			out = append(out, b)
		}
		taken[b.ID] = true
	}
	return out
}

// control tells a control's event, as it happens: to no one when the
// relay is not connected.
func (s *States) control(channel string, ce ControlEvent) {
	b, err := json.Marshal(ce)
	if err != nil {
		s.Log.Error("uplink control", "channel", channel, "err", err)
		return
	}
	if err := s.Relay.Fire(s.Relay.Options().ControlTopic(channel), b); err != nil {
		s.Log.Debug("a control's event was not told", "channel", channel, "event", ce.EventType, "err", err)
	}
}

// sentDoc is a document as last published.
type sentDoc struct {
	body string
	at   time.Time
}

// set publishes doc as it is stamped, unless every is not zero and the
// document, its Made aside, is what was published less than every ago.
func (s *States) set(name string, doc Stamped, every time.Duration) {
	m := *doc.made()
	*doc.made() = Made{}
	b, err := json.Marshal(doc)
	*doc.made() = m
	if err != nil {
		s.Log.Error("uplink state", "name", name, "err", err)
		return
	}
	now := time.Now()
	s.sentMu.Lock()
	last, ok := s.sent[name]
	if every > 0 && ok && last.body == string(b) && now.Sub(last.at) < every {
		s.sentMu.Unlock()
		return
	}
	if s.sent == nil {
		s.sent = map[string]sentDoc{}
	}
	s.sent[name] = sentDoc{string(b), now}
	s.sentMu.Unlock()
	if err := s.Relay.SetState(name, doc); err != nil {
		s.Log.Error("uplink state", "name", name, "err", err)
	}
}

// now is a Made of this moment, by the body's clock.
func (s *States) now() Made {
	if s.Clock != nil {
		st := s.Clock()
		return Made{At: st.UTC, ClockSynced: !st.Unsynced}
	}
	return Made{At: time.Now().UTC()}
}

// worldNow sets every entity's document from the model's state now.
func (s *States) worldNow() {
	if s.WorldNow == nil || len(s.Board.World) == 0 {
		return
	}
	states, err := s.WorldNow()
	if err != nil {
		s.Log.Error("uplink state: the world model's state now; each entity's document waits for its next change", "err", err)
		return
	}
	for _, st := range states {
		s.setWorld(st)
	}
}

// worldChanged sets the document of the entity a world.changed names.
func (s *States) worldChanged(e ledger.Event) {
	st, err := DecodeWorldChanged(e.Payload)
	if err != nil {
		s.Log.Error("uplink state", "event", e.ID, "err", err)
		return
	}
	s.setWorld(st)
}

// setWorld sets an entity's document, stamped now; an entity the model
// given does not have (one it no longer keeps) has none.
func (s *States) setWorld(st WorldState) {
	if !slices.ContainsFunc(s.Board.World, func(w WorldEntity) bool { return w.ID == st.Entity }) {
		return
	}
	doc := WorldDoc{WorldState: st, Made: s.now()}
	s.set(StateWorld(st.Entity), &doc, 0)
}

func (s *States) estop() {
	if s.EStop == nil {
		return
	}
	doc := s.EStop()
	doc.State = "armed"
	if doc.Latched {
		doc.State = "latched"
	}
	doc.Made = s.now()
	s.set(StateEStop, &doc, RefreshEvery)
}

func (s *States) board() {
	// The board's document is made at each new sample and only then: a
	// self-state channel that stops makes it go stale.
	if self, ok := s.Self(); ok && self.At != s.selfAt {
		s.selfAt = self.At
		doc := SelfDocOf(self)
		doc.Made = s.now()
		s.set(StateSelf, &doc, 0)
	}
	if st, err := s.Store.Stats(); err == nil {
		doc := OutboxState{Made: s.now(), Rows: st.OutboxRows, Bytes: st.OutboxBytes}
		s.set(StateOutbox, &doc, RefreshEvery)
	}
}

// SelfDocOf is the board's state document from a self-state sample: the
// CPU's temperature is its zone's when the board names one, else the
// hottest zone's.
func SelfDocOf(s body.SelfState) SelfDoc {
	doc := SelfDoc{Level: s.Level.String(), Why: s.Why, CPU: s.CPU, Load1: s.Load1,
		DiskFreeMB: float64(s.DiskFree) / (1 << 20), MemFreeMB: float64(s.MemAvailable) / (1 << 20)}
	zones := slices.Sorted(maps.Keys(s.Temps))
	if i := slices.IndexFunc(zones, func(z string) bool {
		z = strings.ToLower(z)
		return strings.Contains(z, "cpu") || strings.Contains(z, "pkg")
	}); i >= 0 {
		c := s.Temps[zones[i]]
		doc.CPUTempC = &c
	} else {
		for _, z := range zones {
			if c := s.Temps[z]; doc.CPUTempC == nil || c > *doc.CPUTempC {
				doc.CPUTempC = &c
			}
		}
	}
	if s.Throttle != nil {
		doc.Throttled = s.Throttle.Any()
	}
	return doc
}
