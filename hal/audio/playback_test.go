package audio

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/hal"
)

var frame8 = hal.AudioFormat{Rate: 16000 * physic.Hertz, Channels: 1, FrameSamples: 16}

func openFakePlayback(t *testing.T, f hal.AudioFormat) (*Playback, *fakeStream) {
	t.Helper()
	s := &fakeStream{}
	p := newPlayback("Loopback: PCM (hw:0,0)", f)
	if err := p.run(s); err != nil {
		t.Fatal(err)
	}
	return p, s
}

func ramp(from, n int) []int16 {
	s := make([]int16, n)
	for i := range s {
		s[i] = int16(from + i)
	}
	return s
}

// play starts Play in a goroutine and waits, in the bubble, until it is
// blocked waiting for the device.
func play(p *Playback, ctx context.Context, samples []int16) chan error {
	done := make(chan error, 1)
	go func() { done <- p.Play(ctx, samples) }()
	synctest.Wait()
	return done
}

func pending(done chan error) bool {
	select {
	case err := <-done:
		done <- err
		return false
	default:
		return true
	}
}

func TestPlayHandsClipsInOrderThenSilence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := openFakePlayback(t, frame8)
		defer p.Close()
		first := play(p, t.Context(), ramp(1, 20))
		second := play(p, t.Context(), ramp(100, 6))
		out := make([]int16, 16)
		p.fill(out, 0, 0)
		synctest.Wait()
		if !slices.Equal(out, ramp(1, 16)) || !pending(first) || !pending(second) {
			t.Fatalf("first buffer %v; the first clip must still be playing", out)
		}
		p.fill(out, 0, 0)
		synctest.Wait()
		want := append(append(ramp(17, 4), ramp(100, 6)...), make([]int16, 6)...)
		if !slices.Equal(out, want) {
			t.Errorf("second buffer %v, want %v", out, want)
		}
		if err := <-first; err != nil {
			t.Errorf("first Play: %v", err)
		}
		if err := <-second; err != nil {
			t.Errorf("second Play: %v", err)
		}
		p.fill(out, 0, 0)
		if !slices.Equal(out, make([]int16, 16)) {
			t.Errorf("idle buffer %v, want silence", out)
		}
		if err := p.Play(t.Context(), nil); err != nil {
			t.Errorf("empty Play: %v", err)
		}
	})
}

func TestPlayCancelledDropsTheRest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := openFakePlayback(t, frame8)
		defer p.Close()
		ctx, cancel := context.WithCancel(t.Context())
		first := play(p, ctx, ramp(1, 40))
		second := play(p, t.Context(), ramp(100, 4))
		out := make([]int16, 16)
		p.fill(out, 0, 0)
		cancel()
		synctest.Wait()
		if err := <-first; !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled Play: %v", err)
		}
		p.fill(out, 0, 0)
		if want := append(ramp(100, 4), make([]int16, 12)...); !slices.Equal(out, want) {
			t.Errorf("after the cancel %v, want the next clip %v", out, want)
		}
		if err := <-second; err != nil {
			t.Errorf("next Play: %v", err)
		}
	})
}

func TestPlaybackHaltSilencesAndLatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, s := openFakePlayback(t, frame8)
		waiting := play(p, t.Context(), ramp(1, 100))
		queued := play(p, t.Context(), ramp(500, 10))
		out := make([]int16, 16)
		p.fill(out, 0, 0)
		if err := p.Halt(); err != nil {
			t.Fatal(err)
		}
		for _, done := range []chan error{waiting, queued} {
			if err := <-done; !errors.Is(err, hal.ErrHalted) || !containsAll(err.Error(), "Loopback: PCM (hw:0,0)") {
				t.Errorf("Play waiting at Halt: %v, want ErrHalted naming the device", err)
			}
		}
		// A callback still on its way gets silence.
		p.fill(out, 0, 0)
		if !slices.Equal(out, make([]int16, 16)) {
			t.Errorf("after Halt %v, want silence", out)
		}
		if err := p.Play(t.Context(), ramp(1, 4)); !errors.Is(err, hal.ErrHalted) {
			t.Errorf("Play after Halt: %v, want ErrHalted", err)
		}
		if starts, aborts, _ := s.counts(); starts != 1 || aborts != 1 {
			t.Errorf("stream started %d, aborted %d; want 1, 1", starts, aborts)
		}
		p.Halt()
		if _, aborts, _ := s.counts(); aborts != 1 {
			t.Errorf("a second Halt aborted again (%d)", aborts)
		}
		if err := p.Rearm(); err != nil {
			t.Fatal(err)
		}
		if err := p.Rearm(); err != nil {
			t.Fatal(err)
		}
		if starts, _, _ := s.counts(); starts != 2 {
			t.Errorf("stream started %d times after Rearm twice, want 2", starts)
		}
		done := play(p, t.Context(), ramp(7, 3))
		p.fill(out, 0, 0)
		if err := <-done; err != nil || out[0] != 7 {
			t.Errorf("Play after Rearm: %v, buffer %v", err, out)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if err := p.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if err := p.Play(t.Context(), ramp(1, 4)); !errors.Is(err, hal.ErrClosed) {
			t.Errorf("Play after Close: %v, want ErrClosed", err)
		}
		if err := p.Rearm(); !errors.Is(err, hal.ErrClosed) {
			t.Errorf("Rearm after Close: %v, want ErrClosed", err)
		}
		if _, _, closes := s.counts(); closes != 1 {
			t.Errorf("stream closed %d times, want 1", closes)
		}
	})
}

