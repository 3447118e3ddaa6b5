package world_test

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/control/gate"
	"github.com/tobe-body/tobe-body/awareness/control/wait"
	"github.com/tobe-body/tobe-body/awareness/control/work"
	"github.com/tobe-body/tobe-body/awareness/control/world"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/ledger"
	"github.com/tobe-body/tobe-body/sense"
)

// simMix is ten minutes of the sim board's sensed events, in the
// proportions a day of it makes them: a sound summary every 10 s, a
// camera summary a minute, the air every 5 minutes, and one motion, one
// voice and one button press (a person passing by, some 150 of each a
// day). Every one but the button feeds the model; one in twenty changes
// a state.
func simMix(b testing.TB, part int) []ledger.Event {
	mk := func(typ, ch string, p any) ledger.Event {
		raw, err := ledger.MarshalPayload(p)
		if err != nil {
			b.Fatal(err)
		}
		return ledger.Event{Type: typ, ChannelID: ch, Provenance: ledger.Observed, Trust: ledger.Medium, Privacy: ledger.Sensitive, Payload: raw}
	}
	t, h := 21.0+float64(part%7)*0.4, 48.0
	var evs []ledger.Event
	for minute := 0; minute < 10; minute++ {
		for i := 0; i < 6; i++ {
			evs = append(evs, mk("audio.level", "audio.mic", sense.SoundLevel{RMS: -48, Peak: -40, Floor: -52, CoveredMS: 10000, PeriodMS: 10000}))
		}
		evs = append(evs, mk("camera.summary", "camera.front", sense.CameraSummary{Zones: []string{"left", "right"}, Frames: 1800, OverS: 60}))
		switch minute {
		case 0, 5:
			evs = append(evs, mk("env.reading", "env.air", sense.EnvReading{Sensor: "air", Temperature: &t, Humidity: &h, Over: 300, Samples: 30}))
		case 3:
			evs = append(evs,
				mk("camera.motion_started", "camera.front", sense.MotionStarted{Zone: "left", Box: [4]float64{0.1, 0.2, 0.3, 0.4}, Area: 0.05}),
				mk("audio.voice_started", "audio.mic", sense.Voice{SNR: 12}),
				mk("gpio.changed", "gpio.button", body.LineChanged{Line: "BUTTON", Level: "low", Edge: "falling", Active: true}),
				mk("audio.voice_ended", "audio.mic", sense.Voice{SNR: 12, DurationMS: 1800}),
				mk("camera.motion_ended", "camera.front", sense.MotionEnded{Zone: "left", DurationMS: 4000, Frames: 120}))
		}
	}
	return evs
}

