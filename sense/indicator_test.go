package sense

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/haltest"
)

// The indicator is off while paused or with nothing open, on while a
// camera or microphone is open, blinking while a capture lasts and for
// MinBlink at least, and off when it stops.
func TestIndicator(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		chip := haltest.NewChip("c")
		led := chip.AddOut("LED")
		out, err := chip.Out("LED", hal.OutConfig{Safe: hal.Low})
		if err != nil {
			t.Fatal(err)
		}
		ind := NewIndicator(out, nil)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { ind.Run(ctx); close(done) }()
		level := func(when string, want hal.Level) {
			t.Helper()
			synctest.Wait()
			if got := led.Level(); got != want {
				t.Errorf("%s: %v, want %v", when, got, want)
			}
		}
		level("nothing open yet", hal.Low)
		ind.Privacy(PrivacyState{Devices: []string{"camera.front"}})
		level("open", hal.High)
		capture := ind.Capture()
		var seen [2]int
		for range 8 { // a second of blinking
			synctest.Wait()
			if led.Level() == hal.High {
				seen[1]++
			} else {
				seen[0]++
			}
			time.Sleep(BlinkPeriod)
		}
		if seen[0] < 3 || seen[1] < 3 {
			t.Errorf("capturing: off %d and on %d of 8 looks, want it blinking", seen[0], seen[1])
		}
		capture()
		time.Sleep(MinBlink)
		level("after the capture and its least blink", hal.High)
		ind.Privacy(PrivacyState{Paused: true, Devices: []string{"camera.front"}})
		level("paused", hal.Low)
		ind.Capture()() // no blink while paused
		level("a capture refused while paused", hal.Low)
		ind.Privacy(PrivacyState{Devices: []string{"camera.front"}})
		time.Sleep(MinBlink)
		level("open again", hal.High)
		cancel()
		<-done
		if led.Level() != hal.Low {
			t.Error("left on after Run ended")
		}
	})
}