func TestPlaybackHaltAndRearmRace(t *testing.T) {
	p, _ := openFakePlayback(t, frame8)
	defer p.Close()
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() { p.Halt() })
		wg.Go(func() { p.Rearm() })
		wg.Go(func() { p.fill(make([]int16, 16), 0, 0) })
		wg.Wait()
		// Whichever came last, the latch and the stream agree.
		p.ctl.Lock()
		p.mu.Lock()
		if p.halted == p.running {
			t.Fatalf("halted %v with the stream running %v", p.halted, p.running)
		}
		p.mu.Unlock()
		p.ctl.Unlock()
	}
}

func TestPlaybackUnderflowsCountOnlyMidClip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := openFakePlayback(t, frame8)
		defer p.Close()
		out := make([]int16, 16)
		ms := time.Millisecond
		p.fill(out, 1*ms, outputUnderflow) // idle: nobody heard a gap
		done := play(p, t.Context(), ramp(1, 56))
		p.fill(out, 2*ms, outputUnderflow) // the device ran dry as the clip began
		p.fill(out, 2*ms, outputUnderflow) // the same host buffer: the same gap
		p.fill(out, 3*ms, outputUnderflow) // another gap mid-clip
		p.fill(out, 4*ms, 0)               // the clip's last samples
		p.fill(out, 5*ms, outputUnderflow) // a gap right after them
		p.fill(out, 6*ms, outputUnderflow) // idle again
		<-done
		if got := p.Underflows(); got != 3 {
			t.Errorf("%d underflows, want 3", got)
		}
		// A host API without times: each flag counts.
		done = play(p, t.Context(), ramp(1, 40))
		p.fill(out, 0, outputUnderflow)
		p.fill(out, 0, outputUnderflow)
		p.fill(out, 0, 0)
		<-done
		if got := p.Underflows(); got != 5 {
			t.Errorf("%d underflows, want 5", got)
		}
	})
}

func TestPlaybackStalledDevice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := openFakePlayback(t, frame8)
		defer p.Close()
		// The device calls back for a while, then stops.
		go func() {
			for range 3 {
				time.Sleep(time.Second)
				p.fill(make([]int16, 16), 0, 0)
			}
		}()
		start := time.Now()
		err := p.Play(t.Context(), ramp(1, 1000))
		if !errors.Is(err, ErrStalled) || time.Since(start) != 5*time.Second {
			t.Errorf("got %v after %v, want ErrStalled 2s after the last callback (5s)", err, time.Since(start))
		}
		p.mu.Lock()
		if len(p.queue) != 0 {
			t.Errorf("%d clips left queued", len(p.queue))
		}
		p.mu.Unlock()
	})
}

func TestPlaybackErrors(t *testing.T) {
	stereo := hal.AudioFormat{Rate: 16000 * physic.Hertz, Channels: 2, FrameSamples: 16}
	p, s := openFakePlayback(t, stereo)
	if err := p.Play(t.Context(), make([]int16, 3)); err == nil || !containsAll(err.Error(), "3 samples", "2-channel") {
		t.Errorf("odd samples in stereo: %v", err)
	}
	s.abortErr = errors.New("EIO")
	if err := p.Halt(); err == nil || !containsAll(err.Error(), "Loopback: PCM (hw:0,0)", "halt", "EIO") {
		t.Errorf("failing abort: %v", err)
	}
	s.startErr = errors.New("EBUSY")
	if err := p.Rearm(); err == nil || !containsAll(err.Error(), "rearm", "EBUSY") {
		t.Errorf("failing start: %v", err)
	}
	if err := p.Play(t.Context(), make([]int16, 4)); !errors.Is(err, hal.ErrHalted) {
		t.Errorf("Play after a failed Rearm: %v, want ErrHalted", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	bad := &fakeStream{startErr: errors.New("no such device")}
	p2 := newPlayback("x", stereo)
	if err := p2.run(bad); err == nil {
		t.Error("a stream that does not start opened")
	}
	if err := p2.Play(t.Context(), make([]int16, 4)); !errors.Is(err, hal.ErrClosed) {
		t.Errorf("Play on a playback that never started: %v", err)
	}
}
