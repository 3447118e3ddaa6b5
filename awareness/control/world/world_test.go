package world

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/awareness/control/gate"
	"github.com/tobe-body/tobe-body/awareness/control/wait"
	"github.com/tobe-body/tobe-body/awareness/control/work"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/ledger"
	"github.com/tobe-body/tobe-body/sense"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var simFacts = Facts{Cameras: map[string][]string{"camera.front": {"left", "right door"}}, Microphones: []string{"audio.mic"},
	Lines: []string{"gpio.door"}, EnvSensors: []string{"env.air"}, Outputs: []string{"gpio.relay1"},
	CameraSummary: time.Minute, MicSummary: 10 * time.Second, EnvSummary: 5 * time.Minute}

func ids(m *Model) string {
	var out []string
	for _, e := range m.Entities() {
		s := e.ID + "<"
		for i, src := range e.Sources {
			if i > 0 {
				s += ","
			}
			s += src.ID()
		}
		out = append(out, s+">")
	}
	return strings.Join(out, " ")
}

func TestBuild(t *testing.T) {
	off := false
	neg := -1
	for _, tc := range []struct {
		name    string
		c       Config
		want    string // the entities, or the error's words
		wantErr bool
	}{
		{"defaults", Config{},
			"air.air<env.air> body<body.self> output.relay1<gpio.relay1> room.front-left<camera.front#left> room.front-right-door<camera.front#right door> room.mic<audio.mic>", false},
		{"a room takes a zone and the microphone from the defaults", Config{Entities: map[string]EntityConfig{
			"kitchen": {Kind: "room", Sources: []Source{{Channel: "camera.front", Zone: "left"}, {Channel: "audio.mic"}}},
			"front":   {Kind: "door", Sources: []Source{{Channel: "gpio.door"}}, Area: "hall"}}},
			"air.air<env.air> body<body.self> contact.front<gpio.door> output.relay1<gpio.relay1> room.front-right-door<camera.front#right door> room.kitchen<camera.front#left,audio.mic>", false},
		{"no defaults", Config{Defaults: &off, Entities: map[string]EntityConfig{"hall": {Kind: "air", Sources: []Source{{Channel: "env.air"}}}}},
			"air.hall<env.air> body<body.self>", false},
		{"a kind that is not", Config{Entities: map[string]EntityConfig{"x": {Kind: "garage", Sources: []Source{{Channel: "gpio.door"}}}}},
			`$.world.entities.x.kind: "garage" is not a kind`, true},
		{"a channel the body has not", Config{Entities: map[string]EntityConfig{"x": {Kind: "door", Sources: []Source{{Channel: "gpio.nope"}}}}},
			`$.world.entities.x.sources[0]: channel "gpio.nope" is not a channel of this body`, true},
		{"a zone the camera has not", Config{Entities: map[string]EntityConfig{"x": {Kind: "room", Sources: []Source{{Channel: "camera.front", Zone: "up"}}}}},
			`$.world.entities.x.sources[0]: zone "up" is not a zone of camera.front`, true},
		{"a camera without a zone", Config{Entities: map[string]EntityConfig{"x": {Kind: "room", Sources: []Source{{Channel: "camera.front"}}}}},
			`$.world.entities.x.sources[0]: a camera feeds a room through one of its zones`, true},
		{"a door on a microphone", Config{Entities: map[string]EntityConfig{"x": {Kind: "door", Sources: []Source{{Channel: "audio.mic"}}}}},
			`$.world.entities.x.sources[0]: audio.mic is not an input line`, true},
		{"the body declared", Config{Entities: map[string]EntityConfig{"me": {Kind: "body"}}},
			`$.world.entities.me.kind: the body is one entity`, true},
		{"no source", Config{Entities: map[string]EntityConfig{"x": {Kind: "door"}}},
			`$.world.entities.x.sources: an entity needs at least one source`, true},
		{"a source twice", Config{Entities: map[string]EntityConfig{"x": {Kind: "door", Sources: []Source{{Channel: "gpio.door"}, {Channel: "gpio.door"}}}}},
			`$.world.entities.x.sources[1]: gpio.door is named twice`, true},
		{"a negative expiry", Config{Entities: map[string]EntityConfig{"x": {Kind: "door", Sources: []Source{{Channel: "gpio.door"}}, ExpireAfterS: &neg}}},
			`$.world.entities.x.expire_after_s: -1 is negative`, true},
		{"a bad name", Config{Entities: map[string]EntityConfig{"Front Door": {Kind: "door", Sources: []Source{{Channel: "gpio.door"}}}}},
			`$.world.entities.Front Door: a name is lower-case`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Build(tc.c, simFacts)
			switch {
			case tc.wantErr && err == nil:
				t.Fatalf("got %s, want an error saying %q", ids(m), tc.want)
			case tc.wantErr && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("got %v, want it to say %q", err, tc.want)
			case !tc.wantErr && err != nil:
				t.Fatal(err)
			case !tc.wantErr && ids(m) != tc.want:
				t.Fatalf("got %s\nwant %s", ids(m), tc.want)
			}
		})
	}
	m, _ := Build(Config{}, simFacts)
	for id, want := range map[string]time.Duration{"room.front-left": MinExpiry, "room.mic": MinExpiry, "air.air": 15 * time.Minute, "output.relay1": 0, "body": 0} {
		if e, _ := m.Entity(id); e.ExpireAfter != want {
			t.Errorf("%s expires after %v, want %v", id, e.ExpireAfter, want)
		}
	}
	if e, _ := m.Entity("room.mic"); e.Privacy != ledger.Sensitive {
		t.Errorf("a room is %v, want sensitive", e.Privacy)
	}
}

