package camera

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/jpeg"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/hal"
)

// fakeStream is a stream the test drives: run carries out the steps the
// test sends, returns the failure it sends, or nil when halted.
type fakeStream struct {
	name   string
	format hal.FrameFormat
	pool   *fakePool
	halt   <-chan struct{}
	steps  chan func(*frameQueue)
	fail   chan error
	closed chan struct{}
	// woken, when set, is the harness's wake (a pause): run returns nil.
	woken chan struct{}
}

func newFakeStream(name string, halt <-chan struct{}) *fakeStream {
	return &fakeStream{
		name: name, format: grey, pool: newFakePool(6, 2), halt: halt,
		steps: make(chan func(*frameQueue)), fail: make(chan error), closed: make(chan struct{}),
	}
}

func (s *fakeStream) run(q *frameQueue) error {
	for {
		select {
		case step := <-s.steps:
			step(q)
		case err := <-s.fail:
			return err
		case <-s.halt:
			return nil
		case <-s.woken:
			return nil
		}
	}
}

func (s *fakeStream) close() {
	s.pool.close()
	close(s.closed)
}

func (s *fakeStream) describe() (string, hal.FrameFormat) { return s.name, s.format }

// push makes the driver fill a frame and waits until it is queued.
func (s *fakeStream) push(seq uint64, data []byte, wire hal.PixelFormat) {
	done := make(chan struct{})
	s.steps <- func(q *frameQueue) {
		q.push(s.pool.fill(seq, data, wire, s.format))
		close(done)
	}
	<-done
}

// harness runs a device on fake streams: opens take what the test gives
// to reopen, and the backoff waits are recorded, not slept.
type harness struct {
	*device
	reopen chan func() (stream, error)
	woken  chan struct{}

	mu    sync.Mutex
	waits []time.Duration
}

func newHarness(t *testing.T) (*harness, *fakeStream) {
	t.Helper()
	h := &harness{device: newDevice(&counters{}), reopen: make(chan func() (stream, error)), woken: make(chan struct{}, 1)}
	// A pause wakes the stream, as the eventfd does; the next stream
	// takes the wake back.
	h.wake = func() {
		select {
		case h.woken <- struct{}{}:
		default:
		}
	}
	h.unwake = func() {
		select {
		case <-h.woken:
		default:
		}
	}
	h.open = func() (stream, error) {
		select {
		case open := <-h.reopen:
			return open()
		case <-h.halt:
			return nil, errors.New("halted while opening")
		}
	}
	h.sleep = func(d time.Duration, halt <-chan struct{}) bool {
		h.mu.Lock()
		h.waits = append(h.waits, d)
		h.mu.Unlock()
		select {
		case <-halt:
			return false
		default:
			return true
		}
	}
	s := newFakeStream("cam0", h.halt)
	s.woken = h.woken
	h.start(s)
	t.Cleanup(func() { h.Close() })
	return h, s
}

func (h *harness) next(t *testing.T) (*hal.Frame, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	return h.NextFrame(ctx)
}

func (h *harness) frame(t *testing.T, want uint64) *hal.Frame {
	t.Helper()
	f, err := h.next(t)
	if err != nil || f.Seq != want {
		t.Fatalf("NextFrame: %v, %v; want frame %d", f, err, want)
	}
	return f
}

var errUnplugged = fmt.Errorf("camera: /dev/video0: ioctl VIDIOC_DQBUF: no such device: %w", hal.ErrAbsent)

func TestFramesAreHandedOutAndGivenBack(t *testing.T) {
	h, s := newHarness(t)
	data := []byte{10, 20}
	s.push(1, data, hal.PixelGrey)
	f := h.frame(t, 1)
	if &f.Data[0] != &data[0] || f.Format != grey || f.Time != hal.Mono(1) {
		t.Errorf("frame %+v: want the driver's buffer itself, its format and time", f)
	}
	if s.pool.requeued != 0 {
		t.Error("the buffer went back before Release")
	}
	f.Release()
	f.Release()
	if s.pool.requeued != 1 {
		t.Errorf("after Release twice the buffer went back %d times, want 1", s.pool.requeued)
	}
	st := h.Stats()
	if st.Frames != 1 || !st.Online || st.LastErr != nil || h.Name() != "cam0" || h.Format() != grey {
		t.Errorf("stats %+v, name %q, format %v", st, h.Name(), h.Format())
	}
	s.pool.check(t)
}

