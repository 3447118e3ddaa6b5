// Package camera is the V4L2 camera driver: it opens a capture device by
// path or by a stable name, negotiates a format from hal.CameraConfig,
// streams through memory-mapped buffers and hands frames out without
// copying them, with the driver's own timestamp and sequence. When the
// device goes away it reports that once and opens it again with backoff.
//
// # Opening
//
// CameraConfig.Device is a node (/dev/video0), a symlink to one (udev's
// /dev/v4l/by-id and by-path entries), or a bare name matched against the
// /dev/v4l/by-id entries and then against the card and driver names the
// nodes report (VIDIOC_QUERYCAP); empty means the first capture node
// that is not a CSI camera. The name is resolved again at every reopen,
// and a /dev/videoN given by number is remembered by its by-id (or
// by-path) link, since a camera plugged in again may get another number.
//
// # Formats
//
// YUYV and GREY are delivered as the driver fills them. MJPEG is used
// only when the camera offers no accepted raw format: its frames are
// decoded with image/jpeg (adding the standard Huffman tables UVC cameras
// leave out) and their luma is delivered as GREY frames, which Format
// says; a copy of the JPEG as the camera sent it comes with each frame
// (Frame.Encoded), for a snapshot to pass on without encoding again,
// with the standard Huffman tables put in where the camera left them
// out, so that any decoder reads it. The size and rate are the offered ones nearest to the config
// (VIDIOC_S_FMT, VIDIOC_S_PARM); Format reports what the driver granted.
//
// # Buffers and the queue
//
// The driver gets six MMAP buffers (VIDIOC_REQBUFS; it may grant others).
// A goroutine per camera waits in poll(2) and dequeues every filled
// buffer into a bounded queue that NextFrame reads. A frame's Data points
// into its mmap'd buffer; Release gives the buffer back (VIDIOC_QBUF).
// The capture goroutine never waits for the consumer: when a new frame
// arrives while two wait, or while the driver is left with fewer than two
// empty buffers (one when it has fewer than four), the oldest waiting
// frame goes back to the driver and counts as dropped. A consumer that
// holds every buffer the driver can spare gets no new frame until it
// releases one, but capture never stalls. Frames are not copied to let a
// consumer hold more: a sense channel needs the newest frame, not a
// backlog. Decoded MJPEG frames live in memory of their own: their
// driver buffer goes back as soon as they are decoded.
//
// Frame.Seq is the driver's sequence widened to 64 bits across its 32-bit
// wrap and continued across reopens, so it always increases and a gap is
// frames lost before the consumer (by the driver, or dropped here).
// Frame.Time is the driver's timestamp when the buffer says it is on
// CLOCK_MONOTONIC (V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC, what the kernel's
// videobuf2 sets for capture drivers); a buffer with another or an
// unknown clock is stamped with hal.MonoNow when dequeued, which is late
// by the driver's latency, and Stats().DriverTime says which it is.
//
// # Faults
//
// A buffer flagged V4L2_BUF_FLAG_ERROR, a raw frame shorter than its
// format, or an MJPEG frame that does not decode is requeued and counted
// in Stats().ErrorFrames. When the device fails (ENODEV when it is
// unplugged, EIO when its queue broke) the camera goes offline: the
// frames already queued are still delivered, then NextFrame returns an
// error wrapping hal.ErrAbsent once, and the camera reopens the device
// by its name with backoff (100 ms doubling to 5 s) and resumes; later
// NextFrame calls wait for frames again. Buffers the consumer still holds
// then stay mapped, their bytes intact, until their Release (a driver that
// comes back only when its last user is gone, mappings included, as vivid
// does, comes back after that). Stats counts frames, drops, error
// frames and reopens and says whether the camera is online and what
// failed last.
//
// # Pause
//
// Pause (hal.Pauser, the privacy switch) wakes the capture goroutine,
// which drops the frames waiting for the consumer, stops streaming and
// closes the device (buffers the consumer holds are unmapped as they are
// released); Pause returns once the descriptor is closed. NextFrame then
// returns an error wrapping hal.ErrPaused once and waits. Resume opens
// the device again at once (with the backoff above if it cannot) and
// frames come again.
//
// A CSI camera of a Raspberry Pi (Unicam, RP1 CFE) or a Jetson (VI), or
// any node whose input is routed by the media controller
// (V4L2_CAP_IO_MC), cannot be streamed with plain V4L2 unless its
// pipeline is set up from outside; when such a node offers no usable
// format or fails to stream, the error says that it is a CSI camera that
// needs libcamera, wrapping hal.ErrUnsupported.
//
// # Why the ioctls are issued here
//
// Formats, sizes and frame intervals are enumerated with
// github.com/blackjack/webcam, on a descriptor of its own that is closed
// before streaming (webcam does not expose its descriptor, so it cannot
// share ours). Everything else is issued here on our descriptor, because
// webcam cannot do it: its SetImageFormat returns the size asked for
// instead of the one the driver set and drops bytesperline; SetFramerate
// does not return the interval granted; and its streaming drops each
// buffer's timestamp, sequence and flags (so error frames cannot be told
// from good ones), and unmaps every buffer on StopStreaming while a
// consumer may still hold one. So VIDIOC_QUERYCAP, S_FMT, G_PARM/S_PARM,
// REQBUFS, QUERYBUF, QBUF, DQBUF, STREAMON/STREAMOFF and mmap are ours,
// with the kernel's structure layouts for 64- and 32-bit ARM and amd64
// checked in a test.
//
// # Concurrency
//
// NextFrame is meant for one consumer goroutine; Frame.Release may be
// called from any goroutine. Halt, Close, Stats, Format and Name are safe
// from any goroutine at any time. Halt returns at once: capture stops
// (VIDIOC_STREAMOFF) within a wakeup of the capture goroutine, and
// NextFrame returns hal.ErrHalted from then on. Close halts, waits for the
// capture goroutine, unmaps every buffer the consumer does not hold and
// closes the device; after it NextFrame returns hal.ErrClosed.
package camera

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tobe-body/tobe-body/hal"
)

