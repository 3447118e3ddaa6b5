//go:build lab

package input

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/holoplot/go-evdev"

	"github.com/tobe-body/tobe-body/hal"
)

// Against uinput and evdev in the lab VM.

func keypad(t *testing.T, name string) *evdev.InputDevice {
	t.Helper()
	dev, err := evdev.CreateDevice(name, evdev.InputID{BusType: 0x06, Vendor: 1, Product: 2, Version: 1},
		map[evdev.EvType][]evdev.EvCode{evdev.EV_KEY: {evdev.BTN_0, evdev.KEY_A}})
	if err != nil {
		t.Fatal(err)
	}
	return dev
}

func press(t *testing.T, dev *evdev.InputDevice, code evdev.EvCode, value int32) {
	t.Helper()
	for _, e := range []evdev.InputEvent{{Type: evdev.EV_KEY, Code: code, Value: value}, {Type: evdev.EV_SYN, Code: evdev.SYN_REPORT}} {
		if err := dev.WriteOne(&e); err != nil {
			t.Fatal(err)
		}
	}
}

// waitListed polls until the kernel has made the device node (udev-less
// hotplug: the node appears in devtmpfs).
func waitListed(t *testing.T, name string) hal.InputInfo {
	t.Helper()
	for range 200 {
		devs, err := List()
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range devs {
			if d.Name == name {
				return d
			}
		}
		time.Sleep(10 * time.Millisecond) // the kernel's hotplug, not ours to signal
	}
	t.Fatalf("%s never appeared", name)
	return hal.InputInfo{}
}

func TestLabKeysWithMonotonicTime(t *testing.T) {
	dev := keypad(t, "tobe-lab-keypad")
	defer evdev.DestroyDevice(dev)
	info := waitListed(t, "tobe-lab-keypad")
	if len(info.Keys) != 2 {
		t.Errorf("keys %v, want BTN_0 and KEY_A", info.Keys)
	}
	in, err := Open(hal.InputConfig{Name: "tobe-lab-keypad"})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	before := hal.MonoNow()
	press(t, dev, evdev.BTN_0, 1)
	press(t, dev, evdev.BTN_0, 0)
	var last hal.Mono
	var keys []int32
	for range 4 {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		e, err := in.ReadEvent(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if e.Time < before || e.Time > hal.MonoNow() || e.Time < last {
			t.Errorf("event %v at %v: not on the monotonic clock between %v and now", e, e.Time, before)
		}
		last = e.Time
		if e.Type == hal.EvKey {
			keys = append(keys, e.Value)
		}
	}
	if len(keys) != 2 || keys[0] != 1 || keys[1] != 0 {
		t.Errorf("key values %v, want down then up", keys)
	}
}

func TestLabSynDroppedResyncs(t *testing.T) {
	dev := keypad(t, "tobe-lab-flood")
	defer evdev.DestroyDevice(dev)
	waitListed(t, "tobe-lab-flood")
	in, err := Open(hal.InputConfig{Name: "tobe-lab-flood"})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	// KEY_A goes down, a flood overruns the reader's buffer, KEY_A goes up
	// inside the flood: its release is among what the kernel drops.
	press(t, dev, evdev.KEY_A, 1)
	for i := range 1500 {
		press(t, dev, evdev.BTN_0, int32(i%2))
		if i == 700 {
			press(t, dev, evdev.KEY_A, 0)
		}
	}
	held := map[uint16]bool{}
	for {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		e, err := in.ReadEvent(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == hal.EvKey {
			held[e.Code] = e.Value != 0
		}
	}
	if d := in.(*device); d.resyncs == 0 {
		t.Fatal("no SYN_DROPPED: the flood did not overrun the buffer")
	}
	if held[uint16(evdev.KEY_A)] {
		t.Error("KEY_A is still held after the resync: a phantom key")
	}
	t.Logf("resyncs after the flood: %d", in.(*device).resyncs)
}

func TestLabUnpluggedDeviceEnds(t *testing.T) {
	dev := keypad(t, "tobe-lab-unplug")
	waitListed(t, "tobe-lab-unplug")
	in, err := Open(hal.InputConfig{Name: "tobe-lab-unplug"})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	evdev.DestroyDevice(dev)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	for {
		_, err := in.ReadEvent(ctx)
		if err == nil {
			continue
		}
		if !errors.Is(err, hal.ErrAbsent) {
			t.Errorf("after unplugging: %v, want ErrAbsent", err)
		}
		break
	}
}
