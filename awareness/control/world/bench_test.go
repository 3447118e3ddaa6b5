package world_test

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/awareness"
	"github.com/tobe-body/tobe-body/awareness/control/gate"
	"github.com/tobe-body/tobe-body/awareness/control/wait"
	"github.com/tobe-body/tobe-body/awareness/control/work"
	"github.com/tobe-body/tobe-body/awareness/control/world"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/body/config"
	"github.com/tobe-body/tobe-body/ledger"
	"github.com/tobe-body/tobe-body/sense"
)

// simMinutes is ten minutes of the sim board's sensed events, minute by
// minute, in the proportions a day of it makes them: a sound summary
// every 10 s, a camera summary a minute, the air every 5 minutes, and
// one motion, one voice and one button press (a person passing by, some
// 150 of each a day). Every one but the button feeds the model.
func simMinutes(b testing.TB, part int) [][]ledger.Event {
	mk := func(typ, ch string, p any) ledger.Event {
		raw, err := ledger.MarshalPayload(p)
		if err != nil {
			b.Fatal(err)
		}
		return ledger.Event{Type: typ, ChannelID: ch, Provenance: ledger.Observed, Trust: ledger.Medium, Privacy: ledger.Sensitive, Payload: raw}
	}
	t, h := 21.0+float64(part%7)*0.4, 48.0
	minutes := make([][]ledger.Event, 10)
	for minute := range minutes {
		var evs []ledger.Event
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
		minutes[minute] = evs
	}
	return minutes
}

// simMix is simMinutes' events in one list.
func simMix(b testing.TB, part int) []ledger.Event {
	var evs []ledger.Event
	for _, m := range simMinutes(b, part) {
		evs = append(evs, m...)
	}
	return evs
}

// simHour is the hour the sim's history starts at.
var simHour = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// minuteOf appends a minute of a replay of cycle (simCycle's) to dst,
// each time round the cycle later by its length, and returns them with
// the ledger's running clock at the minute's end.
func minuteOf(dst []ledger.Event, cycle [][]ledger.Event, minute int) ([]ledger.Event, time.Duration) {
	shift := int64(minute/len(cycle)) * int64(len(cycle)) * int64(time.Minute)
	for _, e := range cycle[minute%len(cycle)] {
		e.OccurredAt += shift
		dst = append(dst, e)
	}
	return dst, time.Duration(minute+1) * time.Minute
}

// simCycle is seven parts of simMinutes (70 minutes), each event stamped
// at its time (the events of a minute spread over it): what a bench
// replays, minute by minute, over and over, each time later by the
// cycle's length, with the ledger's clock at the minute's end.
func simCycle(b testing.TB) (minutes [][]ledger.Event) {
	for part := 0; part < 7; part++ {
		for _, evs := range simMinutes(b, part) {
			at := simHour.Add(time.Duration(len(minutes)) * time.Minute)
			for i := range evs {
				evs[i].OccurredAt = at.Add(time.Duration(i) * time.Minute / time.Duration(len(evs))).UnixNano()
			}
			minutes = append(minutes, evs)
		}
	}
	return minutes
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
func benchDir(b testing.TB) string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "worldbench")
		if err == nil {
			b.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return b.TempDir()
}

// benchOptions opens a bench's ledger with the daemon's projections and
// an outbox as an uplink that keeps up leaves it: never over its budget
// (here nothing acks, and the default budget of 100,000 rows would have
// every commit after the first hundred thousand events drop rows).
func benchOptions(b testing.TB) ledger.Options {
	return ledger.Options{Path: benchDir(b) + "/ledger.db", AgentID: ledger.UUID{1}, BodyID: ledger.UUID{2}, Projections: awareness.Projections(),
		OutboxMaxRows: 1 << 30, OutboxMaxBytes: 1 << 40}
}