// rig is a ledger with the model, on a clock the test moves.
type rig struct {
	t     *testing.T
	m     *Model
	clk   *scriptClock
	path  string
	s     *ledger.Store
	r     *Reader
	wall  time.Time
	seqOf map[string]uint64 // by event id
	mod   func(*ledger.Options)
	d     *Deriver // the ledger's
}

func newRig(t *testing.T, c Config) *rig {
	t.Helper()
	m, err := Build(c, simFacts)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	g := &rig{t: t, m: m, clk: &scriptClock{now: start}, path: filepath.Join(t.TempDir(), "ledger.db"), wall: start, seqOf: map[string]uint64{}}
	g.open()
	t.Cleanup(func() { g.s.Close() })
	return g
}

func (g *rig) open() {
	g.d = &Deriver{Model: g.m}
	o := ledger.Options{Path: g.path, AgentID: ledger.UUID{1}, BodyID: ledger.UUID{2}, Now: g.clk.Now,
		Projections: Projections(), Derivers: []ledger.Deriver{g.d}}
	if g.mod != nil {
		g.mod(&o)
	}
	s, err := ledger.Open(o)
	if err != nil {
		g.t.Fatal(err)
	}
	g.s, g.r = s, &Reader{Store: s, Model: g.m}
}

func (g *rig) advance(d time.Duration) { g.clk.now, g.wall = g.clk.now.Add(d), g.wall.Add(d) }

func (g *rig) sense(typ, ch string, p any) ledger.UUID {
	g.t.Helper()
	res, err := g.s.Append(context.Background(), ledger.Event{Type: typ, ChannelID: ch, OccurredAt: g.wall.UnixNano(),
		Provenance: ledger.Observed, Payload: payload(g.t, p)})
	if err != nil {
		g.t.Fatal(err)
	}
	g.seqOf[res[0].ID.String()] = res[0].Seq
	return res[0].ID
}

func (g *rig) now(id string) State {
	g.t.Helper()
	sts, err := g.r.Now(id)
	if err != nil {
		g.t.Fatal(err)
	}
	return sts[0]
}