// stream is one open of the device, streaming.
type stream interface {
	// run dequeues filled buffers into q until the camera is halted
	// (nil) or the device fails (the error, wrapping hal.ErrAbsent when
	// it is gone).
	run(q *frameQueue) error
	// close stops streaming and closes the device; buffers the consumer
	// holds or that wait in the queue are unmapped when they are given
	// back.
	close()
	// describe names the device and the format it delivers.
	describe() (name string, f hal.FrameFormat)
}

// Backoff between reopens of a device that went away.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// counters are updated by the capture goroutine and NextFrame.
type counters struct {
	frames      atomic.Uint64
	errorFrames atomic.Uint64
	reopens     atomic.Uint64
	driverTime  atomic.Bool
}

// device is a camera: it runs one stream at a time and replaces it when
// the device fails.
type device struct {
	// open opens the device again by its stable name.
	open func() (stream, error)
	// wake interrupts a stream's run after halt was closed or Pause;
	// unwake takes a pause's wake back before the next stream runs.
	wake, unwake func()
	// done releases what the streams shared, after the last one closed.
	done func()
	// sleep waits d, or returns false at once when halt closes.
	sleep      func(d time.Duration, halt <-chan struct{}) bool
	minBackoff time.Duration
	maxBackoff time.Duration

	q     *frameQueue
	count *counters

	halt     chan struct{}
	haltOnce sync.Once
	closed   atomic.Bool
	close1   sync.Once
	wg       sync.WaitGroup

	mu      sync.Mutex
	name    string
	format  hal.FrameFormat
	online  bool
	lastErr error

	// pmu guards the pause: paused while the device is let go, resumed
	// closed by Resume, streaming while a stream is open, and released
	// closed once the stream open at a Pause is closed.
	pmu       sync.Mutex
	paused    bool
	streaming bool
	resumed   chan struct{}
	released  chan struct{}

	// luma keeps planes of decoded MJPEG frames the consumer released,
	// and jpegs the copies of their JPEGs.
	luma, jpegs chan []byte
}

// queueLimit is how many frames may wait for the consumer.
const queueLimit = 2

func newDevice(count *counters) *device {
	return &device{
		sleep:      sleep,
		minBackoff: minBackoff,
		maxBackoff: maxBackoff,
		q:          newFrameQueue(queueLimit),
		count:      count,
		halt:       make(chan struct{}),
		luma:       make(chan []byte, queueLimit+2),
		jpegs:      make(chan []byte, queueLimit+2),
	}
}

// start runs s, and the streams after it, until the camera is halted.
func (d *device) start(s stream) {
	d.name, d.format = s.describe()
	d.online, d.streaming = true, true
	d.wg.Add(1)
	go d.supervise(s)
}

func sleep(dur time.Duration, halt <-chan struct{}) bool {
	t := time.NewTimer(dur)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-halt:
		return false
	}
}

func (d *device) halted() bool {
	select {
	case <-d.halt:
		return true
	default:
		return false
	}
}

