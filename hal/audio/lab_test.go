//go:build lab && portaudio

package audio

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/hal"
)

// Against snd-aloop in the lab VM: what is played on the loopback card's
// PCM 0 is captured on its PCM 1, through PortAudio on both sides.

const (
	toneFreq  = 440 * physic.Hertz
	toneLevel = -6.0 // dBFS
	// loud and quiet tell tone from silence: the tone's samples peak near
	// -6 dBFS, a loopback's silence is exactly 0.
	loud = 1000 // about -30 dBFS
)

func openLoopback(t *testing.T) (hal.AudioCapture, hal.AudioPlayback) {
	t.Helper()
	mic, err := OpenCapture(hal.AudioConfig{Device: "Loopback,1"})
	if err != nil {
		t.Fatal(err)
	}
	spk, err := OpenPlayback(hal.AudioConfig{Device: "Loopback,0"})
	if err != nil {
		mic.Close()
		t.Fatal(err)
	}
	t.Logf("capture %s (%s), playback %s (%s)", mic.Name(), mic.Format(), spk.Name(), spk.Format())
	return mic, spk
}

// tape records every frame a capture delivers, from a goroutine of its
// own, until stop.
type tape struct {
	mic    hal.AudioCapture
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	frames []hal.AudioFrame
	err    error
}

func record(mic hal.AudioCapture) *tape {
	ctx, cancel := context.WithCancel(context.Background())
	tp := &tape{mic: mic, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(tp.done)
		for {
			f := hal.AudioFrame{Samples: make([]int16, mic.Format().Len())}
			err := mic.ReadFrame(ctx, &f)
			tp.mu.Lock()
			if err != nil {
				if ctx.Err() == nil {
					tp.err = err
				}
				tp.mu.Unlock()
				return
			}
			tp.frames = append(tp.frames, f)
			tp.mu.Unlock()
		}
	}()
	return tp
}

// stop ends the recording and returns what was recorded and why it ended
// early, if it did.
func (tp *tape) stop() ([]hal.AudioFrame, error) {
	tp.cancel()
	<-tp.done
	return tp.snapshot()
}

func (tp *tape) snapshot() ([]hal.AudioFrame, error) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return slices.Clone(tp.frames), tp.err
}

// waitFor polls the recording until cond holds, for at most d.
func (tp *tape) waitFor(t *testing.T, what string, d time.Duration, cond func([]hal.AudioFrame) bool) []hal.AudioFrame {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		fs, err := tp.snapshot()
		if err != nil {
			t.Fatalf("capture stopped: %v", err)
		}
		if cond(fs) {
			return fs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v (%d frames recorded)", what, d, len(fs))
		}
		time.Sleep(10 * time.Millisecond) // the device's pace, not ours to signal
	}
}

// sampleTime is when sample i (per channel) of f was captured.
func sampleTime(f hal.AudioFrame, format hal.AudioFormat, i int) hal.Mono {
	return f.Time.Add(time.Duration(int64(i) * int64(time.Second) / int64(format.Rate/physic.Hertz)))
}

// firstLoud is when the first loud sample at or after from was captured.
func firstLoud(fs []hal.AudioFrame, format hal.AudioFormat, from hal.Mono) (hal.Mono, bool) {
	for _, f := range fs {
		for i, v := range f.Samples {
			if at := sampleTime(f, format, i/format.Channels); at >= from && (v > loud || v < -loud) {
				return at, true
			}
		}
	}
	return 0, false
}

// lastLoud is when the last loud sample was captured.
func lastLoud(fs []hal.AudioFrame, format hal.AudioFormat) (hal.Mono, bool) {
	for j := len(fs) - 1; j >= 0; j-- {
		f := fs[j]
		for i := len(f.Samples) - 1; i >= 0; i-- {
			if v := f.Samples[i]; v > loud || v < -loud {
				return sampleTime(f, format, i/format.Channels), true
			}
		}
	}
	return 0, false
}

// span is the samples of the frames whose first sample was captured in
// [from, to), joined, and whether they follow each other without a loss.
func span(fs []hal.AudioFrame, from, to hal.Mono) ([]int16, bool) {
	var out []int16
	var prev uint64
	whole := true
	for _, f := range fs {
		if f.Time < from || f.Time >= to {
			continue
		}
		if prev != 0 && (f.Seq != prev+1 || f.Overruns != 0) {
			whole = false
		}
		prev = f.Seq
		out = append(out, f.Samples...)
	}
	return out, whole
}

