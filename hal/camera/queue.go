package camera

import (
	"sync"

	"github.com/tobe-body/tobe-body/hal"
)

// A pool owns the buffers frames are captured into: one stream's mmap'd
// V4L2 buffers.
type pool interface {
	// requeue gives buffer index back to the driver (VIDIOC_QBUF), or
	// unmaps it when its stream has ended. It is called once for each
	// buffer the stream handed out.
	requeue(index int)
	// short reports that the driver holds fewer empty buffers than it
	// needs to go on capturing.
	short() bool
}

// filled is a buffer the driver filled, on its way to the consumer.
type filled struct {
	pool  pool
	index int
	data  []byte
	// wire is the format in the buffer; format is what the consumer gets
	// (GREY frames from MJPEG).
	wire   hal.PixelFormat
	format hal.FrameFormat
	seq    uint64
	time   hal.Mono
}

func (f filled) requeue() { f.pool.requeue(f.index) }

// entry is a frame, or an error to report once in its place in the
// stream (the device going offline).
type entry struct {
	frame filled
	err   error
}

// frameQueue is the bounded queue between the goroutine that dequeues
// buffers from the driver and NextFrame. It never makes the capture side
// wait: when a frame arrives and more than limit frames are waiting, or
// the driver is left with too few empty buffers because the consumer
// holds the others, the oldest waiting frames go back to the driver and
// are counted as dropped. The consumer therefore always gets the newest
// frames, and at worst (it holds every buffer the driver can spare) gets
// no new frame until it releases one, while capture goes on.
type frameQueue struct {
	limit int
	// ready holds a token while entries may be waiting.
	ready chan struct{}

	mu      sync.Mutex
	entries []entry // oldest first
	frames  int     // entries that are frames
	dropped uint64
}

func newFrameQueue(limit int) *frameQueue {
	return &frameQueue{limit: max(limit, 1), ready: make(chan struct{}, 1)}
}

func (q *frameQueue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// push queues a filled buffer, dropping the oldest waiting frames (their
// buffers go back to the driver) while too many wait or the driver runs
// short of empty buffers. The frame just pushed may be the one dropped.
func (q *frameQueue) push(f filled) {
	q.mu.Lock()
	q.entries = append(q.entries, entry{frame: f})
	q.frames++
	for q.frames > 0 && (q.frames > q.limit || f.pool.short()) {
		q.dropOldest()
	}
	waiting := len(q.entries) > 0
	q.mu.Unlock()
	if waiting {
		q.signal()
	}
}

// dropOldest requeues the oldest waiting frame; events stay. q.mu held.
func (q *frameQueue) dropOldest() {
	for i, e := range q.entries {
		if e.err != nil {
			continue
		}
		q.entries = append(q.entries[:i], q.entries[i+1:]...)
		q.frames--
		q.dropped++
		e.frame.requeue()
		return
	}
}

// report queues err to be returned once, after the frames already
// waiting. While an error waits untaken, later ones are not queued: the
// consumer learns of the transition once.
func (q *frameQueue) report(err error) {
	q.mu.Lock()
	for _, e := range q.entries {
		if e.err != nil {
			q.mu.Unlock()
			return
		}
	}
	q.entries = append(q.entries, entry{err: err})
	q.mu.Unlock()
	q.signal()
}

// take returns the oldest entry; ok is false when none waits.
func (q *frameQueue) take() (e entry, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.entries) == 0 {
		return entry{}, false
	}
	e = q.entries[0]
	q.entries[0] = entry{}
	q.entries = q.entries[1:]
	if e.err == nil {
		q.frames--
	}
	if len(q.entries) > 0 {
		// Another reader may be waiting for what is left.
		q.signal()
	}
	return e, true
}

// flush gives every waiting buffer back and forgets waiting errors.
func (q *frameQueue) flush() {
	q.mu.Lock()
	entries := q.entries
	q.entries, q.frames = nil, 0
	q.mu.Unlock()
	for _, e := range entries {
		if e.err == nil {
			e.frame.requeue()
		}
	}
}

// drops returns how many frames were dropped for a slow consumer.
func (q *frameQueue) drops() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.dropped
}
