package sense

import (
	"context"
	"runtime"
)

// CPU bounds how many CPU-heavy workers (motion detection) run at once.
// The body keeps them below GOMAXPROCS so that a P is always free when the
// e-stop's reader wakes: a goroutine woken from a blocking read otherwise
// waits up to Go's 10 ms preemption slice while CPU-bound goroutines hold
// every P. With GOMAXPROCS 1 the bound is 1 and that guarantee is gone;
// the e-stop then relies on preemption (see act's e-stop comment).
type CPU struct{ slots chan struct{} }

// HeavyWorkers is the bound for this process: GOMAXPROCS-1, at least 1.
func HeavyWorkers() int { return max(1, runtime.GOMAXPROCS(0)-1) }

// NewCPU lets n heavy workers run at once.
func NewCPU(n int) *CPU { return &CPU{slots: make(chan struct{}, max(1, n))} }

// Acquire waits for a slot, or ctx.
func (c *CPU) Acquire(ctx context.Context) error {
	select {
	case c.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Release gives the slot back.
func (c *CPU) Release() { <-c.slots }