// checkTimes checks that frames came in order with a frame's length
// between them (within jitter, losses aside), and reports how far the
// stamps strayed and how fast the device's clock ran against
// CLOCK_MONOTONIC.
func checkTimes(t *testing.T, fs []hal.AudioFrame, format hal.AudioFormat, jitter time.Duration) {
	t.Helper()
	d := format.FrameDuration()
	var worst time.Duration
	for i := 1; i < len(fs); i++ {
		a, b := fs[i-1], fs[i]
		if b.Seq <= a.Seq || b.Time <= a.Time {
			t.Errorf("frame %d (seq %d, %v) after seq %d, %v", i, b.Seq, b.Time, a.Seq, a.Time)
			continue
		}
		if b.Seq != a.Seq+1 || b.Overruns != 0 {
			continue
		}
		off := b.Time.Sub(a.Time) - d
		worst = max(worst, off, -off)
	}
	if worst > jitter {
		t.Errorf("frames %v apart give or take %v, want within %v", d, worst, jitter)
	}
	first, last := fs[0], fs[len(fs)-1]
	nominal := time.Duration(last.Seq-first.Seq) * d
	ratio := float64(last.Time.Sub(first.Time)) / float64(nominal)
	t.Logf("timestamps: %d frames, %v apart give or take %v; device clock %.4f× CLOCK_MONOTONIC over %v",
		len(fs), d, worst, ratio, nominal)
	if math.Abs(ratio-1) > 0.02 {
		t.Errorf("device clock runs %.4f× CLOCK_MONOTONIC, want within 2%%", ratio)
	}
}

func TestLabToneThroughLoopback(t *testing.T) {
	mic, spk := openLoopback(t)
	defer spk.Close()
	defer mic.Close()
	f := mic.Format()
	tp := record(mic)
	tp.waitFor(t, "first frames", 5*time.Second, func(fs []hal.AudioFrame) bool { return len(fs) >= 5 })

	tone := Tone(spk.Format(), toneFreq, toneLevel, time.Second)
	start := hal.MonoNow()
	if err := spk.Play(t.Context(), tone); err != nil {
		t.Fatal(err)
	}
	handed := hal.MonoNow()
	tp.waitFor(t, "the whole tone captured", 5*time.Second, func(fs []hal.AudioFrame) bool {
		on, ok := firstLoud(fs, f, start)
		return ok && fs[len(fs)-1].Time > on.Add(1200*time.Millisecond)
	})
	fs, err := tp.stop()
	if err != nil {
		t.Fatal(err)
	}
	onset, _ := firstLoud(fs, f, start)
	end, _ := lastLoud(fs, f)
	t.Logf("latency: Play to the tone captured %v; Play returned after %v; tone heard for %v (played 1s)",
		onset.Sub(start), handed.Sub(start), end.Sub(onset))
	if got := end.Sub(onset); got < 950*time.Millisecond || got > 1050*time.Millisecond {
		t.Errorf("tone captured for %v, want 1s within 50ms", got)
	}

	// The steady middle of the tone, its fades and any edge frame left out.
	body, whole := span(fs, onset.Add(100*time.Millisecond), onset.Add(900*time.Millisecond))
	if !whole || len(body) < f.Len()*30 {
		t.Fatalf("middle of the tone: %d samples, without loss %v", len(body), whole)
	}
	level := Level(body, f.Channels, 0)
	hz, ok := Frequency(body, f.Channels, 0, f.Rate)
	want := float64(toneFreq) / float64(physic.Hertz)
	t.Logf("level %.3f dBFS (error %+.3f dB, tolerance ±1 dB); frequency %.3f Hz (error %+.4f%%, tolerance ±1%%) over %v",
		level, level-toneLevel, hz, 100*(hz-want)/want, time.Duration(len(body)/f.Channels)*time.Second/time.Duration(f.Rate/physic.Hertz))
	if math.Abs(level-toneLevel) > 1 {
		t.Errorf("level %.2f dBFS, want %.0f ±1 dB", level, toneLevel)
	}
	if !ok || math.Abs(hz-want)/want > 0.01 {
		t.Errorf("frequency %.2f Hz (%v), want %.0f ±1%%", hz, ok, want)
	}
	t.Logf("frames stamped with %v", mic.(*Capture).clockSource())
	checkTimes(t, fs, f, 10*time.Millisecond)
	if age := hal.MonoNow().Sub(fs[len(fs)-1].Time); age < 0 || age > time.Second {
		t.Errorf("last frame stamped %v before now, want within a second", age)
	}
}

