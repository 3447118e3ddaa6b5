package world

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/ledger"
	"github.com/tobe-body/tobe-body/sense"
)

// The oracle: a plain replay of the scripted history, written for the
// test from the model's rules and nothing of the projection's, that
// answers what held at a valid time as known at a sequence by walking
// everything recorded up to it.

// oObs is what one step says of one source.
type oObs struct {
	entity, source, channel string
	value                   string  // "" with end or readings
	temp                    float64 // the air, when air
	air                     bool
	end, confirm            bool
	prov                    int
}

// oEntry is a record (value) or an end, at a valid time, recorded at
// seq; from is when it begins in its source's timeline: its valid time,
// but never before the entry before it (after the clock stepped back, a
// source's next entry still comes after its last).
type oEntry struct {
	seq      uint64
	at       int64
	from     int64
	end      bool
	value    string
	temp     float64
	air      bool
	prov     int
	run      int64 // ms
	expireMS int64
	channel  string
	next     uint64 // the seq of the source's next entry; 0: none yet
}

type oMark struct {
	seq uint64
	run int64
	at  int64
}

type oracle struct {
	model   *Model
	entries map[string][]oEntry // entity NUL source -> entries in seq order
	cur     map[string]int      // entity NUL source -> index of the current record; absent: none
	marks   map[string][]oMark
	// pending is each channel's last sighting since its last mark, while
	// no new record of it began: the next mark of any channel marks it
	// too.
	pending map[string]oMark
}

func newOracle(m *Model) *oracle {
	return &oracle{model: m, entries: map[string][]oEntry{}, cur: map[string]int{}, marks: map[string][]oMark{}, pending: map[string]oMark{}}
}

// seenOf is a record's last sighting known at seq upto: the marks of
// its channel after it and by the next entry of its source (a step's
// marks are recorded before its entries).
func (o *oracle) seenOf(e oEntry, upto uint64) (run, at int64) {
	run, at = e.run, e.at
	if e.channel == "" {
		return run, at
	}
	if e.next != 0 {
		// Marks of the step that recorded the next entry came before it.
		upto = min(upto, e.next)
	}
	for _, m := range o.marks[e.channel] { // in seq order: the last one counts
		if m.seq > e.seq && m.seq <= upto {
			run, at = max(run, m.run), m.at
		}
	}
	return run, at
}

// step applies one sensed event at seq, running time run and valid time at.
func (o *oracle) step(seq uint64, run, at int64, obs []oObs) {
	marked := map[string]bool{}
	// markPending marks every channel seen since its last mark.
	markPending := func() {
		for ch, p := range o.pending {
			if !marked[ch] {
				o.marks[ch] = append(o.marks[ch], oMark{seq: seq, run: p.run, at: p.at})
				marked[ch] = true
			}
		}
		clear(o.pending)
	}
	// expired judges a source's current record past its expiry, and
	// then no longer current; a sighting of its channel since its last
	// mark is marked first.
	expired := func(k string) bool {
		i, has := o.cur[k]
		if !has {
			return false
		}
		e := o.entries[k][i]
		if r, _ := o.seenOf(e, math.MaxUint64); e.expireMS <= 0 || run-r <= e.expireMS {
			return false
		}
		if _, ok := o.pending[e.channel]; ok {
			markPending()
		}
		if r, _ := o.seenOf(e, math.MaxUint64); run-r <= e.expireMS {
			return false
		}
		delete(o.cur, k)
		return true
	}
	touched := map[string]bool{}
	defer func() {
		// What holds of each entity that took a new record or end is
		// judged after the step's observations.
		for k := range o.cur {
			if entity, _, _ := strings.Cut(k, "\x00"); touched[entity] {
				expired(k)
			}
		}
	}()
	for _, ob := range obs {
		k := ob.entity + "\x00" + ob.source
		expired(k)
		i, has := o.cur[k]
		if ob.end {
			if has {
				o.add(k, oEntry{seq: seq, at: max(at, o.entries[k][i].at), end: true})
				delete(o.cur, k)
				touched[ob.entity] = true
			}
			continue
		}
		if has {
			e := o.entries[k][i]
			same := ob.confirm || !ob.air && e.value == ob.value || ob.air && math.Abs(e.temp-ob.temp) <= 1
			if same {
				r, _ := o.seenOf(e, math.MaxUint64)
				switch {
				case e.expireMS <= 0 || marked[ob.channel]:
				case run-r < markAfter(e.expireMS):
					o.pending[ob.channel] = oMark{seq: seq, run: run, at: at}
				default:
					o.marks[ob.channel] = append(o.marks[ob.channel], oMark{seq: seq, run: run, at: at})
					marked[ob.channel] = true
					markPending()
				}
				continue
			}
		}
		ent, _ := o.model.Entity(ob.entity)
		delete(o.pending, ob.channel)
		o.add(k, oEntry{seq: seq, at: at, value: ob.value, temp: ob.temp, air: ob.air, prov: ob.prov,
			run: run, expireMS: ent.ExpireAfter.Milliseconds(), channel: ob.channel})
		o.cur[k] = len(o.entries[k]) - 1
		touched[ob.entity] = true
	}
}

