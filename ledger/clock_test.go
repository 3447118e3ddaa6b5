package ledger

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/hal/haltest/stepclock"
	bolt "go.etcd.io/bbolt"
)

// runningClock is a step clock whose monotonic reading the test can move
// on, as days of running would: Now is the step clock's Now plus the
// running time added so far, on both readings. Step moves the wall
// reading alone.
type runningClock struct {
	*stepclock.Clock
	ran atomic.Int64
}

func newRunningClock() *runningClock { return &runningClock{Clock: stepclock.New()} }

func (c *runningClock) Now() time.Time { return c.Clock.Now().Add(time.Duration(c.ran.Load())) }

// Run moves both readings on by d.
func (c *runningClock) Run(d time.Duration) { c.ran.Add(int64(d)) }

var wallSteps = []time.Duration{-10 * time.Minute, 25 * time.Hour, 30 * 24 * time.Hour, 365 * 24 * time.Hour}

// stepped runs fn for each wall step, within one process and across a
// restart (Close, Step, Open again with the same clock). step steps the
// clock, and reopens the store when restart is set.
func stepped(t *testing.T, fn func(t *testing.T, clk *runningClock, s **Store, step func())) {
	for _, d := range wallSteps {
		for _, restart := range []bool{false, true} {
			t.Run(fmt.Sprintf("step=%v/restart=%v", d, restart), func(t *testing.T) {
				clk := newRunningClock()
				path := tempPath(t)
				opts := func(o *Options) { o.Now = clk.Now }
				s := openTest(t, path, opts)
				step := func() {
					if !restart {
						clk.Step(d)
						return
					}
					if err := s.Close(); err != nil {
						t.Fatal(err)
					}
					clk.Step(d)
					s = openTest(t, path, opts)
				}
				fn(t, clk, &s, step)
			})
		}
	}
}

func TestDedupeAcrossWallSteps(t *testing.T) {
	for _, tc := range []struct {
		class, typ string
		ttl        time.Duration
	}{
		{"audit", "action.proposed", 0},
		{"local", "work.created", 0},
		{"telemetry", "camera.motion_started", ClassTelemetry.TTL},
	} {
		t.Run(tc.class, func(t *testing.T) {
			stepped(t, func(t *testing.T, clk *runningClock, sp **Store, step func()) {
				ev := func() Event { return Event{Type: tc.typ, Provenance: Observed, DedupeKey: "action:agent:pi:k-1"} }
				first, err := (*sp).Append(t.Context(), ev())
				if err != nil {
					t.Fatal(err)
				}
				step()
				s := *sp
				dup := func(when string) {
					t.Helper()
					r, err := s.Append(t.Context(), ev())
					if err != nil || !r[0].Duplicate || r[0].Seq != first[0].Seq {
						t.Errorf("%s: %+v %v, want a duplicate of seq %d", when, r, err, first[0].Seq)
					}
				}
				dup("after the step")
				clk.Run(2 * time.Minute)
				if res, err := s.Retain(t.Context()); err != nil || res.Events != 0 {
					t.Errorf("retain after the step: %+v %v, want nothing deleted", res, err)
				}
				dup("after retention")
				if tc.ttl == 0 {
					// Kept for ever, and so is its key.
					clk.Run(3 * 365 * 24 * time.Hour)
					if res, err := s.Retain(t.Context()); err != nil || res.Events != 0 {
						t.Errorf("retain years later: %+v %v, want nothing deleted", res, err)
					}
					dup("years later")
				} else {
					clk.Run(tc.ttl)
					res, err := s.Retain(t.Context())
					if err != nil || res.Events != 1 || res.InboxKeys != 1 {
						t.Errorf("retain a TTL of running time later: %+v %v, want the event and its key", res, err)
					}
					if r, _ := s.Append(t.Context(), ev()); r[0].Duplicate {
						t.Errorf("after retention deleted the event: %+v, want the key free", r[0])
					}
				}
				verifyOK(t, s)
			})
		})
	}
}