func TestLabOverrunsAreCountedAndCaptureGoesOn(t *testing.T) {
	mic, err := OpenCapture(hal.AudioConfig{Device: "Loopback,1"})
	if err != nil {
		t.Fatal(err)
	}
	defer mic.Close()
	c := mic.(*Capture)
	f := mic.Format()
	frame := hal.AudioFrame{Samples: make([]int16, f.Len())}
	read := func() hal.AudioFrame {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		if err := mic.ReadFrame(ctx, &frame); err != nil {
			t.Fatal(err)
		}
		return frame
	}
	// goesOn reads n frames and checks they follow each other.
	goesOn := func(after hal.AudioFrame, n int) hal.AudioFrame {
		t.Helper()
		prev := after
		for range n {
			fr := read()
			if fr.Seq != prev.Seq+1 || fr.Overruns != 0 || fr.Time <= prev.Time {
				t.Fatalf("after recovering: seq %d, overruns %d, %v after seq %d, %v", fr.Seq, fr.Overruns, fr.Time, prev.Seq, prev.Time)
			}
			prev = fr
		}
		return prev
	}
	for range 5 {
		read()
	}
	before := goesOn(frame, 5)

	// The reader stops for 1.5 s, three times the ring: the oldest frames
	// are dropped, once counted, and reading goes on from the ring.
	time.Sleep(1500 * time.Millisecond)
	resumed := hal.MonoNow()
	got := read()
	lost := got.Seq - before.Seq - 1
	t.Logf("reader 1.5 s behind: %d overrun(s), %d frames (%v) dropped; oldest kept captured %v before the read",
		got.Overruns, lost, time.Duration(lost)*f.FrameDuration(), resumed.Sub(got.Time))
	if got.Overruns != 1 || lost < 40 || lost > 60 {
		t.Errorf("after 1.5 s: overruns %d, %d frames dropped; want 1 overrun and about 50 frames (1 s) dropped", got.Overruns, lost)
	}
	if age := resumed.Sub(got.Time); age < 400*time.Millisecond || age > 700*time.Millisecond {
		t.Errorf("oldest frame kept is %v old, want about the ring's 500ms", age)
	}
	// Draining the ring: right after an overrun it is full, so a hiccup of
	// the reader of two frames (40ms) in a busy VM drops again. That is
	// allowed here; what is not is a gap that is not counted.
	caught := got
	for range 100 {
		if hal.MonoNow().Sub(caught.Time) < 8*f.FrameDuration() {
			break
		}
		fr := read()
		gap := fr.Seq != caught.Seq+1
		if fr.Seq <= caught.Seq || fr.Time <= caught.Time || gap != (fr.Overruns > 0) {
			t.Fatalf("draining: seq %d, overruns %d, %v after seq %d, %v: every gap is counted, and only gaps", fr.Seq, fr.Overruns, fr.Time, caught.Seq, caught.Time)
		}
		if gap {
			t.Logf("draining: a second drop of %d frames, counted", fr.Seq-caught.Seq-1)
		}
		caught = fr
	}
	if age := hal.MonoNow().Sub(caught.Time); age >= 8*f.FrameDuration() {
		t.Fatalf("after 100 frames the reader is still %v behind the device", age)
	}
	after := goesOn(caught, 30) // the ring empty, it keeps up with the device

	// The device itself overruns: PortAudio's thread is held for a second,
	// ten times ALSA's buffer. ALSA stops the PCM, PortAudio restarts it
	// and flags the next buffer.
	c.stallOnce.Store(int64(time.Second))
	var xrun hal.AudioFrame
	prev := after
	for range 100 {
		fr := read()
		if fr.Overruns > 0 {
			xrun = fr
			break
		}
		prev = fr
	}
	if xrun.Overruns == 0 {
		t.Fatal("no overrun counted after holding the device's thread for a second")
	}
	gap := xrun.Time.Sub(prev.Time)
	t.Logf("device xrun: %d overrun(s) counted; seq %d then %d; %v between their first samples (a frame is %v)",
		xrun.Overruns, prev.Seq, xrun.Seq, gap, f.FrameDuration())
	if xrun.Seq != prev.Seq+1 {
		t.Errorf("seq %d after %d: the frames the device delivered lost none, so want no gap", xrun.Seq, prev.Seq)
	}
	if gap < 500*time.Millisecond {
		t.Errorf("%v between the frames around the xrun, want the lost second to show in Time", gap)
	}
	goesOn(xrun, 30)
}

