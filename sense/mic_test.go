package sense

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/haltest"
	"github.com/tobe-body/tobe-body/hal/sim"
	"github.com/tobe-body/tobe-body/ledger"
	"github.com/tobe-body/tobe-body/sense/sound"
)

// TestMicChannelOnTheSimMicrophone runs a minute of the sim board's
// microphone (speech bursts every ~10 s over -50 dBFS noise) through the
// channel: each burst is one voice_started/voice_ended pair, levels come
// every 10 s, and voice never starts twice without ending.
func TestMicChannelOnTheSimMicrophone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := sim.New(7)
		mic, err := b.Drivers().OpenCapture(hal.AudioConfig{Device: sim.MicName})
		if err != nil {
			t.Fatal(err)
		}
		o := NewOutlet(Source{Channel: "audio.mic"}, 256)
		c, err := NewMicChannel(o, mic, sound.Config{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		time.Sleep(61 * time.Second)
		st := c.Stats()
		mic.Halt()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		cancel()
		counts := map[string]int{}
		var voiceOn bool
		var order []string
		for len(o.q) > 0 {
			q := <-o.q
			ev := q.ev
			counts[ev.Type]++
			var p map[string]any
			if err := ledger.UnmarshalPayload(ev.Payload, &p); err != nil {
				t.Fatal(err)
			}
			switch ev.Type {
			case "audio.voice_started":
				if voiceOn {
					t.Errorf("voice started twice")
				}
				voiceOn = true
			case "audio.voice_ended":
				voiceOn = false
			case "audio.level":
				if rms, ok := p["rms_dbfs"].(float64); !ok || rms > -10 || rms < -60 {
					t.Errorf("level %v", p)
				}
			}
			order = append(order, ev.Type)
		}
		if counts["audio.voice_started"] != 6 || counts["audio.voice_ended"] != 6 || counts["audio.level"] != 7 {
			t.Errorf("events %v, want 6 voice pairs and 7 levels (6, and the part at the stop) in a minute:\n%s", counts, strings.Join(order, "\n"))
		}
		if st.Frames < 2900 || st.Overruns != 0 {
			t.Errorf("stats %+v, want about 3000 frames of 20 ms", st)
		}
		t.Logf("a minute of the sim microphone: %v", counts)
	})
}

// A tap hears every frame the channel reads after Listen, without
// taking it from the channel; it ends with the channel or its Close.
func TestMicTap(t *testing.T) {
	f := hal.AudioFormat{Rate: 16 * physic.KiloHertz, Channels: 1, FrameSamples: 4}
	mic := haltest.NewCapture(f, 8)
	c, err := NewMicChannel(NewOutlet(Source{Channel: "audio.mic"}, 16), mic, sound.Config{})
	if err != nil {
		t.Fatal(err)
	}
	tap := c.Listen()
	other := c.Listen()
	other.Close()
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background()) }()
	for i := range 3 {
		mic.Push([]int16{int16(i), 1, 2, 3}, uint64(i+1), hal.Mono(i))
	}
	fr := hal.AudioFrame{Samples: make([]int16, 4)}
	for i := range 3 {
		if err := tap.ReadFrame(context.Background(), &fr); err != nil {
			t.Fatal(err)
		}
		if fr.Samples[0] != int16(i) || fr.Seq != uint64(i+1) {
			t.Fatalf("frame %d: got %v seq %d", i, fr.Samples, fr.Seq)
		}
	}
	if err := other.ReadFrame(context.Background(), &fr); !errors.Is(err, hal.ErrClosed) {
		t.Errorf("a closed tap: %v", err)
	}
	if err := tap.ReadFrame(context.Background(), &hal.AudioFrame{Samples: make([]int16, 3)}); err == nil {
		t.Error("a frame of the wrong size was filled")
	}
	mic.Halt()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := tap.ReadFrame(context.Background(), &fr); !errors.Is(err, hal.ErrHalted) {
		t.Errorf("after the channel stopped: %v", err)
	}
	if s := c.Stats(); s.Frames != 3 {
		t.Errorf("the channel read %d frames, want 3", s.Frames)
	}
	tap.Close()
}