func (g *rig) types(after uint64) []string {
	evs, err := g.s.Events(ledger.Filter{After: after, Types: []string{"world."}})
	if err != nil {
		g.t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

func TestARoomActiveQuietAndUnknown(t *testing.T) {
	g := newRig(t, Config{})
	if st := g.now("room.front-left"); st.Value != Unknown || st.Sources[0].Why != "no record" {
		t.Fatalf("before anything: got %+v, want unknown with no record", st)
	}
	started := g.sense("camera.motion_started", "camera.front", sense.MotionStarted{Zone: "left"})
	st := g.now("room.front-left")
	if st.Value != "active" || st.Provenance != "observed" || st.Confidence != confMotion || !st.Since.Equal(g.wall) {
		t.Fatalf("after motion: got %+v, want active, observed, %v, since now", st, confMotion)
	}
	ev := st.Sources[0].Evidence
	if len(ev) != 1 || ev[0].ID != started.String() || ev[0].Seq != g.seqOf[started.String()] {
		t.Fatalf("evidence %+v, want the motion event %s", ev, started)
	}
	g.advance(30 * time.Second)
	g.sense("camera.motion_ended", "camera.front", sense.MotionEnded{Zone: "left"})
	if st := g.now("room.front-left"); st.Value != "quiet" || st.Sources[0].Supersedes == 0 {
		t.Fatalf("after motion ended: got %+v, want quiet, superseding the active record", st)
	}
	// Summaries keep it: one mark three quarters of the expiry at most.
	before, _ := g.s.Stats()
	for i := 0; i < 12; i++ {
		g.advance(time.Minute)
		g.sense("camera.summary", "camera.front", sense.CameraSummary{Zones: []string{"left", "right door"}})
	}
	got := g.types(before.LastSeq)
	// Right door had no record: the first summary makes one (and a
	// change); marks every 7.5 minutes of the running clock after.
	if n := strings.Count(strings.Join(got, " "), EventSeen); n < 1 || n > 2 {
		t.Errorf("12 summaries a minute apart wrote %d seen marks (%v); want one every three quarters of 10 minutes", n, got)
	}
	if st := g.now("room.front-left"); st.Value != "quiet" || *st.Sources[0].ExpiresInMS <= 0 {
		t.Fatalf("kept by summaries: got %+v", st)
	}
	// The camera goes away: nothing for longer than the expiry.
	g.advance(MinExpiry + time.Second)
	st = g.now("room.front-left")
	if st.Value != Unknown || st.Sources[0].Why != EndNotSeen {
		t.Fatalf("not seen for its expiry: got %+v, want unknown, not_seen", st)
	}
	before, _ = g.s.Stats()
	k := &Keeper{Store: g.s, Model: g.m, Now: func() time.Time { return g.wall }}
	if err := k.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	evs, _ := g.s.Events(ledger.Filter{After: before.LastSeq, Types: []string{EventChanged}})
	var ch Changed
	for _, e := range evs {
		if e.ChannelID == "room.front-left" {
			ledger.UnmarshalPayload(e.Payload, &ch)
		}
	}
	if ch.Value != Unknown || len(ch.Ended) != 1 || ch.Ended[0].Reason != EndNotSeen {
		t.Fatalf("the keeper's round wrote %+v; want the change to unknown with the end", ch)
	}
	if st := g.now("room.front-left"); st.Value != Unknown || st.Sources[0].Why != EndNotSeen {
		t.Fatalf("after the round: got %+v", st)
	}
	before, _ = g.s.Stats()
	if err := k.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	if after, _ := g.s.Stats(); after.LastSeq != before.LastSeq {
		t.Errorf("a round with nothing due wrote %d events", after.LastSeq-before.LastSeq)
	}
}

// TestAStateSaysHowSureItsTimeIs: a record's valid time carries the
// uncertainty of its evidence's clock, and whether that clock was
// synchronised.
// A channel's sightings between its seen marks are kept in memory; the
// keeper marks them before the marks would let the state expire, so the
// state expires its expiry after it was last seen, not after its last
// mark. A keeper without the Deriver cannot, and the state expires
// its expiry after the last mark.
func TestTheKeeperMarksWhatTheDeriverSaw(t *testing.T) {
	for _, withDeriver := range []bool{true, false} {
		t.Run(map[bool]string{true: "with the deriver", false: "without"}[withDeriver], func(t *testing.T) {
			g := newRig(t, Config{})
			start := g.wall
			summary := sense.CameraSummary{Zones: []string{"left", "right door"}, Frames: 1800, OverS: 60}
			g.sense("camera.summary", "camera.front", summary) // the records: quiet
			for range 5 {
				g.advance(time.Minute)
				g.sense("camera.summary", "camera.front", summary) // sightings, before a mark is due
			}
			lastSighting := g.wall
			k := &Keeper{Store: g.s, Model: g.m, Now: func() time.Time { return g.wall }}
			if withDeriver {
				k.Deriver = g.d
			}
			round := func() []string {
				before, _ := g.s.Stats()
				if err := k.Round(context.Background()); err != nil {
					t.Fatal(err)
				}
				return g.types(before.LastSeq)
			}
			g.advance(MinExpiry - 5*time.Minute - 2*time.Minute) // 8 minutes after the records: not yet due
			if got := round(); len(got) != 0 {
				t.Fatalf("a round with the marks 2 minutes from letting the state expire wrote %v", got)
			}
			g.advance(90 * time.Second) // 30 s left
			got := round()
			if withDeriver != slices.Contains(got, EventSeen) {
				t.Fatalf("a round 30 s before the marks let the state expire wrote %v (the deriver given: %v)", got, withDeriver)
			}
			g.advance(time.Minute) // past the first record's expiry, within the last sighting's
			st := g.now("room.front-left")
			switch {
			case withDeriver && (st.Value != "quiet" || !st.Sources[0].LastSeen.Equal(lastSighting)):
				t.Fatalf("after the round marked the last sighting: got %+v, want quiet, last seen %v", st, lastSighting)
			case !withDeriver && st.Value != Unknown:
				t.Fatalf("with no mark since the record, %v after it: got %+v, want unknown", g.wall.Sub(start), st)
			}
			round()
			g.advance(lastSighting.Add(MinExpiry).Sub(g.wall) + time.Second)
			if st := g.now("room.front-left"); st.Value != Unknown || st.Sources[0].Why != EndNotSeen {
				t.Fatalf("its expiry after the last sighting: got %+v, want unknown, not_seen", st)
			}
			round()
			evs, _ := g.s.Events(ledger.Filter{Types: []string{EventChanged}})
			var ended []Ended
			for _, e := range evs {
				var ch Changed
				ledger.UnmarshalPayload(e.Payload, &ch)
				ended = append(ended, ch.Ended...)
			}
			if len(ended) == 0 {
				t.Fatal("no end was recorded")
			}
			want := start.Add(MinExpiry)
			if withDeriver {
				want = lastSighting.Add(MinExpiry)
			}
			for _, x := range ended {
				if x.At != want.UnixNano() {
					t.Errorf("%s ended at %v, want %v", x.Source, time.Unix(0, x.At).UTC(), want)
				}
			}
		})
	}
}

// A camera summary that says what the last said is not derived again
// (calm), one that says more is: its zones and moving zones are what
// the model reads, its counts are not.
func TestACalmSummaryIsNotDerivedAgain(t *testing.T) {
	in := func(s sense.CameraSummary) []byte {
		b, ok := calmInput(nil, "camera.summary", payload(t, s))
		if !ok {
			t.Fatalf("%+v: no calm input", s)
		}
		return b
	}
	quiet := sense.CameraSummary{Zones: []string{"left", "right door"}, Frames: 1800, OverS: 60}
	again := sense.CameraSummary{Zones: []string{"left", "right door"}, Frames: 1799, Skipped: 1, OverS: 59.9}
	moving := sense.CameraSummary{Zones: []string{"left", "right door"}, Moving: []string{"left"}, Frames: 1800, OverS: 60}
	if !bytes.Equal(in(quiet), in(again)) {
		t.Errorf("summaries that differ in their counts only read %x and %x", in(quiet), in(again))
	}
	if bytes.Equal(in(quiet), in(moving)) {
		t.Errorf("a summary with a zone moving reads as one without: %x", in(moving))
	}
	if _, ok := calmInput(nil, "camera.summary", []byte{0xbf, 0xff}); ok {
		t.Error("a map of indefinite length was read")
	}
	if _, ok := calmInput(nil, "camera.motion_started", payload(t, sense.MotionStarted{Zone: "left"})); ok {
		t.Error("an event that starts something was taken as calm")
	}

	g := newRig(t, Config{})
	g.sense("camera.summary", "camera.front", quiet)
	before, _ := g.s.Stats()
	for range 3 {
		g.advance(time.Minute)
		g.sense("camera.summary", "camera.front", again)
	}
	if got := g.types(before.LastSeq); len(got) != 0 {
		t.Fatalf("summaries that say what the last said derived %v", got)
	}
	g.advance(time.Minute)
	g.sense("camera.summary", "camera.front", moving)
	if st := g.now("room.front-left"); st.Value != "active" {
		t.Fatalf("after a summary with the zone moving: got %+v, want active", st)
	}
}

// Whether a calm summary is derived again rests only on what was written
// of its own channel: the air changing leaves the camera's calm
// standing, motion in one of its zones ends it.
func TestACalmStandsUntilItsChannelIsWritten(t *testing.T) {
	g := newRig(t, Config{})
	quiet := sense.CameraSummary{Zones: []string{"left", "right door"}, Frames: 1800, OverS: 60}
	standing := func() bool {
		g.d.mu.Lock()
		defer g.d.mu.Unlock()
		q := g.d.cache.calm["camera.front"]
		return q != nil && q.ok && q.at == q.epoch
	}
	g.sense("camera.summary", "camera.front", quiet)
	g.advance(time.Minute)
	g.sense("camera.summary", "camera.front", quiet)
	if !standing() {
		t.Fatal("a summary that confirmed what its zones hold left no calm")
	}
	before, _ := g.s.Stats()
	temp := 21.5
	g.sense("env.reading", "env.air", sense.EnvReading{Sensor: "air", Temperature: &temp})
	if got := g.types(before.LastSeq); !slices.Contains(got, EventChanged) {
		t.Fatalf("the air's first reading derived %v", got)
	}
	if !standing() {
		t.Error("the air changing ended the camera's calm")
	}
	g.sense("camera.motion_started", "camera.front", sense.MotionStarted{Zone: "left"})
	if standing() {
		t.Error("motion in one of the camera's zones left its calm standing")
	}
}

func TestAStateSaysHowSureItsTimeIs(t *testing.T) {
	g := newRig(t, Config{})
	for _, tc := range []struct {
		zone     string
		unc      uint32
		unsynced bool
	}{{"left", 40, false}, {"right door", 4294967295, true}} {
		_, err := g.s.Append(context.Background(), ledger.Event{Type: "camera.motion_started", ChannelID: "camera.front", OccurredAt: g.wall.UnixNano(),
			ClockDomain: "boot", MonotonicNS: 1, ClockUncertaintyMS: tc.unc, ClockUnsynced: tc.unsynced, Provenance: ledger.Observed,
			Payload: payload(t, sense.MotionStarted{Zone: tc.zone})})
		if err != nil {
			t.Fatal(err)
		}
		id := "room.front-" + slug(tc.zone)
		if ss := g.now(id).Sources[0]; ss.UncertaintyMS != tc.unc || ss.ClockUnsynced != tc.unsynced || !ss.ValidFrom.Equal(g.wall) {
			t.Errorf("%s: %+v, want valid from %v ±%d ms, unsynced %v", id, ss, g.wall, tc.unc, tc.unsynced)
		}
	}
}

func TestCutEndsAndARestartForgets(t *testing.T) {
	g := newRig(t, Config{})
	g.sense("camera.motion_started", "camera.front", sense.MotionStarted{Zone: "left"})
	g.sense("camera.motion_ended", "camera.front", sense.MotionEnded{Zone: "left", Cut: true})
	if st := g.now("room.front-left"); st.Value != Unknown || st.Sources[0].Why != EndSourceLost {
		t.Fatalf("the camera went away: got %+v, want unknown, source_lost", st)
	}
	g.sense("gpio.level", "gpio.door", body.LineChanged{Line: "DOOR", Active: true})
	g.sense("body.degradation", "body.self", sense.LevelChange{Level: "normal"})
	g.advance(time.Minute)
	stopped := g.wall
	g.s.Close()
	g.advance(time.Hour)
	g.open()
	k := &Keeper{Store: g.s, Model: g.m, Now: func() time.Time { return g.wall }, StoppedAt: stopped}
	if err := k.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"body", "output.relay1"} {
		if st := g.now(id); st.Value != Unknown {
			t.Errorf("%s after a restart: %+v, want unknown", id, st)
		}
	}
	// Before the stop it was normal, as known now.
	if st, _ := g.r.At("body", stopped.Add(-time.Millisecond), 0); st.Value != "normal" {
		t.Errorf("the body before the stop: %+v, want normal", st)
	}
	if st, _ := g.r.At("body", stopped.Add(time.Minute), 0); st.Value != Unknown {
		t.Errorf("the body while it was off: %+v, want unknown", st)
	}
}

func TestOutputsFromReadBackAndTheEStop(t *testing.T) {
	g := newRig(t, Config{})
	do := func(status string, verified string, state string) {
		r := act.Result{Status: act.Status(status)}
		if verified != "" {
			r.Verification = &act.Verification{Result: verified, Evidence: "read back"}
		}
		g.sense("action."+status, "gpio.set", map[string]any{"status": status, "result": r,
			"invocation": act.Invocation{Capability: "gpio.set", Target: "gpio.relay1", Params: map[string]string{"state": state}, Mode: act.Live}})
	}
	do("succeeded", "verified", "on")
	if st := g.now("output.relay1"); st.Value != "on" || st.Provenance != "verified" {
		t.Fatalf("after a verified set: %+v, want on, verified", st)
	}
	do("failed", "failed", "off")
	if st := g.now("output.relay1"); st.Value != Unknown || st.Sources[0].Why != EndUnverified {
		t.Fatalf("after a set that failed verification: %+v, want unknown, unverified", st)
	}
	g.sense("estop.tripped", "estop.main", act.Trip{Outputs: []act.OutputState{{Name: "relay1", Safe: "low", ReadBack: "low"}}})
	if st := g.now("output.relay1"); st.Value != "off" || st.Provenance != "verified" {
		t.Fatalf("after a trip: %+v, want off, verified", st)
	}
}

func TestToldIsNeverMoreThanTold(t *testing.T) {
	g := newRig(t, Config{Entities: map[string]EntityConfig{"front": {Kind: "door", Sources: []Source{{Channel: "gpio.door"}}}}})
	ctx := context.Background()
	st, err := Tell(ctx, g.s, g.m, Assertion{Entity: "contact.front", Value: "closed", By: "agent:pi", Trust: ledger.Medium, For: time.Hour}, g.wall)
	if err != nil {
		t.Fatal(err)
	}
	if st.Value != "closed" || st.Provenance != "told" || st.Confidence != 0.5 {
		t.Fatalf("told closed: %+v, want closed, told, 0.5", st)
	}
	// The line agrees: the state is observed, and both records stay.
	g.sense("gpio.changed", "gpio.door", body.LineChanged{Line: "DOOR", Active: false})
	st = g.now("contact.front")
	if st.Value != "closed" || st.Provenance != "observed" || st.Conflict || len(st.Sources) != 2 {
		t.Fatalf("told and observed closed: %+v, want closed, observed, both sources", st)
	}
	// The line disagrees: observed wins, in conflict, inferred.
	g.advance(time.Second)
	g.sense("gpio.changed", "gpio.door", body.LineChanged{Line: "DOOR", Active: true})
	st = g.now("contact.front")
	if st.Value != "open" || !st.Conflict || st.Provenance != "inferred" || st.Confidence != confLine/2 {
		t.Fatalf("told closed, observed open: %+v, want open in conflict, inferred, half confidence", st)
	}
	// The teller takes it back.
	if _, err := Tell(ctx, g.s, g.m, Assertion{Entity: "contact.front", By: "agent:pi", Withdraw: true}, g.wall); err != nil {
		t.Fatal(err)
	}
	if st = g.now("contact.front"); st.Value != "open" || st.Conflict || st.Provenance != "observed" {
		t.Fatalf("withdrawn: %+v, want open, observed", st)
	}
	for _, a := range []Assertion{
		{Entity: "contact.front", Value: "ajar", By: "agent:pi"},
		{Entity: "contact.nope", Value: "open", By: "agent:pi"},
		{Entity: "air.air", Value: "warm", By: "agent:pi"},
		{Entity: "contact.front", Value: "open", By: "agent:pi", For: 90 * 24 * time.Hour},
		{Entity: "contact.front", Value: "open", By: "agent:pi", Confidence: 2},
		{Entity: "contact.front", Value: "open"},
		{Entity: "contact.front", By: "agent:pi", Withdraw: true},
	} {
		if _, err := Tell(ctx, g.s, g.m, a, g.wall); !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrNoEntity) {
			t.Errorf("%+v: got %v, want it refused", a, err)
		}
	}
	// A told state expires on its own.
	if _, err := Tell(ctx, g.s, g.m, Assertion{Entity: "contact.front", Value: "closed", By: "agent:pi", For: time.Minute}, g.wall); err != nil {
		t.Fatal(err)
	}
	g.advance(2 * time.Minute)
	for _, ss := range g.now("contact.front").Sources {
		if ss.Source == "told:agent:pi" && ss.Why != EndNotSeen {
			t.Errorf("a told state past its time: %+v, want not_seen", ss)
		}
	}
}