func TestLabHaltSilencesPlaybackAndLatches(t *testing.T) {
	mic, spk := openLoopback(t)
	defer spk.Close()
	defer mic.Close()
	f := mic.Format()
	tp := record(mic)
	defer tp.stop()

	long := Tone(spk.Format(), toneFreq, toneLevel, 5*time.Second)
	played := make(chan error, 1)
	start := hal.MonoNow()
	go func() { played <- spk.Play(context.Background(), long) }()
	tp.waitFor(t, "the tone heard", 5*time.Second, func(fs []hal.AudioFrame) bool {
		_, ok := firstLoud(fs, f, start)
		return ok
	})
	time.Sleep(300 * time.Millisecond) // well into the tone

	halted := hal.MonoNow()
	if err := spk.Halt(); err != nil {
		t.Fatal(err)
	}
	haltTook := hal.MonoNow().Sub(halted)
	err := <-played
	returned := hal.MonoNow().Sub(halted)
	if !errors.Is(err, hal.ErrHalted) {
		t.Errorf("Play cut by Halt: %v, want ErrHalted", err)
	}
	// Wait until the capture has frames from well after the halt.
	fs := tp.waitFor(t, "frames after the halt", 5*time.Second, func(fs []hal.AudioFrame) bool {
		return fs[len(fs)-1].Time > halted.Add(time.Second)
	})
	last, _ := lastLoud(fs, f)
	stopped := last.Sub(halted)
	t.Logf("halt: Halt took %v, Play returned %v after it; the last sample of tone was captured %v after Halt was called (negative: before; 4.7s of tone were left)",
		haltTook, returned, stopped)
	if returned > 250*time.Millisecond {
		t.Errorf("Play returned %v after Halt, want within 250ms", returned)
	}
	if stopped > 150*time.Millisecond {
		t.Errorf("tone still captured %v after Halt, want silence within 150ms", stopped)
	}
	if quiet, _ := span(fs, halted.Add(200*time.Millisecond), halted.Add(time.Second)); !math.IsInf(Level(quiet, f.Channels, 0), -1) || len(quiet) == 0 {
		t.Errorf("after the halt: level %.1f dBFS over %d samples, want silence", Level(quiet, f.Channels, 0), len(quiet))
	}

	if err := spk.Play(t.Context(), long[:1600]); !errors.Is(err, hal.ErrHalted) {
		t.Errorf("Play while halted: %v, want ErrHalted", err)
	}
	if err := spk.Rearm(); err != nil {
		t.Fatal(err)
	}
	again := hal.MonoNow()
	if err := spk.Play(t.Context(), Tone(spk.Format(), toneFreq, toneLevel, 200*time.Millisecond)); err != nil {
		t.Fatalf("Play after Rearm: %v", err)
	}
	tp.waitFor(t, "the tone after Rearm", 5*time.Second, func(fs []hal.AudioFrame) bool {
		_, ok := firstLoud(fs, f, again)
		return ok
	})
}

func TestLabPlaybackUnderflowIsCounted(t *testing.T) {
	mic, spk := openLoopback(t)
	defer spk.Close()
	defer mic.Close()
	f := mic.Format()
	tp := record(mic)
	defer tp.stop()
	pb := spk.(*Playback)
	before := pb.Underflows()

	played := make(chan error, 1)
	start := hal.MonoNow()
	go func() {
		played <- spk.Play(context.Background(), Tone(spk.Format(), toneFreq, toneLevel, 2*time.Second))
	}()
	tp.waitFor(t, "the tone heard", 5*time.Second, func(fs []hal.AudioFrame) bool {
		_, ok := firstLoud(fs, f, start)
		return ok
	})
	// PortAudio's thread held for half a second, six times ALSA's buffer,
	// in the middle of the tone: the device runs dry.
	pb.stallOnce.Store(int64(500 * time.Millisecond))
	if err := <-played; err != nil {
		t.Fatalf("Play across the underflow: %v", err)
	}
	fs := tp.waitFor(t, "the end of the tone", 5*time.Second, func(fs []hal.AudioFrame) bool {
		end, ok := lastLoud(fs, f)
		return ok && fs[len(fs)-1].Time > end.Add(300*time.Millisecond)
	})
	onset, _ := firstLoud(fs, f, start)
	end, _ := lastLoud(fs, f)
	// The longest silence inside the tone is the gap the underflow left.
	var gap, run time.Duration
	var gaps []string
	sample := time.Second / time.Duration(f.Rate/physic.Hertz)
	for _, fr := range fs {
		for i := 0; i < len(fr.Samples); i += f.Channels {
			at := sampleTime(fr, f, i/f.Channels)
			if at < onset || at > end {
				continue
			}
			if v := fr.Samples[i]; v > loud || v < -loud {
				if run > 10*time.Millisecond {
					gaps = append(gaps, fmt.Sprintf("%v at +%v (seq %d)", run, at.Sub(onset).Round(time.Millisecond), fr.Seq))
				}
				run = 0
				continue
			}
			run += sample
			gap = max(gap, run)
		}
	}
	got := pb.Underflows() - before
	t.Logf("underflow: %d counted; the captured tone has a %v gap and lasts %v (2s played, 500ms stall); gaps %v", got, gap, end.Sub(onset), gaps)
	// One for the stall; a loaded machine may add one of its own, but each
	// gap in the tone is one underflow counted, and only a gap is.
	if len(gaps) == 0 || got != uint64(len(gaps)) {
		t.Errorf("%d underflows counted for %d gaps in the tone, want one for each, and the stall's", got, len(gaps))
	}
	if gap < 300*time.Millisecond {
		t.Errorf("longest gap in the captured tone %v, want the stall to show", gap)
	}
}
