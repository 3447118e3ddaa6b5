package sense

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/tobe-body/tobe-body/body/evidence"
	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/sense/motion"
)

// MotionStarted is the payload of camera.motion_started.
type MotionStarted struct {
	Zone string `cbor:"zone" json:"zone"`
	// Box is [x0, y0, x1, y1] in normalised frame coordinates.
	Box  [4]float64 `cbor:"box" json:"box"`
	Area float64    `cbor:"area" json:"area"` // fraction of the frame
}

// MotionEnded is the payload of camera.motion_ended.
type MotionEnded struct {
	Zone       string     `cbor:"zone" json:"zone"`
	DurationMS int64      `cbor:"duration_ms" json:"duration_ms"`
	PeakArea   float64    `cbor:"peak_area" json:"peak_area"`
	Frames     int        `cbor:"frames" json:"frames"`
	Box        [4]float64 `cbor:"box" json:"box"` // the union over the episode
	// Cut is true when the camera went away while motion was on.
	Cut bool `cbor:"cut,omitempty" json:"cut,omitempty"`
}

// CameraSummary is the payload of camera.summary: what a camera watched
// over a period (OverS seconds): its zones, those with motion at the
// end, the frames it analysed and skipped. It says the camera still
// watches: a zone with no motion is quiet because it was seen to be.
type CameraSummary struct {
	Zones   []string `cbor:"zones" json:"zones"`
	Moving  []string `cbor:"moving,omitempty" json:"moving,omitempty"`
	Frames  uint64   `cbor:"frames" json:"frames"`
	Skipped uint64   `cbor:"skipped,omitempty" json:"skipped,omitempty"`
	OverS   float64  `cbor:"over_s" json:"over_s"`
}

// Snapshots configures the owner's motion snapshots: a JPEG of the frame
// that started motion, kept as evidence in Store (by "body", for the
// config's sake) for Lifetime (0: the store's for a snapshot), at most
// Width pixels wide (0: 160). Off unless Store is set. Encoding and
// keeping run off the channel's loop, one at a time: a snapshot asked
// for while one is kept is skipped (counted in Stats).
type Snapshots struct {
	Store    Keeper
	Lifetime time.Duration
	Width    int
	// Config names the setting that asked for them, for the record's why
	// (sense.cameras.front.snapshots).
	Config string
}

// Keeper keeps evidence (*evidence.Store).
type Keeper interface {
	Keep(ctx context.Context, m evidence.Media) (evidence.Item, error)
}

// CameraState is told when the camera goes offline and comes back.
type CameraState func(online bool, err error)

// DefaultCameraSummary is how often a camera channel emits
// camera.summary unless SetSummary says otherwise.
const DefaultCameraSummary = time.Minute

// CameraChannel runs a camera's frames through motion detection and emits
// camera.motion_started / camera.motion_ended per zone, never an event
// per frame, and camera.summary once a summary period (SetSummary).
// Frames are released as soon as they are analysed; no frame leaves the
// channel but as evidence: a copy handed to a capture that asked for it
// (Grab, camera.snapshot through the runner) or a motion snapshot the
// config asks for (Snapshots), kept in the evidence store.
type CameraChannel struct {
	out   *Outlet
	cam   hal.Camera
	det   *motion.Detector
	snaps Snapshots
	state CameraState
	cpu   *CPU
	zones []string // the detector's, in its order

	tr []motion.Transition

	// How often camera.summary comes (SetSummary), and the period in
	// progress, read and written by Run only.
	every    time.Duration
	period   summaryPeriod
	lastSeen hal.Mono // time of the last frame given to the detector

	// zoneBoxes are the bounding boxes of the configured zones.
	zoneBoxes map[string][4]float64

	mu    sync.Mutex
	stats CameraChannelStats
	// grabs wait for a copy of the next frame (Grab); last is the latest
	// motion the channel reported.
	grabs []chan *hal.Frame
	last  Motion
	// capturing is told of each grab (the indicator blinks); nil: none.
	capturing func() (done func())
	// toKeep hands a motion snapshot's frame to the goroutine that keeps
	// it (Run's).
	toKeep  chan snapshotAsk
	stopped chan struct{} // closed when Run returns
	stop    sync.Once
}

// Motion is the latest motion a camera channel reported: in which zone,
// its box ([x0, y0, x1, y1] normalised) and whether it goes on.
type Motion struct {
	Zone   string
	Box    [4]float64
	Moving bool
}

// CameraChannelStats is what a camera channel saw.
type CameraChannelStats struct {
	Frames, Skipped, Calibrations uint64
	LastSeq                       uint64
	Moving                        []string // zones with motion now
	// Snapshots counts the motion snapshots kept, SnapshotsSkipped those
	// not taken while one was being kept, SnapshotErrors those that
	// failed.
	Snapshots, SnapshotsSkipped, SnapshotErrors int
	// Changed is the share of the last analysed frame that changed.
	Changed float64
}

