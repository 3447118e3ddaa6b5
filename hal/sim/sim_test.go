package sim

import (
	"context"
	"errors"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/hal"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// brightPixels counts luma values above the background's range.
func brightPixels(f *hal.Frame) int {
	step := 1
	if f.Format.Pixel == hal.PixelYUYV {
		step = 2
	}
	n := 0
	for i := 0; i < len(f.Data); i += step {
		if f.Data[i] > 200 {
			n++
		}
	}
	return n
}

func TestCameraObjectCrossesEvery20s(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(7)
		cam, err := b.Drivers().OpenCamera(hal.CameraConfig{Device: CameraName, Width: 160, Height: 120, Rate: 10 * physic.Hertz})
		if err != nil {
			t.Fatal(err)
		}
		defer cam.Close()
		if got, want := cam.Format(), (hal.FrameFormat{Pixel: hal.PixelYUYV, Width: 160, Height: 120, Stride: 320, Rate: 10 * physic.Hertz}); got != want {
			t.Fatalf("format %v, want %v", got, want)
		}
		ctx := t.Context()
		var crossings, frames int
		var lastSeq uint64
		inside := false
		for range 600 { // 60 s
			f, err := cam.NextFrame(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if lastSeq != 0 && f.Seq != lastSeq+1 {
				t.Fatalf("seq %d after %d with a prompt reader", f.Seq, lastSeq)
			}
			lastSeq = f.Seq
			frames++
			now := brightPixels(f) > 100
			if now && !inside {
				crossings++
			}
			inside = now
			f.Release()
		}
		if crossings != 3 {
			t.Errorf("object crossed %d times in 60 s, want 3", crossings)
		}
	})
}

func TestCameraDropsFramesWhileConsumerHoldsBuffers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(1)
		cam, err := b.Drivers().OpenCamera(hal.CameraConfig{Pixel: []hal.PixelFormat{hal.PixelGrey}, Rate: 10 * physic.Hertz})
		if err != nil {
			t.Fatal(err)
		}
		defer cam.Close()
		var held []*hal.Frame
		for range camBuffers {
			f, err := cam.NextFrame(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, f)
		}
		last := held[len(held)-1].Seq
		go func() {
			time.Sleep(time.Second) // the consumer is slow: 10 frames go by
			held[0].Release()
		}()
		f, err := cam.NextFrame(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if f.Seq < last+10 {
			t.Errorf("frame %d after %d with all buffers held for 1 s, want a gap of about 10", f.Seq, last)
		}
		f.Release()
		for _, f := range held[1:] {
			f.Release()
		}
	})
}

