// Package main is evidencebench, the Go half of scripts/bench/evidence.sh:
// what capturing evidence costs the body.
//
//	evidencebench snapshot [-n N]          request to JPEG ready, and to kept
//	evidencebench motion [-seconds S] [-rounds R]   motion fps with and without a snapshot a second
//	evidencebench memory                   what the audio ring and a capture in flight hold
//
// snapshot runs the sim board's camera (640x480 YUYV at 30 frames a
// second, in real time) through the body's camera channel, as the daemon
// does, and asks camera.snapshot's action for N snapshots of the whole
// frame at random moments (0 to 100 ms apart): the time from the request
// to the JPEG in hand (the next frame copied by the channel, encoded),
// and to the JPEG kept (written, synced, recorded in a ledger),
// printed as p50 and p99 in milliseconds.
//
// motion feeds the camera channel a free-running 640x480 YUYV camera
// (frames of a rendered scene, handed over as fast as they are taken)
// for S seconds without snapshots and S seconds with one a second (the
// action's grab and encoding, kept in memory), R rounds alternating,
// and prints the frames per second the channel analysed in each, the
// medians, and their ratio.
//
// memory prints the bytes a microphone channel's ring holds for 10 s at
// 16 kHz mono (the default), and the bytes allocated by one capture in
// flight: a 30 s clip (its samples and its WAV) and a 640x480 snapshot
// (the frame's copy and its JPEG).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/body/evidence"
	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/sim"
	"github.com/tobe-body/tobe-body/ledger"
	"github.com/tobe-body/tobe-body/sense"
	"github.com/tobe-body/tobe-body/sense/motion"
	"github.com/tobe-body/tobe-body/sense/motion/motiontest"
	"github.com/tobe-body/tobe-body/sense/sound"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: evidencebench snapshot|motion|memory [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "snapshot":
		fs := flag.NewFlagSet("snapshot", flag.ExitOnError)
		n := fs.Int("n", 200, "snapshots")
		fs.Parse(os.Args[2:])
		err = snapshots(*n)
	case "motion":
		fs := flag.NewFlagSet("motion", flag.ExitOnError)
		secs := fs.Float64("seconds", 5, "seconds of each run")
		rounds := fs.Int("rounds", 3, "rounds")
		fs.Parse(os.Args[2:])
		err = motionFPS(time.Duration(*secs*float64(time.Second)), *rounds)
	case "memory":
		err = memory()
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "evidencebench:", err)
		os.Exit(1)
	}
}

// timedKeeper keeps in an evidence store and notes when each JPEG was
// handed to it.
type timedKeeper struct {
	*evidence.Store
	mu    sync.Mutex
	ready time.Time
}

func (k *timedKeeper) Keep(ctx context.Context, m evidence.Media) (evidence.Item, error) {
	k.mu.Lock()
	k.ready = time.Now()
	k.mu.Unlock()
	if k.Store == nil {
		return evidence.Item{Captured: evidence.Captured{ID: ledger.NewID().String()}}, nil
	}
	return k.Store.Keep(ctx, m)
}

// channel runs a camera channel over cam until the returned stop.
func channel(cam hal.Camera) (*sense.CameraChannel, func(), error) {
	o := sense.NewOutlet(sense.Source{Channel: "camera.front"}, 1024)
	ch, err := sense.NewCameraChannel(o, cam, motion.Config{}, sense.Snapshots{}, nil)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); ch.Run(ctx) }()
	// The outlet's events are drained and dropped: the ledger is not
	// what is measured.
	go func() {
		defer wg.Done()
		o.Run(ctx, discard{})
	}()
	return ch, func() { cancel(); cam.Halt(); wg.Wait() }, nil
}

type discard struct{}

func (discard) Append(_ context.Context, evs ...ledger.Event) ([]ledger.Result, error) {
	return make([]ledger.Result, len(evs)), nil
}

