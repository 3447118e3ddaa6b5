//go:build linux

package camera

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/blackjack/webcam"
	"golang.org/x/sys/unix"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/internal/uapi"
)

// Buffers asked of the driver, and how many of them stay with it.
const (
	wantBuffers = 6
	minBuffers  = 2
)

// Open opens the camera cfg names and starts streaming; see the package
// doc for names, formats and what happens when the device goes away. A
// device that is not there wraps hal.ErrAbsent; one another program
// streams from, hal.ErrBusy; a format or config the device cannot meet,
// or a CSI camera that needs libcamera, hal.ErrUnsupported.
func Open(cfg hal.CameraConfig) (hal.Camera, error) {
	return openCamera(cfg, resolver{root: "/", query: queryCap})
}

func openCamera(cfg hal.CameraConfig, r resolver) (hal.Camera, error) {
	if err := checkConfig(cfg); err != nil {
		return nil, err
	}
	node, _, stable, err := r.locate(cfg.Device)
	if err != nil {
		return nil, err
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("camera %s: %w", node, os.NewSyscallError("eventfd", err))
	}
	count := &counters{}
	sh := &shared{cfg: cfg, stable: stable, wake: wake, seq: &sequence{}, count: count}
	s, err := openSession(sh, node)
	if err != nil {
		unix.Close(wake)
		return nil, err
	}
	d := newDevice(count)
	d.open = func() (stream, error) {
		node, _, err := r.find(stable)
		if err != nil {
			return nil, err
		}
		s, err := openSession(sh, node)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	d.wake = func() {
		var one [8]byte
		binary.NativeEndian.PutUint64(one[:], 1)
		unix.Write(wake, one[:]) // cannot fail short of a closed fd, which Close prevents
	}
	d.unwake = func() {
		var b [8]byte
		unix.Read(wake, b[:]) // nonblocking: nothing to take is EAGAIN
	}
	d.done = func() { unix.Close(wake) }
	d.start(s)
	return d, nil
}

// shared is what the streams of one camera share.
type shared struct {
	cfg    hal.CameraConfig
	stable string // the name the device is found by again
	// wake is an eventfd that turns readable when the camera is halted
	// or paused.
	wake int
	// seq numbers frames; only the goroutine running a stream uses it.
	seq   *sequence
	count *counters
}

// session is one open of the device: its descriptor, negotiated format
// and mmap'd buffers. It is the pool its frames' buffers go back to.
type session struct {
	sh     *shared
	node   string
	label  string
	info   capInfo
	wire   hal.PixelFormat
	format hal.FrameFormat
	need   int // bytes a raw frame must have; 1 for MJPEG

	mu      sync.Mutex
	fd      int      // -1 once closed
	bufs    [][]byte // mmap'd; nil once unmapped
	out     []bool   // dequeued and not given back yet
	queued  int      // buffers with the driver
	reserve int      // buffers to keep with the driver
}

// openSession opens node, negotiates the format and starts streaming.
func openSession(sh *shared, node string) (*session, error) {
	fd, err := openNode(node)
	if err != nil {
		return nil, openError(node, err)
	}
	s := &session{sh: sh, node: node, fd: fd}
	ok := false
	defer func() {
		if !ok {
			s.release()
		}
	}()
	if s.info, err = queryCapFD(fd); err != nil {
		return nil, fmt.Errorf("camera: %s: %w", node, err)
	}
	s.label = fmt.Sprintf("%s (%s)", node, s.info)
	if sh.stable != node {
		s.label = sh.stable + " at " + s.label
	}
	switch {
	case !s.info.capture():
		return nil, explain(node, s.info, errors.New("not a video capture device"))
	case !s.info.streaming():
		return nil, explain(node, s.info, fmt.Errorf("it has no streaming I/O (read() only): %w", hal.ErrUnsupported))
	}
	if err := s.negotiate(); err != nil {
		return nil, err
	}
	if err := s.mapBuffers(); err != nil {
		return nil, err
	}
	typ := uint32(uapi.V4L2BufTypeVideoCapture)
	if err := uapi.Ioctl(fd, uapi.VIDIOCStreamOn, unsafe.Pointer(&typ)); err != nil {
		return nil, explain(node, s.info, os.NewSyscallError("ioctl VIDIOC_STREAMON", err))
	}
	ok = true
	return s, nil
}

func openError(node string, err error) error {
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENODEV), errors.Is(err, unix.ENXIO):
		return fmt.Errorf("camera: %w: %w", err, hal.ErrAbsent)
	case errors.Is(err, unix.EBUSY):
		return fmt.Errorf("camera: %w: %w", err, hal.ErrBusy)
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return fmt.Errorf("camera: %w (the body's user needs read and write access, usually the video group)", err)
	}
	return fmt.Errorf("camera: %w", err)
}

