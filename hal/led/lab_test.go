//go:build lab

package led

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/led/uleds"
)

// Against LED class devices the lab VM makes with uleds (built for the
// lab by scripts/lab/prepare.sh; the kernel's LED core behind them, with
// the timer trigger loaded): the body takes them through periph's sysfs
// LED driver, and the test reads what the kernel sets from the uleds
// side, which is not the file the body reads back.

func trigger(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(classDir, name, "trigger"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Fields(string(b)) {
		if strings.HasPrefix(f, "[") {
			return strings.Trim(f, "[]")
		}
	}
	return ""
}

// TestLabLED: an LED with the timer trigger (as a Pi's ACT has mmc0) is
// taken (trigger none, off), switched on and off with the kernel setting
// its brightness (capped at its max_brightness: 1 for a GPIO LED, 255 for
// a dimmable one) and the read-back agreeing; Halt switches it off and
// refuses Out until Rearm; Close switches it off and gives the trigger
// back; an LED the machine lacks is absent, naming those it has.
func TestLabLED(t *testing.T) {
	leds := []struct {
		name string
		max  int32
	}{{"tobe-lab::gpio", 1}, {"tobe-lab::dim", 255}}
	made := make([]*uleds.LED, len(leds))
	for i, l := range leds {
		var err error
		if made[i], err = uleds.Make(l.name, l.max); err != nil {
			t.Fatal(err)
		}
		defer made[i].Close()
		if err := os.WriteFile(filepath.Join(classDir, l.name, "trigger"), []byte("timer"), 0); err != nil {
			t.Fatalf("the timer trigger (ledtrig-timer): %v", err)
		}
	}
	// periph lists the LEDs once, at its first use in the process: after
	// they were made.
	for i, l := range leds {
		t.Run(l.name, func(t *testing.T) {
			u := made[i]
			bright := func(want int32) {
				t.Helper()
				if err := u.WaitFor(want, 3*time.Second); err != nil {
					t.Fatal(err)
				}
			}
			d, err := Open(l.name)
			if err != nil {
				t.Fatal(err)
			}
			if got := trigger(t, l.name); got != "none" {
				t.Errorf("taken, its trigger is %q, want none", got)
			}
			d.Out(hal.High)
			bright(l.max)
			if got, err := d.ReadBack(); err != nil || got != hal.High {
				t.Errorf("read back after on: %v %v", got, err)
			}
			d.Out(hal.Low)
			bright(0)
			if got, err := d.ReadBack(); err != nil || got != hal.Low {
				t.Errorf("read back after off: %v %v", got, err)
			}
			d.Out(hal.High)
			bright(l.max)
			if err := d.Halt(); err != nil {
				t.Fatal(err)
			}
			bright(0)
			if err := d.Out(hal.High); !errors.Is(err, hal.ErrHalted) {
				t.Errorf("Out after Halt: %v, want ErrHalted", err)
			}
			d.Rearm()
			if err := d.Out(hal.High); err != nil {
				t.Errorf("Out after Rearm: %v", err)
			}
			bright(l.max)
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			if got := trigger(t, l.name); got != "timer" {
				t.Errorf("closed, its trigger is %q, want timer back", got)
			}
		})
	}
	if _, err := Open("tobe-lab::none"); !errors.Is(err, hal.ErrAbsent) || !strings.Contains(err.Error(), "tobe-lab::gpio") {
		t.Errorf("an LED the machine lacks: %v", err)
	}
}
