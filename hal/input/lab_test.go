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

// waitListed waits, through the hotplug watcher, until the kernel has
// made the device's node.
func waitListed(t *testing.T, name string) hal.InputInfo {
	t.Helper()
	w, err := Watch()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	for {
		c, err := w.Next(ctx)
		if err != nil {
			t.Fatalf("%s never appeared: %v", name, err)
		}
		if c.Added && c.Info.Name == name {
			return c.Info
		}
	}
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

// TestLabHotplug plugs and unplugs a uinput device under a running
// watcher, and checks grab on the way.
func TestLabHotplug(t *testing.T) {
	w, err := Watch()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	present := map[string]string{}
	next := func() hal.InputChange {
		t.Helper()
		c, err := w.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if c.Added {
			present[c.Info.Path] = c.Info.Name
		} else {
			delete(present, c.Info.Path)
		}
		return c
	}

	start := hal.MonoNow()
	dev := keypad(t, "tobe-lab-hotplug")
	var added hal.InputChange
	for added.Info.Name != "tobe-lab-hotplug" {
		added = next()
	}
	t.Logf("plugged -> reported in %v: %v", hal.MonoNow().Sub(start), added)
	if !added.Added || len(added.Info.Keys) != 2 {
		t.Fatalf("got %v with keys %v, want an addition with BTN_0 and KEY_A", added, added.Info.Keys)
	}

	// The body's grab takes the device from everyone else.
	grabbed, err := Open(hal.InputConfig{Path: added.Info.Path, Grab: true})
	if err != nil {
		t.Fatal(err)
	}
	defer grabbed.Close()
	if _, err := Open(hal.InputConfig{Path: added.Info.Path, Grab: true}); !errors.Is(err, hal.ErrBusy) {
		t.Errorf("a second grab: %v, want ErrBusy", err)
	}
	other, err := Open(hal.InputConfig{Path: added.Info.Path})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	press(t, dev, evdev.BTN_0, 1)
	if e, err := grabbed.ReadEvent(ctx); err != nil || e.Type != hal.EvKey || e.Value != 1 {
		t.Fatalf("grabbing reader: %v %v, want BTN_0 down", e, err)
	}
	// The kernel delivers to the grabber alone; a second reader sees
	// nothing. (A negative, so bounded by time.)
	quiet, cancelQ := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancelQ()
	if e, err := other.ReadEvent(quiet); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a reader beside the grab got %v %v", e, err)
	}

	start = hal.MonoNow()
	evdev.DestroyDevice(dev)
	var removed hal.InputChange
	for removed.Added || removed.Info.Path != added.Info.Path {
		removed = next()
	}
	t.Logf("unplugged -> reported in %v: %v", hal.MonoNow().Sub(start), removed)
	if removed.Info.Name != "tobe-lab-hotplug" {
		t.Errorf("removal %v does not carry the device's name", removed)
	}
	// An open reader ends with ErrAbsent and closes cleanly.
	for {
		_, err := grabbed.ReadEvent(ctx)
		if err == nil {
			continue
		}
		if !errors.Is(err, hal.ErrAbsent) {
			t.Errorf("reader after unplug: %v, want ErrAbsent", err)
		}
		break
	}
	if err := grabbed.Close(); err != nil {
		t.Errorf("close after unplug: %v", err)
	}
	if _, ok := present[added.Info.Path]; ok {
		t.Errorf("the watcher still lists %s", added.Info.Path)
	}
}