// What is told between two sensed events is in the state the second
// makes: the deriver keeps what it read of the model between events,
// and forgets it when another writes the model.
func TestTheDeriverSeesWhatWasToldBetweenEvents(t *testing.T) {
	g := newRig(t, Config{Entities: map[string]EntityConfig{"front": {Kind: "door", Sources: []Source{{Channel: "gpio.door"}}}}})
	ctx := context.Background()
	g.sense("gpio.changed", "gpio.door", body.LineChanged{Line: "DOOR", Active: false})
	if _, err := Tell(ctx, g.s, g.m, Assertion{Entity: "contact.front", Value: "open", By: "agent:pi", For: time.Hour}, g.wall); err != nil {
		t.Fatal(err)
	}
	g.advance(time.Second)
	g.sense("gpio.changed", "gpio.door", body.LineChanged{Line: "DOOR", Active: true})
	h, err := g.r.History("contact.front", g.wall.Add(-time.Hour), g.wall.Add(time.Hour), 0)
	if err != nil {
		t.Fatal(err)
	}
	last := h.Changes[len(h.Changes)-1]
	if last.Value != "open" || last.Conflict || !slices.Equal(last.Sources, []string{"gpio.door", "told:agent:pi"}) {
		t.Fatalf("the line opened after open was told: %+v; want open, both sources, no conflict", last)
	}
	// Withdrawn, and the line closes: the change rests on the line alone.
	if _, err := Tell(ctx, g.s, g.m, Assertion{Entity: "contact.front", By: "agent:pi", Withdraw: true}, g.wall); err != nil {
		t.Fatal(err)
	}
	g.advance(time.Second)
	g.sense("gpio.changed", "gpio.door", body.LineChanged{Line: "DOOR", Active: false})
	if h, err = g.r.History("contact.front", g.wall.Add(-time.Hour), g.wall.Add(time.Hour), 0); err != nil {
		t.Fatal(err)
	}
	if last := h.Changes[len(h.Changes)-1]; last.Value != "closed" || !slices.Equal(last.Sources, []string{"gpio.door"}) {
		t.Fatalf("the line closed after the assertion was withdrawn: %+v; want closed from the line alone", last)
	}
}

