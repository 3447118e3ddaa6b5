package evidence

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tobe-body/tobe-body/hal/haltest/stepclock"
	"github.com/tobe-body/tobe-body/ledger"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// runningClock is a step clock whose monotonic reading the test moves
// on, as hours of running would; Step moves the wall reading alone.
type runningClock struct {
	*stepclock.Clock
	ran atomic.Int64
}

func (c *runningClock) Now() time.Time      { return c.Clock.Now().Add(time.Duration(c.ran.Load())) }
func (c *runningClock) Run(d time.Duration) { c.ran.Add(int64(d)) }
func newRunningClock() *runningClock        { return &runningClock{Clock: stepclock.New()} }
func jpegOf(n int) []byte                   { return bytes.Repeat([]byte{0xff, 0xd8, byte(n)}, 100+n) }
func hashOf(b []byte) string                { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
func snapshot(data []byte, by, grant string) Media {
	return Media{Kind: Snapshot, Source: "camera.front", MediaType: "image/jpeg", Data: data, Width: 4, Height: 3, By: by, Why: "look", Grant: grant, Privacy: ledger.Sensitive}
}

// fixture is a store over a ledger in a directory of its own.
type fixture struct {
	t     *testing.T
	dir   string
	clock *runningClock
	led   *ledger.Store
	opts  Options
	s     *Store
}

func newFixture(t *testing.T, mod ...func(*Options)) *fixture {
	f := &fixture{t: t, dir: t.TempDir(), clock: newRunningClock()}
	f.opts = Options{Dir: filepath.Join(f.dir, "evidence"), Lifetimes: map[Kind]time.Duration{Snapshot: time.Hour, Clip: 2 * time.Hour}}
	for _, m := range mod {
		m(&f.opts)
	}
	f.open()
	t.Cleanup(func() { f.led.Close() })
	return f
}

func (f *fixture) open() {
	f.t.Helper()
	classes := ledger.DefaultClasses()
	led, err := ledger.Open(ledger.Options{Path: filepath.Join(f.dir, "ledger.db"), Projections: Projections(), Classes: &classes, Now: f.clock.Now})
	if err != nil {
		f.t.Fatal(err)
	}
	f.led = led
	o := f.opts
	o.Ledger = led
	s, err := Open(f.t.Context(), o)
	if err != nil {
		f.t.Fatal(err)
	}
	f.s = s
}

func (f *fixture) restart() {
	f.t.Helper()
	if err := f.led.Close(); err != nil {
		f.t.Fatal(err)
	}
	f.open()
}

// types lists the evidence records in the ledger, in order.
func (f *fixture) types() []string {
	f.t.Helper()
	evs, err := f.led.Events(ledger.Filter{Types: []string{"evidence."}})
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

func (f *fixture) exists(it Item) bool {
	_, err := os.Stat(filepath.Join(f.opts.Dir, it.SHA256+".jpg"))
	return err == nil
}

func (f *fixture) verify() {
	f.t.Helper()
	rep, err := f.led.Verify(f.t.Context())
	if err != nil {
		f.t.Fatal(err)
	}
	if !rep.OK() {
		f.t.Fatalf("the projection does not rebuild from the events: %+v", rep)
	}
}

func TestKeepViewDelete(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	data := jpegOf(1)
	it, err := f.s.Keep(ctx, snapshot(data, "agent:pi", "g-1"))
	if err != nil {
		t.Fatal(err)
	}
	if it.SHA256 != hashOf(data) || it.Bytes != int64(len(data)) || it.By != "agent:pi" || it.Grant != "g-1" || it.Privacy != "sensitive" || it.Seq == 0 {
		t.Fatalf("kept %+v", it)
	}
	if got := time.Duration(it.LifetimeMS) * time.Millisecond; got != time.Hour {
		t.Errorf("lifetime %v, want the snapshot's 1h", got)
	}
	fi, err := os.Stat(filepath.Join(f.opts.Dir, it.SHA256+".jpg"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("file mode %v, want 0640", fi.Mode().Perm())
	}
	if di, _ := os.Stat(f.opts.Dir); di.Mode().Perm() != 0o750 {
		t.Errorf("directory mode %v, want 0750", di.Mode().Perm())
	}
	if _, b, err := f.s.ReadBack(it.ID); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("read back %d bytes, %v", len(b), err)
	}
	seen, file, err := f.s.View(ctx, it.ID, "admin:uid=0", "admin")
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(data)+1)
	n, _ := file.Read(got)
	file.Close()
	if !bytes.Equal(got[:n], data) || seen.Views != 1 {
		t.Fatalf("viewed %d bytes, views %d", n, seen.Views)
	}
	if now, _, _ := f.s.Lookup(it.ID); now.Views != 1 {
		t.Errorf("the record counts %d views, want 1", now.Views)
	}
	if _, err := f.s.Delete(ctx, it.ID, "admin:uid=0", "done"); err != nil {
		t.Fatal(err)
	}
	if f.exists(it) {
		t.Error("the file is still there after delete")
	}
	if _, _, err := f.s.View(ctx, it.ID, "admin:uid=0", "admin"); !errors.Is(err, ErrUnknown) {
		t.Errorf("view after delete: %v, want ErrUnknown", err)
	}
	if _, err := f.s.Delete(ctx, it.ID, "admin:uid=0", "again"); !errors.Is(err, ErrUnknown) {
		t.Errorf("delete again: %v, want ErrUnknown", err)
	}
	want := []string{TypeCaptured, TypeViewed, TypeDeleted}
	if got := f.types(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("records %v, want %v", got, want)
	}
	f.verify()
}

// Two pieces of the same bytes share a file, which goes with the last.
func TestSharedFile(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	a, err := f.s.Keep(ctx, snapshot(jpegOf(2), "agent:pi", ""))
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.s.Keep(ctx, snapshot(jpegOf(2), "agent:other", ""))
	if err != nil {
		t.Fatal(err)
	}
	if a.ID == b.ID || a.SHA256 != b.SHA256 {
		t.Fatalf("two keeps: %s %s, hashes %s %s", a.ID, b.ID, a.SHA256, b.SHA256)
	}
	if _, err := f.s.Delete(ctx, a.ID, "admin", ""); err != nil {
		t.Fatal(err)
	}
	if !f.exists(b) {
		t.Fatal("deleting one removed the file the other names")
	}
	if _, _, err := f.s.ReadBack(b.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Delete(ctx, b.ID, "admin", ""); err != nil {
		t.Fatal(err)
	}
	if f.exists(b) {
		t.Fatal("the file outlived the last record that names it")
	}
}

// A lifetime runs on the ledger's running clock: a wall step neither
// ends a piece early nor keeps it late, within one run or across a
// restart.
func TestLifetimeOnTheRunningClock(t *testing.T) {
	for _, step := range []time.Duration{-48 * time.Hour, -10 * time.Minute, 25 * time.Hour, 365 * 24 * time.Hour} {
		for _, restart := range []bool{false, true} {
			t.Run(fmt.Sprintf("step=%v/restart=%v", step, restart), func(t *testing.T) {
				f := newFixture(t)
				ctx := t.Context()
				it, err := f.s.Keep(ctx, snapshot(jpegOf(3), "agent:pi", ""))
				if err != nil {
					t.Fatal(err)
				}
				clip, err := f.s.Keep(ctx, Media{Kind: Clip, Source: "audio.mic", MediaType: "audio/wav", Data: []byte("RIFF....WAVE"), Duration: time.Second, By: "agent:pi", Privacy: ledger.Sensitive})
				if err != nil {
					t.Fatal(err)
				}
				f.clock.Run(40 * time.Minute)
				if restart {
					f.restart()
				}
				f.clock.Step(step)
				if ended, err := f.s.Sweep(ctx); err != nil || len(ended) != 0 {
					t.Fatalf("40 minutes into a 1h lifetime, after a step of %v: ended %v, %v", step, ended, err)
				}
				f.clock.Run(21 * time.Minute)
				if restart {
					f.restart() // Open sweeps
				} else if _, err := f.s.Sweep(ctx); err != nil {
					t.Fatal(err)
				}
				if f.exists(it) {
					t.Fatal("the snapshot's file outlived its lifetime")
				}
				if _, ok, _ := f.s.Lookup(it.ID); ok {
					t.Fatal("the snapshot's record outlived its lifetime")
				}
				if _, ok, _ := f.s.Lookup(clip.ID); !ok {
					t.Fatal("the clip, of a 2h lifetime, ended with the snapshot")
				}
				want := []string{TypeCaptured, TypeCaptured, TypeExpired}
				if got := f.types(); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("records %v, want %v", got, want)
				}
				f.verify()
			})
		}
	}
}

// Run ends a piece when its lifetime ends, woken by what was kept.
func TestRunEndsPieces(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.Lifetimes = map[Kind]time.Duration{Snapshot: 30 * time.Millisecond} })
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ended := make(chan []Item, 4)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.s.Run(ctx, func(its []Item, err error) {
			if err != nil {
				t.Error(err)
			}
			ended <- its
		})
	}()
	it, err := f.s.Keep(ctx, snapshot(jpegOf(4), "agent:pi", ""))
	if err != nil {
		t.Fatal(err)
	}
	// The running clock follows the monotonic reading of Now: real time
	// here, 30 ms of it.
	select {
	case got := <-ended:
		if len(got) != 1 || got[0].ID != it.ID {
			t.Fatalf("ended %v, want %s", got, it.ID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not end the piece within 10 s of its 30 ms lifetime")
	}
	if f.exists(it) {
		t.Fatal("its file is still there")
	}
	cancel()
	<-done
}

// Open removes what a crash left: a file no record names, a temporary
// file; it records a live piece whose file is gone; it removes an earlier
// body's motion snapshots; it leaves alone what it did not write.
func TestOpenTidies(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	kept, err := f.s.Keep(ctx, snapshot(jpegOf(5), "agent:pi", ""))
	if err != nil {
		t.Fatal(err)
	}
	gone, err := f.s.Keep(ctx, snapshot(jpegOf(6), "agent:pi", ""))
	if err != nil {
		t.Fatal(err)
	}
	dir := f.opts.Dir
	orphan := filepath.Join(dir, hashOf([]byte("orphan"))+".jpg")
	tmp := filepath.Join(dir, "."+hashOf([]byte("half"))+".wav.tmp")
	other := filepath.Join(dir, "notes.txt")
	sub := filepath.Join(dir, "mine")
	legacy := filepath.Join(dir, "camera.front") // an earlier body's motion snapshots
	for _, d := range []string{sub, legacy} {
		if err := os.Mkdir(d, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{orphan, tmp, other, filepath.Join(legacy, "1765000000-12.jpg")} {
		if err := os.WriteFile(p, []byte("x"), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(dir, gone.SHA256+".jpg")); err != nil {
		t.Fatal(err)
	}
	f.restart()
	for _, p := range []string{orphan, tmp, legacy} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", filepath.Base(p), err)
		}
	}
	for _, p := range []string{other, sub} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s, not the store's, was touched: %v", filepath.Base(p), err)
		}
	}
	if !f.exists(kept) {
		t.Error("a live piece's file was removed")
	}
	if _, ok, _ := f.s.Lookup(gone.ID); ok {
		t.Error("a piece whose file is gone is still live")
	}
	want := []string{TypeCaptured, TypeCaptured, TypeDeleted}
	if got := f.types(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("records %v, want %v", got, want)
	}
}