// negotiate picks the format, size and rate from what the device offers
// (enumerated with webcam) and sets them on our descriptor.
func (s *session) negotiate() error {
	cfg := s.sh.cfg
	w, err := webcam.Open(s.node)
	if err != nil {
		return explain(s.node, s.info, fmt.Errorf("listing its formats: %w", err))
	}
	defer w.Close()

	var offered []hal.PixelFormat
	for p := range w.GetSupportedFormats() {
		offered = append(offered, hal.PixelFormat(p))
	}
	pix, err := choosePixel(cfg.Pixel, offered)
	if err != nil {
		return explain(s.node, s.info, err)
	}
	var sizes []sizeRange
	for _, fs := range w.GetSupportedFrameSizes(webcam.PixelFormat(pix)) {
		sizes = append(sizes, sizeRange{
			MinW: int(fs.MinWidth), MaxW: int(fs.MaxWidth), StepW: int(fs.StepWidth),
			MinH: int(fs.MinHeight), MaxH: int(fs.MaxHeight), StepH: int(fs.StepHeight),
		})
	}
	width, height := chooseSize(sizes, cfg.Width, cfg.Height)

	f := uapi.V4L2Format{Type: uapi.V4L2BufTypeVideoCapture}
	f.Pix = uapi.V4L2PixFormat{Width: uint32(width), Height: uint32(height), PixelFormat: uint32(pix), Field: uapi.V4L2FieldNone}
	if err := uapi.Ioctl(s.fd, uapi.VIDIOCSFmt, unsafe.Pointer(&f)); err != nil {
		if errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("camera: %s (%s) is streaming to another program: %w", s.node, s.info, hal.ErrBusy)
		}
		return explain(s.node, s.info, fmt.Errorf("setting %s %dx%d: %w", pix, width, height, os.NewSyscallError("ioctl VIDIOC_S_FMT", err)))
	}
	got := f.Pix
	s.wire = hal.PixelFormat(got.PixelFormat)
	accept := cfg.Pixel
	if len(accept) == 0 {
		accept = deliverable
	}
	gw, gh, stride := int(got.Width), int(got.Height), int(got.BytesPerLine)
	switch {
	case !slices.Contains(accept, s.wire):
		return explain(s.node, s.info, fmt.Errorf("asked for %s, the driver set %s: %w", pix, s.wire, hal.ErrUnsupported))
	case gw <= 0 || gh <= 0:
		return explain(s.node, s.info, fmt.Errorf("the driver set a %dx%d format", gw, gh))
	case got.Field == uapi.V4L2FieldAlternate:
		return explain(s.node, s.info, fmt.Errorf("it delivers alternate fields, not frames: %w", hal.ErrUnsupported))
	}
	s.need = 1
	if s.wire != hal.PixelMJPEG {
		if stride < minStride(s.wire, gw) {
			return explain(s.node, s.info, fmt.Errorf("%s %dx%d with %d bytes per line", s.wire, gw, gh, stride))
		}
		s.need = stride * gh
	}

	var tpf fraction
	if cfg.Rate > 0 {
		var ivals []fraction // discrete ones; a range leaves the choice to S_PARM
		for _, r := range w.GetSupportedFramerates(webcam.PixelFormat(s.wire), uint32(gw), uint32(gh)) {
			if r.StepNumerator == 0 && r.StepDenominator == 0 {
				ivals = append(ivals, fraction{r.MinNumerator, r.MinDenominator})
			}
		}
		want := chooseInterval(ivals, cfg.Rate)
		p := uapi.V4L2StreamParm{Type: uapi.V4L2BufTypeVideoCapture}
		p.Capture.TimePerFrame = uapi.V4L2Fract{Numerator: want.Num, Denominator: want.Den}
		switch err := uapi.Ioctl(s.fd, uapi.VIDIOCSParm, unsafe.Pointer(&p)); {
		case err == nil:
			if p.Capture.Capability&uapi.V4L2CapTimePerFrame != 0 {
				tpf = fraction{p.Capture.TimePerFrame.Numerator, p.Capture.TimePerFrame.Denominator}
			}
		case errors.Is(err, unix.ENOTTY), errors.Is(err, unix.EINVAL):
			// The driver has one rate; G_PARM below may say which.
		default:
			return explain(s.node, s.info, fmt.Errorf("setting %s: %w", want.rate(), os.NewSyscallError("ioctl VIDIOC_S_PARM", err)))
		}
	}
	if tpf.rate() == 0 {
		p := uapi.V4L2StreamParm{Type: uapi.V4L2BufTypeVideoCapture}
		if uapi.Ioctl(s.fd, uapi.VIDIOCGParm, unsafe.Pointer(&p)) == nil && p.Capture.Capability&uapi.V4L2CapTimePerFrame != 0 {
			tpf = fraction{p.Capture.TimePerFrame.Numerator, p.Capture.TimePerFrame.Denominator}
		}
	}
	s.format = wireFormat(s.wire, gw, gh, stride, tpf.rate())
	return nil
}

