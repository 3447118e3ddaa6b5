//go:build lab

package camera

import (
	"context"
	"errors"
	"testing"
	"time"

	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/camera/vivid"
)

// Against vivid in the lab VM (scripts/lab/run.sh loads it with its
// defaults): one instance whose capture node has the card "vivid" and a
// webcam input offering 320x180 up to 60 frames/s and 640x480 up to 25.
// vivid's test controls are found by name, inject faults and set its
// timestamps to the start of exposure.

const labCard = vivid.Card

// labNode is vivid's capture node.
func labNode(t *testing.T) string {
	t.Helper()
	node, _, err := resolver{root: "/", query: queryCap}.find(labCard)
	if err != nil {
		t.Fatal(err)
	}
	return node
}

// setControl sets vivid's control called name, on a descriptor of its own.
func setControl(t *testing.T, name string, value int32) {
	t.Helper()
	v, err := vivid.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if err := v.Set(name, value); err != nil {
		t.Fatal(err)
	}
}

func openLab(t *testing.T, cfg hal.CameraConfig) hal.Camera {
	t.Helper()
	// vivid's default "End of Frame" stamps are 0.9 of a frame period
	// ahead of the moment it finishes a frame: ask for the start of the
	// exposure, which is in the past when the frame is dequeued.
	setControl(t, "Timestamp Source", 1)
	cam, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cam.Close() })
	return cam
}

func stats(cam hal.Camera) hal.CameraStats { return cam.(hal.CameraStatser).Stats() }

func next(t *testing.T, cam hal.Camera, within time.Duration) *hal.Frame {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	f, err := cam.NextFrame(ctx)
	if err != nil {
		t.Fatalf("after %s: %v (stats %+v)", within, err, stats(cam))
	}
	return f
}

func TestLabCapture300(t *testing.T) {
	cam := openLab(t, hal.CameraConfig{Device: labCard, Pixel: []hal.PixelFormat{hal.PixelYUYV}, Width: 640, Height: 480, Rate: 60 * physic.Hertz})
	want := hal.FrameFormat{Pixel: hal.PixelYUYV, Width: 640, Height: 480, Stride: 1280, Rate: 25 * physic.Hertz}
	if got := cam.Format(); got != want {
		t.Errorf("format %v, want %v (the fastest vivid offers at that size)", got, want)
	}
	t.Logf("opened %s: %s", cam.Name(), cam.Format())
	start := hal.MonoNow()
	var first, last hal.Frame
	gaps := 0
	for i := range 300 {
		f := next(t, cam, 10*time.Second)
		now := hal.MonoNow()
		if len(f.Data) != 640*480*2 {
			t.Fatalf("frame %d: %d bytes", f.Seq, len(f.Data))
		}
		if i > 0 {
			if f.Seq <= last.Seq {
				t.Errorf("sequence %d after %d", f.Seq, last.Seq)
			}
			if f.Time <= last.Time {
				t.Errorf("frame %d at %v, not after frame %d at %v", f.Seq, f.Time, last.Seq, last.Time)
			}
			gaps += int(f.Seq - last.Seq - 1)
		}
		if f.Time > now || f.Time < start.Add(-time.Second) {
			t.Errorf("frame %d at %v: not between the opening (%v) and its dequeue (%v)", f.Seq, f.Time, start, now)
		}
		if i == 0 {
			first = *f
			if !nonzero(f.Data) {
				t.Error("the first frame is all zeros: vivid's pattern did not arrive")
			}
		}
		last = *f
		f.Release()
	}
	s := stats(cam)
	if !s.DriverTime || !s.Online || s.Frames != 300 {
		t.Errorf("stats %+v: want 300 frames, online, with the driver's timestamps", s)
	}
	span := last.Time.Sub(first.Time)
	t.Logf("300 frames of 640x480 YUYV: %.1f frames/s over %s (asked 25); %d lost before dequeue (sequence gaps), %d dropped here, latency of the last frame %s",
		299/span.Seconds(), span.Round(time.Millisecond), gaps, s.Dropped, hal.MonoNow().Sub(last.Time).Round(time.Millisecond))
}

func nonzero(b []byte) bool {
	for _, v := range b {
		if v != 0 {
			return true
		}
	}
	return false
}