// NewCameraChannel detects motion with cfg on cam's frames.
func NewCameraChannel(out *Outlet, cam hal.Camera, cfg motion.Config, snaps Snapshots, state CameraState) (*CameraChannel, error) {
	det, err := motion.New(cfg, cam.Format())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", out.Source().Channel, err)
	}
	if snaps.Store != nil && snaps.Width == 0 {
		snaps.Width = 160
	}
	zones := []string{motion.WholeFrame}
	if len(cfg.Zones) > 0 {
		zones = zones[:0]
		for _, z := range cfg.Zones {
			zones = append(zones, z.Name)
		}
	}
	boxes := map[string][4]float64{}
	for _, z := range cfg.Zones {
		b := [4]float64{1, 1, 0, 0}
		for _, p := range z.Polygon {
			b = [4]float64{min(b[0], p.X), min(b[1], p.Y), max(b[2], p.X), max(b[3], p.Y)}
		}
		boxes[z.Name] = [4]float64{max(b[0], 0), max(b[1], 0), min(b[2], 1), min(b[3], 1)}
	}
	return &CameraChannel{out: out, cam: cam, det: det, snaps: snaps, state: state, zones: zones, zoneBoxes: boxes, every: DefaultCameraSummary,
		stopped: make(chan struct{}), toKeep: make(chan snapshotAsk, 1)}, nil
}

// ZoneBox is the bounding box of a configured zone ([x0, y0, x1, y1]
// normalised), and false when the camera has no zone of that name.
func (c *CameraChannel) ZoneBox(name string) ([4]float64, bool) {
	b, ok := c.zoneBoxes[name]
	return b, ok
}

// SetCapturing makes the channel tell fn of each Grab, which calls the
// func fn returns when it ends (call before Run): the privacy
// indicator's blink.
func (c *CameraChannel) SetCapturing(fn func() (done func())) { c.capturing = fn }

// LastMotion is the latest motion the channel reported, and false when
// it reported none since it started.
func (c *CameraChannel) LastMotion() (Motion, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last, c.last.Zone != ""
}

// Grab waits for the next frame the channel reads and returns a copy of
// it that the caller owns (its Release does nothing): its pixels, and the
// camera's own JPEG when it sent one (Frame.Encoded). The channel copies
// the frame only when someone waits, and does not wait for the caller.
// Grab returns ctx's error when ctx ends first, hal.ErrPaused when the
// camera is paused before a frame comes, and hal.ErrHalted once the
// channel stopped reading.
func (c *CameraChannel) Grab(ctx context.Context) (*hal.Frame, error) {
	ch := make(chan *hal.Frame, 1)
	c.mu.Lock()
	if c.capturing != nil {
		defer c.capturing()()
	}
	select {
	case <-c.stopped:
		c.mu.Unlock()
		return nil, fmt.Errorf("%s stopped reading: %w", c.out.Source().Channel, hal.ErrHalted)
	default:
	}
	c.grabs = append(c.grabs, ch)
	c.mu.Unlock()
	select {
	case f := <-ch:
		if f == nil {
			return nil, fmt.Errorf("%s: %w", c.out.Source().Channel, hal.ErrPaused)
		}
		return f, nil
	case <-ctx.Done():
		c.mu.Lock()
		c.grabs = slices.DeleteFunc(c.grabs, func(g chan *hal.Frame) bool { return g == ch })
		c.mu.Unlock()
		select {
		case f := <-ch: // handed over meanwhile
			return f, nil
		default:
		}
		return nil, ctx.Err()
	case <-c.stopped:
		select {
		case f := <-ch:
			return f, nil
		default:
		}
		return nil, fmt.Errorf("%s stopped reading: %w", c.out.Source().Channel, hal.ErrHalted)
	}
}

// failGrabs ends each waiting Grab with hal.ErrPaused; c.mu is held.
func (c *CameraChannel) failGrabs() {
	for _, g := range c.grabs {
		g <- nil
	}
	c.grabs = c.grabs[:0]
}

// handGrabs gives each waiting Grab a copy of f (one copy, shared: the
// callers only read it); c.mu is held.
func (c *CameraChannel) handGrabs(f *hal.Frame) {
	if len(c.grabs) == 0 {
		return
	}
	cp := hal.NewFrame(f.Format, slices.Clone(f.Data), f.Seq, f.Time, nil)
	if f.Encoded != nil {
		cp.Encoded = slices.Clone(f.Encoded)
	}
	for _, g := range c.grabs {
		g <- cp // buffered for one, and each is handed one frame
	}
	c.grabs = c.grabs[:0]
}