// mapBuffers asks the driver for buffers, maps and queues them.
func (s *session) mapBuffers() error {
	rb := uapi.V4L2RequestBuffers{Count: wantBuffers, Type: uapi.V4L2BufTypeVideoCapture, Memory: uapi.V4L2MemoryMMAP}
	if err := uapi.Ioctl(s.fd, uapi.VIDIOCReqBufs, unsafe.Pointer(&rb)); err != nil {
		if errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("camera: %s (%s) is streaming to another program: %w", s.node, s.info, hal.ErrBusy)
		}
		return explain(s.node, s.info, os.NewSyscallError("ioctl VIDIOC_REQBUFS", err))
	}
	if rb.Count < minBuffers {
		return explain(s.node, s.info, fmt.Errorf("the driver granted %d MMAP buffers, %d are needed", rb.Count, minBuffers))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := int(rb.Count)
	s.bufs, s.out = make([][]byte, n), make([]bool, n)
	s.reserve = 1
	if n >= 4 {
		s.reserve = 2
	}
	for i := range n {
		b := uapi.V4L2Buffer{Index: uint32(i), Type: uapi.V4L2BufTypeVideoCapture, Memory: uapi.V4L2MemoryMMAP}
		if err := uapi.Ioctl(s.fd, uapi.VIDIOCQueryBuf, unsafe.Pointer(&b)); err != nil {
			return explain(s.node, s.info, fmt.Errorf("buffer %d: %w", i, os.NewSyscallError("ioctl VIDIOC_QUERYBUF", err)))
		}
		if int(b.Length) < s.need {
			return explain(s.node, s.info, fmt.Errorf("buffer %d holds %d bytes, a %s frame needs %d", i, b.Length, s.format, s.need))
		}
		m, err := unix.Mmap(s.fd, int64(b.Offset), int(b.Length), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			return explain(s.node, s.info, fmt.Errorf("buffer %d: %w", i, os.NewSyscallError("mmap", err)))
		}
		s.bufs[i] = m
	}
	for i := range n {
		b := uapi.V4L2Buffer{Index: uint32(i), Type: uapi.V4L2BufTypeVideoCapture, Memory: uapi.V4L2MemoryMMAP}
		if err := uapi.Ioctl(s.fd, uapi.VIDIOCQBuf, unsafe.Pointer(&b)); err != nil {
			return explain(s.node, s.info, fmt.Errorf("buffer %d: %w", i, os.NewSyscallError("ioctl VIDIOC_QBUF", err)))
		}
		s.queued++
	}
	return nil
}

func (s *session) describe() (string, hal.FrameFormat) {
	name := s.label
	if s.wire == hal.PixelMJPEG {
		name += ", MJPEG decoded to GREY"
	}
	return name, s.format
}

// run waits for filled buffers and queues them until the camera's wake
// eventfd turns readable (nil) or the device fails.
func (s *session) run(q *frameQueue) error {
	s.sh.seq.restart()
	fds := []unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLIN}, {Fd: int32(s.sh.wake), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); err != nil {
			if err == unix.EINTR {
				continue
			}
			return fmt.Errorf("camera: %s: %w", s.node, os.NewSyscallError("poll", err))
		}
		if fds[1].Revents != 0 {
			return nil
		}
		ev := fds[0].Revents
		if ev == 0 {
			continue
		}
		n, err := s.drain(q)
		if err != nil {
			return err
		}
		if n == 0 && ev&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0 {
			err := fmt.Errorf("camera: %s: poll reports 0x%x and there is no buffer to dequeue", s.node, ev)
			if ev&unix.POLLHUP != 0 {
				err = fmt.Errorf("%w: %w", err, hal.ErrAbsent)
			}
			return err
		}
	}
}

// drain dequeues every filled buffer; it returns how many.
func (s *session) drain(q *frameQueue) (int, error) {
	for n := 0; ; n++ {
		f, got, err := s.dequeue()
		if err != nil || !got {
			return n, err
		}
		if f.pool != nil {
			q.push(f)
		}
	}
}

