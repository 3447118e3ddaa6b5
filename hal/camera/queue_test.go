package camera

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/tobe-body/tobe-body/hal"
)

// fakePool stands for a stream's driver buffers: n of them, of which the
// driver must keep reserve.
type fakePool struct {
	n, reserve int

	mu       sync.Mutex
	queued   int          // with the driver
	out      map[int]bool // handed out
	closed   bool         // the stream ended: buffers are unmapped when given back
	requeued int
	unmapped []int
	wrong    []string // misuse seen
}

func newFakePool(n, reserve int) *fakePool {
	return &fakePool{n: n, reserve: reserve, queued: n, out: map[int]bool{}}
}

// fill takes the next buffer from the driver, as DQBUF would.
func (p *fakePool) fill(seq uint64, data []byte, wire hal.PixelFormat, f hal.FrameFormat) filled {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.n {
		if !p.out[i] {
			p.out[i] = true
			p.queued--
			return filled{pool: p, index: i, data: data, wire: wire, format: f, seq: seq, time: hal.Mono(seq)}
		}
	}
	p.wrong = append(p.wrong, fmt.Sprintf("frame %d: the driver has no buffer to fill", seq))
	return filled{}
}

func (p *fakePool) requeue(i int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.out[i] {
		p.wrong = append(p.wrong, fmt.Sprintf("buffer %d given back twice", i))
		return
	}
	delete(p.out, i)
	if p.closed {
		p.unmapped = append(p.unmapped, i)
		return
	}
	p.queued++
	p.requeued++
}

func (p *fakePool) short() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.closed && p.queued < p.reserve
}

func (p *fakePool) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
}

func (p *fakePool) check(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.wrong {
		t.Error(w)
	}
	if !p.closed && p.queued < 1 {
		t.Errorf("the driver was left with %d buffers", p.queued)
	}
}

var grey = hal.FrameFormat{Pixel: hal.PixelGrey, Width: 2, Height: 1, Stride: 2}

// TestQueue runs scripts against the queue: f the driver fills a frame
// (numbered from 1) and it is queued, t the consumer takes the oldest
// entry and holds it, r the consumer releases the oldest frame it holds,
// e the device goes offline.
func TestQueue(t *testing.T) {
	for _, tc := range []struct {
		name           string
		n, reserve     int
		script         string
		taken          string // frames by number, E the error, - nothing
		drops, waiting int
	}{
		{"a fast consumer gets every frame", 6, 2, "ftr ftr ftr", "1 2 3", 0, 0},
		{"a slow consumer gets the newest", 6, 2, "fffff tttt", "4 5 - -", 3, 0},
		{"the queue holds two", 6, 2, "fff", "", 1, 2},
		{"holding all but the reserve starves the consumer, not the driver", 6, 2, "ftftftft f t", "1 2 3 4 -", 1, 0},
		{"a release lets frames through again", 6, 2, "ftftftft f t r f t", "1 2 3 4 - 6", 1, 0},
		{"a small pool keeps one with the driver", 2, 1, "fft", "2", 1, 0},
		{"the error keeps its place among frames", 6, 2, "fef ttt", "1 E 2", 0, 0},
		{"drops skip the error", 6, 2, "feffftttt", "E 3 4 -", 2, 0},
		{"one error per transition", 6, 2, "eett", "E -", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newFakePool(tc.n, tc.reserve)
			q := newFrameQueue(queueLimit)
			offline := errors.New("offline")
			var taken []string
			var held []filled
			seq := uint64(0)
			for _, op := range tc.script {
				switch op {
				case 'f':
					seq++
					q.push(p.fill(seq, nil, hal.PixelGrey, grey))
				case 'e':
					q.report(offline)
				case 't':
					e, ok := q.take()
					switch {
					case !ok:
						taken = append(taken, "-")
					case e.err != nil:
						taken = append(taken, "E")
					default:
						taken = append(taken, fmt.Sprint(e.frame.seq))
						held = append(held, e.frame)
					}
				case 'r':
					held[0].requeue()
					held = held[1:]
				}
			}
			if got := strings.Join(taken, " "); got != tc.taken {
				t.Errorf("taken %q, want %q", got, tc.taken)
			}
			if got := q.drops(); got != uint64(tc.drops) {
				t.Errorf("%d dropped, want %d", got, tc.drops)
			}
			if q.frames != tc.waiting {
				t.Errorf("%d frames waiting, want %d", q.frames, tc.waiting)
			}
			p.check(t)
			// Everything goes back: what is held and what waits.
			for _, f := range held {
				f.requeue()
			}
			q.flush()
			if p.queued != tc.n || len(p.out) != 0 {
				t.Errorf("after giving everything back the driver has %d of %d buffers (%v out)", p.queued, tc.n, p.out)
			}
			p.check(t)
		})
	}
}

func TestQueueSignalsWaitingEntries(t *testing.T) {
	p := newFakePool(6, 2)
	q := newFrameQueue(queueLimit)
	select {
	case <-q.ready:
		t.Fatal("ready before anything was queued")
	default:
	}
	q.push(p.fill(1, nil, hal.PixelGrey, grey))
	q.push(p.fill(2, nil, hal.PixelGrey, grey))
	for want := uint64(1); want <= 2; want++ {
		select {
		case <-q.ready:
		default:
			t.Fatalf("frame %d waits but the queue did not signal", want)
		}
		e, ok := q.take()
		if !ok || e.frame.seq != want {
			t.Fatalf("took %v %v, want frame %d", e, ok, want)
		}
		e.frame.requeue()
	}
	select {
	case <-q.ready:
		t.Fatal("ready with nothing waiting")
	default:
	}
}

func TestQueueFlushUnmapsBuffersOfEndedStreams(t *testing.T) {
	p := newFakePool(6, 2)
	q := newFrameQueue(queueLimit)
	q.push(p.fill(1, nil, hal.PixelGrey, grey))
	q.push(p.fill(2, nil, hal.PixelGrey, grey))
	q.report(errors.New("offline"))
	p.close()
	q.flush()
	if len(p.unmapped) != 2 || p.requeued != 0 {
		t.Errorf("flushing after the stream ended: unmapped %v, requeued %d; want both unmapped", p.unmapped, p.requeued)
	}
	if _, ok := q.take(); ok {
		t.Error("an entry survived the flush")
	}
	p.check(t)
}