func TestExplainResolvesTheEvidence(t *testing.T) {
	g := newRig(t, Config{})
	a := g.sense("camera.motion_started", "camera.front", sense.MotionStarted{Zone: "left"})
	g.advance(time.Second)
	b := g.sense("camera.motion_ended", "camera.front", sense.MotionEnded{Zone: "left"})
	g.advance(8 * time.Minute) // a mark is due
	c := g.sense("camera.summary", "camera.front", sense.CameraSummary{Zones: []string{"left"}})
	x, err := g.r.Explain("room.front-left")
	if err != nil {
		t.Fatal(err)
	}
	ch := x.Chains[0]
	if x.Value != "quiet" || len(ch.Records) != 2 || ch.Records[0].Value != "quiet" || ch.Records[1].Value != "active" {
		t.Fatalf("the chain: %+v, want quiet then active before it", ch)
	}
	if !ch.Records[0].ValidTo.IsZero() || !ch.Records[1].ValidTo.Equal(ch.Records[0].ValidFrom) {
		t.Errorf("the chain's valid times: %+v; want the active record valid until the quiet one began, the quiet one open", ch.Records)
	}
	for i, want := range []ledger.UUID{b, a} {
		e := ch.Records[i].Evidence[0]
		if e.Event == nil || e.Event.ID != want.String() || e.Gone != "" {
			t.Errorf("record %d's evidence: %+v, want event %s", i, e, want)
		}
	}
	if ch.LastMark == nil || ch.LastMark.Event == nil || ch.LastMark.Event.ID != c.String() {
		t.Errorf("the last mark: %+v, want the summary %s", ch.LastMark, c)
	}
	// Evidence retention deleted is said to be gone, the record stays.
	if _, err := g.r.Explain("room.nope"); !errors.Is(err, ErrNoEntity) {
		t.Errorf("an entity that is not: %v", err)
	}
}

