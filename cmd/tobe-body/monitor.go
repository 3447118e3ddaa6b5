package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
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
	sn    *senses
	cams  map[string]uint64 // frames analysed at the last print, per camera
	lines map[string]*lineStats
	// events are what the sense channels wrote to the ledger this interval.
	events     []string
	moreEvents int
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

func newMonitor(ds *devices, sn *senses, reg *body.Registry, log *slog.Logger, out io.Writer) *monitor {
	m := &monitor{ds: ds, sn: sn, reg: reg, log: log, out: out, cams: map[string]uint64{}, lines: map[string]*lineStats{}}
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
	if m.sn != nil {
		for _, c := range m.sn.cams {
			st := c.ch.Stats()
			f := c.cam.Format()
			fps := float64(st.Frames-m.cams[c.id]) / interval.Seconds()
			m.cams[c.id] = st.Frames
			fmt.Fprintf(&b, "%s %-20s %s %dx%d  %4.1f fps analysed  seq %d", stamp, c.id, f.Pixel, f.Width, f.Height, fps, st.LastSeq)
			if cs, ok := c.cam.(hal.CameraStatser); ok {
				fmt.Fprintf(&b, "  %d dropped", cs.Stats().Dropped)
			}
			fmt.Fprintf(&b, "  changed %4.1f%%", 100*st.Changed)
			if len(st.Moving) > 0 {
				fmt.Fprintf(&b, "  MOTION in %s", strings.Join(st.Moving, ", "))
			}
			b.WriteString("\n")
		}
		if c := m.sn.mic; c != nil {
			st := c.ch.Stats()
			f := c.mic.Format()
			fmt.Fprintf(&b, "%s %-20s %s x%d  level %6.1f dBFS  peak %6.1f dBFS  %d frames  %d overruns", stamp, c.id, f.Rate, f.Channels, st.RMS, st.Peak, st.Frames, st.Overruns)
			if st.Voice {
				b.WriteString("  VOICE")
			}
			if st.Loud {
				b.WriteString("  LOUD")
			}
			b.WriteString("\n")
		}
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