func TestRevoked(t *testing.T) {
	for _, on := range []OnRevoke{RevokeDeletes, RevokeFreezes} {
		t.Run(string(on), func(t *testing.T) {
			f := newFixture(t, func(o *Options) { o.OnRevoke = on })
			ctx := t.Context()
			a, _ := f.s.Keep(ctx, snapshot(jpegOf(7), "agent:pi", "g-1"))
			b, _ := f.s.Keep(ctx, snapshot(jpegOf(8), "agent:pi", "g-2"))
			done, err := f.s.Revoked(ctx, "g-1", "admin:uid=0")
			if err != nil || len(done) != 1 || done[0].ID != a.ID {
				t.Fatalf("revoked %v, %v; want %s alone", done, err, a.ID)
			}
			got, ok, _ := f.s.Lookup(a.ID)
			switch on {
			case RevokeDeletes:
				if ok || f.exists(a) {
					t.Error("a piece of the revoked grant is kept")
				}
			case RevokeFreezes:
				if !ok || !got.Frozen || !f.exists(a) {
					t.Errorf("frozen piece: %+v, live %v, file %v", got, ok, f.exists(a))
				}
				if again, _ := f.s.Revoked(ctx, "g-1", "admin:uid=0"); len(again) != 0 {
					t.Errorf("a second revocation froze %d again", len(again))
				}
			}
			if _, ok, _ := f.s.Lookup(b.ID); !ok || !f.exists(b) {
				t.Error("a piece of another grant was touched")
			}
			f.verify()
		})
	}
}