func TestSceneIsDeterministic(t *testing.T) {
	read := func(seed uint64) (frame []byte, audio []int16) {
		synctest.Test(t, func(t *testing.T) {
			b := New(seed)
			d := b.Drivers()
			cam, err := d.OpenCamera(hal.CameraConfig{Width: 64, Height: 48})
			if err != nil {
				t.Fatal(err)
			}
			mic, err := d.OpenCapture(hal.AudioConfig{})
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(13 * time.Second)
			f, err := cam.NextFrame(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			frame = append(frame, f.Data...)
			f.Release()
			af := hal.AudioFrame{Samples: make([]int16, mic.Format().Len())}
			if err := mic.ReadFrame(t.Context(), &af); err != nil {
				t.Fatal(err)
			}
			audio = af.Samples
			cam.Close()
			mic.Close()
		})
		return frame, audio
	}
	f1, a1 := read(42)
	f2, a2 := read(42)
	f3, a3 := read(43)
	if string(f1) != string(f2) {
		t.Error("same seed, different frames")
	}
	if !equalInt16(a1, a2) {
		t.Error("same seed, different audio")
	}
	if string(f1) == string(f3) && equalInt16(a1, a3) {
		t.Error("different seeds, same scene")
	}
}

func equalInt16(a, b []int16) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func dbfs(s []int16) float64 {
	var sum float64
	for _, v := range s {
		x := float64(v) / 32768
		sum += x * x
	}
	return 10 * math.Log10(sum/float64(len(s))+1e-12)
}

func TestMicrophoneNoiseAndSpeechBursts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(3)
		mic, err := b.Drivers().OpenCapture(hal.AudioConfig{Device: MicName})
		if err != nil {
			t.Fatal(err)
		}
		defer mic.Close()
		f := mic.Format()
		if f.Rate != 16*physic.KiloHertz || f.Channels != 1 || f.FrameSamples != 320 {
			t.Fatalf("format %v, want 16 kHz mono 320-sample frames", f)
		}
		af := hal.AudioFrame{Samples: make([]int16, f.Len())}
		var quietest = 0.0
		var bursts, loud int
		inside := false
		var last hal.Mono
		for i := range 50 * 30 { // 30 s
			if err := mic.ReadFrame(t.Context(), &af); err != nil {
				t.Fatal(err)
			}
			if i > 0 && af.Time.Sub(last) != 20*time.Millisecond {
				t.Fatalf("frame %d at %v after %v, want 20 ms apart", af.Seq, af.Time, last)
			}
			last = af.Time
			l := dbfs(af.Samples)
			quietest = min(quietest, l)
			now := l > -30
			if now {
				loud++
			}
			if now && !inside {
				bursts++
			}
			inside = now
		}
		if quietest < -55 || quietest > -45 {
			t.Errorf("noise floor %.1f dBFS, want about -50", quietest)
		}
		// Syllables split a burst into several loud stretches; about three
		// bursts of 1-3 s in 30 s.
		if secs := float64(loud) / 50; secs < 1.5 || secs > 9 {
			t.Errorf("%.1f s loud in 30 s, want the length of about 3 bursts", secs)
		}
		if bursts < 3 {
			t.Errorf("%d loud stretches in 30 s, want at least 3", bursts)
		}
	})
}

func TestSpeakerIsHeardByMicrophone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(3)
		d := b.Drivers()
		mic, _ := d.OpenCapture(hal.AudioConfig{})
		spk, err := d.OpenPlayback(hal.AudioConfig{Device: SpeakerName})
		if err != nil {
			t.Fatal(err)
		}
		defer mic.Close()
		defer spk.Close()
		tone := make([]int16, 16000) // 1 s of 1 kHz at half scale
		for i := range tone {
			tone[i] = int16(16384 * math.Sin(2*math.Pi*1000*float64(i)/16000))
		}
		done := make(chan error, 1)
		go func() { done <- spk.Play(t.Context(), tone) }()
		synctest.Wait()
		af := hal.AudioFrame{Samples: make([]int16, mic.Format().Len())}
		var peak float64 = -100
		for range 25 {
			if err := mic.ReadFrame(t.Context(), &af); err != nil {
				t.Fatal(err)
			}
			peak = max(peak, dbfs(af.Samples))
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		// Half scale sine is -9 dBFS; the coupling halves it again: -15.
		if peak < -17 || peak > -12 {
			t.Errorf("microphone heard the tone at %.1f dBFS, want about -15", peak)
		}
	})
}

func TestSpeakerHaltCutsPlay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(1)
		spk, _ := b.Drivers().OpenPlayback(hal.AudioConfig{})
		defer spk.Close()
		done := make(chan error, 1)
		go func() { done <- spk.Play(t.Context(), make([]int16, 16000*5)) }()
		time.Sleep(time.Second)
		spk.Halt()
		if err := <-done; !errors.Is(err, hal.ErrHalted) {
			t.Fatalf("Play after Halt returned %v, want ErrHalted", err)
		}
		if got := time.Duration(b.elapsed()); got != time.Second {
			t.Errorf("Play returned at %v, want at the Halt (1s)", got)
		}
	})
}