// add appends an entry to a source's.
func (o *oracle) add(k string, e oEntry) {
	e.from = e.at
	if n := len(o.entries[k]); n > 0 {
		o.entries[k][n-1].next = e.seq
		e.from = max(e.from, o.entries[k][n-1].from)
	}
	o.entries[k] = append(o.entries[k], e)
}

// restart ends every current record at min(stopped, seen+expire).
func (o *oracle) restart(seq uint64, now, stopped int64) {
	clear(o.pending)
	keys := make([]string, 0, len(o.cur))
	for k := range o.cur {
		keys = append(keys, k)
	}
	for _, k := range keys {
		e := o.entries[k][o.cur[k]]
		end := stopped
		if e.expireMS > 0 {
			_, seenAt := o.seenOf(e, math.MaxUint64)
			end = min(end, seenAt+e.expireMS*1e6)
		}
		o.add(k, oEntry{seq: seq, at: max(end, e.at), end: true})
		delete(o.cur, k)
	}
}

// sourceAt is a source's value at valid time t known at seq upto: its
// last entry recorded by upto that began by t.
func (o *oracle) sourceAt(k string, t int64, upto uint64) (oEntry, bool) {
	var best *oEntry
	for i := range o.entries[k] {
		if e := &o.entries[k][i]; e.seq <= upto && e.from <= t {
			best = e
		}
	}
	if best == nil || best.end {
		return oEntry{}, false
	}
	if _, seenAt := o.seenOf(*best, upto); best.expireMS > 0 && t > seenAt+best.expireMS*1e6 {
		return oEntry{}, false
	}
	return *best, true
}

// at is an entity's fused value at t known at upto: a room is active if
// any source says so; anything else is what its sources agree on, or
// the strongest provenance, then the latest, then the greatest value.
func (o *oracle) at(ent Entity, t int64, upto uint64) (string, map[string]string) {
	per := map[string]string{}
	var held []oEntry
	for _, s := range ent.Sources {
		e, ok := o.sourceAt(ent.ID+"\x00"+s.ID(), t, upto)
		per[s.ID()] = Unknown
		if ok {
			per[s.ID()] = e.value
			if e.air {
				per[s.ID()] = fmt.Sprintf("%.1f", e.temp)
			}
			held = append(held, e)
		}
	}
	if len(held) == 0 {
		return Unknown, per
	}
	switch ent.Kind {
	case Room:
		for _, e := range held {
			if e.value == "active" {
				return "active", per
			}
		}
		return "quiet", per
	case Air:
		latest := held[0]
		for _, e := range held[1:] {
			if e.at > latest.at {
				latest = e
			}
		}
		return fmt.Sprintf("%.1f", latest.temp), per
	}
	best := held[0]
	for _, e := range held[1:] {
		if e.prov > best.prov || e.prov == best.prov && (e.at > best.at || e.at == best.at && e.value > best.value) {
			best = e
		}
	}
	return best.value, per
}

// scriptClock is the ledger's clock: it moves only when the script says,
// so the running clock is the sum of the script's steps while open.
type scriptClock struct{ now time.Time }

func (c *scriptClock) Now() time.Time { return c.now }