func benchModel(b testing.TB) *world.Model {
	m, err := world.Build(world.Config{}, world.Facts{Cameras: map[string][]string{"camera.front": {"left", "right"}},
		Microphones: []string{"audio.mic"}, EnvSensors: []string{"env.air"}, Outputs: []string{"gpio.relay1", "gpio.led"},
		CameraSummary: time.Minute, MicSummary: 10 * time.Second, EnvSummary: 5 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// benchDir is where the benchmark's ledger lives: in memory when the
// machine has /dev/shm, so what is measured is the work of a commit and
// not the disk's sync.
func benchDir(b *testing.B) string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "worldbench")
		if err == nil {
			b.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return b.TempDir()
}

// BenchmarkKeepingTheModel is the per-event cost of keeping the world
// model beside the gate's per-event cost, on the sim's mix of sensed
// events: appends of the mix in groups of a minute with and without the
// model's deriver (the model's cost is the difference), and the gate as
// the daemon runs it on the same events (each decoded from its record,
// matched against 10 wait conditions, weighed with the built-in rules).
// Each sub-benchmark's op is one event. Run with -cpu 1.
func BenchmarkKeepingTheModel(b *testing.B) {
	for _, withModel := range []bool{false, true} {
		name := "ledger"
		if withModel {
			name = "ledger+world"
		}
		b.Run(name, func(b *testing.B) {
			m := benchModel(b)
			opts := ledger.Options{Path: benchDir(b) + "/ledger.db", AgentID: ledger.UUID{1}, BodyID: ledger.UUID{2}, Projections: awareness.Projections()}
			var timed *timedDeriver
			if withModel {
				timed = &timedDeriver{Deriver: &world.Deriver{Model: m}}
				opts.Derivers = []ledger.Deriver{timed}
			}
			s, err := ledger.Open(opts)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			mixes := make([][]ledger.Event, 7)
			for i := range mixes {
				mixes[i] = simMix(b, i)
			}
			b.ResetTimer()
			for n, minute := 0, 0; n < b.N; minute++ {
				mix := mixes[minute%len(mixes)]
				evs := make([]ledger.Event, 0, len(mix))
				for _, e := range mix[:min(len(mix), b.N-n)] {
					e.OccurredAt = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(minute) * 10 * time.Minute).UnixNano()
					evs = append(evs, e)
				}
				if _, err := s.Append(ctx, evs...); err != nil {
					b.Fatal(err)
				}
				n += len(evs)
			}
			if timed != nil {
				b.ReportMetric(float64(timed.spent.Nanoseconds())/float64(b.N), "derive-ns/event")
				b.ReportMetric(float64(timed.derived)/float64(b.N), "derived/event")
			}
		})
	}
	b.Run("gate-daemon", func(b *testing.B) {
		// The gate as the daemon runs it: following the ledger, reading
		// each event back, deciding it, and recording what it does not
		// ignore, until it has decided a stop appended after the
		// events (a hard rule: it always wakes).
		observer, err := awareness.NewObserver(awareness.DefaultObservationRules)
		if err != nil {
			b.Fatal(err)
		}
		s, err := ledger.Open(ledger.Options{Path: benchDir(b) + "/ledger.db", AgentID: ledger.UUID{1}, BodyID: ledger.UUID{2}, Projections: awareness.Projections()})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		rules := gate.DefaultRules()
		rules.Defaults = observer.Defaults()
		done := make(chan struct{})
		stop := ledger.Event{ID: ledger.NewID(), Type: "estop.tripped", ChannelID: "estop.main", Provenance: ledger.Observed, Trust: ledger.High}
		g := &gate.Gate{Store: s, Sal: gate.NewSalience(rules), Pool: &gate.Pool{Per: 8, TTL: time.Hour, MaxKeys: 1024}, Classes: ledger.DefaultClasses(),
			Push: func(d gate.Decision, e ledger.Stored) {
				if e.ID == stop.ID {
					close(done)
				}
			}}
		if err := g.Load(); err != nil { // it begins after the last event: none yet
			b.Fatal(err)
		}
		for n, part := 0, 0; n < b.N; part++ {
			mix := simMix(b, part)
			mix = mix[:min(len(mix), b.N-n)]
			if _, err := s.Append(ctx, mix...); err != nil {
				b.Fatal(err)
			}
			n += len(mix)
		}
		if _, err := s.Append(ctx, stop); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		errc := make(chan error, 1)
		go func() { errc <- g.Run(ctx) }()
		<-done
		b.StopTimer()
		cancel()
		<-errc
	})
	b.Run("gate", func(b *testing.B) {
		observer, err := awareness.NewObserver(awareness.DefaultObservationRules)
		if err != nil {
			b.Fatal(err)
		}
		rules := gate.DefaultRules()
		rules.Defaults = observer.Defaults()
		sal := gate.NewSalience(rules)
		var conds []wait.Condition
		for i := 0; i < 10; i++ {
			conds = append(conds, wait.Condition{ID: string(rune('a' + i)), Owner: "w", Types: []string{"camera.motion_started"},
				Match: []wait.Clause{{Field: "zone", Equals: "kitchen"}}, Priority: wait.High, ExpiresAt: time.Now().Add(time.Hour).UnixMilli()})
		}
		ix := gate.Build(conds)
		items := func(id string) (work.Item, bool) { return work.Item{ID: id, Status: work.Running}, id == "w" }
		var recs [][]byte
		for i := 0; i < 7; i++ {
			for _, e := range simMix(b, i) {
				e.ID, e.SchemaVersion, e.OccurredAt, e.IngestedAt = ledger.NewID(), ledger.SchemaVersion, time.Now().UnixNano(), time.Now().UnixNano()
				var buf bytesBuffer
				if err := ledger.Encode(&buf.Buffer, &e); err != nil {
					b.Fatal(err)
				}
				recs = append(recs, buf.Bytes())
			}
		}
		out := make([]*wait.Condition, 0, 16)
		now := time.Now()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			st := ledger.Stored{Seq: uint64(i + 1)}
			if err := ledger.Decode(recs[i%len(recs)], &st.Event); err != nil {
				b.Fatal(err)
			}
			out = ix.Match(&st, now.UnixMilli(), out[:0])
			sal.Decide(&st, out, items, now)
		}
	})
}

type bytesBuffer struct{ bytes.Buffer }

// timedDeriver counts the time a deriver takes and what it derives.
type timedDeriver struct {
	*world.Deriver
	spent   time.Duration
	derived int
}

func (d *timedDeriver) Derive(v *ledger.View, e *ledger.Event, at ledger.Derivation) ([]ledger.Event, error) {
	t := time.Now()
	evs, err := d.Deriver.Derive(v, e, at)
	d.spent += time.Since(t)
	d.derived += len(evs)
	return evs, err
}
