package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tobe-body/tobe-body/board"
	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/ledger"
)

// maxListed bounds the edges and keys listed for one interval; the rest
// are counted.
const maxListed = 16

// monitor reads every opened stream and prints, once an interval, what the
// body sees. It is the daemon's view until the sense channels turn the
// streams into events. Readers are goroutines owned by the monitor: they
// end when ctx ends or their device is halted, and wait returns after all.
type monitor struct {
	ds  *devices
	reg *body.Registry
	log *slog.Logger
	out io.Writer

	wg sync.WaitGroup

	mu    sync.Mutex
	cams  map[string]*camStats
	mic   audioStats
	lines map[string]*lineStats
	// events are what the sense channels wrote to the ledger this interval.
	events     []string
	moreEvents int
}

type camStats struct {
	frames, dropped int
	lastSeq         uint64
	lumaSum         float64
	changedMax      float64 // the largest share of samples that changed between two frames
	prev, cur       []byte  // luma samples of the previous and this frame
	format          hal.FrameFormat
}

type audioStats struct {
	frames, overruns int
	sumSquares       float64
	samples          int
	peak             float64
}

type lineStats struct {
	edges []string
	more  int // edges past maxListed
	level hal.Level
	lost  uint64
	seq   uint64
}

// listed appends s to a bounded list, or counts it in more.
func listed(list []string, more *int, s string) []string {
	if len(list) < maxListed {
		return append(list, s)
	}
	*more++
	return list
}

func newMonitor(ds *devices, reg *body.Registry, log *slog.Logger, out io.Writer) *monitor {
	m := &monitor{ds: ds, reg: reg, log: log, out: out,
		cams: map[string]*camStats{}, lines: map[string]*lineStats{}}
	for _, c := range ds.cams {
		m.cams[c.id] = &camStats{format: c.cam.Format()}
	}
	for _, in := range m.estopLines() {
		l, _ := in.line.Read()
		m.lines[in.id] = &lineStats{level: l}
	}
	return m
}

// estopLines are the lines the monitor reads itself: the e-stop's (every
// other input line is a sense channel's).
func (m *monitor) estopLines() []inputLine {
	var out []inputLine
	for _, in := range m.ds.ins {
		switch in.role {
		case board.RoleEStop, board.RoleEStopSecond, board.RoleEStopReset:
			out = append(out, in)
		}
	}
	return out
}

// start launches one reader per stream.
func (m *monitor) start(ctx context.Context) {
	for _, c := range m.ds.cams {
		m.goRead(ctx, c.id, func() error { return m.readCamera(ctx, c) })
	}
	if m.ds.mic != nil {
		m.goRead(ctx, m.ds.micID, func() error { return m.readMic(ctx) })
	}
	for _, in := range m.estopLines() {
		m.goRead(ctx, in.id, func() error { return m.readLine(ctx, in) })
	}
}

// follow prints, each interval, the events written to the ledger since
// seq, until ctx ends.
func (m *monitor) follow(ctx context.Context, store *ledger.Store, seq uint64) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		store.Follow(ctx, ledger.Filter{After: seq}, func(e ledger.Stored) error {
			line := eventLine(e.View())
			m.mu.Lock()
			m.events = listed(m.events, &m.moreEvents, line)
			m.mu.Unlock()
			return nil
		})
	}()
}

// eventLine is one event as the monitor prints it: type, channel and the
// payload's fields.
func eventLine(e ledger.EventView) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-22s %-16s", e.Type, e.ChannelID)
	if p, ok := e.Payload.(map[string]any); ok {
		keys := make([]string, 0, len(p))
		for k := range p {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, " %s=%v", k, p[k])
		}
	} else if e.Payload != nil {
		fmt.Fprintf(&b, " %v", e.Payload)
	}
	return strings.TrimRight(b.String(), " ")
}

// goRead runs a reader; a reader that fails for a reason other than the
// shutdown marks its channel offline with the error.
func (m *monitor) goRead(ctx context.Context, id string, read func() error) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		err := read()
		if err == nil || ctx.Err() != nil || errors.Is(err, hal.ErrHalted) {
			return
		}
		m.log.Error("device stopped", "channel", id, "err", err)
		if serr := m.reg.Set(id, body.Offline, err.Error()); serr != nil {
			m.log.Error("channel state", "channel", id, "err", serr)
		}
	}()
}