func TestRetentionAcrossWallSteps(t *testing.T) {
	stepped(t, func(t *testing.T, clk *runningClock, sp **Store, step func()) {
		for i := range 600 {
			e := motion(i)
			e.DedupeKey = fmt.Sprint("old", i)
			if _, err := (*sp).Append(t.Context(), e); err != nil {
				t.Fatal(err)
			}
		}
		clk.Run(6 * 24 * time.Hour)
		for i := range 600 {
			e := motion(i)
			e.DedupeKey = fmt.Sprint("young", i)
			if _, err := (*sp).Append(t.Context(), e); err != nil {
				t.Fatal(err)
			}
		}
		step()
		s := *sp
		// Nothing is a TTL old on the running clock, whatever the wall says.
		if res, err := s.Retain(t.Context()); err != nil || res.Events != 0 {
			t.Fatalf("after the step: %+v %v, want nothing deleted", res, err)
		}
		// A day and a bit more of running: the first 600 are past 7 days.
		clk.Run(24*time.Hour + 2*time.Minute)
		res, err := s.Retain(t.Context())
		if err != nil || res.Events != 600 || res.InboxKeys != 600 || res.OutboxExpired != 600 {
			t.Fatalf("a TTL of running time later: %+v %v, want the 600 old events, keys and rows", res, err)
		}
		evs, _ := s.Events(Filter{Types: []string{"camera."}, Limit: 10000})
		if len(evs) != 600 || evs[0].DedupeKey != "young0" {
			t.Errorf("left %d events, the first %q; want the 600 young ones", len(evs), evs[0].DedupeKey)
		}
		st, _ := s.Stats()
		if st.InboxKeys != 600 {
			t.Errorf("inbox keys %d, want 600", st.InboxKeys)
		}
		verifyOK(t, s)
	})
}

// Running time is what the monotonic reading says, kept across a restart;
// no wall step moves it.
func TestRunningClock(t *testing.T) {
	clk := newRunningClock()
	path := tempPath(t)
	opts := func(o *Options) { o.Now = clk.Now }
	s := openTest(t, path, opts)
	clk.Run(time.Hour)
	clk.Step(-365 * 24 * time.Hour)
	if r := s.Running(); r < time.Hour || r > time.Hour+time.Minute {
		t.Errorf("running %v after an hour and a step back of a year, want an hour", r)
	}
	s.Append(t.Context(), motion(1))
	s.Close()
	clk.Step(2 * 365 * 24 * time.Hour)
	s = openTest(t, path, opts)
	if r := s.Running(); r < time.Hour || r > time.Hour+time.Minute {
		t.Errorf("running %v after a restart, want the hour it ran before", r)
	}
	// A crash loses what ran since the last checkpoint, and no more. A
	// checkpoint holds the running time of the commit before it.
	clk.Run(10 * time.Minute)
	s.Append(t.Context(), motion(2)) // writes a checkpoint at 1 h
	clk.Run(10 * time.Minute)
	s.Append(t.Context(), motion(3)) // at 1 h 10 min
	clk.Run(10 * time.Minute)
	s.shutdown(false)
	s = openTest(t, path, opts)
	if r := s.Running(); r < time.Hour+10*time.Minute || r > time.Hour+11*time.Minute {
		t.Errorf("running %v after a crash, want the last checkpoint's 1h10m", r)
	}
}

// An open that writes nothing still counts the time it ran, once that is
// a checkpoint's worth; a shorter one leaves the file as it was.
func TestRunningWithoutWrites(t *testing.T) {
	clk := newRunningClock()
	path := tempPath(t)
	opts := func(o *Options) { o.Now, o.CheckAtOpen = clk.Now, false }
	s := openTest(t, path, opts)
	s.Append(t.Context(), motion(1))
	s.Close()
	s = openTest(t, path, opts) // the first open after a close of its own
	s.Close()
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s = openTest(t, path, opts)
	clk.Run(checkpointEvery / 2)
	s.Close()
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("an open of half a minute that wrote nothing changed the file")
	}
	s = openTest(t, path, opts)
	clk.Run(time.Hour)
	s.Close()
	s = openTest(t, path, opts)
	if r := s.Running(); r < time.Hour {
		t.Errorf("running %v after an open of an hour that wrote nothing, want at least the hour", r)
	}
}

// Checkpoints no cutoff needs are deleted; the newest one always stays.
func TestCheckpointsPruned(t *testing.T) {
	clk := newRunningClock()
	s := openTest(t, tempPath(t), func(o *Options) { o.Now = clk.Now })
	for range 30 * 24 {
		s.Append(t.Context(), motion(1))
		clk.Run(time.Hour)
	}
	count := func() (n int) {
		s.read(func(tx *bolt.Tx) error {
			// Not Stats, which counts the pages bbolt has (the open
			// transaction's are not there before the fold).
			return tx.Bucket(bClock).ForEach(func(_, _ []byte) error { n++; return nil })
		})
		return n
	}
	before := count()
	if _, err := s.Retain(t.Context()); err != nil {
		t.Fatal(err)
	}
	// One at or below the 7-day cutoff, one an hour for the 7 days since.
	if after := count(); after > 7*24+2 || after < 7*24-1 {
		t.Errorf("%d checkpoints before retention, %d after; want about %d", before, after, 7*24+1)
	}
	verifyOK(t, s)
}