func TestKeepRefuses(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.MaxBytes = 1000 })
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		m    Media
		want error
	}{
		{"empty", snapshot(nil, "agent:pi", ""), ErrInvalid},
		{"no one", snapshot(jpegOf(1), "", ""), ErrInvalid},
		{"unknown media", Media{Kind: Snapshot, Source: "camera.front", MediaType: "image/png", Data: []byte{1}, By: "a"}, ErrInvalid},
		{"unknown kind", Media{Kind: "video", Source: "camera.front", MediaType: "image/jpeg", Data: []byte{1}, By: "a"}, ErrInvalid},
		{"over budget", snapshot(make([]byte, 1001), "agent:pi", ""), ErrFull},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := f.s.Keep(ctx, tc.m); !errors.Is(err, tc.want) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
	if ents, _ := os.ReadDir(f.opts.Dir); len(ents) != 0 {
		t.Errorf("refused keeps left %d files", len(ents))
	}
}

// A file whose bytes changed is not read back as the record's.
func TestReadBackFindsDamage(t *testing.T) {
	f := newFixture(t)
	it, err := f.s.Keep(t.Context(), snapshot(jpegOf(9), "agent:pi", ""))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(f.opts.Dir, it.SHA256+".jpg")
	b, _ := os.ReadFile(p)
	b[0] ^= 1
	if err := os.WriteFile(p, b, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.s.ReadBack(it.ID); !errors.Is(err, ErrDamaged) {
		t.Errorf("read back a changed file: %v, want ErrDamaged", err)
	}
}