func oracleModel(t *testing.T) *Model {
	t.Helper()
	off := false
	m, err := Build(Config{Defaults: &off, Entities: map[string]EntityConfig{
		"kitchen": {Kind: "room", Sources: []Source{{Channel: "camera.front", Zone: "left"}, {Channel: "audio.mic"}}},
		"door":    {Kind: "door", Sources: []Source{{Channel: "gpio.door"}, {Channel: "gpio.door2"}}},
		"hall":    {Kind: "air", Sources: []Source{{Channel: "env.air"}}},
	}}, Facts{Cameras: map[string][]string{"camera.front": {"left", "right"}}, Microphones: []string{"audio.mic"},
		Lines: []string{"gpio.door", "gpio.door2"}, EnvSensors: []string{"env.air"}, CameraSummary: time.Minute,
		MicSummary: 10 * time.Second, EnvSummary: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// payload is v as a payload.
func payload(tb testing.TB, v any) []byte {
	tb.Helper()
	p, err := ledger.MarshalPayload(v)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// TestProjectionAgreesWithAReplay scripts a history (motion, voice,
// summaries, two door contacts that disagree, the air, a wall clock
// stepped back, gaps past expiry, a restart) and asks the projection and
// the oracle the same questions at many valid and recorded times, before
// and after the ledger is reopened.
func TestProjectionAgreesWithAReplay(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { replay(t, seed) })
	}
}

func replay(t *testing.T, seed uint64) {
	m := oracleModel(t)
	rng := rand.New(rand.NewPCG(seed, 7))
	clk := &scriptClock{now: time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)}
	path := filepath.Join(t.TempDir(), "ledger.db")
	open := func() *ledger.Store {
		s, err := ledger.Open(ledger.Options{Path: path, AgentID: ledger.UUID{1}, BodyID: ledger.UUID{2}, Now: clk.Now,
			Projections: Projections(), Derivers: []ledger.Deriver{&Deriver{Model: m}}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	defer func() { s.Close() }()
	or := newOracle(m)
	ctx := context.Background()
	wall := clk.now.UnixNano() // the valid time: it steps back once
	var run int64              // ms
	var probes []uint64        // sequences before each step
	var times []int64
	kitchen, _ := m.Entity("room.kitchen")
	door, _ := m.Entity("contact.door")
	hall, _ := m.Entity("air.hall")
	emit := func(typ, ch string, p any, obs []oObs) {
		st, err := s.Stats()
		if err != nil {
			t.Fatal(err)
		}
		probes = append(probes, st.LastSeq)
		res, err := s.Append(ctx, ledger.Event{Type: typ, ChannelID: ch, OccurredAt: wall, Provenance: ledger.Observed, Payload: payload(t, p)})
		if err != nil {
			t.Fatal(err)
		}
		or.step(res[0].Seq, run, wall, obs)
		times = append(times, wall)
	}
	advance := func(d time.Duration) {
		clk.now = clk.now.Add(d)
		run += d.Milliseconds()
		wall += int64(d)
	}
	moving := false
	temp := 21.0
	for i := 0; i < 400; i++ {
		advance(time.Duration(1+rng.IntN(90)) * time.Second)
		switch i {
		case 150: // the wall clock steps back ten minutes
			wall -= int64(10 * time.Minute)
		case 250: // nothing for longer than any expiry
			advance(25 * time.Minute)
		case 320: // the body stops for an hour and starts again
			stopped := wall
			st, _ := s.Stats()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			clk.now = clk.now.Add(time.Hour) // the running clock stands still
			wall += int64(time.Hour)
			s = open()
			k := &Keeper{Store: s, Model: m, Now: func() time.Time { return time.Unix(0, wall) }, StoppedAt: time.Unix(0, stopped)}
			if err := k.Start(ctx); err != nil {
				t.Fatal(err)
			}
			or.restart(st.LastSeq+1, wall, stopped)
		}
		switch r := rng.IntN(10); {
		case r < 3:
			moving = !moving
			if moving {
				emit("camera.motion_started", "camera.front", sense.MotionStarted{Zone: "left"},
					[]oObs{{entity: kitchen.ID, source: "camera.front#left", channel: "camera.front", value: "active", prov: 3}})
			} else {
				cut := rng.IntN(5) == 0
				emit("camera.motion_ended", "camera.front", sense.MotionEnded{Zone: "left", Cut: cut},
					[]oObs{{entity: kitchen.ID, source: "camera.front#left", channel: "camera.front", value: "quiet", end: cut, prov: 3}})
			}
		case r < 4:
			v := "quiet"
			if moving {
				v = "active"
			}
			var mv []string
			if moving {
				mv = []string{"left"}
			}
			emit("camera.summary", "camera.front", sense.CameraSummary{Zones: []string{"left", "right"}, Moving: mv},
				[]oObs{{entity: kitchen.ID, source: "camera.front#left", channel: "camera.front", value: v, prov: 3}})
		case r < 5:
			voice := rng.IntN(2) == 0
			typ, v := "audio.voice_ended", "quiet"
			if voice {
				typ, v = "audio.voice_started", "active"
			}
			emit(typ, "audio.mic", sense.Voice{SNR: 10}, []oObs{{entity: kitchen.ID, source: "audio.mic", channel: "audio.mic", value: v, prov: 3}})
		case r < 6:
			emit("audio.level", "audio.mic", sense.SoundLevel{},
				[]oObs{{entity: kitchen.ID, source: "audio.mic", channel: "audio.mic", value: "quiet", confirm: true, prov: 3}})
		case r < 8:
			ch := []string{"gpio.door", "gpio.door2"}[rng.IntN(2)]
			a := rng.IntN(2) == 0
			v := "closed"
			if a {
				v = "open"
			}
			emit("gpio.changed", ch, body.LineChanged{Line: ch, Active: a}, []oObs{{entity: door.ID, source: ch, channel: ch, value: v, prov: 3}})
		default:
			temp += rng.Float64()*1.6 - 0.8
			tv := math.Round(temp*10) / 10
			emit("env.reading", "env.air", sense.EnvReading{Sensor: "air", Temperature: &tv},
				[]oObs{{entity: hall.ID, source: "env.air", channel: "env.air", temp: tv, air: true, prov: 3}})
		}
	}
	check := func(when string) {
		st, _ := s.Stats()
		probes := append(probes, st.LastSeq)
		r := &Reader{Store: s, Model: m}
		n := 0
		for pi, upto := range probes {
			if upto == 0 || pi%7 != 0 && pi != len(probes)-1 { // 0 asks what is known now
				continue
			}
			for ti, tn := range times {
				if ti%5 != 0 {
					continue
				}
				for _, off := range []int64{-int64(time.Millisecond), int64(time.Millisecond), int64(7 * time.Minute)} {
					for _, ent := range []Entity{kitchen, door, hall} {
						want, wantPer := or.at(ent, tn+off, upto)
						got, err := r.At(ent.ID, time.Unix(0, tn+off), upto)
						if err != nil {
							t.Fatal(err)
						}
						gv := got.Value
						gotPer := map[string]string{}
						for _, ss := range got.Sources {
							gotPer[ss.Source] = ss.Value
							if ss.Readings != nil {
								gotPer[ss.Source] = fmt.Sprintf("%.1f", ss.Readings["temperature_c"].Value)
							}
						}
						if ent.Kind == Air && got.Readings != nil {
							gv = fmt.Sprintf("%.1f", got.Readings["temperature_c"].Value)
						}
						n++
						if gv != want || fmt.Sprint(sortedMap(gotPer)) != fmt.Sprint(sortedMap(wantPer)) {
							for _, src := range ent.Sources {
								t.Log(src.ID(), "\n", dumpSource(s, or, ent.ID, src.ID()))
							}
							t.Fatalf("%s: %s at %s known at %d: got %s %v, the replay says %s %v", when, ent.ID,
								time.Unix(0, tn+off).UTC().Format(time.RFC3339Nano), upto, gv, sortedMap(gotPer), want, sortedMap(wantPer))
						}
					}
				}
			}
		}
		t.Logf("%s: %d probes agree", when, n)
	}
	check("before a reopen")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open()
	check("after a reopen")
	rep, err := s.Verify(ctx)
	if err != nil || !rep.OK() {
		t.Fatalf("verify: %v %v", rep.Problems, err)
	}
}

func sortedMap(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// dumpSource shows what the oracle and the projection hold of a source,
// for a disagreement.
func dumpSource(s *ledger.Store, or *oracle, entity, source string) string {
	out := "oracle:\n"
	for _, e := range or.entries[entity+"\x00"+source] {
		out += fmt.Sprintf("  seq %d at %s end %v value %s run %d\n", e.seq, time.Unix(0, e.at).UTC().Format("15:04:05.000"), e.end, e.value, e.run)
	}
	out += "marks:\n"
	for _, m := range or.marks[source] {
		out += fmt.Sprintf("  seq %d at %s run %d\n", m.seq, time.Unix(0, m.at).UTC().Format("15:04:05.000"), m.run)
	}
	out += "projection:\n"
	s.ReadProjection(ProjectionName, func(kv ledger.ReadKV) error {
		ledger.Range(kv, entryPrefix(entity, source), nil, false, func(k, v []byte) bool {
			x, _ := entryOf(k)
			extra := ""
			if r, why, _ := readEntry(kv, entity, source, x); why == "" {
				extra = fmt.Sprintf("%s from %s run %d", r.Value, time.Unix(0, r.ValidFrom).UTC().Format("15:04:05.000"), r.RunMS)
			}
			out += fmt.Sprintf("  seq %d at %s %s %s\n", x.seq, time.Unix(0, x.from).UTC().Format("15:04:05.000"), v[:1], extra)
			return true
		})
		ledger.Range(kv, []byte{kMark}, nil, false, func(k, v []byte) bool {
			var m Seen
			ledger.UnmarshalPayload(v, &m)
			if seq, ch, _ := markOf(k); ch == source {
				out += fmt.Sprintf("  mark seq %d at %s run %d\n", seq, time.Unix(0, m.At).UTC().Format("15:04:05.000"), m.RunMS)
			}
			return true
		})
		return nil
	})
	return out
}