// supervise streams until halted, reopening the device when it fails
// and letting it go while paused.
func (d *device) supervise(s stream) {
	defer d.wg.Done()
	for s != nil {
		err := s.run(d.q)
		if d.halted() {
			s.close()
			d.setStreaming(false)
			break
		}
		if err == nil {
			// Woken, and not halted: a pause. What waits is dropped
			// before the device closes, so its buffers go with it.
			d.q.flush()
			s.close()
			d.mu.Lock()
			d.online = false
			d.mu.Unlock()
			d.setStreaming(false)
			d.q.report(fmt.Errorf("camera %s: %w", d.Name(), hal.ErrPaused))
			s = d.reopen(0)
			continue
		}
		s.close()
		d.setStreaming(false)
		d.mu.Lock()
		name := d.name
		d.online, d.lastErr = false, err
		d.mu.Unlock()
		d.q.report(fmt.Errorf("camera %s went offline: %w", name, err))
		s = d.reopen(d.minBackoff)
	}
	d.mu.Lock()
	d.online = false
	d.mu.Unlock()
}

// reopen opens the device again, first after wait (none after a pause),
// doubling the wait from minBackoff up to maxBackoff after each failure,
// and not while the camera is paused. It returns nil when halted.
func (d *device) reopen(wait time.Duration) stream {
	for {
		if wait > 0 && !d.sleep(wait, d.halt) {
			return nil
		}
		if !d.waitResumed() {
			return nil
		}
		if d.unwake != nil {
			d.unwake() // the pause's wake, which the next run must not see
		}
		s, err := d.open()
		if err != nil {
			d.mu.Lock()
			d.lastErr = err
			d.mu.Unlock()
			wait = min(max(2*wait, d.minBackoff), d.maxBackoff)
			continue
		}
		if d.halted() {
			s.close()
			return nil
		}
		if !d.setStreaming(true) {
			s.close() // paused meanwhile
			continue
		}
		d.count.reopens.Add(1)
		d.mu.Lock()
		d.name, d.format = s.describe()
		d.online = true
		d.mu.Unlock()
		return s
	}
}

// setStreaming notes that a stream is open (on) or closed; a stream
// that closes ends the pause's wait (Pause). Opening one is refused
// (false) while the camera is paused.
func (d *device) setStreaming(on bool) bool {
	d.pmu.Lock()
	defer d.pmu.Unlock()
	if on && d.paused {
		return false
	}
	d.streaming = on
	if !on && d.released != nil {
		close(d.released)
		d.released = nil
	}
	return true
}

// waitResumed waits while the camera is paused; false when halted.
func (d *device) waitResumed() bool {
	for {
		d.pmu.Lock()
		paused, resumed := d.paused, d.resumed
		d.pmu.Unlock()
		if !paused {
			return !d.halted()
		}
		select {
		case <-resumed:
		case <-d.halt:
			return false
		}
	}
}

// pauseWait bounds how long Pause waits for the device to close.
const pauseWait = 5 * time.Second

// Pause stops capture and closes the device (see hal.Pauser); it returns
// once the device is closed. Frames waiting for the consumer are
// dropped; the consumer's next NextFrame returns hal.ErrPaused.
func (d *device) Pause() error {
	d.pmu.Lock()
	if d.paused || d.halted() {
		d.pmu.Unlock()
		return nil
	}
	d.paused, d.resumed = true, make(chan struct{})
	var released chan struct{}
	if d.streaming {
		released = make(chan struct{})
		d.released = released
	}
	d.pmu.Unlock()
	if released == nil {
		d.q.flush() // offline, reopening: nothing is open
		d.q.report(fmt.Errorf("camera %s: %w", d.Name(), hal.ErrPaused))
		return nil
	}
	if d.wake != nil {
		d.wake()
	}
	t := time.NewTimer(pauseWait)
	defer t.Stop()
	select {
	case <-released:
		return nil
	case <-d.halt:
		return nil
	case <-t.C:
		return fmt.Errorf("camera %s: pause: the device was not closed within %v", d.Name(), pauseWait)
	}
}

// Resume opens the device again (see hal.Pauser).
func (d *device) Resume() error {
	d.pmu.Lock()
	defer d.pmu.Unlock()
	if d.paused {
		d.paused = false
		close(d.resumed)
	}
	return nil
}

func (d *device) Name() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.name
}

// Format returns what the device delivers; after a reopen, what the
// device delivers now.
func (d *device) Format() hal.FrameFormat {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.format
}

