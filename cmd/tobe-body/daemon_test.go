package main

import (
	"context"
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