// An event stamped a year in the future (wall) stops retention of none of
// the events behind or after it: age is told by the running clock.
func TestFutureEventStopsNothing(t *testing.T) {
	clk := newRunningClock()
	s := openTest(t, tempPath(t), func(o *Options) { o.Now = clk.Now })
	for i := range 10 {
		s.Append(t.Context(), motion(i))
	}
	future := motion(100)
	future.IngestedAt = clk.Now().Add(365 * 24 * time.Hour).UnixNano()
	future.OccurredAt = future.IngestedAt
	s.Append(t.Context(), future)
	for i := range 10 {
		s.Append(t.Context(), motion(200+i))
	}
	clk.Run(ClassTelemetry.TTL + 2*time.Minute)
	res, err := s.Retain(t.Context())
	if err != nil || res.Events != 21 {
		t.Errorf("retain: %+v %v, want all 21 events deleted", res, err)
	}
	verifyOK(t, s)
}

// A kept event of a class with a longer TTL does not stop the events of a
// shorter one behind it.
func TestLongerTTLDoesNotStopShorter(t *testing.T) {
	clk := newRunningClock()
	classes := DefaultClasses()
	classes.ByPrefix["audio."] = Class{Name: "long", Outbox: true, Droppable: true, TTL: 30 * 24 * time.Hour}
	s := openTest(t, tempPath(t), func(o *Options) { o.Now, o.Classes = clk.Now, &classes })
	s.Append(t.Context(), motion(1))
	s.Append(t.Context(), Event{Type: "audio.level", Provenance: Observed})
	s.Append(t.Context(), motion(2))
	clk.Run(8 * 24 * time.Hour)
	if res, err := s.Retain(t.Context()); err != nil || res.Events != 2 {
		t.Errorf("day 8: %+v %v, want the two motions", res, err)
	}
	clk.Run(23 * 24 * time.Hour)
	if res, err := s.Retain(t.Context()); err != nil || res.Events != 1 {
		t.Errorf("day 31: %+v %v, want the audio event", res, err)
	}
	verifyOK(t, s)
}

// An event without a time of its own carries the Stamp's; one with its own
// keeps it.
func TestStamp(t *testing.T) {
	clk := newRunningClock()
	for _, synced := range []bool{true, false} {
		t.Run(fmt.Sprintf("synced=%v", synced), func(t *testing.T) {
			clk.SetSynced(synced)
			s := openTest(t, tempPath(t), func(o *Options) {
				o.Now = clk.Now
				o.Stamp = func() TimeStamp {
					return TimeStamp{MonotonicNS: int64(clk.Mono()), Domain: clk.BootID(), UncertaintyMS: 7, Unsynced: !clk.Synced()}
				}
			})
			own := motion(1)
			own.MonotonicNS, own.ClockDomain, own.ClockUncertaintyMS = 42, "other-boot", 3
			res, err := s.Append(t.Context(), Event{Type: "action.proposed", Provenance: Told}, own)
			if err != nil {
				t.Fatal(err)
			}
			evs, _ := s.Events(Filter{})
			a, o := evs[0].Event, evs[1].Event
			wantUnc := uint32(7)
			if !synced {
				wantUnc = math.MaxUint32
			}
			if a.ClockDomain != clk.BootID() || a.MonotonicNS <= 0 || a.ClockUncertaintyMS != wantUnc || a.ClockUnsynced == synced {
				t.Errorf("audit record stamped %q %d %d unsynced=%v; want %q, a monotonic reading, %d, unsynced=%v",
					a.ClockDomain, a.MonotonicNS, a.ClockUncertaintyMS, a.ClockUnsynced, clk.BootID(), wantUnc, !synced)
			}
			if o.ClockDomain != "other-boot" || o.MonotonicNS != 42 || o.ClockUncertaintyMS != 3 || o.ClockUnsynced {
				t.Errorf("an event with its own time: %+v", o)
			}
			if evs[0].Seq != res[0].Seq {
				t.Errorf("seq %d, want %d", evs[0].Seq, res[0].Seq)
			}
		})
	}
}

