package ledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestRetention(t *testing.T) {
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	s := openTest(t, tempPath(t), func(o *Options) { o.Now = clock })
	s.Execute(t.Context(), grantCmd{id: "g"}) // audit: kept for ever
	for i := range 1200 {                     // telemetry: 7 days
		e := motion(i)
		e.DedupeKey = "k" + strconv.Itoa(i)
		s.Append(t.Context(), e)
	}
	now = now.Add(6 * 24 * time.Hour)
	recent, _ := s.Append(t.Context(), motion(9999))
	// Day 6: nothing is old enough; the dedupe keys live with their events.
	if res, err := s.Retain(t.Context()); err != nil || res.Events != 0 || res.InboxKeys != 0 {
		t.Fatalf("day 6: %+v %v, want nothing deleted", res, err)
	}
	now = now.Add(2 * 24 * time.Hour) // day 8: the first batch expired, the recent one not
	res, err := s.Retain(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.Events != 1200 || res.OutboxExpired != 1200 || res.InboxKeys != 1200 {
		t.Errorf("day 8: %+v, want the 1200 old telemetry events, their rows and their keys", res)
	}
	evs, _ := s.Events(Filter{Limit: 10000})
	var types []string
	for _, e := range evs {
		types = append(types, e.Type)
	}
	// The grant, the recent motion, and the second pass's ledger.retained.
	if len(evs) != 3 || evs[1].Seq != recent[0].Seq || types[2] != "ledger.retained" {
		t.Errorf("left: %v", types)
	}
	if r, err := s.Verify(t.Context()); err != nil || !r.OK() {
		t.Errorf("verify after retention: %v %v", r.Problems, err)
	}
	st, _ := s.Stats()
	if st.OutboxRows != 3 {
		t.Errorf("outbox rows %d, want 3", st.OutboxRows)
	}
	// The next pass starts where this one stopped.
	if res, _ := s.Retain(t.Context()); res.Events != 0 {
		t.Errorf("second pass: %+v", res)
	}
}

func TestCompaction(t *testing.T) {
	path := tempPath(t)
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	s := openTest(t, path, func(o *Options) { o.Now = func() time.Time { return now } })
	for i := range 3000 {
		s.Append(t.Context(), motion(i))
	}
	s.Execute(t.Context(), grantCmd{id: "g"})
	// Into bbolt's file, which grows (what one transaction applies and
	// retention deletes before it is folded never reaches the file).
	if err := s.foldNow(); err != nil {
		t.Fatal(err)
	}
	now = now.Add(8 * 24 * time.Hour)
	if _, err := s.Retain(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := CompactFile(path, nil); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("compact while open: %v", err)
	}
	s.Close()
	var calls int
	before, after, err := CompactFile(path, func(done, total int) { calls++ })
	if err != nil {
		t.Fatal(err)
	}
	if after >= before || calls == 0 {
		t.Errorf("compact %d -> %d bytes, %d progress calls", before, after, calls)
	}
	s = openTest(t, path)
	if r, err := s.Verify(t.Context()); err != nil || !r.OK() {
		t.Errorf("verify after compaction: %v %v", r.Problems, err)
	}
	// Sequences go on from where they were.
	res, _ := s.Append(t.Context(), motion(1))
	if res[0].Seq <= 3002 {
		t.Errorf("seq after compaction %d", res[0].Seq)
	}
	if _, err := s.Execute(t.Context(), grantCmd{id: "g", expected: 1}); err != nil {
		t.Errorf("the aggregate lost its version: %v", err)
	}
}

func TestCompactAtOpen(t *testing.T) {
	// The free bytes come from the whole walk, or, for a file closed
	// cleanly and opened without CheckAtOpen, from its free list.
	for _, whole := range []bool{true, false} {
		t.Run(fmt.Sprintf("whole=%v", whole), func(t *testing.T) {
			path := tempPath(t)
			now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
			s := openTest(t, path, func(o *Options) { o.Now = func() time.Time { return now } })
			for i := range 3000 {
				s.Append(t.Context(), motion(i))
			}
			if err := s.foldNow(); err != nil {
				t.Fatal(err)
			}
			now = now.Add(8 * 24 * time.Hour)
			s.Retain(t.Context())
			s.Close()
			fi, _ := os.Stat(path)
			s = openTest(t, path, func(o *Options) { o.CompactFree, o.CheckAtOpen = 1, whole })
			after, _ := os.Stat(path)
			if after.Size() >= fi.Size() {
				t.Errorf("not compacted at open: %d -> %d", fi.Size(), after.Size())
			}
			if r, err := s.Verify(t.Context()); err != nil || !r.OK() {
				t.Errorf("verify after compaction at open: %v %v", r.Problems, err)
			}
		})
	}
}

func TestRetainLoopStopsWithClose(t *testing.T) {
	s := openTest(t, tempPath(t), func(o *Options) { o.RetainEvery = time.Millisecond })
	s.Append(t.Context(), motion(1))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Retain(context.Background()); err == nil || !errors.Is(err, ErrClosed) && !strings.Contains(err.Error(), "closed") {
		t.Logf("retain after close: %v", err)
	}
}
