package sense

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/tobe-body/tobe-body/hal"
)

// Plugged is the payload of input.plugged and input.unplugged.
type Plugged struct {
	Device string `cbor:"device" json:"device"`
	Path   string `cbor:"path" json:"path"`
}

// HotplugChannel takes every input device as it comes (a profile input
// that matches "*"): it says when one is plugged or unplugged, and runs an
// activity channel on each, so keyboards and mice plugged at any time are
// counted, never read. Devices that skip says are someone else's (the
// controls the profile names) are left alone.
type HotplugChannel struct {
	out  *Outlet
	w    hal.InputWatcher
	open func(hal.InputConfig) (hal.InputDevice, error)
	skip func(path string) bool
	cfg  InputConfig

	wg     sync.WaitGroup
	mu     sync.Mutex
	devs   map[string]*reader // by path
	halted bool
}

// reader is a plugged device and its channel; done closes when the
// channel has said all it had to.
type reader struct {
	dev  hal.InputDevice
	done chan struct{}
}

// NewHotplugChannel follows w, opens devices with open, and reads each as
// an activity device with cfg.
func NewHotplugChannel(out *Outlet, w hal.InputWatcher, open func(hal.InputConfig) (hal.InputDevice, error), skip func(string) bool, cfg InputConfig) (*HotplugChannel, error) {
	cfg.Role = Activity
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", out.Source().Channel, err)
	}
	if skip == nil {
		skip = func(string) bool { return false }
	}
	return &HotplugChannel{out: out, w: w, open: open, skip: skip, cfg: cfg, devs: map[string]*reader{}}, nil
}

// Devices counts the devices being read now.
func (h *HotplugChannel) Devices() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.devs)
}

// Halt stops the watcher and every device's reader; Run then returns.
func (h *HotplugChannel) Halt() error {
	h.mu.Lock()
	h.halted = true
	for _, r := range h.devs {
		r.dev.Halt()
	}
	h.mu.Unlock()
	return h.w.Close()
}

// Run follows the watcher until ctx is done or the channel is halted, and
// returns after every device's reader has ended and its device is closed.
func (h *HotplugChannel) Run(ctx context.Context) error {
	defer func() {
		h.Halt()
		h.wg.Wait()
	}()
	for {
		c, err := h.w.Next(ctx)
		switch {
		case err == nil:
		case ctx.Err() != nil, errors.Is(err, hal.ErrClosed):
			return nil
		default:
			return fmt.Errorf("%s: %w", h.out.Source().Channel, err)
		}
		at := hal.MonoNow()
		p := Plugged{Device: c.Info.Name, Path: c.Info.Path}
		if h.skip(c.Info.Path) {
			continue
		}
		if !c.Added {
			// Let the device's reader report what it counted first.
			h.mu.Lock()
			r := h.devs[c.Info.Path]
			h.mu.Unlock()
			if r != nil {
				r.dev.Halt()
				<-r.done
			}
			h.out.Emit("input.unplugged", at, 0, p)
			continue
		}
		dev, err := h.open(hal.InputConfig{Path: c.Info.Path})
		if err != nil {
			// Plugged but not readable (permissions, gone again): say so
			// without the reader.
			h.out.fail(fmt.Errorf("%s: %s: %w", h.out.Source().Channel, c.Info.Path, err))
			h.out.Emit("input.plugged", at, 0, p)
			continue
		}
		r := &reader{dev: dev, done: make(chan struct{})}
		h.mu.Lock()
		if h.halted {
			h.mu.Unlock()
			dev.Close()
			return nil
		}
		old := h.devs[c.Info.Path]
		h.devs[c.Info.Path] = r
		h.mu.Unlock()
		if old != nil { // the node was reused before its removal was seen
			old.dev.Halt()
			<-old.done
		}
		h.out.Emit("input.plugged", at, 0, p)
		ch := &InputChannel{out: h.out, dev: dev, cfg: h.cfg, now: hal.MonoNow}
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			ch.Run(ctx) // ends when the device goes, is halted, or ctx ends
			h.mu.Lock()
			if h.devs[c.Info.Path] == r {
				delete(h.devs, c.Info.Path)
			}
			h.mu.Unlock()
			dev.Close()
			close(r.done)
		}()
	}
}