// Zones returns the names of the zones motion is reported in: the
// configured ones, in their order, or motion.WholeFrame when none is.
func (c *CameraChannel) Zones() []string { return append([]string(nil), c.zones...) }

// SetSummary sets how often the channel emits camera.summary (call
// before Run); every <= 0 keeps DefaultCameraSummary.
func (c *CameraChannel) SetSummary(every time.Duration) {
	if every > 0 {
		c.every = every
	}
}

// Summary is how often the channel says camera.summary.
func (c *CameraChannel) Summary() time.Duration { return c.every }

// SetCPU makes the channel take a slot of cpu for each frame it analyses
// (call before Run).
func (c *CameraChannel) SetCPU(cpu *CPU) { c.cpu = cpu }

// Stats returns what the channel saw so far.
func (c *CameraChannel) Stats() CameraChannelStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Moving = append([]string(nil), s.Moving...)
	return s
}

// Run reads frames until ctx is done or the camera is halted (nil). A
// camera that goes away ends the motion it had (marked cut) and is waited
// for: the driver reopens it. Another error is returned.
//
// Run also emits camera.summary, judging time by the frames' timestamps
// alone (no timer): the first frame starts a summary period, and the
// first frame at least a period after its start closes it, counted in it;
// the summary has that frame's time and sequence, and the frame starts
// the next period. A camera that stops sending frames sends no summary:
// a period in progress when the camera goes away, or when a frame comes
// more than a period after the one before, is dropped, and the next
// frame starts a period afresh, so a summary never spans time no frame
// was seen in.
func (c *CameraChannel) Run(ctx context.Context) error {
	defer c.stop.Do(func() { close(c.stopped) })
	if c.snaps.Store != nil {
		kept := make(chan struct{})
		defer func() { <-kept }()
		defer close(c.toKeep)
		go func() {
			defer close(kept)
			for a := range c.toKeep {
				c.keepSnapshot(a)
			}
		}()
	}
	offline := false
	for {
		f, err := c.cam.NextFrame(ctx)
		switch {
		case err == nil:
		case ctx.Err() != nil, errors.Is(err, hal.ErrHalted):
			c.emit(c.det.Reset(c.tr[:0]), true)
			return nil
		case errors.Is(err, hal.ErrPaused):
			// The privacy switch (or a pause): the motion that was on is
			// cut, no summary spans the pause, and a grab waiting gets
			// nothing. Whoever paused says so in the registry.
			c.emit(c.det.Reset(c.tr[:0]), true)
			c.period = summaryPeriod{}
			c.mu.Lock()
			c.failGrabs()
			c.mu.Unlock()
			continue
		case errors.Is(err, hal.ErrAbsent):
			c.emit(c.det.Reset(c.tr[:0]), true)
			c.period = summaryPeriod{}
			if !offline && c.state != nil {
				c.state(false, err)
			}
			offline = true
			continue
		default:
			c.emit(c.det.Reset(c.tr[:0]), true)
			return fmt.Errorf("%s: %w", c.out.Source().Channel, err)
		}
		if offline {
			offline = false
			if c.state != nil {
				c.state(true, nil)
			}
		}
		if c.cpu != nil {
			if err := c.cpu.Acquire(ctx); err != nil {
				f.Release()
				c.emit(c.det.Reset(c.tr[:0]), true)
				return nil
			}
		}
		before := c.det.Stats()
		c.tr, err = c.det.Process(f, c.tr[:0])
		if c.cpu != nil {
			c.cpu.Release()
		}
		if err != nil {
			f.Release()
			if errors.Is(err, motion.ErrTime) {
				continue // a frame from before the last: skip it
			}
			return fmt.Errorf("%s: %w", c.out.Source().Channel, err)
		}
		if c.snaps.Store != nil {
			if zone := started(c.tr); zone != "" {
				c.askSnapshot(f, zone)
			}
		}
		seq, at := f.Seq, f.Time
		c.mu.Lock()
		c.handGrabs(f)
		c.mu.Unlock()
		f.Release()
		c.emitAt(c.tr, false, seq)
		st := c.det.Stats()
		c.summarise(at, seq, before, st)
		c.mu.Lock()
		c.stats.Frames, c.stats.Skipped, c.stats.Calibrations, c.stats.LastSeq = st.Frames, st.Skipped, st.Calibrations, seq
		if li := c.det.Last(); !li.Skipped {
			c.stats.Changed = li.Changed
		}
		c.mu.Unlock()
	}
}

// summaryPeriod is a camera.summary period in progress: from start, with
// the detector's counters as they were before its first frame.
type summaryPeriod struct {
	on    bool
	start hal.Mono
	base  motion.Stats
}