func TestHistory(t *testing.T) {
	g := newRig(t, Config{})
	t0 := g.wall
	for i := 0; i < 5; i++ {
		g.advance(time.Minute)
		g.sense("camera.motion_started", "camera.front", sense.MotionStarted{Zone: "left"})
		g.advance(time.Minute)
		g.sense("camera.motion_ended", "camera.front", sense.MotionEnded{Zone: "left"})
	}
	h, err := g.r.History("room.front-left", t0.Add(3*time.Minute), t0.Add(7*time.Minute), 0)
	if err != nil {
		t.Fatal(err)
	}
	if h.Before == nil || h.Before.Value != "quiet" || len(h.Changes) != 4 || h.Changes[0].Value != "active" || h.Changes[3].Value != "quiet" {
		t.Fatalf("got before %+v and %d changes %+v", h.Before, len(h.Changes), h.Changes)
	}
	h, _ = g.r.History("room.front-left", t0, t0.Add(time.Hour), 3)
	if len(h.Changes) != 3 || !h.More {
		t.Fatalf("limited to 3: %d, more %v", len(h.Changes), h.More)
	}
}

func TestVerifyRebuildsAfterRetention(t *testing.T) {
	g := newRig(t, Config{Entities: map[string]EntityConfig{"front": {Kind: "door", Sources: []Source{{Channel: "gpio.door"}}}}})
	g.s.Close()
	g.mod = func(o *ledger.Options) {
		c := ledger.DefaultClasses()
		tel := ledger.ClassTelemetry
		tel.TTL = time.Hour
		c.ByPrefix["gpio."] = tel
		o.Classes = &c
	}
	g.open()
	a := g.sense("gpio.changed", "gpio.door", body.LineChanged{Line: "DOOR", Active: true})
	g.advance(2 * time.Hour) // on the running clock too
	g.sense("gpio.changed", "gpio.door", body.LineChanged{Line: "DOOR", Active: false})
	g.s.Close() // a checkpoint of the running clock, which retention reads
	g.open()
	if _, err := g.s.Retain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if evs, _ := g.s.EventsAt(g.seqOf[a.String()]); len(evs) != 0 {
		t.Fatalf("retention kept the first change: %+v", evs)
	}
	rep, err := g.s.Verify(context.Background())
	if err != nil || !rep.OK() {
		t.Fatalf("verify after retention: %v %v", rep.Problems, err)
	}
	x, err := g.r.Explain("contact.front")
	if err != nil {
		t.Fatal(err)
	}
	if len(x.Chains[0].Records) != 2 {
		t.Fatalf("the chain: %+v, want closed then open", x.Chains[0])
	}
	old := x.Chains[0].Records[1].Evidence[0]
	if old.ID != a.String() || old.Event != nil || old.Gone == "" {
		t.Fatalf("evidence retention deleted: %+v, want it said gone", old)
	}
	if st, _ := g.r.At("contact.front", g.wall.Add(-time.Hour), 0); st.Value != "open" {
		t.Fatalf("what was true an hour ago, after its evidence went: %+v", st)
	}
}