// A file of schema 1 (an expiry index, expiries in the inbox's values, no
// checkpoints) migrates: its keys still dedupe, even those whose window
// ran out, a key naming no stored event goes, and its events live one TTL
// of running time after the migration.
func TestMigrateFromSchema1(t *testing.T) {
	path := tempPath(t)
	clk := newRunningClock()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	past := clk.Now().Add(-30 * 24 * time.Hour)
	var legacy []Event
	for i := range 5 {
		e := motion(i)
		e.DedupeKey = fmt.Sprint("m", i)
		legacy = append(legacy, e)
	}
	legacy = append(legacy, Event{Type: "action.proposed", Provenance: Told, DedupeKey: "action:agent:pi:k-1"})
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bMeta, bEvents, bIDs, bInbox, bInboxExp, bAggregates, bProj} {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		meta, ev := tx.Bucket(bMeta), tx.Bucket(bEvents)
		meta.Put(kSchema, u64(1))
		meta.Put(kAgentID, testAgent[:])
		meta.Put(kBodyID, testBody[:])
		meta.Put(kCreated, u64(uint64(past.UnixNano())))
		for i := range legacy {
			e := &legacy[i]
			e.ID, e.SchemaVersion, e.AgentID, e.BodyID = NewID(), SchemaVersion, testAgent, testBody
			e.IngestedAt = past.Add(time.Duration(i) * time.Second).UnixNano()
			e.OccurredAt = e.IngestedAt
			seq, _ := ev.NextSequence()
			var buf bytes.Buffer
			if err := Encode(&buf, e); err != nil {
				return err
			}
			ev.Put(u64(seq), buf.Bytes())
			row := outboxRow{Priority: 1, Droppable: true, Size: uint32(buf.Len())}
			ev.Put(rowKey(seq), row.encode())
			tx.Bucket(bIDs).Put(e.ID[:], u64(seq))
			// Expired an hour after the event: the old code would free it.
			exp := u64(uint64(e.IngestedAt + int64(time.Hour)))
			tx.Bucket(bInbox).Put([]byte(e.DedupeKey), append(exp, u64(seq)...))
			tx.Bucket(bInboxExp).Put(append(exp, e.DedupeKey...), nil)
		}
		// A key whose event retention deleted before its window ran out.
		tx.Bucket(bInbox).Put([]byte("orphan"), append(u64(uint64(clk.Now().UnixNano())), u64(99)...))
		return meta.Put(kIDsThrough, u64(uint64(len(legacy))))
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	s := openTest(t, path, func(o *Options) { o.Now = clk.Now })
	st, _ := s.Stats()
	if st.Schema != 2 || st.InboxKeys != len(legacy) || st.Events != len(legacy) {
		t.Errorf("after migration: schema %d, %d inbox keys, %d events; want 2, %d, %d", st.Schema, st.InboxKeys, st.Events, len(legacy), len(legacy))
	}
	s.read(func(tx *bolt.Tx) error {
		if tx.Bucket(bInboxExp) != nil {
			t.Error("the expiry index is still there")
		}
		if k, v := tx.Bucket(bClock).Cursor().First(); getU64(k) != uint64(len(legacy)+1) || getU64(v) != 0 {
			t.Errorf("first checkpoint (%d, %d), want (%d, 0)", getU64(k), getU64(v), len(legacy)+1)
		}
		return nil
	})
	verifyOK(t, s)
	dupAll := func(when string, from int) {
		t.Helper()
		for i, e := range legacy[from:] {
			again := Event{Type: e.Type, Provenance: e.Provenance, DedupeKey: e.DedupeKey}
			if r, err := s.Append(t.Context(), again); err != nil || !r[0].Duplicate || r[0].Seq != uint64(from+i+1) {
				t.Errorf("%s: key %q: %+v %v, want a duplicate of seq %d", when, e.DedupeKey, r, err, from+i+1)
			}
		}
	}
	dupAll("after migration", 0)
	clk.Run(ClassTelemetry.TTL - time.Hour)
	if res, err := s.Retain(t.Context()); err != nil || res.Events != 0 {
		t.Errorf("an hour short of a TTL after migration: %+v %v, want nothing deleted", res, err)
	}
	dupAll("an hour short of a TTL", 0)
	clk.Run(2 * time.Hour)
	if res, err := s.Retain(t.Context()); err != nil || res.Events != 5 || res.InboxKeys != 5 {
		t.Errorf("a TTL after migration: %+v %v, want the 5 motions and their keys", res, err)
	}
	dupAll("the audit record's key", 5)
	verifyOK(t, s)
}
