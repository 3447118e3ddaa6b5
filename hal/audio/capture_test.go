package audio

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/hal"
)

// fakeStream records what a capture or playback did to its stream.
type fakeStream struct {
	mu                       sync.Mutex
	starts, aborts, closes   int
	startErr, abortErr, cErr error
}

func (s *fakeStream) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.starts++
	return s.startErr
}

func (s *fakeStream) abort() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.aborts++
	return s.abortErr
}

func (s *fakeStream) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closes++
	return s.cErr
}

func (s *fakeStream) counts() (starts, aborts, closes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.starts, s.aborts, s.closes
}

var mono16k = hal.AudioFormat{Rate: 16000 * physic.Hertz, Channels: 1, FrameSamples: 320}

func openFakeCapture(t *testing.T, f hal.AudioFormat) (*Capture, *fakeStream) {
	t.Helper()
	s := &fakeStream{}
	c := newCapture("Loopback: PCM (hw:0,1)", f)
	if err := c.run(s); err != nil {
		t.Fatal(err)
	}
	return c, s
}

// frameOf is a frame whose samples are all v.
func frameOf(f hal.AudioFormat, v int16) []int16 {
	s := make([]int16, f.Len())
	for i := range s {
		s[i] = v
	}
	return s
}

// monoAt is a PortAudio time on CLOCK_MONOTONIC, d from now.
func monoAt(d time.Duration) time.Duration { return hal.MonoNow().Duration() + d }

func TestCaptureDeliversFramesInOrderWithDeviceTimes(t *testing.T) {
	c, _ := openFakeCapture(t, mono16k)
	defer c.Close()
	base := monoAt(-500 * time.Millisecond)
	for i := range 3 {
		adc := base + time.Duration(i)*20*time.Millisecond
		c.deliver(frameOf(mono16k, int16(i+1)), adc, adc+40*time.Millisecond, 0)
	}
	if c.clockSource() != clockDevice {
		t.Fatalf("clock %v, want the device's: PortAudio's times are CLOCK_MONOTONIC here", c.clockSource())
	}
	f := hal.AudioFrame{Samples: make([]int16, mono16k.Len())}
	for i := range 3 {
		if err := c.ReadFrame(t.Context(), &f); err != nil {
			t.Fatal(err)
		}
		want := hal.Mono(base + time.Duration(i)*20*time.Millisecond)
		if f.Seq != uint64(i+1) || f.Time != want || f.Overruns != 0 || f.Samples[0] != int16(i+1) || f.Samples[319] != int16(i+1) {
			t.Errorf("frame %d: seq %d time %v overruns %d samples %d..%d; want seq %d time %v, no overruns, samples %d",
				i, f.Seq, f.Time, f.Overruns, f.Samples[0], f.Samples[319], i+1, want, i+1)
		}
	}
}

func TestCaptureEstimatesTimesOffAnotherClock(t *testing.T) {
	c, _ := openFakeCapture(t, mono16k)
	defer c.Close()
	// PortAudio on the wall clock: 60 ms buffered behind this frame.
	wall := time.Duration(time.Now().UnixNano())
	before := hal.MonoNow()
	c.deliver(frameOf(mono16k, 1), wall-60*time.Millisecond, wall, 0)
	after := hal.MonoNow()
	// A host API that gives no times: the frame's own length.
	c.deliver(frameOf(mono16k, 2), 0, 0, 0)
	end := hal.MonoNow()
	if c.clockSource() != clockEstimate {
		t.Fatalf("clock %v, want the estimate", c.clockSource())
	}
	f := hal.AudioFrame{Samples: make([]int16, mono16k.Len())}
	c.ReadFrame(t.Context(), &f)
	if f.Time < before.Add(-60*time.Millisecond) || f.Time > after.Add(-60*time.Millisecond) {
		t.Errorf("time %v, want MonoNow minus 60 ms, within %v..%v", f.Time, before.Add(-60*time.Millisecond), after.Add(-60*time.Millisecond))
	}
	c.ReadFrame(t.Context(), &f)
	if f.Time < after.Add(-20*time.Millisecond) || f.Time > end.Add(-20*time.Millisecond) {
		t.Errorf("time %v, want MonoNow minus one 20 ms frame", f.Time)
	}
}

