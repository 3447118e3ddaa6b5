package ledger

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"
)

func grantEvent(i int) Event {
	return Event{Type: "action.succeeded", ChannelID: "gpio.led", Provenance: Observed, SourceSequence: uint64(i)}
}

func appendAll(t *testing.T, s *Store, evs ...Event) {
	t.Helper()
	if _, err := s.Append(t.Context(), evs...); err != nil {
		t.Fatal(err)
	}
}

func rowsOf(t *testing.T, s *Store) uint64 {
	t.Helper()
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return st.OutboxRows
}

func typesOf(t *testing.T, s *Store, typ string) []Stored {
	t.Helper()
	evs, err := s.Events(Filter{Types: []string{typ}})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// With no uplink nothing is queued for one: a file opened so has its
// rows cleared (and says so), and its appends write none. Opened with an
// uplink again, the outbox starts with the next event, or with the
// backlog asked for.
func TestOutboxOffAndOn(t *testing.T) {
	clk := newRunningClock()
	path := tempPath(t)
	open := func(mod func(*Options)) *Store {
		return openTest(t, path, func(o *Options) { o.Now = clk.Now; mod(o) })
	}
	s := open(func(*Options) {})
	appendAll(t, s, motion(1), grantEvent(1))
	if n := rowsOf(t, s); n != 2 {
		t.Fatalf("%d rows, want 2", n)
	}
	s.Close()

	s = open(func(o *Options) { o.NoOutbox = true })
	if n := rowsOf(t, s); n != 0 {
		t.Errorf("opened with no uplink: %d rows left", n)
	}
	if evs := typesOf(t, s, "ledger.outbox_cleared"); len(evs) != 1 {
		t.Errorf("%d ledger.outbox_cleared events, want 1", len(evs))
	}
	clk.Run(2 * time.Hour)
	appendAll(t, s, motion(2), grantEvent(2))
	clk.Run(2 * time.Hour)
	appendAll(t, s, motion(3))
	if n := rowsOf(t, s); n != 0 {
		t.Errorf("appends with no uplink wrote %d rows", n)
	}
	if r, err := s.Verify(t.Context()); err != nil || !r.OK() {
		t.Errorf("verify: %v %v", r.Problems, err)
	}
	s.Close()
	s = open(func(o *Options) { o.NoOutbox = true }) // again: nothing more to clear, nothing recorded
	if evs := typesOf(t, s, "ledger.outbox_cleared"); len(evs) != 1 {
		t.Errorf("a second open with no uplink: %d ledger.outbox_cleared events, want still 1", len(evs))
	}
	s.Close()

	// The uplink comes, with a backlog of 1 h: the events of the last hour
	// of running time are queued (motion 3; motion 2 and action 2 are 2 h
	// old, the rest 4 h), and what comes next.
	s = open(func(o *Options) { o.OutboxBacklog = time.Hour })
	items, err := s.OutboxNext(0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, it := range items {
		types = append(types, it.Event.Type+"/"+string(rune('0'+it.Event.SourceSequence)))
	}
	// motion 3 (younger than 3 h); ledger.outbox_started comes after.
	if len(items) < 1 || items[0].Event.Type != "camera.motion_started" || items[0].Event.SourceSequence != 3 {
		t.Errorf("the backlog queued %v, want motion 3 first", types)
	}
	for _, it := range items {
		if it.Event.SourceSequence == 2 {
			t.Errorf("an event older than the backlog was queued: %v", types)
		}
	}
	started := typesOf(t, s, "ledger.outbox_started")
	if len(started) != 1 {
		t.Fatalf("%d ledger.outbox_started events", len(started))
	}
	var p struct {
		From    uint64 `cbor:"from_seq"`
		Backlog int    `cbor:"backlog_events"`
		BS      int64  `cbor:"backlog_s"`
	}
	if err := UnmarshalPayload(started[0].Payload, &p); err != nil || p.Backlog != 1 || p.BS != 3600 {
		t.Errorf("ledger.outbox_started %+v %v", p, err)
	}
	appendAll(t, s, motion(4))
	if n := rowsOf(t, s); n != uint64(len(items))+1 {
		t.Errorf("%d rows after one more event, want %d", n, len(items)+1)
	}
	if r, err := s.Verify(t.Context()); err != nil || !r.OK() {
		t.Errorf("verify: %v %v", r.Problems, err)
	}
}

// Over the budget with only audit rows, those that waited longer than
// OutboxAuditWait go out of the outbox, recorded as not sent, and the
// budget holds; their events stay. Younger ones wait on.
func TestAuditRowsThatWaitedTooLongAreNotSent(t *testing.T) {
	clk := newRunningClock()
	s := openTest(t, tempPath(t), func(o *Options) {
		o.Now, o.OutboxMaxRows, o.OutboxAuditWait = clk.Now, 100, time.Hour
	})
	batch := func(from, n int) {
		evs := make([]Event, 0, n)
		for i := from; i < from+n; i++ {
			evs = append(evs, grantEvent(i))
		}
		appendAll(t, s, evs...)
	}
	batch(0, 150)
	if n := rowsOf(t, s); n < 150 {
		t.Fatalf("young audit rows went out of the outbox: %d left of 150", n)
	}
	clk.Run(2 * time.Hour) // the 150 have waited 2 h
	batch(150, 10)         // a commit over the budget, a checkpoint due
	clk.Run(time.Minute)
	batch(160, 10)
	n := rowsOf(t, s)
	if n > 100 {
		t.Errorf("%d rows: the budget of 100 does not hold", n)
	}
	notSent := typesOf(t, s, "ledger.outbox_not_sent")
	if len(notSent) == 0 {
		t.Fatal("no ledger.outbox_not_sent event")
	}
	items, _ := s.OutboxNext(0, 1000)
	for _, it := range items {
		if it.Event.Type == "action.succeeded" && it.Event.SourceSequence >= 150 {
			continue
		}
		if it.Event.Type == "action.succeeded" && it.Event.SourceSequence < 60 {
			t.Errorf("an old row (%d) stayed while younger ones were given up", it.Event.SourceSequence)
		}
	}
	youngest := false
	for _, it := range items {
		youngest = youngest || it.Event.Type == "action.succeeded" && it.Event.SourceSequence >= 160
	}
	if !youngest {
		t.Error("the youngest rows are not in the outbox")
	}
	if all, _ := s.Events(Filter{Types: []string{"action.succeeded"}, Limit: 1000}); len(all) != 170 {
		t.Errorf("%d action events in the ledger, want all 170", len(all))
	}
	t.Logf("%d rows left, %d not-sent records", n, len(notSent))
}

// Grouped appends of telemetry wait for company; the first append that
// may not wait (an audit event) commits them all, in one transaction;
// the uplink's acknowledgements wait with them; Close commits what
// waits.
func TestGroupCommit(t *testing.T) {
	path := tempPath(t)
	s := openTest(t, path, func(o *Options) { o.GroupCommit = time.Hour })
	appendAll(t, s, motion(0)) // an Append, not grouped: at once
	items, _ := s.OutboxNext(0, 10)
	before := s.commits.Load()
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Go(func() {
			if _, err := s.AppendGrouped(t.Context(), time.Time{}, motion(i+1)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Go(func() {
		if err := s.OutboxAck(items[0].Seq); err != nil {
			t.Error(err)
		}
	})
	for s.held.Load() < 6 {
		time.Sleep(time.Millisecond) // until all six wait (an hour is the deadline)
	}
	if n := s.commits.Load() - before; n != 0 {
		t.Fatalf("%d commits while the grouped appends wait", n)
	}
	appendAll(t, s, grantEvent(1)) // audit: may not wait
	wg.Wait()
	if n := s.commits.Load() - before; n != 1 {
		t.Errorf("%d commits for five grouped appends, an ack and an audit append, want 1", n)
	}
	if evs, _ := s.Events(Filter{Types: []string{"camera.motion_started"}}); len(evs) != 6 {
		t.Errorf("%d motion events, want 6", len(evs))
	}
	if rows, _ := s.OutboxNext(0, 100); len(rows) != 6 || rows[0].Seq == items[0].Seq {
		t.Errorf("after the ack: %d rows, first %d (acked %d)", len(rows), rows[0].Seq, items[0].Seq)
	}
	// A grouped append of a class that may not wait is not held.
	before = s.commits.Load()
	if _, err := s.AppendGrouped(t.Context(), time.Time{}, Event{Type: "body.degradation", Provenance: Observed}, motion(9)); err != nil {
		t.Fatal(err)
	}
	if n := s.commits.Load() - before; n != 1 {
		t.Errorf("a grouped append with a safety event: %d commits, want 1", n)
	}
	// Close commits what waits.
	done := make(chan error, 1)
	go func() { _, err := s.AppendGrouped(context.Background(), time.Time{}, motion(10)); done <- err }()
	for s.held.Load() < 1 {
		time.Sleep(time.Millisecond)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the grouped append waiting at Close: %v", err)
	}
	s = openTest(t, path)
	if evs, _ := s.Events(Filter{Types: []string{"camera.motion_started"}}); len(evs) != 8 {
		t.Errorf("after Close and open: %d motion events, want 8", len(evs))
	}
}

// A grouped append waits no longer than GroupCommit from when its events
// began to wait (since), not from when it was made: the events a sense
// channel queued while its previous append waited do not wait for that
// one and then a whole GroupCommit of their own.
func TestGroupedWaitIsBoundedByTheEvent(t *testing.T) {
	s := openTest(t, tempPath(t), func(o *Options) { o.GroupCommit = time.Hour })
	before := s.commits.Load()
	// Events that began to wait longer ago than GroupCommit commit at once.
	if _, err := s.AppendGrouped(t.Context(), time.Now().Add(-2*time.Hour), motion(1)); err != nil { // returns: it does not wait an hour
		t.Fatal(err)
	}
	if n := s.commits.Load() - before; n != 1 {
		t.Fatalf("an append whose events waited past GroupCommit: %d commits, want 1", n)
	}
	// A held append (an hour to go) and one whose events have waited all
	// but a moment: the second's deadline commits both, together.
	before = s.commits.Load()
	done := make(chan error, 2)
	go func() { _, err := s.AppendGrouped(context.Background(), time.Time{}, motion(2)); done <- err }()
	for s.held.Load() < 1 {
		time.Sleep(time.Millisecond)
	}
	second := time.Now()
	go func() {
		_, err := s.AppendGrouped(context.Background(), time.Now().Add(-time.Hour+100*time.Millisecond), motion(3))
		done <- err
	}()
	for range 2 {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(time.Minute): // the deadline is 100 ms off; the old one an hour
			t.Fatal("the held appends waited for the first one's deadline, not the oldest event's")
		}
	}
	if took := time.Since(second); took < 90*time.Millisecond {
		t.Errorf("the held appends committed %v after the second came: not held to its deadline (100 ms)", took)
	}
	if n := s.commits.Load() - before; n != 1 {
		t.Errorf("%d commits for the two held appends, want 1", n)
	}
	if evs, _ := s.Events(Filter{Types: []string{"camera.motion_started"}}); len(evs) != 3 {
		t.Errorf("%d motion events, want 3", len(evs))
	}
}

// Appends that race Close are each answered, committed or ErrClosed, and
// everything answered as committed is in the file: none is left waiting
// in the queue after the last drain.
func TestAppendsRacingCloseAreAnswered(t *testing.T) {
	path := tempPath(t)
	for round := range 40 {
		s := openTest(t, path)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var committed []UUID
		start := make(chan struct{})
		for g := range 8 {
			wg.Go(func() {
				<-start
				for i := 0; ; i++ {
					ev := motion(round*1_000_000 + g*10_000 + i)
					ev.ID = NewID()
					_, err := s.Append(context.Background(), ev)
					if errors.Is(err, ErrClosed) {
						return
					}
					if err != nil {
						t.Errorf("append: %v", err)
						return
					}
					mu.Lock()
					committed = append(committed, ev.ID)
					mu.Unlock()
				}
			})
		}
		close(start)
		time.Sleep(time.Duration(round%5) * time.Millisecond)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		answered := make(chan struct{})
		go func() { wg.Wait(); close(answered) }()
		select {
		case <-answered:
		case <-time.After(time.Minute):
			t.Fatalf("round %d: an append racing Close was never answered", round)
		}
		s = openTest(t, path)
		evs, err := s.Events(Filter{Types: []string{"camera.motion_started"}, Limit: math.MaxInt})
		if err != nil {
			t.Fatal(err)
		}
		stored := map[UUID]bool{}
		for _, e := range evs {
			stored[e.Event.ID] = true
		}
		for _, id := range committed {
			if !stored[id] {
				t.Fatalf("round %d: event %v was answered as committed and is not in the file", round, id)
			}
		}
		s.Close()
	}
}

// The interleaving TestAppendsRacingCloseAreAnswered can only hope to
// hit, made every time: Close starts between a request's look at closed
// and its send into the commit queue. The request is answered (committed
// or ErrClosed), never left in the queue after the last drain; a
// committed one is in the file. Appends, grouped appends and
// acknowledgements alike.
func TestCloseBetweenTheLookAndTheSend(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(s *Store) error
	}{
		{"append", func(s *Store) error { _, err := s.Append(context.Background(), motion(1)); return err }},
		{"grouped", func(s *Store) error {
			_, err := s.AppendGrouped(context.Background(), time.Time{}, motion(1))
			return err
		}},
		{"ack", func(s *Store) error { return s.OutboxAck(1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Without the fix the send wins half the time: 8 rounds.
			for range 8 {
				path := tempPath(t)
				s := openTest(t, path, func(o *Options) { o.GroupCommit = time.Hour })
				closed := make(chan error, 1)
				enqueueHook = func(*Store) {
					go func() { closed <- s.Close() }()
					time.Sleep(50 * time.Millisecond) // time for Close to drain and finish, were it not held off
				}
				done := make(chan error, 1)
				go func() { done <- tc.call(s) }()
				var err error
				select {
				case err = <-done:
				case <-time.After(time.Minute):
					t.Fatal("a request sent as the store closed was never answered")
				}
				enqueueHook = nil
				if err != nil && !errors.Is(err, ErrClosed) {
					t.Fatalf("%v, want an answer or ErrClosed", err)
				}
				if err := <-closed; err != nil {
					t.Fatal(err)
				}
				if tc.name != "ack" && err == nil {
					s = openTest(t, path)
					if evs, _ := s.Events(Filter{Types: []string{"camera.motion_started"}}); len(evs) != 1 {
						t.Errorf("answered as committed, and %d events in the file", len(evs))
					}
				}
			}
		})
	}
}

// Hurry commits what waits for company at once, and nothing waits after.
func TestHurry(t *testing.T) {
	s := openTest(t, tempPath(t), func(o *Options) { o.GroupCommit = time.Hour })
	done := make(chan error, 1)
	go func() { _, err := s.AppendGrouped(context.Background(), time.Time{}, motion(1)); done <- err }()
	for s.held.Load() < 1 {
		time.Sleep(time.Millisecond)
	}
	s.Hurry()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	before := s.commits.Load()
	if _, err := s.AppendGrouped(t.Context(), time.Time{}, motion(2)); err != nil { // returns: it does not wait an hour
		t.Fatal(err)
	}
	if err := s.OutboxAck(1); err != nil {
		t.Fatal(err)
	}
	if n := s.commits.Load() - before; n != 2 {
		t.Errorf("%d commits after Hurry for an append and an ack, want 2", n)
	}
}

// A grouped append of 32 events or more commits at once: its caller is
// busy, and they share a commit already.
func TestBusyGroupedAppendDoesNotWait(t *testing.T) {
	s := openTest(t, tempPath(t), func(o *Options) { o.GroupCommit = time.Hour })
	evs := make([]Event, groupedBusy)
	for i := range evs {
		evs[i] = motion(i)
	}
	before := s.commits.Load()
	if _, err := s.AppendGrouped(t.Context(), time.Time{}, evs...); err != nil { // returns: it does not wait an hour
		t.Fatal(err)
	}
	if n := s.commits.Load() - before; n != 1 {
		t.Errorf("%d commits, want 1", n)
	}
}
