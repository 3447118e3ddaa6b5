package sense

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"
)

func TestCPUBoundsHeavyWorkers(t *testing.T) {
	if n := HeavyWorkers(); n != max(1, runtime.GOMAXPROCS(0)-1) {
		t.Errorf("HeavyWorkers %d", n)
	}
	synctest.Test(t, func(t *testing.T) {
		c := NewCPU(2)
		var running, most atomic.Int32
		gate := make(chan struct{})
		done := make(chan struct{})
		for range 5 {
			go func() {
				defer func() { done <- struct{}{} }()
				if err := c.Acquire(context.Background()); err != nil {
					t.Error(err)
					return
				}
				n := running.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				<-gate
				running.Add(-1)
				c.Release()
			}()
		}
		synctest.Wait()
		if most.Load() != 2 {
			t.Errorf("%d ran at once, want 2", most.Load())
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := c.Acquire(ctx); err == nil {
			t.Error("a full CPU gave a slot to a cancelled context")
		}
		close(gate)
		for range 5 {
			<-done
		}
	})
}