// wait returns when every reader has ended.
func (m *monitor) wait() { m.wg.Wait() }

func (m *monitor) readCamera(ctx context.Context, c camera) error {
	offline := false
	for {
		f, err := c.cam.NextFrame(ctx)
		if errors.Is(err, hal.ErrAbsent) {
			// Unplugged: the driver reopens it; say so and wait for frames.
			m.log.Warn("camera offline", "channel", c.id, "err", err)
			if serr := m.reg.Set(c.id, body.Offline, err.Error()); serr != nil {
				m.log.Error("channel state", "channel", c.id, "err", serr)
			}
			offline = true
			continue
		}
		if err != nil {
			return err
		}
		if offline {
			offline = false
			m.log.Info("camera back", "channel", c.id)
			if serr := m.reg.Set(c.id, body.Enabled, "ok"); serr != nil {
				m.log.Error("channel state", "channel", c.id, "err", serr)
			}
		}
		m.mu.Lock()
		s := m.cams[c.id]
		s.cur = sampleLuma(f, s.cur[:0])
		luma, changed := compareLuma(s.cur, s.prev)
		s.prev, s.cur = s.cur, s.prev
		s.changedMax = max(s.changedMax, changed)
		if s.lastSeq != 0 && f.Seq > s.lastSeq+1 {
			s.dropped += int(f.Seq - s.lastSeq - 1)
		}
		s.lastSeq = f.Seq
		s.frames++
		s.lumaSum += luma
		m.mu.Unlock()
		f.Release()
	}
}

// sampleLuma appends every 16th pixel's luma to dst.
func sampleLuma(f *hal.Frame, dst []byte) []byte {
	step := 16
	if f.Format.Pixel == hal.PixelYUYV {
		step = 32 // luma at even bytes
	} else if f.Format.Pixel != hal.PixelGrey {
		return dst
	}
	for i := 0; i < len(f.Data); i += step {
		dst = append(dst, f.Data[i])
	}
	return dst
}

// changeThreshold is how far a luma sample must move to count as changed.
const changeThreshold = 24

// compareLuma returns the mean of cur and the share of samples that moved
// more than changeThreshold since prev (0 without a previous frame).
func compareLuma(cur, prev []byte) (mean, changed float64) {
	if len(cur) == 0 {
		return 0, 0
	}
	var sum, moved int
	for i, v := range cur {
		sum += int(v)
		if len(prev) == len(cur) {
			if d := int(v) - int(prev[i]); d > changeThreshold || d < -changeThreshold {
				moved++
			}
		}
	}
	return float64(sum) / float64(len(cur)), float64(moved) / float64(len(cur))
}

func (m *monitor) readMic(ctx context.Context) error {
	f := hal.AudioFrame{Samples: make([]int16, m.ds.mic.Format().Len())}
	for {
		if err := m.ds.mic.ReadFrame(ctx, &f); err != nil {
			return err
		}
		var sq, peak float64
		for _, v := range f.Samples {
			x := float64(v) / 32768
			sq += x * x
			peak = max(peak, math.Abs(x))
		}
		m.mu.Lock()
		m.mic.frames++
		m.mic.overruns += f.Overruns
		m.mic.sumSquares += sq
		m.mic.samples += len(f.Samples)
		m.mic.peak = max(m.mic.peak, peak)
		m.mu.Unlock()
	}
}

func (m *monitor) readLine(ctx context.Context, in inputLine) error {
	for {
		e, err := in.line.WaitForEdge(ctx)
		if err != nil {
			return err
		}
		gap := false
		m.mu.Lock()
		s := m.lines[in.id]
		if e.Seq > s.seq+1 {
			s.lost += e.Seq - s.seq - 1
			gap = true
		}
		s.seq = e.Seq
		s.level = e.Level
		s.edges = listed(s.edges, &s.more, edgeWord(e.Edge))
		m.mu.Unlock()
		if gap {
			// Edges were lost: the level now is what counts, not the
			// last edge that arrived.
			if l, err := in.line.Read(); err == nil {
				m.mu.Lock()
				m.lines[in.id].level = l
				m.mu.Unlock()
			}
		}
	}
}