func TestButtonPressedEvery30s(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(5)
		chip, err := b.Drivers().OpenChip(ChipLabel)
		if err != nil {
			t.Fatal(err)
		}
		defer chip.Close()
		in, err := chip.In(LineButton, hal.InConfig{Pull: hal.PullUp, Edge: hal.BothEdges, Debounce: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		var edges []hal.EdgeEvent
		ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
		defer cancel()
		for {
			e, err := in.WaitForEdge(ctx)
			if errors.Is(err, context.DeadlineExceeded) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			edges = append(edges, e)
		}
		if len(edges) != 6 {
			t.Fatalf("%d edges in 90 s, want 6 (3 presses): %v", len(edges), edges)
		}
		for i, e := range edges {
			want := hal.FallingEdge // active low: press falls
			if i%2 == 1 {
				want = hal.RisingEdge
			}
			if e.Edge != want || e.Seq != uint64(i+1) {
				t.Errorf("edge %d: %v, want %v seq %d", i, e, want, i+1)
			}
			if i%2 == 1 {
				held := e.Time.Sub(edges[i-1].Time)
				if held < 100*time.Millisecond || held > 400*time.Millisecond {
					t.Errorf("press %d held %v, want 120-400 ms", i/2, held)
				}
			}
		}
	})
}

func TestKeypadAndKeyboard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(9)
		kp, err := b.Drivers().OpenInput(hal.InputConfig{Name: KeypadName})
		if err != nil {
			t.Fatal(err)
		}
		defer kp.Close()
		var presses int
		var last hal.Mono
		for range 12 { // three presses: down, syn, up, syn each
			ev, err := kp.ReadEvent(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if ev.Time < last {
				t.Fatalf("event time went back: %v after %v", ev.Time, last)
			}
			last = ev.Time
			if ev.Type == hal.EvKey && ev.Code == hal.BtnMisc && ev.Value == 1 {
				presses++
			}
		}
		if presses != 3 {
			t.Errorf("%d presses, want 3", presses)
		}
		if e := time.Duration(b.elapsed()); e < 60*time.Second || e > 90*time.Second {
			t.Errorf("three presses took %v, want about 60-90 s", e)
		}
		if _, err := b.Drivers().OpenInput(hal.InputConfig{Name: "nope"}); !errors.Is(err, hal.ErrAbsent) {
			t.Errorf("unknown device: %v, want ErrAbsent", err)
		}
	})
}

func TestInputWatcherListsTheDevicesThenWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, err := New(1).Drivers().WatchInputs()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for range 2 {
			c, err := w.Next(t.Context())
			if err != nil || !c.Added {
				t.Fatalf("%v %v, want an addition", c, err)
			}
			names = append(names, c.Info.Name)
		}
		if names[0] != KeypadName || names[1] != KeyboardName {
			t.Errorf("added %q", names)
		}
		done := make(chan error, 1)
		go func() {
			_, err := w.Next(t.Context())
			done <- err
		}()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("a third change: %v", err)
		default:
		}
		w.Close()
		if err := <-done; !errors.Is(err, hal.ErrClosed) {
			t.Errorf("Next after Close: %v, want ErrClosed", err)
		}
	})
}

func TestEStopLineIsControllable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(1)
		chip, _ := b.Drivers().OpenChip(ChipLabel)
		defer chip.Close()
		in, err := chip.In(LineEStop, hal.InConfig{Pull: hal.PullUp, Edge: hal.BothEdges})
		if err != nil {
			t.Fatal(err)
		}
		if l, _ := in.Read(); l != hal.Low {
			t.Fatalf("e-stop reads %v at start, want Low (contact closed)", l)
		}
		time.Sleep(3 * time.Second)
		if err := b.SetInput(LineEStop, hal.High); err != nil {
			t.Fatal(err)
		}
		if err := b.SetInput(LineEStop, hal.Low); err != nil {
			t.Fatal(err)
		}
		for i, want := range []hal.Edge{hal.RisingEdge, hal.FallingEdge} {
			e, err := in.WaitForEdge(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if e.Edge != want || e.Time != b.mono(3*time.Second) || e.Seq != uint64(i+1) {
				t.Errorf("edge %d: %v, want %v at +3s", i, e, want)
			}
		}
		// A blocked waiter is released by Halt.
		done := make(chan error, 1)
		go func() { _, err := in.WaitForEdge(t.Context()); done <- err }()
		synctest.Wait()
		in.Halt()
		if err := <-done; !errors.Is(err, hal.ErrHalted) {
			t.Errorf("WaitForEdge after Halt: %v, want ErrHalted", err)
		}
	})
}

