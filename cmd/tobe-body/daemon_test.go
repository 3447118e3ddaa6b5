package main

import (
	"context"
	"runtime/pprof"
	"slices"
	"testing"
)

// The daemon stops what it started in the reverse order, and a spawned
// goroutine has ended when its stop returns.
func TestDaemonStopsInReverse(t *testing.T) {
	d := &daemon{}
	var stopped []string
	d.onStop(func() { stopped = append(stopped, "devices") })
	ended := false
	d.spawn("test", func(ctx context.Context) {
		<-ctx.Done()
		ended = true
	})
	d.onStop(func() {
		if ended {
			t.Error("the e-stop's watcher ended before the admin socket stopped")
		}
		stopped = append(stopped, "admin socket")
	})
	d.onStop(func() {})
	d.stop()
	if !ended {
		t.Error("the spawned goroutine still runs after stop")
	}
	if want := []string{"admin socket", "devices"}; !slices.Equal(stopped, want) {
		t.Errorf("stopped %v, want %v", stopped, want)
	}
	d.stop() // a second stop does nothing
}

// A spawned goroutine carries the profiler label part=name, so a
// goroutine profile names the part it belongs to.
func TestSpawnLabelsThePart(t *testing.T) {
	d := &daemon{}
	got := make(chan string, 1)
	d.spawn("e-stop", func(ctx context.Context) {
		part, _ := pprof.Label(ctx, "part")
		got <- part
		<-ctx.Done()
	})
	if part := <-got; part != "e-stop" {
		t.Errorf("label part=%q, want e-stop", part)
	}
	d.stop()
}
