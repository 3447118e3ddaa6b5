package sense

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/body/evidence"
	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/haltest"
	"github.com/tobe-body/tobe-body/ledger"
	"github.com/tobe-body/tobe-body/sense/motion"
	"github.com/tobe-body/tobe-body/sense/motion/motiontest"
)

// TestCameraChannel plays a synthetic scene (an object crossing two
// zones) through a fake camera, unplugs it during a second crossing, and
// checks the events, the snapshot and the offline/online reports.
func TestCameraChannel(t *testing.T) {
	format := hal.FrameFormat{Pixel: hal.PixelYUYV, Width: 160, Height: 120, Stride: 320}
	sc := motiontest.Scene{Format: format, Seed: 1, Noise: 3, Objects: []motiontest.Object{
		{From: time.Second, To: 4 * time.Second, Start: [2]float64{-0.1, 0.5}, End: [2]float64{1.1, 0.5}, W: 0.15, H: 0.2, Luma: 230},
		{From: 8 * time.Second, To: 12 * time.Second, Start: [2]float64{-0.1, 0.5}, End: [2]float64{1.1, 0.5}, W: 0.15, H: 0.2, Luma: 230},
	}}
	cam := haltest.NewCamera(format, 4)
	keep := &keeper{}
	o := NewOutlet(Source{Channel: "camera.front", Privacy: ledger.Sensitive}, 64)
	var states []string
	cfg := motion.Config{Zones: []motion.Zone{
		{Name: "left", Polygon: []motion.Point{{X: 0, Y: 0}, {X: 0.5, Y: 0}, {X: 0.5, Y: 1}, {X: 0, Y: 1}}},
		{Name: "right", Polygon: []motion.Point{{X: 0.5, Y: 0}, {X: 1, Y: 0}, {X: 1, Y: 1}, {X: 0.5, Y: 1}}},
	}}
	c, err := NewCameraChannel(o, cam, cfg, Snapshots{Store: keep, Lifetime: time.Hour, Config: "sense.cameras.front.snapshots"}, func(online bool, err error) {
		states = append(states, fmt.Sprintf("online=%v %v", online, err))
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background()) }()
	const fps = 15
	frames := 19 * fps / 2 // the stream ends in the middle of the second crossing
	for i := range frames {
		at := time.Duration(i) * time.Second / fps
		if at == 7*time.Second { // unplugged between the crossings, once all before is analysed
			for cam.Released() < i {
				time.Sleep(time.Millisecond) // the channel's goroutine, not a clock
			}
			cam.Fail(fmt.Errorf("camera front: %w", hal.ErrAbsent))
		}
		buf := make([]byte, sc.Bytes())
		sc.Render(buf, at, uint64(i))
		cam.Push(buf, uint64(i+1), hal.Mono(at+time.Second))
	}
	for cam.Released() < frames {
		time.Sleep(time.Millisecond)
	}
	cam.Halt()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var got []string
	var starts []uint64 // the source sequences of the motion starts
	for len(o.q) > 0 {
		q := <-o.q
		ev := q.ev
		var p map[string]any
		if err := ledger.UnmarshalPayload(ev.Payload, &p); err != nil {
			t.Fatal(err)
		}
		s := fmt.Sprintf("%s %v", ev.Type, p["zone"])
		if p["cut"] == true {
			s += " cut"
		}
		if ev.Type == "camera.motion_started" {
			starts = append(starts, ev.SourceSequence)
		}
		got = append(got, s)
	}
	want := []string{
		"camera.motion_started left", "camera.motion_started right", "camera.motion_ended left", "camera.motion_ended right",
		"camera.motion_started left", "camera.motion_ended left cut",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(states) != 2 || !strings.HasPrefix(states[0], "online=false camera front") || states[1] != "online=true <nil>" {
		t.Errorf("states %q, want offline then online", states)
	}
	if s := c.Stats(); s.Snapshots != 3 || len(s.Moving) != 0 || s.Frames == 0 {
		t.Errorf("stats %+v, want a snapshot per start and nothing moving at the end", s)
	}
	if m, ok := c.LastMotion(); !ok || m.Zone != "left" || m.Moving || m.Box[2] <= m.Box[0] {
		t.Errorf("last motion %+v %v, want the cut one in left, ended, with its box", m, ok)
	}
	if b, ok := c.ZoneBox("right"); !ok || b != [4]float64{0.5, 0, 1, 1} {
		t.Errorf("zone box of right: %v %v", b, ok)
	}
	if _, ok := c.ZoneBox("middle"); ok {
		t.Error("a zone box of a zone the camera does not have")
	}
	// A snapshot of each start, kept as evidence of its frame.
	if len(keep.kept) != 3 {
		t.Fatalf("%d snapshots kept, want one per start", len(keep.kept))
	}
	for i, m := range keep.kept {
		if m.Kind != evidence.Snapshot || m.Source != "camera.front" || m.By != "body" || m.Lifetime != time.Hour || m.Privacy != ledger.Sensitive ||
			m.FrameSeq != starts[i] || !strings.HasPrefix(m.Why, "motion started in zone ") || !strings.HasSuffix(m.Why, "(sense.cameras.front.snapshots)") ||
			m.Width != 160 || m.Height != 120 || len(m.Data) < 100 {
			t.Errorf("snapshot %d: %+v (%d bytes), want one of frame %d", i, m, len(m.Data), starts[i])
		}
	}
}

// keeper keeps evidence in memory.
type keeper struct {
	mu   sync.Mutex
	kept []evidence.Media
}

func (k *keeper) Keep(_ context.Context, m evidence.Media) (evidence.Item, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.kept = append(k.kept, m)
	return evidence.Item{}, nil
}

func TestCameraChannelRefusesAFormatItCannotRead(t *testing.T) {
	cam := haltest.NewCamera(hal.FrameFormat{Pixel: hal.PixelMJPEG, Width: 640, Height: 480}, 1)
	_, err := NewCameraChannel(NewOutlet(Source{Channel: "camera.x"}, 1), cam, motion.Config{}, Snapshots{}, nil)
	if !errors.Is(err, motion.ErrFormat) || !strings.Contains(err.Error(), "camera.x") {
		t.Errorf("got %v, want ErrFormat naming the channel", err)
	}
}

// A camera channel summarises each period by its frames' own time: the
// zones it watches, those moving when the period ends, the frames it
// analysed and skipped. No summary comes before a period has passed, nor
// for time no frame was seen in: a camera that stops, or goes away,
// starts a period afresh when its frames come back.
func TestCameraChannelSummary(t *testing.T) {
	format := hal.FrameFormat{Pixel: hal.PixelYUYV, Width: 160, Height: 120, Stride: 320}
	halves := []motion.Zone{
		{Name: "left", Polygon: []motion.Point{{X: 0, Y: 0}, {X: 0.5, Y: 0}, {X: 0.5, Y: 1}, {X: 0, Y: 1}}},
		{Name: "right", Polygon: []motion.Point{{X: 0.5, Y: 0}, {X: 1, Y: 0}, {X: 1, Y: 1}, {X: 0.5, Y: 1}}},
	}
	// Frames come every 100 ms from each span's from to its to (both
	// included); the camera goes away before a span marked offline.
	type span struct {
		from, to time.Duration
		offline  bool
	}
	s := time.Second
	for _, tc := range []struct {
		name    string
		cfg     motion.Config
		objects []motiontest.Object
		spans   []span
		want    []string // "@ms zones=[…] moving=[…] frames=N skipped=N over_s=S", times from the first frame
	}{
		{"none before the first period ends", motion.Config{}, nil,
			[]span{{0, 1900 * time.Millisecond, false}}, nil},
		{"one a period, the first a period after the first frame", motion.Config{}, nil,
			[]span{{0, 6 * s, false}},
			[]string{"@2000 zones=[frame] moving=[] frames=21 skipped=0 over_s=2", "@4000 zones=[frame] moving=[] frames=20 skipped=0 over_s=2",
				"@6000 zones=[frame] moving=[] frames=20 skipped=0 over_s=2"}},
		{"frames max_fps skips are counted apart", motion.Config{MaxFPS: 5}, nil,
			[]span{{0, 4 * s, false}},
			[]string{"@2000 zones=[frame] moving=[] frames=11 skipped=10 over_s=2", "@4000 zones=[frame] moving=[] frames=10 skipped=10 over_s=2"}},
		{"the zones moving when the period ends", motion.Config{Zones: halves},
			[]motiontest.Object{{From: 2500 * time.Millisecond, To: 4500 * time.Millisecond, Start: [2]float64{0.1, 0.5}, End: [2]float64{0.35, 0.5}, W: 0.15, H: 0.2, Luma: 230}},
			[]span{{0, 10 * s, false}},
			[]string{"@2000 zones=[left right] moving=[] frames=21 skipped=0 over_s=2", "@4000 zones=[left right] moving=[left] frames=20 skipped=0 over_s=2",
				"@6000 zones=[left right] moving=[left] frames=20 skipped=0 over_s=2", "@8000 zones=[left right] moving=[] frames=20 skipped=0 over_s=2",
				"@10000 zones=[left right] moving=[] frames=20 skipped=0 over_s=2"}},
		{"none while frames stop; they start a period afresh", motion.Config{}, nil,
			[]span{{0, 3 * s, false}, {10 * s, 13 * s, false}},
			[]string{"@2000 zones=[frame] moving=[] frames=21 skipped=0 over_s=2", "@12000 zones=[frame] moving=[] frames=21 skipped=0 over_s=2"}},
		{"a camera that went away starts a period afresh", motion.Config{}, nil,
			[]span{{0, 3 * s, false}, {3100 * time.Millisecond, 6 * s, true}},
			[]string{"@2000 zones=[frame] moving=[] frames=21 skipped=0 over_s=2", "@5100 zones=[frame] moving=[] frames=21 skipped=0 over_s=2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sc := motiontest.Scene{Format: format, Seed: 1, Noise: 3, Objects: tc.objects}
				cam := haltest.NewCamera(format, 1)
				clock, err := body.NewClock()
				if err != nil {
					t.Fatal(err)
				}
				o := NewOutlet(Source{Channel: "camera.front", Clock: clock}, 256)
				c, err := NewCameraChannel(o, cam, tc.cfg, Snapshots{}, nil)
				if err != nil {
					t.Fatal(err)
				}
				c.SetSummary(2 * time.Second)
				done := make(chan error, 1)
				go func() { done <- c.Run(t.Context()) }()
				const base = hal.Mono(time.Second) // the first frame's time
				seq := uint64(0)
				seqAt := map[int64]uint64{} // the frames' sequence numbers by their time
				for _, sp := range tc.spans {
					if sp.offline {
						cam.Fail(fmt.Errorf("camera front: %w", hal.ErrAbsent))
						synctest.Wait()
					}
					for at := sp.from; at <= sp.to; at += 100 * time.Millisecond {
						buf := make([]byte, sc.Bytes())
						sc.Render(buf, at, seq)
						seq++
						cam.Push(buf, seq, base.Add(at))
						seqAt[int64(base.Add(at))] = seq
						synctest.Wait() // the channel analysed it
					}
				}
				cam.Halt()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				var got []string
				for len(o.q) > 0 {
					ev := (<-o.q).ev
					if ev.Type != "camera.summary" {
						continue
					}
					var p CameraSummary
					if err := ledger.UnmarshalPayload(ev.Payload, &p); err != nil {
						t.Fatal(err)
					}
					if want, ok := seqAt[ev.MonotonicNS]; !ok || ev.SourceSequence != want {
						t.Errorf("a summary at %d with sequence %d: got no frame of that time and sequence, want the frame's (%d)", ev.MonotonicNS, ev.SourceSequence, want)
					}
					got = append(got, fmt.Sprintf("@%d zones=%v moving=%v frames=%d skipped=%d over_s=%v",
						time.Duration(ev.MonotonicNS-int64(base)).Milliseconds(), p.Zones, p.Moving, p.Frames, p.Skipped, p.OverS))
				}
				if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
					t.Errorf("summaries:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
				}
			})
		})
	}
}