func TestEdgeDebounceDropsBounces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(1)
		chip, _ := b.Drivers().OpenChip(ChipLabel)
		defer chip.Close()
		in, _ := chip.In(LineReset, hal.InConfig{Pull: hal.PullUp, Edge: hal.BothEdges, Debounce: 20 * time.Millisecond})
		b.SetInput(LineReset, hal.Low) // a bounce
		time.Sleep(5 * time.Millisecond)
		b.SetInput(LineReset, hal.High)
		time.Sleep(time.Second)
		b.SetInput(LineReset, hal.Low) // a real press
		e, err := in.WaitForEdge(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if e.Edge != hal.FallingEdge || e.Time != b.mono(1005*time.Millisecond) || e.Seq != 1 {
			t.Errorf("got %v (+%v), want the falling edge at +1.005s as the first", e, e.Time.Sub(b.mono(0)))
		}
	})
}

func TestOutputs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(1)
		chip, _ := b.Drivers().OpenChip(ChipLabel)
		out, err := chip.Out(LineRelay1, hal.OutConfig{Safe: hal.Low})
		if err != nil {
			t.Fatal(err)
		}
		fb, err := chip.In(LineRelay1Feed, hal.InConfig{Edge: hal.BothEdges})
		if err != nil {
			t.Fatal(err)
		}
		if err := out.Out(hal.High); err != nil {
			t.Fatal(err)
		}
		if l, _ := out.ReadBack(); l != hal.High {
			t.Errorf("read back %v after High", l)
		}
		if e, err := fb.WaitForEdge(t.Context()); err != nil || e.Level != hal.High {
			t.Errorf("feedback edge %v %v, want High", e, err)
		}
		stuck := hal.High
		b.SetStuck(LineRelay1, &stuck)
		out.Halt()
		if l, _ := out.ReadBack(); l != hal.High {
			t.Errorf("a welded relay reads back %v, want High", l)
		}
		b.SetStuck(LineRelay1, nil)
		if l, _ := out.ReadBack(); l != hal.Low {
			t.Errorf("after Halt the relay reads %v, want its safe Low", l)
		}
		if _, err := chip.Out(LineRelay1, hal.OutConfig{}); !errors.Is(err, hal.ErrBusy) {
			t.Errorf("second request: %v, want ErrBusy", err)
		}
		if _, err := chip.Out(LineButton, hal.OutConfig{}); !errors.Is(err, hal.ErrUnsupported) {
			t.Errorf("button as output: %v, want ErrUnsupported", err)
		}
		if _, err := chip.In("GPIO99", hal.InConfig{}); !errors.Is(err, hal.ErrAbsent) {
			t.Errorf("unknown line: %v, want ErrAbsent", err)
		}
		if err := b.SetInput(LineRelay1, hal.High); err == nil {
			t.Error("SetInput on a requested output succeeded")
		}
		// Halt latches: an Out racing an e-stop is refused until Rearm.
		if err := out.Out(hal.High); !errors.Is(err, hal.ErrHalted) {
			t.Errorf("Out after Halt: %v, want ErrHalted", err)
		}
		if err := out.Rearm(); err != nil {
			t.Fatal(err)
		}
		if l, _ := out.ReadBack(); l != hal.Low {
			t.Errorf("Rearm moved the line to %v; it must stay safe until Out", l)
		}
		out.Out(hal.High)
		chip.Halt()
		if l, _ := b.Level(LineRelay1); l != hal.Low {
			t.Errorf("after chip Halt the relay is %v, want safe Low", l)
		}
		if _, err := fb.Read(); err != nil {
			t.Errorf("chip Halt stopped an input: %v", err)
		}
		out.Rearm()
		out.Out(hal.High)
		chip.Close()
		if err := out.Out(hal.High); !errors.Is(err, hal.ErrClosed) {
			t.Errorf("Out after Close: %v, want ErrClosed", err)
		}
		if l, _ := b.Level(LineRelay1); l != hal.Low {
			t.Errorf("after chip Close the relay is %v, want safe Low", l)
		}
		if _, err := b.Drivers().OpenChip("pinctrl-rp1"); !errors.Is(err, hal.ErrAbsent) {
			t.Errorf("other chip label: %v, want ErrAbsent", err)
		}
	})
}

