package haltest

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"go.uber.org/goleak"

	"github.com/tobe-body/tobe-body/hal"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestChipLines(t *testing.T) {
	c := NewChip("fake")
	estop := c.AddIn("ESTOP", hal.Low)
	relay := c.AddOut("RELAY1")

	in, err := c.In("ESTOP", hal.InConfig{Edge: hal.BothEdges})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.In("ESTOP", hal.InConfig{}); !errors.Is(err, hal.ErrBusy) {
		t.Errorf("second request: %v, want ErrBusy", err)
	}
	if _, err := c.In("NOPE", hal.InConfig{}); !errors.Is(err, hal.ErrAbsent) {
		t.Errorf("unknown line: %v, want ErrAbsent", err)
	}
	estop.Set(hal.High, 42)
	e, err := in.WaitForEdge(t.Context())
	if err != nil || e.Edge != hal.RisingEdge || e.Time != 42 || e.Seq != 1 {
		t.Errorf("edge %v, %v; want rising at 42, seq 1", e, err)
	}

	out, err := c.Out("RELAY1", hal.OutConfig{Safe: hal.Low})
	if err != nil {
		t.Fatal(err)
	}
	out.Out(hal.High)
	high := hal.High
	relay.Stick(&high)
	out.Halt()
	if got, _ := out.ReadBack(); got != hal.High {
		t.Errorf("stuck line reads back %v, want High", got)
	}
	if got, want := relay.Writes(), []hal.Level{hal.Low, hal.High, hal.Low}; len(got) != len(want) || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("writes %v, want %v", got, want)
	}
	if err := out.Out(hal.High); !errors.Is(err, hal.ErrHalted) {
		t.Errorf("Out after Halt: %v, want ErrHalted", err)
	}
	out.Rearm()
	relay.Fail(errors.New("EIO"))
	if err := out.Out(hal.High); err == nil {
		t.Error("Out on a failing line succeeded")
	}
}

func TestBlockingReadsEndOnHalt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cam := NewCamera(hal.FrameFormat{Pixel: hal.PixelGrey, Width: 2, Height: 1, Stride: 2}, 1)
		mic := NewCapture(hal.AudioFormat{Channels: 1, FrameSamples: 2}, 1)
		kbd := NewInput(hal.InputInfo{Name: "kbd"}, 1)
		in := NewChip("c").AddIn("L", hal.Low)
		errs := make(chan error, 4)
		go func() { _, err := cam.NextFrame(context.Background()); errs <- err }()
		go func() { errs <- mic.ReadFrame(context.Background(), &hal.AudioFrame{Samples: make([]int16, 2)}) }()
		go func() { _, err := kbd.ReadEvent(context.Background()); errs <- err }()
		go func() { _, err := in.WaitForEdge(context.Background()); errs <- err }()
		synctest.Wait()
		cam.Halt()
		mic.Halt()
		kbd.Halt()
		in.Halt()
		for range 4 {
			if err := <-errs; !errors.Is(err, hal.ErrHalted) {
				t.Errorf("blocked read after Halt: %v, want ErrHalted", err)
			}
		}
	})
}

func TestStreamsDeliverWhatIsPushed(t *testing.T) {
	cam := NewCamera(hal.FrameFormat{Pixel: hal.PixelGrey, Width: 2, Height: 1, Stride: 2}, 1)
	cam.Push([]byte{1, 2}, 7, 100)
	f, err := cam.NextFrame(t.Context())
	if err != nil || f.Seq != 7 || f.Time != 100 || string(f.Data) != "\x01\x02" {
		t.Fatalf("frame %+v, %v", f, err)
	}
	f.Release()
	f.Release()
	if cam.Released() != 1 {
		t.Errorf("released %d times, want once", cam.Released())
	}
	mic := NewCapture(hal.AudioFormat{Channels: 1, FrameSamples: 2}, 1)
	mic.Push([]int16{5, -5}, 1, 9)
	af := hal.AudioFrame{Samples: make([]int16, 2)}
	if err := mic.ReadFrame(t.Context(), &af); err != nil || af.Samples[1] != -5 || af.Time != 9 {
		t.Errorf("audio frame %+v, %v", af, err)
	}
	if err := mic.ReadFrame(t.Context(), &hal.AudioFrame{Samples: make([]int16, 3)}); err == nil {
		t.Error("a wrong-size frame was accepted")
	}
	spk := NewPlayback(hal.AudioFormat{Channels: 1})
	spk.Play(t.Context(), []int16{1, 2, 3})
	if p := spk.Played(); len(p) != 1 || len(p[0]) != 3 {
		t.Errorf("played %v", p)
	}
}
