package sense

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/haltest"
	"github.com/tobe-body/tobe-body/ledger"
)

// TestHotplugReadsWhatIsPluggedAsActivity: devices are opened as plugged,
// counted without naming a key, forgotten when unplugged, and the ones the
// profile names elsewhere are left to their own channels.
func TestHotplugReadsWhatIsPluggedAsActivity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := haltest.NewInputWatcher(8)
		named := haltest.NewInput(hal.InputInfo{Name: "keypad", Path: "/dev/input/event0"}, 4)
		kbd := haltest.NewInput(hal.InputInfo{Name: "USB Keyboard", Path: "/dev/input/event1"}, 64)
		mouse := haltest.NewInput(hal.InputInfo{Name: "USB Mouse", Path: "/dev/input/event2"}, 64)
		o := NewOutlet(Source{Channel: "input.all"}, 64)
		h, err := NewHotplugChannel(o, w, w.Open, func(p string) bool { return p == named.Info().Path }, InputConfig{Window: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- h.Run(ctx) }()

		w.Plug(named)
		w.Plug(kbd)
		w.Plug(mouse)
		synctest.Wait()
		if n := h.Devices(); n != 2 {
			t.Errorf("%d devices read, want the keyboard and the mouse", n)
		}
		for _, code := range typed {
			kbd.Push(hal.InputEvent{Time: hal.MonoNow(), Type: hal.EvKey, Code: code, Value: 1})
		}
		mouse.Push(hal.InputEvent{Time: hal.MonoNow(), Type: hal.EvRel, Code: 0, Value: 5})
		synctest.Wait()
		w.Unplug(mouse)
		synctest.Wait()
		if n := h.Devices(); n != 1 {
			t.Errorf("%d devices after unplugging the mouse, want 1", n)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if n := h.Devices(); n != 0 {
			t.Errorf("%d devices left open", n)
		}
		var got []string
		for len(o.q) > 0 {
			q := <-o.q
			ev := q.ev
			var p map[string]any
			if err := ledger.UnmarshalPayload(ev.Payload, &p); err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%s %v %v", ev.Type, p["device"], p["events"]))
		}
		want := []string{"input.plugged USB Keyboard <nil>", "input.plugged USB Mouse <nil>",
			"input.activity USB Mouse 1", "input.unplugged USB Mouse <nil>", fmt.Sprintf("input.activity USB Keyboard %d", len(typed))}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}