func (d *device) Stats() hal.CameraStats {
	d.mu.Lock()
	online, lastErr := d.online, d.lastErr
	d.mu.Unlock()
	return hal.CameraStats{
		Frames:      d.count.frames.Load(),
		Dropped:     d.q.drops(),
		ErrorFrames: d.count.errorFrames.Load(),
		Reopens:     d.count.reopens.Load(),
		Online:      online,
		DriverTime:  d.count.driverTime.Load(),
		LastErr:     lastErr,
	}
}

// Halt stops capture; NextFrame returns hal.ErrHalted from now on.
func (d *device) Halt() error {
	d.haltOnce.Do(func() {
		close(d.halt)
		if d.wake != nil {
			d.wake()
		}
	})
	return nil
}

// Close halts, waits for the capture goroutine and releases the device.
// Frames the consumer holds stay valid until their Release.
func (d *device) Close() error {
	d.close1.Do(func() {
		d.Halt()
		d.wg.Wait()
		d.closed.Store(true)
		d.q.flush()
		if d.done != nil {
			d.done()
		}
	})
	return nil
}

// NextFrame returns the oldest waiting frame, waiting for one if none
// does. It returns the error of a device that went offline once, in its
// place among the frames; hal.ErrHalted after Halt; hal.ErrClosed after
// Close; ctx.Err() when ctx ends first.
func (d *device) NextFrame(ctx context.Context) (*hal.Frame, error) {
	for {
		if d.closed.Load() {
			return nil, fmt.Errorf("camera %s: %w", d.Name(), hal.ErrClosed)
		}
		if d.halted() {
			return nil, hal.ErrHalted
		}
		if e, ok := d.q.take(); ok {
			if e.err != nil {
				return nil, e.err
			}
			if f := d.deliver(e.frame); f != nil {
				d.count.frames.Add(1)
				return f, nil
			}
			continue
		}
		select {
		case <-d.q.ready:
		case <-d.halt:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// deliver makes the consumer's frame of a filled buffer: the buffer
// itself, or for MJPEG its decoded luma (the buffer goes back at once).
// It returns nil for an MJPEG frame that does not decode.
func (d *device) deliver(f filled) *hal.Frame {
	if f.wire != hal.PixelMJPEG {
		return hal.NewFrame(f.format, f.data, f.seq, f.time, f.requeue)
	}
	n := f.format.Width * f.format.Height
	var luma []byte
	select {
	case luma = <-d.luma:
	default:
	}
	if cap(luma) < n {
		luma = make([]byte, n)
	}
	luma = luma[:n]
	err := decodeLuma(f.data, f.format.Width, f.format.Height, luma)
	var jpeg []byte
	if err == nil {
		select {
		case jpeg = <-d.jpegs:
		default:
		}
		jpeg = completeJPEG(jpeg[:0], f.data)
	}
	f.requeue()
	if err != nil {
		d.count.errorFrames.Add(1)
		d.mu.Lock()
		d.lastErr = fmt.Errorf("camera %s: frame %d: %w", d.name, f.seq, err)
		d.mu.Unlock()
		keep(d.luma, luma)
		return nil
	}
	fr := hal.NewFrame(f.format, luma, f.seq, f.time, func() { keep(d.luma, luma); keep(d.jpegs, jpeg) })
	fr.Encoded = jpeg
	return fr
}

// keep keeps a released buffer in pool for the next decoded frame, if
// there is room; the garbage collector takes the others.
func keep(pool chan []byte, b []byte) {
	select {
	case pool <- b:
	default:
	}
}

// sequence widens a driver's 32-bit frame sequence to 64 bits and keeps
// it increasing across streams.
type sequence struct {
	last    uint64 // the number given to the last frame
	raw     uint32 // the driver's number for it
	any     bool   // a frame was numbered
	running bool   // the current stream numbered a frame
}

// restart begins a new stream, whose driver sequence starts anew.
func (s *sequence) restart() { s.running = false }

// next numbers a frame of driver sequence raw.
func (s *sequence) next(raw uint32) uint64 {
	switch {
	case !s.any:
		s.last = uint64(raw)
	case !s.running:
		// A new stream numbers from its own start: keep its offset from
		// it after the last number of the one before.
		s.last += 1 + uint64(raw)
	case raw == s.raw:
		// A driver that stamps two buffers with one number (vivid does,
		// at a stream's start under emulation): the frame is still a new
		// one, and Seq still increases.
		s.last++
	default:
		s.last += uint64(raw - s.raw) // modulo 2^32: crosses the wrap
	}
	s.raw, s.any, s.running = raw, true, true
	return s.last
}

var (
	_ hal.Camera        = (*device)(nil)
	_ hal.CameraStatser = (*device)(nil)
	_                   = hal.Drivers{OpenCamera: Open}
)