// TestAHoldWakesWhatWaitsForIt: a wait condition for world.held of a
// room quiet longer than 10 minutes gets one world.held once the room
// has been quiet that long on the running clock, none before, none
// again for the same quiet, and another after the next quiet begins.
func TestAHoldWakesWhatWaitsForIt(t *testing.T) {
	g := newRig(t, Config{})
	g.s.Close()
	g.mod = func(o *ledger.Options) { o.Projections = append(o.Projections, gate.Projections()...) }
	g.open()
	ctx := context.Background()
	item := work.NewCreate(work.Spec{Goal: "tidy the kitchen when nobody is there", DoneWhen: []string{"tidy"}}, "agent:pi", g.wall)
	if _, err := g.s.Execute(ctx, item); err != nil {
		t.Fatal(err)
	}
	ten := 600.0
	add := wait.NewAdd(wait.Condition{Owner: item.Item.ID, Types: []string{EventHeld}, ExpiresAt: g.wall.Add(24 * time.Hour).UnixMilli(),
		Match: []wait.Clause{{Field: "entity", Equals: "room.front-left"}, {Field: "value", Equals: "quiet"}, {Field: "held_s", Above: &ten}}},
		"agent:pi", g.wall)
	if _, err := g.s.Execute(ctx, add); err != nil {
		t.Fatal(err)
	}
	k := &Keeper{Store: g.s, Model: g.m, Now: func() time.Time { return g.wall }}
	held := func() []Held {
		evs, err := g.s.Events(ledger.Filter{Types: []string{EventHeld}})
		if err != nil {
			t.Fatal(err)
		}
		var out []Held
		for _, e := range evs {
			var h Held
			if err := ledger.UnmarshalPayload(e.Payload, &h); err != nil {
				t.Fatal(err)
			}
			out = append(out, h)
		}
		return out
	}
	g.sense("camera.motion_started", "camera.front", sense.MotionStarted{Zone: "left"})
	g.advance(time.Minute)
	g.sense("camera.motion_ended", "camera.front", sense.MotionEnded{Zone: "left"})
	for i := 0; i < 11; i++ { // summaries keep it quiet: 11 minutes
		g.advance(time.Minute)
		g.sense("camera.summary", "camera.front", sense.CameraSummary{Zones: []string{"left"}})
		if err := k.Holds(ctx); err != nil {
			t.Fatal(err)
		}
		if n := len(held()); i < 9 && n != 0 || i >= 10 && n != 1 {
			t.Fatalf("after %d minutes of quiet: %d holds recorded", i+1, n)
		}
	}
	h := held()[0]
	if h.Entity != "room.front-left" || h.Value != "quiet" || h.HeldS <= 600 || h.Condition != add.Condition.ID {
		t.Fatalf("the hold: %+v", h)
	}
	// A keeper of a new start does not record the same hold again.
	k2 := &Keeper{Store: g.s, Model: g.m, Now: func() time.Time { return g.wall }}
	if err := k2.Holds(ctx); err != nil || len(held()) != 1 {
		t.Fatalf("the same quiet again: %v, %d holds", err, len(held()))
	}
	g.sense("camera.motion_started", "camera.front", sense.MotionStarted{Zone: "left"})
	g.advance(time.Second)
	g.sense("camera.motion_ended", "camera.front", sense.MotionEnded{Zone: "left"})
	for i := 0; i < 11; i++ {
		g.advance(time.Minute)
		g.sense("camera.summary", "camera.front", sense.CameraSummary{Zones: []string{"left"}})
	}
	if err := k.Holds(ctx); err != nil || len(held()) != 2 {
		t.Fatalf("the next quiet: %v, %d holds", err, len(held()))
	}
}

// The search for what was recorded by a sequence agrees with a plain walk
// over a timeline, whatever the times (equal ones, steps of any size)
// and wherever the sequence falls.
func TestRecordedByAgreesWithAWalk(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for round := 0; round < 200; round++ {
		kv := ledger.MemKV{}
		type key struct {
			t   int64
			seq uint64
		}
		var keys []key
		at, seq := int64(rng.IntN(1000))-500, uint64(0)
		for i := rng.IntN(40); i >= 0; i-- {
			switch rng.IntN(4) {
			case 0: // as early as the one before
			case 1:
				at += int64(rng.IntN(3))
			default:
				at += int64(rng.Uint64N(1 << 40))
			}
			seq += 1 + rng.Uint64N(3)
			keys = append(keys, key{at, seq})
			if err := kv.Put(historyKey("room.a", at, seq), u64(seq)); err != nil {
				t.Fatal(err)
			}
		}
		mk := func(t int64, seq uint64) []byte { return historyKey("room.a", t, seq) }
		tailOf := func(k []byte) (int64, uint64, bool) { t, s := tail(k); return t, s, len(k) >= 16 }
		for q := 0; q < 50; q++ {
			qt := keys[0].t - 2 + rng.Int64N(at-keys[0].t+4)
			if q%5 == 0 {
				qt = keys[rng.IntN(len(keys))].t
			}
			known := rng.Uint64N(seq + 2)
			var want *key
			for i := range keys {
				if keys[i].t <= qt && keys[i].seq <= known {
					want = &keys[i]
				}
			}
			k, _, ok := recordedBy(kv, historyPrefix("room.a"), mk, tailOf, qt, known)
			gt, gs := tail(k)
			switch {
			case want == nil && ok:
				t.Fatalf("round %d: at %d known at %d: got (%d, %d), want none of %v", round, qt, known, gt, gs, keys)
			case want != nil && (!ok || gt != want.t || gs != want.seq):
				t.Fatalf("round %d: at %d known at %d: got (%d, %d) %v, want %+v of %v", round, qt, known, gt, gs, ok, *want, keys)
			}
		}
	}
}

