package main

import (
	"context"
	"errors"
	"sync"

	"github.com/tobe-body/tobe-body/hal"
)

// hotplug is an input channel that takes every device as it comes (a
// profile input with "match": "*"): each device is opened when it is
// plugged and read for activity only, never for which keys; devices the
// profile names elsewhere are left to their own channels.
type hotplug struct {
	id   string
	w    hal.InputWatcher
	open func(hal.InputConfig) (hal.InputDevice, error)
	skip map[string]bool // paths of devices opened by name

	mu     sync.Mutex
	devs   map[string]hal.InputDevice // by path
	halted bool
}

// add opens a plugged device; nil when it is skipped, fails, or the
// channel is halted.
func (h *hotplug) add(info hal.InputInfo) (hal.InputDevice, error) {
	if h.skip[info.Path] {
		return nil, nil
	}
	dev, err := h.open(hal.InputConfig{Path: info.Path})
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.halted {
		dev.Close()
		return nil, nil
	}
	if old := h.devs[info.Path]; old != nil {
		old.Close() // a node reused before its removal was seen
	}
	h.devs[info.Path] = dev
	return dev, nil
}

// gone forgets a device that was unplugged or ended.
func (h *hotplug) gone(path string, dev hal.InputDevice) {
	h.mu.Lock()
	if dev == nil || h.devs[path] == dev {
		dev = h.devs[path]
		delete(h.devs, path)
	} else {
		dev = nil // already replaced or forgotten
	}
	h.mu.Unlock()
	if dev != nil {
		dev.Close()
	}
}

func (h *hotplug) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.devs)
}

// halt stops the watcher and every device's reader.
func (h *hotplug) halt() {
	h.mu.Lock()
	h.halted = true
	for _, d := range h.devs {
		d.Halt()
	}
	h.mu.Unlock()
	h.w.Close()
}

// close releases every device.
func (h *hotplug) close() {
	h.halt()
	h.mu.Lock()
	devs := h.devs
	h.devs = map[string]hal.InputDevice{}
	h.mu.Unlock()
	for _, d := range devs {
		d.Close()
	}
}

// readHotplug follows the watcher: each device plugged gets a reader that
// counts its events; an unplugged one is closed. It ends with ctx, or
// when the channel is halted.
func (m *monitor) readHotplug(ctx context.Context, h *hotplug) error {
	for {
		c, err := h.w.Next(ctx)
		if errors.Is(err, hal.ErrClosed) {
			return hal.ErrHalted
		}
		if err != nil {
			return err
		}
		if !c.Added {
			h.gone(c.Info.Path, nil)
			m.log.Info("input device unplugged", "channel", h.id, "path", c.Info.Path)
			continue
		}
		dev, err := h.add(c.Info)
		if err != nil {
			m.log.Warn("input device not opened", "channel", h.id, "path", c.Info.Path, "err", err)
			continue
		}
		if dev == nil {
			continue
		}
		m.log.Info("input device plugged", "channel", h.id, "path", c.Info.Path)
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			for {
				ev, err := dev.ReadEvent(ctx)
				if err != nil {
					if !errors.Is(err, hal.ErrHalted) && ctx.Err() == nil {
						h.gone(c.Info.Path, dev)
					}
					return
				}
				if ev.Type == hal.EvKey || ev.Type == hal.EvRel || ev.Type == hal.EvAbs {
					m.mu.Lock()
					m.activity[h.id]++
					m.mu.Unlock()
				}
			}
		}()
	}
}