// dequeue takes one filled buffer from the driver. got is false when
// none is ready; a broken frame is requeued and counted, and returned as
// a zero filled.
func (s *session) dequeue() (f filled, got bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := uapi.V4L2Buffer{Type: uapi.V4L2BufTypeVideoCapture, Memory: uapi.V4L2MemoryMMAP}
	if err := uapi.Ioctl(s.fd, uapi.VIDIOCDQBuf, unsafe.Pointer(&b)); err != nil {
		if err == unix.EAGAIN {
			return filled{}, false, nil
		}
		return filled{}, false, s.failure("VIDIOC_DQBUF", err)
	}
	i := int(b.Index)
	if i >= len(s.bufs) || s.out[i] {
		return filled{}, false, fmt.Errorf("camera: %s: VIDIOC_DQBUF returned buffer %d, which is not with the driver", s.node, i)
	}
	s.out[i] = true
	s.queued--
	if !s.good(&b) {
		s.sh.count.errorFrames.Add(1)
		s.requeueLocked(i)
		return filled{}, true, nil
	}
	t, driverTime := bufferTime(&b, hal.MonoNow)
	s.sh.count.driverTime.Store(driverTime)
	n := s.need
	if s.wire == hal.PixelMJPEG {
		n = int(b.BytesUsed)
	}
	return filled{
		pool: s, index: i, data: s.bufs[i][:n:n],
		wire: s.wire, format: s.format,
		seq: s.sh.seq.next(b.Sequence), time: t,
	}, true, nil
}

// good reports a buffer that holds a whole frame.
func (s *session) good(b *uapi.V4L2Buffer) bool {
	return b.Flags&uapi.V4L2BufFlagError == 0 && int(b.BytesUsed) >= s.need && int(b.BytesUsed) <= len(s.bufs[b.Index])
}

// bufferTime returns the driver's timestamp when it is on CLOCK_MONOTONIC
// (and not left zero), else the time now; ok says which.
func bufferTime(b *uapi.V4L2Buffer, now func() hal.Mono) (t hal.Mono, ok bool) {
	sec, usec := int64(b.Timestamp.Sec), int64(b.Timestamp.Usec)
	if b.Flags&uapi.V4L2BufFlagTimestampMask != uapi.V4L2BufFlagTimestampMonotonic || sec == 0 && usec == 0 {
		return now(), false
	}
	return hal.Mono(time.Duration(sec)*time.Second + time.Duration(usec)*time.Microsecond), true
}

// failure wraps a failed streaming ioctl; a device that is gone (ENODEV,
// ENXIO) or broken (EIO) wraps hal.ErrAbsent.
func (s *session) failure(op string, err error) error {
	e := os.NewSyscallError("ioctl "+op, err)
	if errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENXIO) || errors.Is(err, unix.EIO) {
		return fmt.Errorf("camera: %s: %w: %w", s.node, e, hal.ErrAbsent)
	}
	return fmt.Errorf("camera: %s: %w", s.node, e)
}

// requeue gives buffer i back: to the driver while the session streams,
// else it unmaps it.
func (s *session) requeue(i int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requeueLocked(i)
}

func (s *session) requeueLocked(i int) {
	if !s.out[i] {
		return
	}
	s.out[i] = false
	if s.fd < 0 {
		unix.Munmap(s.bufs[i])
		s.bufs[i] = nil
		return
	}
	b := uapi.V4L2Buffer{Index: uint32(i), Type: uapi.V4L2BufTypeVideoCapture, Memory: uapi.V4L2MemoryMMAP}
	if uapi.Ioctl(s.fd, uapi.VIDIOCQBuf, unsafe.Pointer(&b)) != nil {
		// The device is failing: the capture goroutine hears it from
		// poll or DQBUF, and close unmaps the buffer.
		return
	}
	s.queued++
}

// short reports that fewer buffers than the reserve are with the driver.
func (s *session) short() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fd >= 0 && s.queued < s.reserve
}

// close stops streaming, unmaps the buffers nobody holds and closes the
// descriptor; the others are unmapped when given back.
func (s *session) close() {
	typ := uint32(uapi.V4L2BufTypeVideoCapture)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd < 0 {
		return
	}
	// After an unplug this fails with ENODEV; there is nothing to stop.
	uapi.Ioctl(s.fd, uapi.VIDIOCStreamOff, unsafe.Pointer(&typ))
	s.unmapIdle()
	unix.Close(s.fd)
	s.fd = -1
}

// release undoes a failed open.
func (s *session) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd < 0 {
		return
	}
	s.unmapIdle()
	unix.Close(s.fd)
	s.fd = -1
}

func (s *session) unmapIdle() {
	for i, b := range s.bufs {
		if b != nil && !s.out[i] {
			unix.Munmap(b)
			s.bufs[i] = nil
		}
	}
	s.queued = 0
}