func edgeWord(e hal.Edge) string {
	if e == hal.RisingEdge {
		return "rising"
	}
	return "falling"
}

// print writes one line per device for the interval that ended and starts
// the next.
func (m *monitor) print(since time.Duration, interval time.Duration) {
	var b strings.Builder
	stamp := fmt.Sprintf("[%6s]", since.Truncate(time.Second))
	m.mu.Lock()
	for _, c := range m.ds.cams {
		s := m.cams[c.id]
		fps := float64(s.frames) / interval.Seconds()
		luma := 0.0
		if s.frames > 0 {
			luma = s.lumaSum / float64(s.frames)
		}
		fmt.Fprintf(&b, "%s %-20s %s %dx%d  %4.1f fps  seq %d  %d dropped  luma %3.0f  changed %4.1f%%\n",
			stamp, c.id, s.format.Pixel, s.format.Width, s.format.Height, fps, s.lastSeq, s.dropped, luma, 100*s.changedMax)
	}
	if m.ds.mic != nil {
		s := &m.mic
		rms := -120.0
		if s.samples > 0 && s.sumSquares > 0 {
			rms = 10 * math.Log10(s.sumSquares/float64(s.samples))
		}
		peak := -120.0
		if s.peak > 0 {
			peak = 20 * math.Log10(s.peak)
		}
		f := m.ds.mic.Format()
		fmt.Fprintf(&b, "%s %-20s %s x%d  level %6.1f dBFS  peak %6.1f dBFS  %d frames  %d overruns\n",
			stamp, m.ds.micID, f.Rate, f.Channels, rms, peak, s.frames, s.overruns)
	}
	for _, in := range m.estopLines() {
		s := m.lines[in.id]
		fmt.Fprintf(&b, "%s %-20s %s  %s", stamp, in.id, levelWord(s.level), lineMeaning(in, s.level))
		if len(s.edges) > 0 {
			fmt.Fprintf(&b, "  edges: %s", strings.Join(s.edges, ", "))
		}
		if s.more > 0 {
			fmt.Fprintf(&b, " and %d more", s.more)
		}
		if s.lost > 0 {
			fmt.Fprintf(&b, "  %d edges lost", s.lost)
		}
		b.WriteString("\n")
	}
	for _, e := range m.events {
		fmt.Fprintf(&b, "%s event  %s\n", stamp, e)
	}
	if m.moreEvents > 0 {
		fmt.Fprintf(&b, "%s event  and %d more\n", stamp, m.moreEvents)
	}
	m.resetLocked()
	m.mu.Unlock()
	if len(m.ds.outs) > 0 {
		var outs []string
		for _, o := range m.ds.outs {
			l, err := o.line.ReadBack()
			if err != nil {
				outs = append(outs, o.name+"=?("+err.Error()+")")
				continue
			}
			outs = append(outs, o.name+"="+levelWord(l))
		}
		fmt.Fprintf(&b, "%s %-20s %s (read back)\n", stamp, "outputs", strings.Join(outs, " "))
	}
	io.WriteString(m.out, b.String())
}

// reset starts a new interval without printing the one that ended.
func (m *monitor) reset() {
	m.mu.Lock()
	m.resetLocked()
	m.mu.Unlock()
}

func (m *monitor) resetLocked() {
	for _, s := range m.cams {
		s.frames, s.dropped, s.lumaSum, s.changedMax = 0, 0, 0, 0
	}
	m.mic = audioStats{}
	for _, s := range m.lines {
		s.edges, s.more, s.lost = nil, 0, 0
	}
	m.events, m.moreEvents = nil, 0
}

func levelWord(l hal.Level) string {
	if l == hal.High {
		return "high"
	}
	return "low "
}

func lineMeaning(in inputLine, l hal.Level) string {
	on := l == in.active
	switch in.role {
	case board.RoleEStop, board.RoleEStopSecond:
		if on {
			return "STOP (contact open or wire broken)"
		}
		return "closed, no stop"
	case board.RoleEStopReset, "button":
		if on {
			return "pressed"
		}
		return "released"
	}
	if on {
		return "active"
	}
	return "inactive"
}
