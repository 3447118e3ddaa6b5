//go:build lab

package gpio

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/gpio/gpiosim"
	"github.com/tobe-body/tobe-body/hal/internal/uapi"
)

// Against gpio-sim in the lab VM (scripts/lab/run.sh makes the chip
// tobe-lab with the lab profile's lines).

// simLine is line of the lab's gpio-sim chip, driven and read from outside.
func simLine(t *testing.T, line string) gpiosim.Line {
	t.Helper()
	l, err := gpiosim.Find("tobe-lab", line)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// sim is the path of one of a line's gpio-sim attributes.
func sim(t *testing.T, line, attr string) string {
	t.Helper()
	return simLine(t, line).Attr(attr)
}

func setPull(t *testing.T, line string, high bool) {
	t.Helper()
	if err := simLine(t, line).SetPull(high); err != nil {
		t.Fatal(err)
	}
}

func simValue(t *testing.T, line string) string {
	t.Helper()
	v, err := simLine(t, line).Value()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func openChip(t *testing.T) hal.Chip {
	t.Helper()
	c, err := Open("tobe-lab")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// watchEdges switches the kernel's edge detection on a requested input
// off or on (both edges): with it off the line changes unseen, as with a
// lost interrupt.
func watchEdges(t *testing.T, in hal.LineIn, on bool) {
	t.Helper()
	cfg := uapi.GPIOV2LineConfig{Flags: uapi.GPIOV2LineFlagInput}
	if on {
		cfg.Flags |= uapi.GPIOV2LineFlagEdgeRising | uapi.GPIOV2LineFlagEdgeFalling
	}
	if err := uapi.FileIoctl(in.(*lineIn).f, uapi.GPIOV2LineSetConfig, unsafe.Pointer(&cfg)); err != nil {
		t.Fatal(err)
	}
}

func TestLabEdges(t *testing.T) {
	c := openChip(t)
	setPull(t, "BUTTON", false)
	in, err := c.In("BUTTON", hal.InConfig{Edge: hal.BothEdges})
	if err != nil {
		t.Fatal(err)
	}
	var last hal.EdgeEvent
	for i, high := range []bool{true, false, true} {
		setPull(t, "BUTTON", high)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		e, err := in.WaitForEdge(ctx)
		cancel()
		if err != nil {
			t.Fatalf("edge %d: %v", i, err)
		}
		want := hal.FallingEdge
		if high {
			want = hal.RisingEdge
		}
		if e.Edge != want || e.Level != hal.Level(high) || e.Time <= last.Time || e.Seq <= last.Seq {
			t.Errorf("edge %d: %v after %v, want %v", i, e, last, want)
		}
		last = e
	}
	if l, err := in.Read(); err != nil || l != hal.High {
		t.Errorf("read %v %v, want High", l, err)
	}
}

func TestLabDebounce(t *testing.T) {
	c := openChip(t)
	setPull(t, "RESET", false)
	in, err := c.In("RESET", hal.InConfig{Edge: hal.BothEdges, Debounce: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// A bouncing contact: five changes within a few milliseconds, ending high.
	for _, high := range []bool{true, false, true, false, true} {
		setPull(t, "RESET", high)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	e, err := in.WaitForEdge(ctx)
	if err != nil || e.Edge != hal.RisingEdge {
		t.Fatalf("first event %v %v, want one rising edge", e, err)
	}
	quiet, cancel2 := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel2()
	if e, err := in.WaitForEdge(quiet); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a second event %v %v from one bouncing press", e, err)
	}
}

func TestLabOutputs(t *testing.T) {
	c := openChip(t)
	out, err := c.Out("RELAY1", hal.OutConfig{Safe: hal.Low})
	if err != nil {
		t.Fatal(err)
	}
	if v := simValue(t, "RELAY1"); v != "0" {
		t.Errorf("at request the line is %s, want its safe 0", v)
	}
	led, err := c.Out("LED", hal.OutConfig{Safe: hal.High})
	if err != nil {
		t.Fatal(err)
	}
	if v := simValue(t, "LED"); v != "1" {
		t.Errorf("a safe-high line starts at %s", v)
	}
	_ = led
	if err := out.Out(hal.High); err != nil {
		t.Fatal(err)
	}
	if v := simValue(t, "RELAY1"); v != "1" {
		t.Errorf("driven High, the line is %s", v)
	}
	if l, err := out.ReadBack(); err != nil || l != hal.High {
		t.Errorf("read back %v %v", l, err)
	}
	if err := c.Halt(); err != nil {
		t.Fatal(err)
	}
	if v := simValue(t, "RELAY1"); v != "0" {
		t.Errorf("after Halt the line is %s, want 0", v)
	}
	if err := out.Out(hal.High); !errors.Is(err, hal.ErrHalted) {
		t.Errorf("Out after Halt: %v, want ErrHalted", err)
	}
	out.Rearm()
	if err := out.Out(hal.High); err != nil || simValue(t, "RELAY1") != "1" {
		t.Errorf("after Rearm: %v, line %s", err, simValue(t, "RELAY1"))
	}
	// Held by another consumer: the error names it.
	other := openChip(t)
	if _, err := other.Out("RELAY1", hal.OutConfig{}); !errors.Is(err, hal.ErrBusy) || !strings.Contains(err.Error(), Consumer) {
		t.Errorf("second request: %v, want ErrBusy naming %q", err, Consumer)
	}
}

// TestLabReconcile loses an edge on purpose: edge detection is switched
// off on the requested line while the line changes (as a lost interrupt
// would), then on again. The periodic read must deliver the change.
func TestLabReconcile(t *testing.T) {
	c := openChip(t)
	setPull(t, "BUTTON", false)
	in, err := c.In("BUTTON", hal.InConfig{Edge: hal.BothEdges, Reconcile: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	watchEdges(t, in, false)
	setPull(t, "BUTTON", true)
	watchEdges(t, in, true)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	start := hal.MonoNow()
	e, err := in.WaitForEdge(ctx)
	if err != nil || !e.Reconciled || e.Edge != hal.RisingEdge || e.Level != hal.High {
		t.Fatalf("got %v %v, want a reconciled rising edge", e, err)
	}
	t.Logf("lost edge reconciled after %v (period 50ms): %v", hal.MonoNow().Sub(start), e)
	// A reported edge afterwards is the kernel's again, not doubled.
	setPull(t, "BUTTON", false)
	e, err = in.WaitForEdge(ctx)
	if err != nil || e.Reconciled || e.Edge != hal.FallingEdge {
		t.Fatalf("got %v %v, want the kernel's falling edge", e, err)
	}
	quiet, cancel2 := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel2()
	if e, err := in.WaitForEdge(quiet); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("an extra event %v %v while the line is quiet", e, err)
	}
}

// TestLabEdgeLatency measures pull written -> event delivered through the
// driver, and through a bare blocking read(2) on a second line in the same
// run: under emulation only the ratio means anything.
func TestLabEdgeLatency(t *testing.T) {
	c := openChip(t)
	setPull(t, "ESTOP", false)
	setPull(t, "ESTOP2", false)
	in, err := c.In("ESTOP", hal.InConfig{Edge: hal.BothEdges})
	if err != nil {
		t.Fatal(err)
	}
	// The bare reader blocks in read(2) as a plain C program would.
	bare, err := simLine(t, "ESTOP2").RequestEdges("bare-reader")
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	measure := func(line string, wait func(high bool) error) []time.Duration {
		pull := sim(t, line, "pull")
		var delivered []time.Duration
		high := false
		for range 500 {
			high = !high
			v := []byte("pull-down")
			if high {
				v = []byte("pull-up")
			}
			start := hal.MonoNow()
			if err := os.WriteFile(pull, v, 0); err != nil {
				t.Fatal(err)
			}
			if err := wait(high); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			delivered = append(delivered, hal.MonoNow().Sub(start))
		}
		slices.Sort(delivered)
		return delivered
	}
	drv := measure("ESTOP", func(high bool) error {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		e, err := in.WaitForEdge(ctx)
		if err == nil && e.Level != hal.Level(high) {
			err = fmt.Errorf("edge %v, want level %v", e, high)
		}
		return err
	})
	raw := measure("ESTOP2", func(bool) error {
		_, err := bare.Read()
		return err
	})
	p := func(d []time.Duration, q int) time.Duration { return d[len(d)*q/100] }
	t.Logf("edge latency, pull written -> event delivered, 500 edges: driver p50 %v p99 %v; bare read(2) p50 %v p99 %v; ratio p50 %.2f p99 %.2f",
		p(drv, 50), p(drv, 99), p(raw, 50), p(raw, 99),
		float64(p(drv, 50))/float64(p(raw, 50)), float64(p(drv, 99))/float64(p(raw, 99)))
}