// BenchmarkKeepingTheModel is the per-event cost of keeping the world
// model beside the gate's per-event cost, on the sim's mix of sensed
// events (simMinutes):
//   - ledger, ledger+world: appends of the mix a minute at a time, with
//     the ledger's clock (so its running clock, which expiries and seen
//     marks go by) a minute on at each, without and with the model's
//     deriver: the model's whole cost is the difference (deriving, and
//     writing what it derives with its projection);
//   - derive: the deriver alone on the same events, one after another in
//     one transaction, its running clock as the ledger's would be (what
//     it derives is not written; it keeps it as written);
//   - gate-daemon: the gate as the daemon runs it, following the ledger,
//     reading each event back, deciding it and recording what it does
//     not ignore;
//   - gate: the gate alone on the same events, each decoded from its
//     record, matched against 10 wait conditions, weighed with the
//     built-in rules.
//
// Each sub-benchmark's op is one sensed event. Run with -cpu 1.
func BenchmarkKeepingTheModel(b *testing.B) {
	for _, withModel := range []bool{false, true} {
		name := "ledger"
		if withModel {
			name = "ledger+world"
		}
		b.Run(name, func(b *testing.B) {
			m := benchModel(b)
			opts := benchOptions(b)
			clk := simHour
			opts.Now = func() time.Time { return clk }
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
			cycle := simCycle(b)
			b.ResetTimer()
			for n, minute := 0, 0; n < b.N; minute++ {
				evs, run := minuteOf(make([]ledger.Event, 0, 16), cycle, minute)
				evs = evs[:min(len(evs), b.N-n)]
				clk = simHour.Add(run)
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
	b.Run("derive", func(b *testing.B) {
		s, err := ledger.Open(benchOptions(b))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		cycle := simCycle(b)
		for _, evs := range cycle {
			for i := range evs {
				evs[i].ID = ledger.NewID()
			}
		}
		cmd := &deriveAll{d: &world.Deriver{Model: benchModel(b)}, cycle: cycle, n: b.N}
		b.ResetTimer()
		if _, err := s.Execute(context.Background(), cmd); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		b.ReportMetric(float64(cmd.derived)/float64(b.N), "derived/event")
	})
	b.Run("gate-daemon", func(b *testing.B) {
		// The gate as the daemon runs it: following the ledger, reading
		// each event back, deciding it, and recording what it does not
		// ignore, until it has decided a stop appended after the
		// events (a hard rule: it always wakes).
		s, err := ledger.Open(benchOptions(b))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan struct{})
		stop := ledger.Event{ID: ledger.NewID(), Type: "estop.tripped", ChannelID: "estop.main", Provenance: ledger.Observed, Trust: ledger.High}
		g := daemonGate(b, s)
		g.Push = func(d gate.Decision, e ledger.Stored) {
			if e.ID == stop.ID {
				close(done)
			}
		}
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

// BenchmarkWhereTheModelGoes splits the model's whole cost (ledger+world
// less ledger in BenchmarkKeepingTheModel) into its parts, and measures
// the gate beside it as the daemon runs it, on six ledgers fed the same
// minutes of the sim's mix in turn, each append timed: noise of a shared
// machine, and what the others leave in the caches, fall on all alike,
// which separate runs do not see. The ledgers:
//   - ledger: no model;
//   - derive: the deriver runs, and what it derives is dropped;
//   - write: what it derives is written, without the model's projection;
//   - world: the model as the daemon keeps it;
//   - gate: no model, and the gate following the ledger, each append
//     timed until the gate is done with its last event (decided, and
//     recorded when it is not ignored);
//   - world+gate: the model, and the gate following it (which decides
//     the model's events too).
//
// The metrics are each ledger's ns an event, and the parts: deriving
// (derive less ledger), writing the derived events (write less derive),
// projecting them (world less write), gating (gate less ledger: the
// gate's cost an event at the daemon's pace, a minute at a time) and
// what the model's events add to the gate's (world+gate less world, less
// gating). An op is one minute appended to each of the six. Run with
// -cpu 1.
func BenchmarkWhereTheModelGoes(b *testing.B) {
	type lane struct {
		name  string
		s     *ledger.Store
		clk   time.Time
		spent time.Duration
		// decided is how far the lane's gate is, when it has one.
		decided func() uint64
		caught  chan struct{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var lanes []*lane
	for _, name := range []string{"ledger", "derive", "write", "world", "gate", "world+gate"} {
		l := &lane{name: name, clk: simHour}
		opts := benchOptions(b)
		opts.Now = func() time.Time { return l.clk }
		d := &world.Deriver{Model: benchModel(b)}
		switch name {
		case "derive":
			opts.Derivers = []ledger.Deriver{dropped{d}}
		case "write":
			opts.Derivers = []ledger.Deriver{d}
			opts.Projections = slices.DeleteFunc(opts.Projections, func(p ledger.Projection) bool { return p.Name() == world.ProjectionName })
		case "world", "world+gate":
			opts.Derivers = []ledger.Deriver{d}
		}
		s, err := ledger.Open(opts)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		l.s = s
		lanes = append(lanes, l)
		if strings.HasSuffix(name, "gate") {
			var decided atomic.Uint64
			l.decided, l.caught = decided.Load, make(chan struct{}, 1)
			stop := runBenchGate(b, ctx, s, func() time.Time { return l.clk }, func(seq uint64) {
				decided.Store(seq)
				select {
				case l.caught <- struct{}{}:
				default:
				}
			})
			defer stop()
		}
	}
	cycle := simCycle(b)
	events := 0
	evs := make([]ledger.Event, 0, 16)
	b.ResetTimer()
	for minute := range b.N {
		for i := range lanes {
			l := lanes[(i+minute)%len(lanes)] // each first in turn
			var run time.Duration
			evs, run = minuteOf(evs[:0], cycle, minute) // afresh: Append gives them ids
			l.clk = simHour.Add(run)
			t := time.Now()
			res, err := l.s.Append(ctx, evs...)
			if err != nil {
				b.Fatal(err)
			}
			if l.decided != nil {
				for last := res[len(res)-1].Seq; l.decided() < last; {
					<-l.caught
				}
			}
			l.spent += time.Since(t)
		}
		events += len(evs)
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(events) }
	for _, l := range lanes {
		b.ReportMetric(per(l.spent), l.name+"-ns/event")
	}
	b.ReportMetric(per(lanes[1].spent-lanes[0].spent), "deriving-ns/event")
	b.ReportMetric(per(lanes[2].spent-lanes[1].spent), "writing-ns/event")
	b.ReportMetric(per(lanes[3].spent-lanes[2].spent), "projecting-ns/event")
	b.ReportMetric(per(lanes[4].spent-lanes[0].spent), "gating-ns/event")
	b.ReportMetric(per(lanes[5].spent-lanes[3].spent-(lanes[4].spent-lanes[0].spent)), "gating-the-model-ns/event")
}

// daemonGate is the gate as the daemon makes it over s, with the
// default configuration: its default rules, with the observation rules'
// defaults, and its noise pool.
func daemonGate(b *testing.B, s *ledger.Store) *gate.Gate {
	observer, err := awareness.NewObserver(awareness.DefaultObservationRules)
	if err != nil {
		b.Fatal(err)
	}
	g, err := gate.FromConfig(s, config.Default().Gate, observer.Defaults(), ledger.DefaultClasses())
	if err != nil {
		b.Fatal(err)
	}
	return g
}

// runBenchGate runs the daemon's gate over s, on the clock now, telling
// decided how far it is, until stop.
func runBenchGate(b *testing.B, ctx context.Context, s *ledger.Store, now func() time.Time, decided func(uint64)) (stop func()) {
	g := daemonGate(b, s)
	g.Now, g.Decided = now, decided
	if err := g.Load(); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- g.Run(ctx) }()
	return func() {
		cancel()
		if err := <-errc; err != nil && ctx.Err() == nil {
			b.Error(err)
		}
	}
}

// dropped is a deriver whose events are not written: what deriving them
// costs alone, inside the appends.
type dropped struct{ *world.Deriver }

func (d dropped) Derive(v *ledger.View, e *ledger.Event, at ledger.Derivation) ([]ledger.Event, error) {
	_, err := d.Deriver.Derive(v, e, at)
	return nil, err
}

type bytesBuffer struct{ bytes.Buffer }

// deriveAll derives n events of a cycle, as BenchmarkKeepingTheModel's
// ledger+world appends them, in the transaction of a command, and
// writes nothing.
type deriveAll struct {
	d       *world.Deriver
	cycle   [][]ledger.Event
	n       int
	derived int
}

func (c *deriveAll) Decide(v *ledger.View) ([]ledger.Event, error) {
	seq := uint64(1)
	e := new(ledger.Event) // as the ledger's writer gives it, on the heap
	for n, minute := 0, 0; n < c.n; minute++ {
		mix := c.cycle[minute%len(c.cycle)]
		shift := int64(minute/len(c.cycle)) * int64(len(c.cycle)) * int64(time.Minute)
		run := time.Duration(minute+1) * time.Minute
		for i := 0; i < len(mix) && n < c.n; i, n = i+1, n+1 {
			*e = mix[i]
			e.OccurredAt += shift
			evs, err := c.d.Derive(v, e, ledger.Derivation{Seq: seq, Running: run})
			if err != nil {
				return nil, err
			}
			seq += 1 + uint64(len(evs))
			c.derived += len(evs)
		}
	}
	return nil, nil
}

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