// TestTheArchiveForgetsTheOldMemory: once the archive takes the model's
// records older than audit_keep, the memory lets go of them but for what
// still holds: it reaches back audit_keep, its size stops growing, the
// state now is kept however old, and verify rebuilds the same memory
// (applying the archived events, forgetting them, applying the file's)
// as the passes, run between the events, left.
func TestTheArchiveForgetsTheOldMemory(t *testing.T) {
	g := newRig(t, Config{Entities: map[string]EntityConfig{"front": {Kind: "door", Sources: []Source{{Channel: "gpio.door"}}}}})
	g.s.Close()
	g.mod = func(o *ledger.Options) {
		o.NoOutbox = true
		o.AuditKeep = 30 * 24 * time.Hour
		o.ArchiveSegment = 1
	}
	g.open()
	pass := func() {
		t.Helper()
		if _, err := g.s.Retain(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, err := g.s.Archive(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	keys := func() int {
		n := 0
		g.s.ReadProjection(ProjectionName, func(kv ledger.ReadKV) error {
			return kv.ForEach(func(k, v []byte) error { n++; return nil })
		})
		return n
	}
	// The door moves twice a day for 120 days, a pass each tenth day.
	size := map[int]int{}
	for day := 1; day <= 120; day++ {
		g.sense("gpio.changed", "gpio.door", body.LineChanged{Line: "DOOR", Active: true})
		g.advance(6 * time.Hour)
		g.sense("gpio.changed", "gpio.door", body.LineChanged{Line: "DOOR", Active: false})
		g.advance(18 * time.Hour)
		if day%10 == 0 {
			pass()
			size[day] = keys()
		}
	}
	t.Logf("keys by day: %v", size)
	if size[120] > size[60]+size[60]/10 {
		t.Errorf("the memory grew from %d keys at day 60 to %d at day 120", size[60], size[120])
	}
	if st, _ := g.r.At("contact.front", g.wall.Add(-10*24*time.Hour-21*time.Hour), 0); st.Value != "open" {
		t.Errorf("the front door ten days ago: %+v", st)
	}
	if st, _ := g.r.At("contact.front", g.wall.Add(-90*24*time.Hour-21*time.Hour), 0); st.Value == "open" {
		t.Errorf("the front door 90 days ago, past the memory: %+v", st)
	}
	// Then it stays closed for 100 days: the state now is kept however
	// old its records.
	for range 10 {
		g.advance(10 * 24 * time.Hour)
		g.s.Append(context.Background(), ledger.Event{Type: "body.tick", Provenance: ledger.Observed})
		pass()
	}
	if st := g.now("contact.front"); st.Value != "closed" {
		t.Errorf("the door, closed 100 days ago: %+v", st)
	}
	as, _ := g.s.ArchiveStats()
	rep, err := g.s.Verify(context.Background())
	if err != nil || !rep.OK() || rep.Archived == 0 || int(as.Events) != rep.Archived {
		t.Fatalf("verify: %+v %v (archive %+v)", rep, err, as)
	}
	// And once it moves again, the old last goes.
	before := keys()
	g.sense("gpio.changed", "gpio.door", body.LineChanged{Line: "DOOR", Active: true})
	g.advance(31 * 24 * time.Hour)
	g.s.Append(context.Background(), ledger.Event{Type: "body.tick", Provenance: ledger.Observed})
	pass()
	if after := keys(); after > before {
		t.Errorf("after the door moved again: %d keys, %d before", after, before)
	}
	if rep, err := g.s.Verify(context.Background()); err != nil || !rep.OK() {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}

// The projection keeps a change's state as its payload without its
// records and ends, cut from the bytes as encoded: the same bytes as the
// state encoded on its own (what a ledger written before kept), and the
// records' names as they decode.
func TestAStepIsReadAsEncoded(t *testing.T) {
	t20 := 20.5
	rec := Record{Entity: "air.hall", Source: "env.air", Channel: "env.air", Readings: map[string]Reading{"temperature_c": {Value: t20, Uncertainty: 1, Unit: "°C"}},
		Confidence: 0.9, Provenance: "observed", Evidence: []Evidence{{Seq: 7, ID: "01a2", Type: "env.reading"}}, ValidFrom: -5, ExpireMS: 900000, RunMS: 3}
	for _, c := range []Changed{
		{Entity: "room.a", Kind: Room, Value: "active", Was: "quiet", Confidence: 0.8, Provenance: "observed", Observed: true, Sources: []string{"camera.front#a"},
			Since: 1e18, SinceRunMS: 5, At: 1e18, Records: []Record{{Entity: "room.a", Source: "camera.front#a", Value: "active", ValidFrom: 1e18}}},
		{Entity: "air.hall", Kind: Air, Value: "measured", Readings: rec.Readings, Confidence: 0.45, Provenance: "inferred", Conflict: true, Since: -5, At: -5,
			Records: []Record{rec, rec}, Ended: []Ended{{Entity: "air.hall", Source: "told:x", Record: 3, Reason: EndWithdrawn, At: 9}}},
		{Entity: "body", Kind: Self, Value: Unknown, Ended: []Ended{{Entity: "body", Source: "body.self", Record: 1, Reason: EndRestarted, At: 1}}},
	} {
		whole, err := ledger.MarshalPayload(c)
		if err != nil {
			t.Fatal(err)
		}
		st, err := readStep(whole)
		if err != nil {
			t.Fatalf("%s: %v", c.Entity, err)
		}
		alone := c
		alone.Records, alone.Ended = nil, nil
		want, _ := ledger.MarshalPayload(alone)
		if !bytes.Equal(st.state, want) {
			t.Errorf("%s: the state cut from the change is %x, encoded alone %x", c.Entity, st.state, []byte(want))
		}
		if st.entity != c.Entity || st.at != c.At || len(st.records) != len(c.Records) || !slices.Equal(st.ended, c.Ended) {
			t.Errorf("%s: read %+v", c.Entity, st)
		}
		for i, got := range st.records {
			r := c.Records[i]
			if got.entity != r.Entity || got.source != r.Source || got.validFrom != r.ValidFrom {
				t.Errorf("%s: record %d read as %q %q %d, want %q %q %d", c.Entity, i, got.entity, got.source, got.validFrom, r.Entity, r.Source, r.ValidFrom)
			}
			var back Record
			if err := ledger.UnmarshalPayload(got.raw, &back); err != nil || back.Entity != r.Entity || back.ValidFrom != r.ValidFrom {
				t.Errorf("%s: record %d as kept decodes to %+v (%v)", c.Entity, i, back, err)
			}
		}
	}
	for _, bad := range [][]byte{{0xbf, 0xff}, {0xa1, 0x67, 'r', 'e', 'c', 'o', 'r', 'd', 's', 0x01}, {0xa1, 0x62, 'a', 't', 0x61, 'x'}, {0xa2, 0x62}} {
		if _, err := readStep(bad); err == nil {
			t.Errorf("%x read as a step", bad)
		}
	}
}