func TestCaptureCountsAnOverflowOncePerHostBuffer(t *testing.T) {
	c, _ := openFakeCapture(t, mono16k)
	defer c.Close()
	base := monoAt(-400 * time.Millisecond)
	// Frames 1 and 2 come from one host buffer (one current time), both
	// flagged for the one loss before it; frame 3 from the next, clean;
	// frame 4 from another flagged one: a second loss.
	for i, b := range []struct {
		cur   time.Duration
		flags callbackFlags
	}{{base + 60*time.Millisecond, inputOverflow}, {base + 60*time.Millisecond, inputOverflow}, {base + 100*time.Millisecond, 0}, {base + 200*time.Millisecond, inputOverflow}} {
		adc := base + time.Duration(i)*20*time.Millisecond
		c.deliver(frameOf(mono16k, 1), adc, b.cur, b.flags)
	}
	f := hal.AudioFrame{Samples: make([]int16, mono16k.Len())}
	var got []int
	for range 4 {
		c.ReadFrame(t.Context(), &f)
		got = append(got, f.Overruns)
	}
	if want := []int{1, 0, 0, 1}; !slices.Equal(got, want) {
		t.Errorf("overruns %v, want %v", got, want)
	}
}

func TestChooseClock(t *testing.T) {
	mono := hal.Mono(5 * time.Hour)
	wall := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		cur  time.Duration
		wall time.Time
		want clockSource
	}{
		{"monotonic", 5*time.Hour + 3*time.Millisecond, wall, clockDevice},
		{"monotonic, emulated and late", 5*time.Hour - 400*time.Millisecond, wall, clockDevice},
		{"wall clock", time.Duration(wall.UnixNano()), wall, clockEstimate},
		{"no time", 0, wall, clockEstimate},
		{"wall clock never set: both alike", 5 * time.Hour, time.Unix(0, 0).Add(5*time.Hour + 200*time.Millisecond), clockEstimate},
		{"another clock", 90 * time.Second, wall, clockEstimate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := chooseClock(tc.cur, mono, tc.wall); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRingOverruns(t *testing.T) {
	f := hal.AudioFormat{Rate: 16000 * physic.Hertz, Channels: 1, FrameSamples: 16}
	r := newRing(4, f.Len())
	out := hal.AudioFrame{Samples: make([]int16, f.Len())}
	pop := func() (uint64, int, int16) {
		t.Helper()
		if !r.pop(&out) {
			t.Fatal("ring empty")
		}
		return out.Seq, out.Overruns, out.Samples[0]
	}
	// The device overran before frame 2: charged to frame 2.
	r.push(frameOf(f, 1), 1, false)
	r.push(frameOf(f, 2), 2, true)
	if s, o, v := pop(); s != 1 || o != 0 || v != 1 {
		t.Errorf("frame 1: seq %d overruns %d value %d", s, o, v)
	}
	if s, o, v := pop(); s != 2 || o != 1 || v != 2 || out.Time != 2 {
		t.Errorf("frame 2: seq %d overruns %d value %d time %v; want 2 1 2 2", s, o, v, out.Time)
	}
	// The reader falls behind by 10 frames with room for 4: one overrun,
	// on the oldest frame kept; the 6 dropped leave a gap in Seq.
	for i := range 10 {
		r.push(frameOf(f, int16(3+i)), hal.Mono(3+i), false)
	}
	if s, o, v := pop(); s != 9 || o != 1 || v != 9 {
		t.Errorf("after the stall: seq %d overruns %d value %d; want 9 1 9", s, o, v)
	}
	for want := uint64(10); want <= 12; want++ {
		if s, o, _ := pop(); s != want || o != 0 {
			t.Errorf("seq %d overruns %d; want %d 0", s, o, want)
		}
	}
	if r.pop(&out) {
		t.Error("ring not empty")
	}
	// A device overrun on a frame that is then dropped moves on to the
	// oldest kept, and adds to the reader's own overrun.
	r.push(frameOf(f, 13), 13, true)
	for i := range 4 {
		r.push(frameOf(f, int16(14+i)), hal.Mono(14+i), false)
	}
	if s, o, _ := pop(); s != 14 || o != 2 {
		t.Errorf("seq %d overruns %d; want 14 2 (the device's and the reader's)", s, o)
	}
	// A buffer that is not a frame is lost, and counted.
	r.push(make([]int16, 5), 20, false)
	r.push(frameOf(f, 21), 21, false)
	for range 3 {
		pop()
	}
	if s, o, _ := pop(); s != 19 || o != 1 {
		t.Errorf("after a short buffer: seq %d overruns %d; want 19 (18 was lost) 1", s, o)
	}
}

func TestCaptureHaltUnblocksAndLatches(t *testing.T) {
	c, s := openFakeCapture(t, mono16k)
	done := make(chan error, 1)
	go func() { done <- c.ReadFrame(context.Background(), &hal.AudioFrame{Samples: make([]int16, 320)}) }()
	if err := c.Halt(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, hal.ErrHalted) {
		t.Errorf("blocked read: %v, want ErrHalted", err)
	}
	// Frames after Halt are not kept; reads go on failing.
	c.deliver(frameOf(mono16k, 1), monoAt(0), monoAt(0), 0)
	if err := c.ReadFrame(t.Context(), &hal.AudioFrame{Samples: make([]int16, 320)}); !errors.Is(err, hal.ErrHalted) {
		t.Errorf("read after Halt: %v, want ErrHalted", err)
	}
	c.Halt()
	if _, aborts, _ := s.counts(); aborts != 1 {
		t.Errorf("%d aborts after two Halts, want 1", aborts)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := c.ReadFrame(t.Context(), &hal.AudioFrame{Samples: make([]int16, 320)}); !errors.Is(err, hal.ErrClosed) {
		t.Errorf("read after Close: %v, want ErrClosed", err)
	}
	if starts, aborts, closes := s.counts(); starts != 1 || aborts != 1 || closes != 1 {
		t.Errorf("stream started %d, aborted %d, closed %d times; want 1 each", starts, aborts, closes)
	}
}

func TestCaptureErrors(t *testing.T) {
	c, s := openFakeCapture(t, mono16k)
	if err := c.ReadFrame(t.Context(), &hal.AudioFrame{Samples: make([]int16, 319)}); err == nil || !containsAll(err.Error(), "Loopback: PCM (hw:0,1)", "319", "320") {
		t.Errorf("short frame: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := c.ReadFrame(ctx, &hal.AudioFrame{Samples: make([]int16, 320)}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	s.abortErr = errors.New("device gone")
	s.cErr = errors.New("close failed")
	if err := c.Close(); err == nil || !containsAll(err.Error(), "Loopback: PCM (hw:0,1)", "close failed") {
		t.Errorf("failing close: %v", err)
	}
	// A stream that will not start is closed, and nothing is left open.
	bad := &fakeStream{startErr: errors.New("device busy")}
	c2 := newCapture("Loopback: PCM (hw:0,1)", mono16k)
	if err := c2.run(bad); err == nil || !containsAll(err.Error(), "start", "device busy") {
		t.Errorf("failing start: %v", err)
	}
	if _, _, closes := bad.counts(); closes != 1 {
		t.Errorf("stream closed %d times after a failed start, want 1", closes)
	}
	if err := c2.Close(); err != nil {
		t.Errorf("Close after a failed start: %v", err)
	}
}

func TestCaptureStalledDevice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := openFakeCapture(t, mono16k)
		defer c.Close()
		// Callbacks that come keep the reader waiting for a frame.
		go func() {
			for range 5 {
				time.Sleep(time.Second)
				c.deliver(frameOf(mono16k, 1), 0, 0, 0)
			}
		}()
		f := hal.AudioFrame{Samples: make([]int16, 320)}
		for range 5 {
			if err := c.ReadFrame(t.Context(), &f); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		err := c.ReadFrame(t.Context(), &f)
		if !errors.Is(err, ErrStalled) || time.Since(start) != stallAfter || !containsAll(err.Error(), "Loopback: PCM (hw:0,1)", "2s") {
			t.Errorf("got %v after %v, want ErrStalled after %v", err, time.Since(start), stallAfter)
		}
	})
}

func TestCaptureConcurrentReadersAndHalt(t *testing.T) {
	c, _ := openFakeCapture(t, mono16k)
	var wg sync.WaitGroup
	seen := make(chan uint64, 1000)
	for range 3 {
		wg.Go(func() {
			f := hal.AudioFrame{Samples: make([]int16, 320)}
			for {
				if err := c.ReadFrame(context.Background(), &f); err != nil {
					if !errors.Is(err, hal.ErrHalted) {
						t.Error(err)
					}
					return
				}
				seen <- f.Seq
			}
		})
	}
	// Every frame is read once, by one of the readers.
	got := map[uint64]bool{}
	for i := range 200 {
		c.deliver(frameOf(mono16k, int16(i)), monoAt(0), monoAt(0), 0)
		s := <-seen
		if got[s] {
			t.Fatalf("frame %d read twice", s)
		}
		got[s] = true
	}
	c.Halt()
	wg.Wait()
	c.Close()
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// Pause aborts and closes the stream (the PCM is released), drops what
// waits and tells a reader once; callbacks still in flight are dropped;
// a reader then waits, without a stall, until Resume opens a new stream.
func TestCapturePauseAndResume(t *testing.T) {
	c, s1 := openFakeCapture(t, mono16k)
	defer c.Close()
	base := monoAt(-100 * time.Millisecond)
	c.deliver(frameOf(mono16k, 1), base, base+40*time.Millisecond, 0)
	if err := c.Pause(); err != nil {
		t.Fatal(err)
	}
	if starts, aborts, closes := s1.counts(); starts != 1 || aborts != 1 || closes != 1 {
		t.Fatalf("the stream at the pause: %d starts, %d aborts, %d closes; want it stopped and closed", starts, aborts, closes)
	}
	c.Pause() // again: nothing
	c.deliver(frameOf(mono16k, 2), base, base+40*time.Millisecond, 0)
	f := hal.AudioFrame{Samples: make([]int16, mono16k.Len())}
	if err := c.ReadFrame(t.Context(), &f); !errors.Is(err, hal.ErrPaused) {
		t.Fatalf("the first read after the pause: %v, want ErrPaused", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), stallAfter+100*time.Millisecond)
	err := c.ReadFrame(ctx, &f)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a read while paused, past the stall time: %v, want a wait", err)
	}
	// A device that cannot be opened again leaves it paused.
	c.reopen = func() (stream, error) { return nil, errors.New("no such device") }
	if err := c.Resume(); err == nil || !strings.Contains(err.Error(), "no such device") {
		t.Fatalf("a resume that cannot open: %v", err)
	}
	s2 := &fakeStream{}
	c.reopen = func() (stream, error) { return s2, nil }
	got := make(chan error, 1)
	go func() { got <- c.ReadFrame(t.Context(), &f) }()
	if err := c.Resume(); err != nil {
		t.Fatal(err)
	}
	now := monoAt(0)
	c.deliver(frameOf(mono16k, 3), now, now+40*time.Millisecond, 0)
	if err := <-got; err != nil || f.Samples[0] != 3 {
		t.Fatalf("after the resume: %v, sample %d; want frame 3", err, f.Samples[0])
	}
	if starts, _, _ := s2.counts(); starts != 1 {
		t.Errorf("the new stream started %d times", starts)
	}
	c.Close()
	if _, _, closes := s2.counts(); closes != 1 {
		t.Errorf("Close closed the new stream %d times", closes)
	}
	if _, _, closes := s1.counts(); closes != 1 {
		t.Errorf("Close closed the paused stream again: %d closes", closes)
	}
}