func TestFullEdgeQueueKeepsTheNewestLevel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(1)
		chip, _ := b.Drivers().OpenChip(ChipLabel)
		defer chip.Close()
		in, _ := chip.In(LineEStop, hal.InConfig{Edge: hal.BothEdges})
		level := hal.Low
		for range edgeQueue + 1 { // one more change than the queue holds, ending High
			level = !level
			b.SetInput(LineEStop, level)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		var last hal.EdgeEvent
		n := 0
		for {
			e, err := in.WaitForEdge(ctx)
			if err != nil {
				break
			}
			last, n = e, n+1
		}
		// The oldest change was dropped; the reader sees the newest level,
		// and a Seq beyond the edges it got.
		if last.Level != hal.High || last.Seq <= uint64(n) {
			t.Errorf("last of %d edges %v, want High with a gap in Seq", n, last)
		}
	})
}

func TestRisingOnlyCountsWhatItReports(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(1)
		chip, _ := b.Drivers().OpenChip(ChipLabel)
		defer chip.Close()
		in, _ := chip.In(LineEStop, hal.InConfig{Edge: hal.RisingEdge})
		for range 3 {
			b.SetInput(LineEStop, hal.High)
			b.SetInput(LineEStop, hal.Low)
		}
		for i := range 3 {
			e, err := in.WaitForEdge(t.Context())
			if err != nil || e.Edge != hal.RisingEdge || e.Seq != uint64(i+1) {
				t.Errorf("edge %d: %v %v, want rising with seq %d", i, e, err, i+1)
			}
		}
	})
}

func TestStuckOutputTellsItsFeedback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(1)
		chip, _ := b.Drivers().OpenChip(ChipLabel)
		defer chip.Close()
		fb, _ := chip.In(LineRelay1Feed, hal.InConfig{Edge: hal.BothEdges})
		high := hal.High
		b.SetStuck(LineRelay1, &high) // the relay welds shut
		e, err := fb.WaitForEdge(t.Context())
		if err != nil || e.Level != hal.High {
			t.Errorf("feedback edge %v %v, want High", e, err)
		}
	})
}

func TestSpeakerHaltLatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		spk, _ := New(1).Drivers().OpenPlayback(hal.AudioConfig{})
		defer spk.Close()
		spk.Halt()
		if err := spk.Play(t.Context(), make([]int16, 160)); !errors.Is(err, hal.ErrHalted) {
			t.Errorf("Play after Halt: %v, want ErrHalted", err)
		}
		spk.Rearm()
		if err := spk.Play(t.Context(), make([]int16, 160)); err != nil {
			t.Errorf("Play after Rearm: %v", err)
		}
	})
}