// Grab hands each waiting caller a copy of the next frame the channel
// reads, one copy for all of them, and nothing to a caller that left.
func TestCameraChannelGrab(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		format := hal.FrameFormat{Pixel: hal.PixelYUYV, Width: 16, Height: 8, Stride: 32}
		cam := haltest.NewCamera(format, 2)
		c, err := NewCameraChannel(NewOutlet(Source{Channel: "camera.front"}, 8), cam, motion.Config{}, Snapshots{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- c.Run(t.Context()) }()
		frame := func(v byte) []byte { return bytes.Repeat([]byte{v}, 16*8*2) }
		cam.Push(frame(1), 1, hal.Mono(time.Second)) // nobody waits: not copied
		synctest.Wait()
		type grabbed struct {
			f   *hal.Frame
			err error
		}
		got := make(chan grabbed, 3)
		ctx, cancel := context.WithCancel(t.Context())
		for _, ctx := range []context.Context{t.Context(), t.Context(), ctx} {
			go func() {
				f, err := c.Grab(ctx)
				got <- grabbed{f, err}
			}()
		}
		synctest.Wait()
		cancel() // the third leaves before the frame comes
		if g := <-got; !errors.Is(g.err, context.Canceled) {
			t.Fatalf("a grab whose context ended: %v, %v", g.f, g.err)
		}
		cam.Push(frame(2), 2, hal.Mono(2*time.Second))
		a, b := <-got, <-got
		if a.err != nil || b.err != nil {
			t.Fatal(a.err, b.err)
		}
		if a.f != b.f || a.f.Seq != 2 || a.f.Time != hal.Mono(2*time.Second) || !bytes.Equal(a.f.Data, frame(2)) || a.f.Format != format {
			t.Fatalf("grabbed seq %d at %v, %d bytes", a.f.Seq, a.f.Time, len(a.f.Data))
		}
		synctest.Wait()
		if cam.Released() != 2 {
			t.Errorf("%d frames released, want both: a grab holds a copy, not the driver's buffer", cam.Released())
		}
		a.f.Release() // does nothing to a copy
		cam.Halt()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if _, err := c.Grab(t.Context()); !errors.Is(err, hal.ErrHalted) {
			t.Errorf("a grab after the channel stopped: %v, want hal.ErrHalted", err)
		}
	})
}

