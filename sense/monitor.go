package sense

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/ledger"
)

// maxListed bounds the events listed for one interval; the rest are
// counted.
const maxListed = 16

// Monitor prints, once an interval, what the body sees: each camera's and
// microphone's counts from its sense channel, the e-stop, the outputs read
// back, and the events the channels wrote to the ledger since the last
// print (collected by Follow, which its caller runs in a goroutine).
type Monitor struct {
	ds  *body.Devices
	out io.Writer

	mu    sync.Mutex
	sn    *Group
	cams  map[string]uint64 // frames analysed at the last print, per camera
	estop func() string     // the e-stop's state, or nil: none
	// events are what the sense channels wrote to the ledger this interval.
	events     []string
	moreEvents int
}

// listed appends s to a bounded list, or counts it in more.
func listed(list []string, more *int, s string) []string {
	if len(list) < maxListed {
		return append(list, s)
	}
	*more++
	return list
}

// NewMonitor prints to out what the group senses, the outputs of ds read
// back, and estop's state (nil: no e-stop).
func NewMonitor(ds *body.Devices, sn *Group, estop func() string, out io.Writer) *Monitor {
	return &Monitor{ds: ds, sn: sn, estop: estop, out: out, cams: map[string]uint64{}}
}

// Follow collects, for each interval's print, the events written to the
// ledger since seq, until ctx ends.
func (m *Monitor) Follow(ctx context.Context, store *ledger.Store, seq uint64) {
	store.Follow(ctx, ledger.Filter{After: seq}, func(e ledger.Stored) error {
		line := eventLine(e.View())
		m.mu.Lock()
		m.events = listed(m.events, &m.moreEvents, line)
		m.mu.Unlock()
		return nil
	})
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

// Print writes one line per device for the interval that ended and starts
// the next.
func (m *Monitor) Print(since time.Duration, interval time.Duration) {
	var b strings.Builder
	stamp := fmt.Sprintf("[%6s]", since.Truncate(time.Second))
	m.mu.Lock()
	if m.sn != nil {
		for _, c := range m.sn.Cameras {
			st := c.Ch.Stats()
			f := c.Cam.Format()
			fps := float64(st.Frames-m.cams[c.ID]) / interval.Seconds()
			m.cams[c.ID] = st.Frames
			fmt.Fprintf(&b, "%s %-20s %s %dx%d  %4.1f fps analysed  seq %d", stamp, c.ID, f.Pixel, f.Width, f.Height, fps, st.LastSeq)
			if cs, ok := c.Cam.(hal.CameraStatser); ok {
				fmt.Fprintf(&b, "  %d dropped", cs.Stats().Dropped)
			}
			fmt.Fprintf(&b, "  changed %4.1f%%", 100*st.Changed)
			if len(st.Moving) > 0 {
				fmt.Fprintf(&b, "  MOTION in %s", strings.Join(st.Moving, ", "))
			}
			b.WriteString("\n")
		}
		if c := m.sn.Mic; c != nil {
			st := c.Ch.Stats()
			f := c.Mic.Format()
			fmt.Fprintf(&b, "%s %-20s %s x%d  level %6.1f dBFS  peak %6.1f dBFS  %d frames  %d overruns", stamp, c.ID, f.Rate, f.Channels, st.RMS, st.Peak, st.Frames, st.Overruns)
			if st.Voice {
				b.WriteString("  VOICE")
			}
			if st.Loud {
				b.WriteString("  LOUD")
			}
			b.WriteString("\n")
		}
	}
	if m.estop != nil {
		fmt.Fprintf(&b, "%s %-20s %s\n", stamp, "estop", m.estop())
	}
	for _, e := range m.events {
		fmt.Fprintf(&b, "%s event  %s\n", stamp, e)
	}
	if m.moreEvents > 0 {
		fmt.Fprintf(&b, "%s event  and %d more\n", stamp, m.moreEvents)
	}
	m.resetLocked()
	m.mu.Unlock()
	if len(m.ds.Outs) > 0 {
		var outs []string
		for _, o := range m.ds.Outs {
			l, err := o.Line.ReadBack()
			if err != nil {
				outs = append(outs, o.Name+"=?("+err.Error()+")")
				continue
			}
			outs = append(outs, fmt.Sprintf("%s=%-4s", o.Name, levelWord(l)))
		}
		fmt.Fprintf(&b, "%s %-20s %s (read back)\n", stamp, "outputs", strings.Join(outs, " "))
	}
	io.WriteString(m.out, b.String())
}

// Reset starts a new interval without printing the one that ended.
func (m *Monitor) Reset() {
	m.mu.Lock()
	m.resetLocked()
	m.mu.Unlock()
}

func (m *Monitor) resetLocked() {
	m.events, m.moreEvents = nil, 0
}