// A bench's board presses its button and keypad more often: every period,
// each press whole before the next (a period under MinButtonPeriod is
// taken as that).
func TestPressingPeriod(t *testing.T) {
	for _, period := range []time.Duration{MinButtonPeriod, 5 * time.Second, time.Millisecond} {
		t.Run(period.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := NewPressing(11, period)
				want := max(period, MinButtonPeriod)
				kp, err := b.Drivers().OpenInput(hal.InputConfig{Name: KeypadName})
				if err != nil {
					t.Fatal(err)
				}
				defer kp.Close()
				var downs, ups int
				for downs < 20 {
					ev, err := kp.ReadEvent(t.Context())
					if err != nil {
						t.Fatal(err)
					}
					if ev.Type == hal.EvKey && ev.Code == hal.BtnMisc {
						if ev.Value == 1 {
							downs++
							if downs != ups+1 {
								t.Fatalf("press %d began before the one before ended", downs)
							}
						} else {
							ups++
						}
					}
				}
				if e := time.Duration(b.elapsed()); e < 18*want || e > 21*want {
					t.Errorf("20 presses took %v, want about 20 periods of %v", e, want)
				}
				chip, err := b.Drivers().OpenChip(ChipLabel)
				if err != nil {
					t.Fatal(err)
				}
				defer chip.Close()
				in, err := chip.In(LineButton, hal.InConfig{Pull: hal.PullUp, Edge: hal.BothEdges})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(t.Context(), 10*want)
				defer cancel()
				n := 0
				for {
					if _, err := in.WaitForEdge(ctx); err != nil {
						break
					}
					n++
				}
				if n < 18 || n > 20 {
					t.Errorf("%d edges of the button in 10 periods, want about 20", n)
				}
			})
		})
	}
}

// A paused camera or microphone produces nothing (one ErrPaused, then a
// wait, also of a read already waiting for its time), and after Resume
// goes on from the scene's time then.
func TestPauseAndResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(5)
		cam, err := b.Drivers().OpenCamera(hal.CameraConfig{Device: CameraName, Rate: 10 * physic.Hertz})
		if err != nil {
			t.Fatal(err)
		}
		defer cam.Close()
		mic, err := b.Drivers().OpenCapture(hal.AudioConfig{Device: MicName})
		if err != nil {
			t.Fatal(err)
		}
		defer mic.Close()
		af := hal.AudioFrame{Samples: make([]int16, mic.Format().Len())}
		f, err := cam.NextFrame(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		f.Release()
		if err := mic.ReadFrame(t.Context(), &af); err != nil {
			t.Fatal(err)
		}
		// A read waiting for its time when the pause comes.
		camErr, micErr := make(chan error, 1), make(chan error, 1)
		go func() {
			f, err := cam.NextFrame(t.Context())
			if err == nil {
				f.Release()
			}
			camErr <- err
		}()
		go func() { micErr <- mic.ReadFrame(t.Context(), &af) }()
		synctest.Wait()
		for _, p := range []hal.Pauser{cam.(hal.Pauser), mic.(hal.Pauser)} {
			p.Pause()
			p.Pause()
		}
		if err := <-camErr; !errors.Is(err, hal.ErrPaused) {
			t.Fatalf("the camera's read at the pause: %v", err)
		}
		// The microphone's read may have had its frame before the pause
		// (audio already captured); the next one is told.
		if err := <-micErr; err == nil {
			err = mic.ReadFrame(t.Context(), &af)
			if !errors.Is(err, hal.ErrPaused) {
				t.Fatalf("the microphone's read after the pause: %v", err)
			}
		} else if !errors.Is(err, hal.ErrPaused) {
			t.Fatalf("the microphone's read at the pause: %v", err)
		}
		go func() {
			f, err := cam.NextFrame(t.Context())
			if err == nil {
				f.Release()
			}
			camErr <- err
		}()
		go func() { micErr <- mic.ReadFrame(t.Context(), &af) }()
		time.Sleep(time.Minute) // a minute of the bubble's clock: nothing comes
		synctest.Wait()
		select {
		case err := <-camErr:
			t.Fatalf("the camera read while paused: %v", err)
		case err := <-micErr:
			t.Fatalf("the microphone read while paused: %v", err)
		default:
		}
		resumedAt := b.mono(b.elapsed())
		cam.(hal.Pauser).Resume()
		mic.(hal.Pauser).Resume()
		if err := <-camErr; err != nil {
			t.Fatal(err)
		}
		if err := <-micErr; err != nil || af.Time < resumedAt-hal.Mono(20*time.Millisecond) || af.Overruns != 0 {
			t.Fatalf("the first audio after the resume: %v at %v (resumed at %v), overruns %d", err, af.Time, resumedAt, af.Overruns)
		}
	})
}