// A pause cuts the motion that was on, fails a grab that waits, and the
// channel goes on reading after the resume.
func TestCameraChannelPaused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		format := hal.FrameFormat{Pixel: hal.PixelYUYV, Width: 160, Height: 120, Stride: 320}
		sc := motiontest.Scene{Format: format, Seed: 2, Noise: 3, Objects: []motiontest.Object{
			{From: time.Second, To: 10 * time.Second, Start: [2]float64{-0.1, 0.5}, End: [2]float64{1.1, 0.5}, W: 0.2, H: 0.3, Luma: 230},
		}}
		cam := haltest.NewCamera(format, 4)
		o := NewOutlet(Source{Channel: "camera.front"}, 64)
		c, err := NewCameraChannel(o, cam, motion.Config{}, Snapshots{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- c.Run(t.Context()) }()
		push := func(i int) {
			buf := make([]byte, sc.Bytes())
			at := time.Duration(i) * time.Second / 15
			sc.Render(buf, at, uint64(i))
			cam.Push(buf, uint64(i+1), hal.Mono(at+time.Second))
			synctest.Wait()
		}
		for i := range 45 { // three seconds: the object is moving
			push(i)
		}
		if m, ok := c.LastMotion(); !ok || !m.Moving {
			t.Fatalf("no motion before the pause: %+v", m)
		}
		grab := make(chan error, 1)
		go func() { _, err := c.Grab(t.Context()); grab <- err }()
		synctest.Wait()
		cam.Pause()
		synctest.Wait()
		if err := <-grab; !errors.Is(err, hal.ErrPaused) {
			t.Errorf("a grab at the pause: %v, want ErrPaused", err)
		}
		var last string
		for len(o.q) > 0 {
			q := <-o.q
			var p map[string]any
			ledger.UnmarshalPayload(q.ev.Payload, &p)
			last = fmt.Sprintf("%s cut=%v", q.ev.Type, p["cut"])
		}
		if last != "camera.motion_ended cut=true" {
			t.Errorf("the last event at the pause: %q, want the motion ended, cut", last)
		}
		cam.Resume()
		push(100)
		if s := c.Stats(); s.LastSeq != 101 {
			t.Errorf("after the resume the channel read up to frame %d, want 101", s.LastSeq)
		}
		cam.Halt()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
