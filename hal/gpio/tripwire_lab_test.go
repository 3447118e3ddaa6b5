//go:build lab && cgo

package gpio

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/hal"
)

// labOuts claims the lines together, at safe Low: one request.
func labOuts(t *testing.T, c hal.Chip, names ...string) []hal.LineOut {
	t.Helper()
	var reqs []hal.OutRequest
	for _, n := range names {
		reqs = append(reqs, hal.OutRequest{Line: n, Config: hal.OutConfig{Safe: hal.Low}})
	}
	outs, errs := c.Outs(reqs)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return outs
}

// TestLabTripwire arms ESTOP's tripwire over the relays, the LED and the
// buzzer, drives them high, and opens the line: every output must be low
// on gpio-sim's value attribute and latched before the edge is delivered,
// and the edge must carry the read-backs. Then a stop that no event
// reports (edge detection switched off while the line opens) is found by
// the thread's periodic read and halts just the same.
func TestLabTripwire(t *testing.T) {
	c := openChip(t)
	setPull(t, "ESTOP", false)
	in, err := c.In("ESTOP", hal.InConfig{Edge: hal.BothEdges, Reconcile: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"RELAY1", "RELAY2", "LED", "BUZZER"}
	outs := labOuts(t, c, names...) // one request, as the body claims them
	covered, err := in.(hal.Tripwire).ArmTrip(hal.High, outs)
	if err != nil || len(covered) != len(outs) {
		t.Fatalf("ArmTrip: %d covered, %v", len(covered), err)
	}
	t.Logf("tripwire thread: %s", in.(hal.Tripwire).TripThread())
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	on := func() {
		t.Helper()
		for i, o := range outs {
			if err := o.Rearm(); err != nil {
				t.Fatal(err)
			}
			if err := o.Out(hal.High); err != nil {
				t.Fatal(err)
			}
			if v := simValue(t, names[i]); v != "1" {
				t.Fatalf("%s reads %s after Out(high)", names[i], v)
			}
		}
	}
	check := func(e hal.EdgeEvent, reconciled bool) {
		t.Helper()
		if e.Level != hal.High || e.Reconciled != reconciled || e.Halted == nil || len(e.Halted.Outputs) != len(outs) {
			t.Fatalf("edge %v, halted %+v; want a stop (reconciled %v) with %d read-backs", e, e.Halted, reconciled, len(outs))
		}
		for i, h := range e.Halted.Outputs {
			if h.Name != names[i] || h.Err != nil || h.ReadBack != hal.Low {
				t.Errorf("read-back %d: %+v", i, h)
			}
			if v := simValue(t, names[i]); v != "0" {
				t.Errorf("%s reads %s after the stop", names[i], v)
			}
			if err := outs[i].Out(hal.High); !errors.Is(err, hal.ErrHalted) {
				t.Errorf("%s: Out after the stop: %v, want ErrHalted", names[i], err)
			}
		}
		if e.Halted.Safe < e.Time {
			t.Errorf("safe at %v before the edge at %v", e.Halted.Safe, e.Time)
		}
		t.Logf("stop (reconciled %v): edge -> %d outputs safe and read back in %v", reconciled, len(outs), e.Halted.Safe.Sub(e.Time))
	}

	// An edge.
	on()
	setPull(t, "ESTOP", true)
	e, err := in.WaitForEdge(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check(e, false)
	setPull(t, "ESTOP", false)
	if e, err = in.WaitForEdge(ctx); err != nil || e.Level != hal.Low || e.Halted != nil {
		t.Fatalf("closing: %v %+v %v", e, e.Halted, err)
	}

	// A stop no event tells of.
	on()
	watchEdges(t, in, false)
	setPull(t, "ESTOP", true)
	if e, err = in.WaitForEdge(ctx); err != nil {
		t.Fatal(err)
	}
	check(e, true)
	watchEdges(t, in, true)
	setPull(t, "ESTOP", false)
	if e, err = in.WaitForEdge(ctx); err != nil || e.Level != hal.Low {
		t.Fatalf("closing again: %v %v", e, err)
	}

	// Halt wakes a waiter; Close ends the thread.
	done := make(chan error, 1)
	go func() {
		_, err := in.WaitForEdge(ctx)
		done <- err
	}()
	in.Halt()
	if err := <-done; !errors.Is(err, hal.ErrHalted) {
		t.Errorf("WaitForEdge after Halt: %v", err)
	}
}

// TestLabTripwireRacingWrites: writers drive every output high as fast as
// they can while the line opens, 100 times; the outputs share a request,
// so the writers contend for its lock with each other and the halt. Each write either lands
// before the tripwire's halt (which undoes it) or is refused, so after
// every stop each output reads low on gpio-sim and stays low.
func TestLabTripwireRacingWrites(t *testing.T) {
	c := openChip(t)
	setPull(t, "ESTOP", false)
	in, err := c.In("ESTOP", hal.InConfig{Edge: hal.BothEdges})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"RELAY1", "RELAY2", "LED", "BUZZER"}
	outs := labOuts(t, c, names...) // one request, as the body claims them
	if _, err := in.(hal.Tripwire).ArmTrip(hal.High, outs); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var written, refused atomic.Int64
	for round := range 100 {
		for _, o := range outs {
			if err := o.Rearm(); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		for _, o := range outs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					err := o.Out(hal.High)
					if errors.Is(err, hal.ErrHalted) {
						refused.Add(1)
						return
					}
					if err != nil {
						t.Error(err)
						return
					}
					written.Add(1)
				}
			}()
		}
		setPull(t, "ESTOP", true)
		e, err := in.WaitForEdge(ctx)
		if err != nil || e.Halted == nil {
			t.Fatalf("round %d: %v %+v", round, err, e)
		}
		wg.Wait() // every writer was refused
		for i, n := range names {
			if v := simValue(t, n); v != "0" {
				t.Fatalf("round %d: %s reads %s after the stop, with writers racing it", round, n, v)
			}
			if l, err := outs[i].ReadBack(); err != nil || l != hal.Low {
				t.Fatalf("round %d: %s reads back %v %v", round, n, l, err)
			}
		}
		setPull(t, "ESTOP", false)
		if _, err := in.WaitForEdge(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("100 stops with 4 writers racing each: %d writes landed before the halts, %d refused after", written.Load(), refused.Load())
}

// TestLabTripwireTwoChips arms ESTOP's tripwire over outputs of two
// chips, each chip's in one request: a stop drives all six safe and reads
// them back, with one write and one read a chip, before the edge is
// delivered, and each read-back is named by its line. Then the paths that
// release: the second chip closed while the tripwire holds its request
// (its outputs are reported closed at the next stop, the first chip's
// halted still), and the first chip closed, which ends the thread; after
// it every line is free and every descriptor closed.
func TestLabTripwireTwoChips(t *testing.T) {
	base := fds(t)
	c1, c2 := openLabel(t, "tobe-lab"), openLabel(t, "tobe-lab2")
	setPull(t, "ESTOP", false)
	in, err := c1.In("ESTOP", hal.InConfig{Edge: hal.BothEdges})
	if err != nil {
		t.Fatal(err)
	}
	n1 := []string{"RELAY1", "RELAY2", "LED", "BUZZER"}
	n2 := []string{"RELAY3", "RELAY4"}
	o1, o2 := labOuts(t, c1, n1...), labOuts(t, c2, n2...)
	outs := append(append([]hal.LineOut(nil), o1...), o2...)
	names := append(append([]string(nil), n1...), n2...)
	chips := []string{"tobe-lab", "tobe-lab", "tobe-lab", "tobe-lab", "tobe-lab2", "tobe-lab2"}
	covered, err := in.(hal.Tripwire).ArmTrip(hal.High, outs)
	if err != nil || len(covered) != len(outs) {
		t.Fatalf("ArmTrip: %d covered, %v", len(covered), err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	closed := 0 // outputs at the end of outs whose chip was closed
	stop := func() hal.EdgeEvent {
		t.Helper()
		for i, o := range outs[:len(outs)-closed] {
			if err := o.Rearm(); err != nil {
				t.Fatal(err)
			}
			if err := o.Out(hal.High); err != nil {
				t.Fatal(err)
			}
			if v := valueOn(t, chips[i], names[i]); v != "1" {
				t.Fatalf("%s on %s at %s after Out(high)", names[i], chips[i], v)
			}
		}
		setPull(t, "ESTOP", true)
		e, err := in.WaitForEdge(ctx)
		if err != nil || e.Halted == nil || len(e.Halted.Outputs) != len(outs) {
			t.Fatalf("stop: %v %+v %v", e, e.Halted, err)
		}
		setPull(t, "ESTOP", false)
		if _, err := in.WaitForEdge(ctx); err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := stop()
	for i, h := range e.Halted.Outputs {
		if h.Name != names[i] || h.Err != nil || h.ReadBack != hal.Low {
			t.Errorf("read-back %d: %+v, want %s low", i, h, names[i])
		}
		if v := valueOn(t, chips[i], names[i]); v != "0" {
			t.Errorf("%s on %s at %s after the stop", names[i], chips[i], v)
		}
	}
	t.Logf("stop over two chips: edge -> %d outputs safe and read back in %v", len(outs), e.Halted.Safe.Sub(e.Time))

	c2.Close() // the tripwire still holds its request
	closed = len(n2)
	free(t, c2, n2...)
	e = stop()
	for i, h := range e.Halted.Outputs {
		closed := i >= len(n1)
		if closed != errors.Is(h.Err, hal.ErrClosed) || closed && !strings.Contains(h.Err.Error(), names[i]) || !closed && (h.Err != nil || h.ReadBack != hal.Low) {
			t.Errorf("read-back %d with tobe-lab2 closed: %+v", i, h)
		}
	}
	c1.Close()
	free(t, c1, append([]string{"ESTOP"}, n1...)...)
	if n := fds(t); n != base {
		t.Errorf("%d descriptors after both chips closed, %d before", n, base)
	}
}

// TestLabTripwireLostStop: after a level an event told of, an event to a
// level that is not stop either means the line was at stop between them
// and its edge was lost (here: edge detection switched off while the
// line opens, and on again before it closes, with no periodic read to
// find it). The tripwire halts on the event's signal and delivers the
// lost stop, reconciled, with its read-backs, before the closing edge.
func TestLabTripwireLostStop(t *testing.T) {
	c := openChip(t)
	setPull(t, "ESTOP", false)
	in, err := c.In("ESTOP", hal.InConfig{Edge: hal.BothEdges, Reconcile: -1})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"RELAY1", "RELAY2"}
	outs := labOuts(t, c, names...)
	if _, err := in.(hal.Tripwire).ArmTrip(hal.High, outs); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	// A stop and a close the kernel tells of: the level is an event's.
	setPull(t, "ESTOP", true)
	if e, err := in.WaitForEdge(ctx); err != nil || e.Halted == nil {
		t.Fatalf("stop: %v %v", e, err)
	}
	setPull(t, "ESTOP", false)
	if e, err := in.WaitForEdge(ctx); err != nil || e.Level != hal.Low {
		t.Fatalf("close: %v %v", e, err)
	}
	for _, o := range outs {
		if err := o.Rearm(); err != nil {
			t.Fatal(err)
		}
		if err := o.Out(hal.High); err != nil {
			t.Fatal(err)
		}
	}
	watchEdges(t, in, false)
	setPull(t, "ESTOP", true) // the stop no event tells of
	watchEdges(t, in, true)
	setPull(t, "ESTOP", false)
	e, err := in.WaitForEdge(ctx)
	if err != nil || e.Level != hal.High || !e.Reconciled || e.Halted == nil || len(e.Halted.Outputs) != len(outs) {
		t.Fatalf("after a lost stop: %v, halted %+v, %v; want the stop, reconciled, with read-backs", e, e.Halted, err)
	}
	for i, h := range e.Halted.Outputs {
		if h.Name != names[i] || h.Err != nil || h.ReadBack != hal.Low || simValue(t, names[i]) != "0" {
			t.Errorf("read-back %d: %+v, line at %s", i, h, simValue(t, names[i]))
		}
		if err := outs[i].Out(hal.High); !errors.Is(err, hal.ErrHalted) {
			t.Errorf("%s after the lost stop: %v, want ErrHalted", names[i], err)
		}
	}
	if e, err = in.WaitForEdge(ctx); err != nil || e.Level != hal.Low || e.Reconciled {
		t.Fatalf("the close after the lost stop: %v %v", e, err)
	}
}