// Clip joins the ring's last frames and the frames after the request
// without a gap or an overlap, and holds no more than the ring keeps.
func TestMicClip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 4 samples a frame at 16 kHz: 250 µs a frame.
		f := hal.AudioFormat{Rate: 16 * physic.KiloHertz, Channels: 1, FrameSamples: 4}
		fd := f.FrameDuration()
		mic := haltest.NewCapture(f, 8)
		c, err := NewMicChannel(NewOutlet(Source{Channel: "audio.mic"}, 16), mic, sound.Config{})
		if err != nil {
			t.Fatal(err)
		}
		c.SetRing(3 * fd) // three frames
		if c.RingBytes() != 3*4*2+3*8 {
			t.Errorf("ring of %d bytes", c.RingBytes())
		}
		done := make(chan error, 1)
		go func() { done <- c.Run(t.Context()) }()
		seq := 0
		push := func() {
			seq++
			mic.Push([]int16{int16(seq), int16(seq), int16(seq), int16(seq)}, uint64(seq), hal.Mono(time.Duration(seq)*fd))
		}
		for range 5 {
			push()
		}
		synctest.Wait()
		// Before alone: the last two frames, 4 and 5.
		h, err := c.Clip(t.Context(), 2*fd, 0)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(h.Samples) != "[4 4 4 4 5 5 5 5]" || h.Start != hal.Mono(4*fd) || h.Duration() != 2*fd {
			t.Errorf("before: %v from %v, %v", h.Samples, h.Start, h.Duration())
		}
		// More than the ring holds: its three frames; then two after.
		got := make(chan hal.AudioSpan, 1)
		go func() {
			h, err := c.Clip(t.Context(), time.Second, 2*fd)
			if err != nil {
				t.Error(err)
			}
			got <- h
		}()
		synctest.Wait()
		push()
		push()
		h = <-got
		if fmt.Sprint(h.Samples) != "[3 3 3 3 4 4 4 4 5 5 5 5 6 6 6 6 7 7 7 7]" || h.Start != hal.Mono(3*fd) || h.Lost != 0 {
			t.Errorf("before and after: %v from %v, lost %d", h.Samples, h.Start, h.Lost)
		}
		// After alone starts at the first frame after.
		go func() {
			h, err := c.Clip(t.Context(), 0, fd)
			if err != nil {
				t.Error(err)
			}
			got <- h
		}()
		synctest.Wait()
		push()
		if h = <-got; fmt.Sprint(h.Samples) != "[8 8 8 8]" || h.Start != hal.Mono(8*fd) {
			t.Errorf("after: %v from %v", h.Samples, h.Start)
		}
		// A clip whose context ends before its end is an error.
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { _, err := c.Clip(ctx, 0, time.Second); errc <- err }()
		synctest.Wait()
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("a clip cut short: %v", err)
		}
		mic.Halt()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if _, err := c.Clip(t.Context(), fd, fd); !errors.Is(err, hal.ErrHalted) {
			t.Errorf("a clip after the channel stopped: %v", err)
		}
	})
}

// A pause forgets the ring and ends a clip in progress.
func TestMicChannelPaused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := hal.AudioFormat{Rate: 16 * physic.KiloHertz, Channels: 1, FrameSamples: 4}
		fd := f.FrameDuration()
		mic := haltest.NewCapture(f, 8)
		c, err := NewMicChannel(NewOutlet(Source{Channel: "audio.mic"}, 16), mic, sound.Config{})
		if err != nil {
			t.Fatal(err)
		}
		c.SetRing(3 * fd)
		done := make(chan error, 1)
		go func() { done <- c.Run(t.Context()) }()
		for i := range 3 {
			mic.Push([]int16{1, 1, 1, 1}, uint64(i+1), hal.Mono(time.Duration(i)*fd))
		}
		synctest.Wait()
		clip := make(chan error, 1)
		go func() { _, err := c.Clip(t.Context(), fd, time.Second); clip <- err }()
		synctest.Wait()
		mic.Pause()
		synctest.Wait()
		if err := <-clip; !errors.Is(err, hal.ErrPaused) {
			t.Errorf("a clip at the pause: %v, want ErrPaused", err)
		}
		if h, err := c.Clip(t.Context(), time.Second, 0); err != nil || len(h.Samples) != 0 {
			t.Errorf("the ring after the pause: %v, %v; want it empty", h.Samples, err)
		}
		mic.Resume()
		mic.Push([]int16{7, 7, 7, 7}, 9, hal.Mono(time.Minute))
		synctest.Wait()
		if h, _ := c.Clip(t.Context(), time.Second, 0); fmt.Sprint(h.Samples) != "[7 7 7 7]" {
			t.Errorf("the ring after the resume: %v", h.Samples)
		}
		mic.Halt()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