func snapshots(n int) error {
	dir, err := os.MkdirTemp("", "evidencebench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	classes := ledger.DefaultClasses()
	store, err := ledger.Open(ledger.Options{Path: filepath.Join(dir, "ledger.db"), Classes: &classes, Projections: evidence.Projections()})
	if err != nil {
		return err
	}
	defer store.Close()
	ev, err := evidence.Open(context.Background(), evidence.Options{Dir: filepath.Join(dir, "evidence"), Ledger: store, MaxBytes: 1 << 30, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	cam, err := sim.New(1).Drivers().OpenCamera(hal.CameraConfig{Device: sim.CameraName, Pixel: []hal.PixelFormat{hal.PixelYUYV}, Width: 640, Height: 480, Rate: 30 * physic.Hertz})
	if err != nil {
		return err
	}
	ch, stop, err := channel(cam)
	if err != nil {
		return err
	}
	defer stop()
	keep := &timedKeeper{Store: ev}
	a := act.NewCameraSnapshot([]*act.Lens{{Channel: "camera.front", Privacy: ledger.Sensitive, Grab: ch.Grab}}, keep, 0, 0)
	var ready, kept []float64
	r := rand.New(rand.NewPCG(1, 2))
	time.Sleep(200 * time.Millisecond) // the camera's first frames
	for range n {
		time.Sleep(time.Duration(r.Int64N(int64(100 * time.Millisecond))))
		inv := &act.Invocation{ActionID: ledger.NewID().String(), Principal: act.Principal{Subject: "admin:bench"}, Target: "camera.front"}
		t0 := time.Now()
		if _, err := a.Do(context.Background(), inv); err != nil {
			return err
		}
		done := time.Now()
		keep.mu.Lock()
		ready = append(ready, ms(keep.ready.Sub(t0)))
		keep.mu.Unlock()
		kept = append(kept, ms(done.Sub(t0)))
	}
	fmt.Printf("snapshot: %d requests of a 640x480 JPEG of the sim camera at 30 fps through the camera channel\n", n)
	fmt.Printf("ready p50 %.2f p99 %.2f ms; kept p50 %.2f p99 %.2f ms\n", pct(ready, 50), pct(ready, 99), pct(kept, 50), pct(kept, 99))
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func pct(v []float64, p float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p / 100)
	return s[i]
}

// freeCamera hands its frames over as fast as they are taken.
type freeCamera struct {
	format hal.FrameFormat
	frames [][]byte
	next   int
	seq    uint64
	halt   chan struct{}
	once   sync.Once
}

func (c *freeCamera) Name() string            { return "free" }
func (c *freeCamera) Format() hal.FrameFormat { return c.format }
func (c *freeCamera) Halt() error             { c.once.Do(func() { close(c.halt) }); return nil }
func (c *freeCamera) Close() error            { return c.Halt() }

func (c *freeCamera) NextFrame(ctx context.Context) (*hal.Frame, error) {
	select {
	case <-c.halt:
		return nil, hal.ErrHalted
	default:
	}
	c.seq++
	f := c.frames[c.next]
	c.next = (c.next + 1) % len(c.frames)
	// Its time: 30 frames a second of the scene, whatever the pace.
	return hal.NewFrame(c.format, f, c.seq, hal.Mono(time.Duration(c.seq)*time.Second/30), nil), nil
}

func motionFPS(d time.Duration, rounds int) error {
	format := hal.FrameFormat{Pixel: hal.PixelYUYV, Width: 640, Height: 480, Stride: 1280}
	sc := motiontest.Scene{Format: format, Seed: 1, Noise: 3, Objects: []motiontest.Object{
		{From: 0, To: 4 * time.Second, Start: [2]float64{-0.1, 0.5}, End: [2]float64{1.1, 0.5}, W: 0.15, H: 0.2, Luma: 230},
	}}
	frames := make([][]byte, 120)
	for i := range frames {
		frames[i] = make([]byte, sc.Bytes())
		sc.Render(frames[i], time.Duration(i)*time.Second/30, uint64(i))
	}
	run := func(snap bool) (float64, error) {
		cam := &freeCamera{format: format, frames: frames, halt: make(chan struct{})}
		ch, stop, err := channel(cam)
		if err != nil {
			return 0, err
		}
		a := act.NewCameraSnapshot([]*act.Lens{{Channel: "camera.front", Grab: ch.Grab}}, &timedKeeper{}, 0, 0)
		time.Sleep(100 * time.Millisecond)
		start, f0 := time.Now(), ch.Stats().Frames
		deadline := start.Add(d)
		for snap && time.Now().Before(deadline) {
			if _, err := a.Do(context.Background(), &act.Invocation{Target: "camera.front", Principal: act.Principal{Subject: "admin:bench"}}); err != nil {
				stop()
				return 0, err
			}
			time.Sleep(time.Until(deadline.Add(-d).Add(time.Duration(1+int(time.Since(start)/time.Second)) * time.Second)))
		}
		time.Sleep(time.Until(deadline))
		n := ch.Stats().Frames - f0
		el := time.Since(start)
		stop()
		return float64(n) / el.Seconds(), nil
	}
	var without, with []float64
	for r := range rounds {
		a, err := run(false)
		if err != nil {
			return err
		}
		b, err := run(true)
		if err != nil {
			return err
		}
		without, with = append(without, a), append(with, b)
		fmt.Printf("round %d: %.0f frames/s without snapshots, %.0f with one a second\n", r+1, a, b)
	}
	fmt.Printf("motion: median %.0f frames/s without, %.0f with (GOMAXPROCS %d)\n", pct(without, 50), pct(with, 50), runtime.GOMAXPROCS(0))
	return nil
}

// allocated is the bytes fn allocates.
func allocated(fn func() error) (uint64, error) {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	err := fn()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc, err
}

// freeMic hands its frames over as fast as they are taken: a tone.
type freeMic struct {
	format hal.AudioFormat
	seq    uint64
	halt   chan struct{}
	once   sync.Once
}

func (m *freeMic) Name() string            { return "free" }
func (m *freeMic) Format() hal.AudioFormat { return m.format }
func (m *freeMic) Halt() error             { m.once.Do(func() { close(m.halt) }); return nil }
func (m *freeMic) Close() error            { return m.Halt() }

func (m *freeMic) ReadFrame(ctx context.Context, f *hal.AudioFrame) error {
	select {
	case <-m.halt:
		return hal.ErrHalted
	case <-ctx.Done():
		return ctx.Err()
	default:
	}
	m.seq++
	for i := range f.Samples {
		f.Samples[i] = int16(1000 * (i % 16))
	}
	f.Seq, f.Time = m.seq, hal.Mono(time.Duration(m.seq)*m.format.FrameDuration())
	runtime.Gosched() // a reader of its own, as a device's
	return nil
}

func memory() error {
	f := hal.AudioFormat{Rate: 16 * physic.KiloHertz, Channels: 1, FrameSamples: 320}
	mic := &freeMic{format: f, halt: make(chan struct{})}
	o := sense.NewOutlet(sense.Source{Channel: "audio.mic"}, 1<<16)
	ch, err := sense.NewMicChannel(o, mic, sound.Config{})
	if err != nil {
		return err
	}
	ch.SetRing(sense.DefaultRing)
	ring := ch.RingBytes()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); ch.Run(ctx) }()
	go func() { defer wg.Done(); o.Run(ctx, discard{}) }()
	defer func() { cancel(); mic.Halt(); wg.Wait() }()
	for { // the ring full
		if h, err := ch.Clip(ctx, sense.DefaultRing, 0); err != nil {
			return err
		} else if h.Duration() >= sense.DefaultRing {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A 30 s clip in flight: 10 s from the ring and 20 s after, through
	// the channel's tap, then its WAV.
	clip, err := allocated(func() error {
		h, err := ch.Clip(ctx, sense.DefaultRing, 30*time.Second-sense.DefaultRing)
		if err == nil && h.Duration() != 30*time.Second {
			err = fmt.Errorf("a clip of %v, want 30s", h.Duration())
		}
		_ = evidence.EncodeWAV(h.Format, h.Samples)
		return err
	})
	if err != nil {
		return err
	}
	// A 640x480 snapshot in flight: the channel's copy of the frame, then
	// its JPEG.
	format := hal.FrameFormat{Pixel: hal.PixelYUYV, Width: 640, Height: 480, Stride: 1280}
	sc := motiontest.Scene{Format: format, Seed: 1, Noise: 3}
	buf := make([]byte, sc.Bytes())
	sc.Render(buf, 0, 0)
	snap, err := allocated(func() error {
		cp := hal.NewFrame(format, slices.Clone(buf), 1, 0, nil)
		_, _, _, err := evidence.EncodeJPEG(cp, [4]float64{0, 0, 1, 1}, 1920, 80, act.DefaultSnapshotBytes)
		return err
	})
	if err != nil {
		return err
	}
	fmt.Printf("memory: the ring of %v at 16 kHz mono holds %d bytes; a 30 s clip in flight allocates %d bytes; a 640x480 snapshot %d bytes\n",
		sense.DefaultRing, ring, clip, snap)
	return nil
}