// summarise counts the frame at t (seq) that took the detector's counters
// from before to now into the summary period, and emits camera.summary
// when the frame closes the period (see Run).
func (c *CameraChannel) summarise(t hal.Mono, seq uint64, before, now motion.Stats) {
	gap := c.period.on && t.Sub(c.lastSeen) > c.every
	c.lastSeen = t
	if !c.period.on || gap {
		c.period = summaryPeriod{on: true, start: t, base: before}
		return
	}
	over := t.Sub(c.period.start)
	if over < c.every {
		return
	}
	moving := c.Stats().Moving
	var inZones []string
	for _, z := range c.zones {
		if slices.Contains(moving, z) {
			inZones = append(inZones, z)
		}
	}
	c.out.Emit("camera.summary", t, seq, CameraSummary{Zones: c.zones, Moving: inZones,
		Frames: now.Frames - c.period.base.Frames, Skipped: now.Skipped - c.period.base.Skipped, OverS: round3(over.Seconds())})
	c.period = summaryPeriod{on: true, start: t, base: now}
}

// started is the zone of the first motion that started in tr, "" when
// none did.
func started(tr []motion.Transition) string {
	for _, t := range tr {
		if t.Kind == motion.Started {
			return t.Zone
		}
	}
	return ""
}

func (c *CameraChannel) emit(tr []motion.Transition, cut bool) { c.emitAt(tr, cut, 0) }

func (c *CameraChannel) emitAt(tr []motion.Transition, cut bool, seq uint64) {
	for _, t := range tr {
		box := [4]float64{round3(t.Box.X0), round3(t.Box.Y0), round3(t.Box.X1), round3(t.Box.Y1)}
		switch t.Kind {
		case motion.Started:
			c.out.Emit("camera.motion_started", t.Time, seq, MotionStarted{Zone: t.Zone, Box: box, Area: round3(t.Area)})
			c.moving(t.Zone, true, box)
		case motion.Ended:
			c.out.Emit("camera.motion_ended", t.Time, seq, MotionEnded{Zone: t.Zone, DurationMS: t.Duration.Milliseconds(),
				PeakArea: round3(t.Area), Frames: t.Frames, Box: box, Cut: cut})
			c.moving(t.Zone, false, box)
		}
	}
}

func (c *CameraChannel) moving(zone string, on bool, box [4]float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last = Motion{Zone: zone, Box: box, Moving: on}
	for i, z := range c.stats.Moving {
		if z == zone {
			c.stats.Moving = append(c.stats.Moving[:i], c.stats.Moving[i+1:]...)
			break
		}
	}
	if on {
		c.stats.Moving = append(c.stats.Moving, zone)
	}
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// snapshotAsk is a motion snapshot to keep: a copy of the frame, and
// the zone whose motion started in it.
type snapshotAsk struct {
	frame *hal.Frame
	zone  string
}

// askSnapshot hands a copy of f to the goroutine that keeps motion
// snapshots, or skips it when that one is still keeping the last.
func (c *CameraChannel) askSnapshot(f *hal.Frame, zone string) {
	cp := hal.NewFrame(f.Format, slices.Clone(f.Data), f.Seq, f.Time, nil)
	if f.Encoded != nil {
		cp.Encoded = slices.Clone(f.Encoded)
	}
	select {
	case c.toKeep <- snapshotAsk{cp, zone}:
	default:
		c.mu.Lock()
		c.stats.SnapshotsSkipped++
		c.mu.Unlock()
	}
}

// keepSnapshot encodes a motion snapshot and keeps it as evidence. The
// record names the frame (its sequence is the motion event's source
// sequence); a failure is counted and told, not fatal.
func (c *CameraChannel) keepSnapshot(a snapshotAsk) {
	if c.capturing != nil {
		defer c.capturing()()
	}
	src := c.out.Source()
	jpg, w, h, err := evidence.EncodeJPEG(a.frame, [4]float64{0, 0, 1, 1}, c.snaps.Width, 70, 1<<20)
	if err == nil {
		why := "motion started in zone " + a.zone
		if c.snaps.Config != "" {
			why += " (" + c.snaps.Config + ")"
		}
		_, err = c.snaps.Store.Keep(context.Background(), evidence.Media{Kind: evidence.Snapshot, Source: src.Channel, MediaType: "image/jpeg",
			Data: jpg, Width: w, Height: h, FrameSeq: a.frame.Seq, By: "body", Why: why, Privacy: src.Privacy, Lifetime: c.snaps.Lifetime})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.stats.SnapshotErrors++
		c.out.fail(fmt.Errorf("%s: motion snapshot: %w", src.Channel, err))
		return
	}
	c.stats.Snapshots++
}