func TestLabSlowConsumerDropsOldest(t *testing.T) {
	cam := openLab(t, hal.CameraConfig{Device: labCard, Width: 320, Height: 180, Rate: 60 * physic.Hertz})
	a := next(t, cam, 10*time.Second)
	aSeq := a.Seq
	a.Release()
	before := stats(cam).Dropped
	// Read nothing until the driver has dropped ten frames.
	deadline := time.Now().Add(30 * time.Second)
	for stats(cam).Dropped < before+10 {
		if time.Now().After(deadline) {
			t.Fatalf("no drops while the consumer read nothing: %+v", stats(cam))
		}
		time.Sleep(20 * time.Millisecond) // waiting for vivid's frames, not for the driver
	}
	// Every drop counted now was of a frame older than all those waiting
	// now, so older than the next one read; later drops are not counted.
	dropped := stats(cam).Dropped - before
	b := next(t, cam, time.Second)
	if b.Seq-aSeq-1 < dropped {
		t.Errorf("after a pause the next frame is %d, %d after %d, but %d were dropped before it: not the newest", b.Seq, b.Seq-aSeq-1, aSeq, dropped)
	}
	t.Logf("paused reading: %d frames dropped, the next one is %d after the last read, %s old",
		dropped, b.Seq-aSeq, hal.MonoNow().Sub(b.Time).Round(time.Millisecond))
	b.Release()

	// Hold frames without releasing them: the driver keeps its reserve,
	// capture goes on, and new frames come once one is released.
	var held []*hal.Frame
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		f, err := cam.NextFrame(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, f)
		if len(held) > wantBuffers {
			t.Fatalf("holding %d frames, more than the %d buffers asked for", len(held), wantBuffers)
		}
	}
	dropsHeld := stats(cam).Dropped
	if len(held) != wantBuffers-2 {
		t.Errorf("the consumer could hold %d frames, want %d (all but the two kept with the driver)", len(held), wantBuffers-2)
	}
	lastHeld := held[len(held)-1].Seq
	for _, f := range held {
		f.Release()
	}
	f := next(t, cam, 2*time.Second)
	if f.Seq <= lastHeld {
		t.Errorf("after releasing, frame %d, not newer than the last held %d", f.Seq, lastHeld)
	}
	f.Release()
	if !stats(cam).Online || dropsHeld <= before+dropped {
		t.Errorf("while %d frames were held: %+v; want it online and dropping", len(held), stats(cam))
	}
	t.Logf("held %d frames; capture went on (%d more drops), the next frame after release is %d", len(held), dropsHeld-before-dropped, f.Seq-lastHeld)
}

func TestLabErrorFramesAreDroppedAndCounted(t *testing.T) {
	cam := openLab(t, hal.CameraConfig{Device: labCard, Width: 320, Height: 180, Rate: 60 * physic.Hertz})
	// The sequence numbers delivered. vivid can stamp two buffers with one
	// number when its thread wakes early (seen under emulation: the first
	// two of a stream are both 0), so numbers are counted, not frames.
	seqs := map[uint64]bool{}
	take := func(f *hal.Frame) uint64 {
		seqs[f.Seq] = true
		f.Release()
		return f.Seq
	}
	first := take(next(t, cam, 10*time.Second))
	s0 := stats(cam)
	for i := range 3 {
		setControl(t, "Inject V4L2_BUF_FLAG_ERROR", 1)
		// The capture goroutine counts the error frame when it dequeues
		// it, on a CPU of its own with two: wait for the count, reading
		// frames meanwhile, until a deadline, never assuming it is there.
		deadline := time.Now().Add(10 * time.Second)
		for stats(cam).ErrorFrames < uint64(i+1) {
			if time.Now().After(deadline) {
				t.Fatalf("error frame %d injected, not counted within 10s: %+v", i+1, stats(cam))
			}
			take(next(t, cam, 5*time.Second))
		}
	}
	last := take(next(t, cam, 5*time.Second)) // after the last error frame
	s := stats(cam)
	if s.ErrorFrames != 3 || !s.Online {
		t.Errorf("after 3 injected error frames: %+v", s)
	}
	// The error frames are among the numbers from first to last that were
	// not delivered (with frames dropped here or lost by the driver).
	delivered := uint64(len(seqs))
	missing := last - first + 1 - delivered
	if missing < 3 {
		t.Errorf("frames %d to %d: %d numbers delivered, so %d missing; the 3 error frames must be among them", first, last, delivered, missing)
	}
	t.Logf("3 error frames dropped and counted; frames %d..%d: %d delivered (%d numbers), %d numbers missing (%d dropped here)", first, last, s.Frames-s0.Frames+1, delivered, missing, s.Dropped-s0.Dropped)
}