func TestOfflineIsReportedOnceThenTheCameraReopens(t *testing.T) {
	h, s1 := newHarness(t)
	s1.push(1, nil, hal.PixelGrey)
	s1.push(2, nil, hal.PixelGrey)
	s1.fail <- errUnplugged
	<-s1.closed

	// The frames from before the unplug come first, then the error once.
	h.frame(t, 1).Release()
	h.frame(t, 2).Release()
	_, err := h.next(t)
	if !errors.Is(err, hal.ErrAbsent) || !strings.Contains(err.Error(), "camera cam0 went offline") {
		t.Fatalf("after the unplug: %v, want ErrAbsent naming the camera", err)
	}
	if st := h.Stats(); st.Online || !errors.Is(st.LastErr, hal.ErrAbsent) {
		t.Errorf("offline: stats %+v", st)
	}
	if len(s1.pool.unmapped) != 2 {
		t.Errorf("the frames of the ended stream: unmapped %v, want both", s1.pool.unmapped)
	}

	// The device stays away for seven attempts, then comes back.
	for range 7 {
		h.reopen <- func() (stream, error) {
			return nil, fmt.Errorf("camera: no device at /dev/video0: %w", hal.ErrAbsent)
		}
	}
	s2 := newFakeStream("cam0 again", h.halt)
	s2.format.Width = 4
	h.reopen <- func() (stream, error) { return s2, nil }
	s2.push(1, nil, hal.PixelGrey)

	f := h.frame(t, 1) // no second error: frames again
	f.Release()
	h.mu.Lock()
	waits := h.waits
	h.mu.Unlock()
	ms := time.Millisecond
	if want := []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 5000 * ms, 5000 * ms}; !reflect.DeepEqual(waits, want) {
		t.Errorf("backoff %v, want %v", waits, want)
	}
	st := h.Stats()
	if st.Reopens != 1 || !st.Online || st.Frames != 3 || !strings.Contains(fmt.Sprint(st.LastErr), "no device at /dev/video0") {
		t.Errorf("back online: stats %+v", st)
	}
	if h.Name() != "cam0 again" || h.Format().Width != 4 || f.Format.Width != 4 {
		t.Errorf("after the reopen: name %q, format %v, frame format %v; want the new stream's", h.Name(), h.Format(), f.Format)
	}
	s1.pool.check(t)
	s2.pool.check(t)
}

