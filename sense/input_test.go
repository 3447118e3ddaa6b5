package sense

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tobe-body/tobe-body/body"
	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/haltest"
	"github.com/tobe-body/tobe-body/ledger"
)

// typed is "hello world" as the kernel's key codes.
var typed = []uint16{35, 18, 38, 38, 24, 57, 17, 24, 19, 38, 32}

// runInput runs an input channel in a synctest bubble over scripted events
// (at offsets from the start), then ends it as end says, and returns the
// events it emitted and Run's error.
func runInput(t *testing.T, cfg InputConfig, info hal.InputInfo, script func(push func(at time.Duration, typ, code uint16, v int32)), until time.Duration, unplug bool) ([]ledger.Event, error) {
	t.Helper()
	var evs []ledger.Event
	var runErr error
	synctest.Test(t, func(t *testing.T) {
		clock, err := body.NewClock()
		if err != nil {
			t.Fatal(err)
		}
		start, base := time.Now(), hal.MonoNow()
		now := func() hal.Mono { return base.Add(time.Since(start)) }
		dev := haltest.NewInput(info, 1024)
		o := NewOutlet(Source{Channel: "input.x", Clock: clock}, 1024)
		c, err := NewInputChannel(o, dev, cfg)
		if err != nil {
			t.Fatal(err)
		}
		c.now = now
		done := make(chan error, 1)
		go func() { done <- c.Run(t.Context()) }()
		script(func(at time.Duration, typ, code uint16, v int32) {
			time.Sleep(at - time.Since(start))
			dev.Push(hal.InputEvent{Time: now(), Type: typ, Code: code, Value: v})
		})
		time.Sleep(until - time.Since(start))
		if unplug {
			dev.Unplug()
		} else {
			dev.Halt()
		}
		runErr = <-done
		for len(o.q) > 0 {
			q := <-o.q
			ev := q.ev
			ev.MonotonicNS -= int64(base) // relative, for the test
			evs = append(evs, ev)
		}
	})
	return evs, runErr
}

func typeText(push func(at time.Duration, typ, code uint16, v int32)) {
	at := time.Second
	for _, k := range typed {
		push(at, hal.EvKey, k, 1)
		push(at, hal.EvSyn, hal.SynReport, 0)
		push(at+30*time.Millisecond, hal.EvKey, k, 2) // autorepeat
		push(at+60*time.Millisecond, hal.EvKey, k, 0)
		push(at+60*time.Millisecond, hal.EvSyn, hal.SynReport, 0)
		at += 150 * time.Millisecond
	}
}

// TestKeyboardNeverEmitsAKey is the privacy rule: typed text on a device
// that is not a control leaves only counts.
func TestKeyboardNeverEmitsAKey(t *testing.T) {
	evs, err := runInput(t, InputConfig{Role: Activity, Window: 10 * time.Second},
		hal.InputInfo{Name: "USB Keyboard", Path: "/dev/input/event3"}, typeText, 25*time.Second, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Type != "input.activity" {
		t.Fatalf("events %v, want one input.activity", evs)
	}
	var p map[string]any
	if err := ledger.UnmarshalPayload(evs[0].Payload, &p); err != nil {
		t.Fatal(err)
	}
	if len(p) != 3 || p["device"] != "USB Keyboard" || p["events"] != uint64(2*len(typed)) || p["window_ms"] != uint64(10000) {
		t.Errorf("payload %v, want device, %d events and the window, nothing else", p, 2*len(typed))
	}
	if at := time.Duration(evs[0].MonotonicNS); at != 11*time.Second {
		t.Errorf("reported at %v, want the end of the window that began with the first key (11s)", at)
	}
	// Nothing of the text, in any form, in the whole event.
	var buf bytes.Buffer
	if err := ledger.Encode(&buf, &evs[0]); err != nil {
		t.Fatal(err)
	}
	raw := buf.Bytes()
	for _, leak := range [][]byte{[]byte("hello"), []byte("KEY_"), {35, 18, 38}} {
		if bytes.Contains(raw, leak) || bytes.Contains(evs[0].Payload, leak) {
			t.Errorf("the event holds %q", leak)
		}
	}
}

func TestActivityReportsAPartialWindowWhenTheDeviceGoes(t *testing.T) {
	evs, err := runInput(t, InputConfig{Role: Activity, Window: time.Minute},
		hal.InputInfo{Name: "USB Mouse"}, func(push func(time.Duration, uint16, uint16, int32)) {
			push(time.Second, hal.EvRel, 0, 3)
			push(2*time.Second, hal.EvRel, 1, -1)
		}, 5*time.Second, true)
	if !errors.Is(err, hal.ErrAbsent) {
		t.Errorf("Run: %v, want ErrAbsent", err)
	}
	if len(evs) != 1 || evs[0].Type != "input.activity" {
		t.Fatalf("events %v", evs)
	}
	var p ActivityReport
	ledger.UnmarshalPayload(evs[0].Payload, &p)
	if p.Events != 2 || p.WindowMS != 4000 {
		t.Errorf("partial window %+v, want 2 events over 4 s", p)
	}
}

func TestControlNamesItsKeysAndCoalescesRotation(t *testing.T) {
	evs, err := runInput(t, InputConfig{Role: Control},
		hal.InputInfo{Name: "tobe keypad"}, func(push func(time.Duration, uint16, uint16, int32)) {
			push(time.Second, hal.EvKey, hal.BtnMisc, 1)
			push(time.Second+500*time.Millisecond, hal.EvKey, hal.BtnMisc, 2) // autorepeat: nothing
			push(2*time.Second, hal.EvKey, hal.BtnMisc, 0)
			for i := range 5 { // a knob turned five detents in 50 ms
				push(3*time.Second+time.Duration(i)*10*time.Millisecond, hal.EvRel, hal.RelDial, 1)
			}
			push(4*time.Second, hal.EvRel, hal.RelDial, -2)
			push(4*time.Second+50*time.Millisecond, hal.EvRel, hal.RelDial, -1)
			push(5*time.Second, hal.EvKey, 28, 1)
		}, 6*time.Second, false)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		var p map[string]any
		ledger.UnmarshalPayload(e.Payload, &p)
		s := e.Type + "@" + time.Duration(e.MonotonicNS).Round(time.Millisecond).String()
		for _, k := range []string{"key", "axis", "delta"} {
			if v, ok := p[k]; ok {
				s += fmt.Sprintf(" %s=%v", k, v)
			}
		}
		got = append(got, s)
	}
	want := []string{
		"input.pressed@1s key=BTN_0", "input.released@2s key=BTN_0",
		"input.rotated@3.04s axis=dial delta=5", "input.rotated@4.05s axis=dial delta=-3",
		"input.pressed@5s key=KEY_ENTER",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestInputConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  InputConfig
		want string
	}{
		{InputConfig{Role: Control}, ""},
		{InputConfig{Role: "keyboard"}, `input role "keyboard" is neither`},
		{InputConfig{Role: Activity, Window: time.Millisecond}, "activity window 1ms outside"},
		{InputConfig{Role: Control, RotateWindow: time.Hour}, "rotate window 1h0m0s outside"},
	} {
		err := tc.cfg.Validate()
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
}