func TestLabDisconnectReopens(t *testing.T) {
	cam := openLab(t, hal.CameraConfig{Device: labCard, Width: 320, Height: 180, Rate: 60 * physic.Hertz})
	f := next(t, cam, 10*time.Second)
	lastSeq := f.Seq
	f.Release()
	pressed := hal.MonoNow()
	setControl(t, "Disconnect", 1)
	var offline hal.Mono
	for offline == 0 {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		f, err := cam.NextFrame(ctx)
		cancel()
		switch {
		case err == nil:
			lastSeq = f.Seq
			f.Release()
		case errors.Is(err, hal.ErrAbsent):
			offline = hal.MonoNow()
			t.Logf("offline: %v", err)
		default:
			t.Fatalf("after the disconnect: %v, want ErrAbsent", err)
		}
	}
	f = next(t, cam, 10*time.Second) // no second ErrAbsent: frames again
	back := hal.MonoNow()
	if f.Seq <= lastSeq {
		t.Errorf("after the reopen, frame %d: not after %d", f.Seq, lastSeq)
	}
	if f.Time < pressed {
		t.Errorf("the first frame after the reopen is from %v, before the disconnect at %v", f.Time, pressed)
	}
	f.Release()
	s := stats(cam)
	if s.Reopens != 1 || !s.Online || !errors.Is(s.LastErr, hal.ErrAbsent) {
		t.Errorf("after the reopen: %+v; want 1 reopen, online, the unplug as the last error", s)
	}
	for range 5 {
		next(t, cam, 5*time.Second).Release()
	}
	t.Logf("disconnect → ErrAbsent in %s, → frames again in %s (backoff starts at %s)",
		offline.Sub(pressed).Round(time.Millisecond), back.Sub(offline).Round(time.Millisecond), minBackoff)
}

// A frame held across an unplug stays readable: its buffer stays mapped
// after the device is closed, until Release. vivid comes back only when
// its last user is gone, mappings included, so the reopen waits for it.
func TestLabHeldFrameOutlivesTheDevice(t *testing.T) {
	cam := openLab(t, hal.CameraConfig{Device: labCard, Width: 320, Height: 180, Rate: 60 * physic.Hertz})
	held := next(t, cam, 10*time.Second)
	before := checksum(held.Data)
	setControl(t, "Disconnect", 1)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		f, err := cam.NextFrame(ctx)
		cancel()
		if err == nil {
			f.Release()
			continue
		}
		if !errors.Is(err, hal.ErrAbsent) {
			t.Fatalf("after the disconnect: %v, want ErrAbsent", err)
		}
		break
	}
	if after := checksum(held.Data); after != before {
		t.Errorf("the held frame changed while the device went away: checksum %x, was %x", after, before)
	}
	released := hal.MonoNow()
	held.Release()
	f := next(t, cam, 10*time.Second)
	f.Release()
	if s := stats(cam); s.Reopens != 1 || !s.Online {
		t.Errorf("after releasing the held frame: %+v, want reopened", s)
	}
	t.Logf("held frame intact after the unplug; frames again %s after its release", hal.MonoNow().Sub(released).Round(time.Millisecond))
}

func checksum(b []byte) uint64 {
	var s uint64
	for i, v := range b {
		s = s*31 + uint64(v) + uint64(i)
	}
	return s
}

func TestLabNamesAndFormats(t *testing.T) {
	node := labNode(t)
	for _, tc := range []struct {
		name string
		cfg  hal.CameraConfig
		want hal.FrameFormat
	}{
		{"node GREY", hal.CameraConfig{Device: node, Pixel: []hal.PixelFormat{hal.PixelGrey}, Width: 320, Height: 180, Rate: 30 * physic.Hertz},
			hal.FrameFormat{Pixel: hal.PixelGrey, Width: 320, Height: 180, Stride: 320, Rate: 30 * physic.Hertz}},
		{"card, nearest size and rate", hal.CameraConfig{Device: labCard, Width: 700, Height: 500, Rate: 24 * physic.Hertz},
			hal.FrameFormat{Pixel: hal.PixelYUYV, Width: 640, Height: 480, Stride: 1280, Rate: 25 * physic.Hertz}},
		{"any camera, defaults", hal.CameraConfig{},
			hal.FrameFormat{Pixel: hal.PixelYUYV, Width: 640, Height: 480, Stride: 1280, Rate: 25 * physic.Hertz}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cam, err := Open(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer cam.Close()
			got := cam.Format()
			if tc.cfg.Rate == 0 {
				got.Rate = tc.want.Rate // whatever vivid runs at
			}
			if got != tc.want {
				t.Errorf("format %v, want %v", got, tc.want)
			}
			f := next(t, cam, 10*time.Second)
			if len(f.Data) != got.Stride*got.Height || f.Format != cam.Format() {
				t.Errorf("frame of %d bytes, %v", len(f.Data), f.Format)
			}
			f.Release()
			if err := cam.Halt(); err != nil {
				t.Fatal(err)
			}
			if _, err := cam.NextFrame(t.Context()); !errors.Is(err, hal.ErrHalted) {
				t.Errorf("after Halt: %v, want ErrHalted", err)
			}
		})
	}
	for _, device := range []string{"no-such-camera", "/dev/video99"} {
		if _, err := Open(hal.CameraConfig{Device: device}); !errors.Is(err, hal.ErrAbsent) {
			t.Errorf("Open(%q): %v, want ErrAbsent", device, err)
		}
	}
}