func TestHaltEndsWaitingAndLaterReads(t *testing.T) {
	h, s := newHarness(t)
	woken := make(chan struct{})
	h.wake = func() { close(woken) }
	got := make(chan error, 1)
	go func() {
		_, err := h.NextFrame(context.Background())
		got <- err
	}()
	if err := h.Halt(); err != nil {
		t.Fatal(err)
	}
	h.Halt()
	<-woken
	if err := <-got; !errors.Is(err, hal.ErrHalted) {
		t.Errorf("a waiting NextFrame after Halt: %v, want ErrHalted", err)
	}
	<-s.closed // the stream stops
	if _, err := h.NextFrame(context.Background()); !errors.Is(err, hal.ErrHalted) {
		t.Errorf("NextFrame after Halt: %v, want ErrHalted", err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.NextFrame(context.Background()); !errors.Is(err, hal.ErrClosed) {
		t.Errorf("NextFrame after Close: %v, want ErrClosed", err)
	}
	if err := h.Close(); err != nil {
		t.Errorf("Close again: %v", err)
	}
	if st := h.Stats(); st.Online {
		t.Errorf("closed camera: stats %+v", st)
	}
}

func TestHaltWhileWaitingToReopen(t *testing.T) {
	h, s := newHarness(t)
	sleeping := make(chan struct{})
	h.sleep = func(_ time.Duration, halt <-chan struct{}) bool {
		close(sleeping)
		<-halt
		return false
	}
	s.fail <- errUnplugged
	<-sleeping
	h.Close() // returns: the backoff ends with the halt
	if _, err := h.NextFrame(context.Background()); !errors.Is(err, hal.ErrClosed) {
		t.Errorf("%v, want ErrClosed", err)
	}
}

func TestNextFrameEndsWithTheContext(t *testing.T) {
	h, _ := newHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := h.NextFrame(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("%v, want context.Canceled", err)
	}
}

func TestCloseLeavesHeldFramesValidUntilRelease(t *testing.T) {
	h, s := newHarness(t)
	s.push(1, []byte{7, 7}, hal.PixelGrey)
	s.push(2, nil, hal.PixelGrey)
	s.push(3, nil, hal.PixelGrey)
	f := h.frame(t, 2) // 1 was dropped for 3
	h.Close()
	if len(s.pool.unmapped) != 1 {
		t.Errorf("after Close: unmapped %v, want the waiting frame 3's buffer only", s.pool.unmapped)
	}
	f.Release()
	if len(s.pool.unmapped) != 2 {
		t.Errorf("after Release: unmapped %v, want the held one too", s.pool.unmapped)
	}
	if st := h.Stats(); st.Dropped != 1 || st.Frames != 1 {
		t.Errorf("stats %+v, want 1 dropped and 1 delivered", st)
	}
	s.pool.check(t)
}

func TestMJPEGIsDeliveredAsLuma(t *testing.T) {
	h, s := newHarness(t)
	s.format = hal.FrameFormat{Pixel: hal.PixelGrey, Width: 64, Height: 48, Stride: 64}
	jpg := stripDHT(t, testJPEG(t, 64, 48, true))
	s.push(1, []byte("corrupt"), hal.PixelMJPEG)
	s.push(2, jpg, hal.PixelMJPEG)
	f := h.frame(t, 2)
	if string(f.Data) != string(lumaOf(t, testJPEG(t, 64, 48, true))) || f.Format != s.format {
		t.Errorf("frame %v: want the luma of the JPEG as %v", f.Format, s.format)
	}
	if s.pool.requeued != 2 {
		t.Errorf("%d MJPEG buffers went back to the driver, want both at once (decoded or not)", s.pool.requeued)
	}
	// The JPEG comes with it as the camera sent it, with the tables it
	// left out, in memory of its own: image/jpeg reads it.
	if string(f.Encoded) != string(testJPEG(t, 64, 48, true)) {
		t.Errorf("Encoded is %d bytes, want the camera's %d-byte JPEG with the standard tables", len(f.Encoded), len(jpg))
	}
	if _, err := jpeg.Decode(bytes.NewReader(f.Encoded)); err != nil {
		t.Errorf("Encoded does not decode: %v", err)
	}
	// A released plane and JPEG are reused for the next frame.
	plane, enc := &f.Data[0], &f.Encoded[0]
	f.Release()
	if f.Encoded != nil {
		t.Error("Release left Encoded set")
	}
	s.push(3, jpg, hal.PixelMJPEG)
	g := h.frame(t, 3)
	if &g.Data[0] != plane || &g.Encoded[0] != enc {
		t.Error("the next frame did not reuse the released plane and JPEG")
	}
	g.Release()
	st := h.Stats()
	if st.ErrorFrames != 1 || st.Frames != 2 || !strings.Contains(fmt.Sprint(st.LastErr), "frame 1: mjpeg") {
		t.Errorf("stats %+v: want the corrupt frame counted and named", st)
	}
	s.pool.check(t)
}

func TestSequenceWidens(t *testing.T) {
	const restart = -1
	for _, tc := range []struct {
		name string
		raw  []int64 // driver sequences; restart starts a new stream
		want []uint64
	}{
		{"counts on", []int64{0, 1, 2, 5}, []uint64{0, 1, 2, 5}},
		{"crosses the 32-bit wrap", []int64{0xfffffffe, 0xffffffff, 0, 1}, []uint64{0xfffffffe, 0xffffffff, 0x100000000, 0x100000001}},
		{"goes on after a reopen", []int64{5, 6, restart, 0, 1}, []uint64{5, 6, 7, 8}},
		{"keeps a new stream's offset", []int64{5, 6, restart, 3, 4}, []uint64{5, 6, 10, 11}},
		{"increases over a number stamped twice", []int64{0, 0, 1, 3}, []uint64{0, 1, 2, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s sequence
			var got []uint64
			for _, r := range tc.raw {
				if r == restart {
					s.restart()
					continue
				}
				got = append(got, s.next(uint32(r)))
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%v, want %v", got, tc.want)
			}
		})
	}
}

// A pause drops what waits, closes the device and says so once; the
// consumer then waits, and a resume opens the device again at once.
func TestPauseLetsTheDeviceGo(t *testing.T) {
	h, s1 := newHarness(t)
	s1.push(1, nil, hal.PixelGrey)
	held := h.frame(t, 1) // held by the consumer across the pause
	s1.push(2, nil, hal.PixelGrey)
	if err := h.Pause(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s1.closed:
	default:
		t.Fatal("Pause returned before the device was closed")
	}
	if h.Pause() != nil {
		t.Error("a second pause failed")
	}
	if _, err := h.next(t); !errors.Is(err, hal.ErrPaused) {
		t.Fatalf("after the pause: %v, want ErrPaused (frame 2 dropped)", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	if f, err := h.NextFrame(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("while paused: %v %v, want a wait", f, err)
	}
	cancel()
	if st := h.Stats(); st.Online {
		t.Error("online while paused")
	}
	if s1.pool.requeued != 1 {
		t.Errorf("%d buffers went back before the close, want the dropped frame's", s1.pool.requeued)
	}
	held.Release() // its buffer is unmapped now, with the device gone
	if fmt.Sprint(s1.pool.unmapped) != "[0]" {
		t.Errorf("buffers unmapped on release %v, want the held one", s1.pool.unmapped)
	}
	s2 := newFakeStream("cam0", h.halt)
	s2.woken = h.woken
	h.Resume()
	h.reopen <- func() (stream, error) { return s2, nil }
	s2.push(3, nil, hal.PixelGrey)
	h.frame(t, 3).Release()
	h.mu.Lock()
	waits := len(h.waits)
	h.mu.Unlock()
	if waits != 0 || !h.Stats().Online {
		t.Errorf("after the resume: %d backoff waits, online %v; want it opened at once", waits, h.Stats().Online)
	}
	h.Resume() // not paused: nothing
	s1.pool.check(t)
	s2.pool.check(t)
}
