package act

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/ledger"
	"github.com/tobe-body/tobe-body/sense/motion"
	"github.com/tobe-body/tobe-body/sense/motion/motiontest"
)

// TestTripLatencyFakePinsUnderLoad is E8 on the host with fake pins: 1,000
// trips (or ESTOP_TRIPS) while motion workers (capped below GOMAXPROCS, as
// the body runs them) detect motion in 640x480 frames as fast as they can, agents offer
// 2,000 requests/s to the runner over the same e-stop, and the ledger
// appends one fsynced commit after another. Without a driver tripwire the
// e-stop's goroutine halts the outputs, so this is the Go scheduler's
// figure. It is a benchmark, logged and not asserted, and runs only with
// ESTOP_LOAD=1 (scripts/bench/estop.sh).
func TestTripLatencyFakePinsUnderLoad(t *testing.T) {
	if os.Getenv("ESTOP_LOAD") != "1" {
		t.Skip("a benchmark: ESTOP_LOAD=1 runs it")
	}
	start := time.Now()
	b := newBench(t)
	b.r.env.Limiter = nil
	r := b.estop
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.e.Run(ctx) }()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var frames, offered, ran, appends atomic.Int64
	heavy := max(1, runtime.GOMAXPROCS(0)-1)
	f := hal.FrameFormat{Pixel: hal.PixelYUYV, Width: 640, Height: 480, Stride: 1280}
	sc := motiontest.Scene{Format: f, Seed: 1, Noise: 4, Objects: []motiontest.Object{
		{From: 0, To: time.Hour, Start: [2]float64{-0.1, 0.5}, End: [2]float64{1.1, 0.5}, W: 0.15, H: 0.2, Luma: 230}}}
	imgs := make([][]byte, 8)
	for i := range imgs {
		imgs[i] = make([]byte, sc.Bytes())
		sc.Render(imgs[i], time.Duration(i)*time.Second/30, uint64(i))
	}
	for range heavy {
		d, err := motion.New(motion.Config{}, f)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			fr := hal.NewFrame(f, nil, 0, 0, nil)
			out := make([]motion.Transition, 0, 8)
			base := hal.MonoNow()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				fr.Data, fr.Time = imgs[i%len(imgs)], base.Add(time.Duration(i)*time.Second/30)
				out, _ = d.Process(fr, out[:0])
				frames.Add(1)
			}
		}()
	}
	ticks := make(chan int64, 256)
	wg.Add(1)
	go func() { // agents: 2,000 requests a second, by the clock
		defer wg.Done()
		defer close(ticks)
		tk := time.NewTicker(time.Millisecond)
		defer tk.Stop()
		start := time.Now()
		var n int64
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
			}
			for due := int64(time.Since(start).Seconds() * 2000); n < due; {
				n++
				offered.Add(1)
				select {
				case ticks <- n:
				default:
				}
			}
		}
	}()
	for s := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := b.agent
			p.Session = fmt.Sprintf("load%d", s)
			for n := range ticks {
				state := "on"
				if n%2 == 0 {
					state = "off"
				}
				b.r.Submit(context.Background(), Invocation{Principal: p, Capability: "gpio.set", Target: "gpio.led", Params: map[string]string{"state": state}})
				ran.Add(1)
			}
		}()
	}
	wg.Add(1)
	go func() { // the ledger, one commit after another
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			p, _ := ledger.MarshalPayload(map[string]any{"n": i})
			if _, err := b.store.Append(context.Background(), ledger.Event{Type: "camera.motion_started", ChannelID: "camera.front", Provenance: ledger.Observed, SourceSequence: uint64(i + 1), Payload: p}); err != nil {
				t.Error(err)
				return
			}
			appends.Add(1)
		}
	}()

	admin := Principal{Kind: LocalAdmin, Subject: "admin"}
	var lat []time.Duration
	time.Sleep(500 * time.Millisecond) // the load is running
	for i := range benchTrips(1000) {
		time.Sleep(time.Duration(i%7+1) * time.Millisecond) // pacing: the trips spread over the load, in no lockstep with it
		r.main.Set(hal.High, hal.MonoNow())
		var trip Trip
		for trip.Cause == "" {
			recs, _ := r.e.Records(context.Background())
			for _, rec := range recs {
				if tr, ok := rec.Payload.(Trip); ok && !tr.Already {
					trip = tr
				}
			}
		}
		if !trip.AllSafe {
			t.Fatalf("trip %+v", trip)
		}
		lat = append(lat, time.Duration(trip.LatencyNS))
		r.main.Set(hal.Low, hal.MonoNow())
		for r.e.Status().Main != "ok" {
			time.Sleep(10 * time.Microsecond) // the watcher's goroutine updating the level
		}
		if err := r.e.Reset(admin); err != nil {
			t.Fatal(err)
		}
	}
	s := time.Since(start).Seconds()
	close(stop)
	wg.Wait()
	cancel()
	<-done
	slices.Sort(lat)
	t.Logf("e-stop latency with fake pins under load (GOMAXPROCS %d, %d motion worker(s) at %.0f frames/s, agents offered %.0f requests/s and ran %.0f/s through the runner, %.0f ledger appends/s), edge -> outputs safe and read back, %d trips: p50 %v p99 %v max %v",
		runtime.GOMAXPROCS(0), heavy, float64(frames.Load())/s, float64(offered.Load())/s, float64(ran.Load())/s, float64(appends.Load())/s,
		len(lat), lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1])
}
