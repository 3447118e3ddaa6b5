package stepclock

import (
	"testing"
	"time"
)

func TestAStepMovesOnlyTheWall(t *testing.T) {
	for _, step := range []time.Duration{-10 * time.Minute, 25 * time.Hour, 30 * 24 * time.Hour, 365 * 24 * time.Hour, -365 * 24 * time.Hour} {
		c := New()
		before := c.Now()
		mono := c.Mono()
		c.Step(step)
		after := c.Now()
		if d := after.Sub(before); d < 0 || d > time.Second {
			t.Errorf("step %v: Sub measured %v, want the real elapsed time", step, d)
		}
		if d := after.Round(0).Sub(before.Round(0)) - step; d < 0 || d > time.Second {
			t.Errorf("step %v: the wall readings differ by %v more than the step", step, d)
		}
		if !after.After(before) {
			t.Errorf("step %v: a later time is not After an earlier one", step)
		}
		if m := c.Mono(); m < mono {
			t.Errorf("step %v: Mono went back from %v to %v", step, mono, m)
		}
		if c.Offset() != step {
			t.Errorf("Offset = %v, want %v", c.Offset(), step)
		}
		// A time that lost its monotonic reading compares by the wall.
		if d := after.Round(0).Sub(before); d < step-time.Second {
			t.Errorf("step %v: a stripped reading measured %v", step, d)
		}
	}
}

func TestWatchAndReboot(t *testing.T) {
	c := New()
	w := c.Watch()
	c.Step(time.Hour)
	if d := <-w; d != time.Hour {
		t.Errorf("Watch got %v, want 1h", d)
	}
	id := c.BootID()
	c.Reboot()
	if c.BootID() == id || len(id) != 36 {
		t.Errorf("boot id %q then %q", id, c.BootID())
	}
	if m := c.Mono(); m.Duration() > time.Second {
		t.Errorf("Mono after Reboot is %v, want it near zero", m)
	}
	if !c.Synced() {
		t.Error("a new clock is not synced")
	}
	c.SetSynced(false)
	if c.Synced() {
		t.Error("SetSynced(false) did not take")
	}
}
