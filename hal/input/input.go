//go:build linux

// Package input reads Linux input devices through evdev: it lists them
// with their capabilities (github.com/holoplot/go-evdev), opens one by
// name or path, and reads its events with the kernel's monotonic
// timestamps (EVIOCSCLOCKID) from a descriptor of its own that Halt and a
// context can interrupt. When the kernel's buffer overflowed
// (SYN_DROPPED), it drops events up to the next SYN_REPORT and resyncs
// the key state from the device, the way libevdev does, so no key is left
// held that was released meanwhile. Grab asks for exclusive access.
package input

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
	"unsafe"

	"github.com/holoplot/go-evdev"
	"golang.org/x/sys/unix"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/internal/uapi"
)

// List returns the input devices this process can open, each opened once.
func List() ([]hal.InputInfo, error) {
	paths, err := filepath.Glob("/dev/input/event*")
	if err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	var out []hal.InputInfo
	for _, p := range paths {
		if info, err := describe(p); err == nil {
			out = append(out, info)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func describe(path string) (hal.InputInfo, error) {
	d, err := evdev.OpenWithFlags(path, os.O_RDONLY)
	if err != nil {
		return hal.InputInfo{}, err
	}
	defer d.Close()
	info := hal.InputInfo{Path: path}
	info.Name, _ = d.Name()
	info.Phys, _ = d.PhysicalLocation()
	if id, err := d.InputID(); err == nil {
		info.Bus, info.Vendor, info.Product = id.BusType, id.Vendor, id.Product
	}
	for _, c := range d.CapableEvents(evdev.EV_KEY) {
		info.Keys = append(info.Keys, uint16(c))
	}
	return info, nil
}

// Open opens the device cfg names (by Path, else by Name).
func Open(cfg hal.InputConfig) (hal.InputDevice, error) {
	var info hal.InputInfo
	if cfg.Path != "" {
		var err error
		info, err = describe(cfg.Path)
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("input: %s: %w", cfg.Path, hal.ErrAbsent)
		}
		if err != nil {
			return nil, fmt.Errorf("input: %s: %w", cfg.Path, err)
		}
	} else {
		devs, err := List()
		if err != nil {
			return nil, err
		}
		var names []string
		for _, d := range devs {
			names = append(names, d.Name)
			if d.Name == cfg.Name {
				info = d
				break
			}
		}
		if info.Path == "" {
			return nil, fmt.Errorf("input: no device named %q (present: %q): %w", cfg.Name, names, hal.ErrAbsent)
		}
	}
	path := info.Path
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	clock := int32(unix.CLOCK_MONOTONIC)
	if err := uapi.FileIoctl(f, uapi.EVIOCSClockID, unsafe.Pointer(&clock)); err != nil {
		f.Close()
		return nil, fmt.Errorf("input: %s: %w", path, os.NewSyscallError("ioctl EVIOCSCLOCKID", err))
	}
	if cfg.Grab {
		// EVIOCGRAB grabs for any argument but 0 (evdev reads it as a
		// flag, never through it).
		one := int32(1)
		if err := uapi.FileIoctl(f, uapi.EVIOCGrab, unsafe.Pointer(&one)); err != nil {
			f.Close()
			if errors.Is(err, unix.EBUSY) {
				return nil, fmt.Errorf("input: %s: another process has grabbed it: %w", path, hal.ErrBusy)
			}
			return nil, fmt.Errorf("input: %s: grab: %w", path, os.NewSyscallError("ioctl EVIOCGRAB", err))
		}
	}
	return &device{info: info, f: f, keys: map[uint16]bool{}}, nil
}

type device struct {
	info hal.InputInfo
	f    *os.File

	dl     sync.Mutex // guards halted and the read deadline
	halted bool

	mu   sync.Mutex // one reader at a time; guards below
	buf  [64 * uapi.InputEventSize]byte
	q    []hal.InputEvent
	keys map[uint16]bool // keys held, as the reader has been told
	drop bool            // between SYN_DROPPED and the next SYN_REPORT
	// Resyncs counts SYN_DROPPED recoveries.
	resyncs int
}

func (d *device) Info() hal.InputInfo { return d.info }

func (d *device) Halt() error {
	d.dl.Lock()
	d.halted = true
	d.f.SetReadDeadline(time.Unix(1, 0))
	d.dl.Unlock()
	return nil
}

// arm sets the next read's deadline: in the past when halted or ctx is
// done, else none, so that the deadline a context's end set to wake an
// earlier read does not cut the next one short. It says whether the
// device is halted.
func (d *device) arm(ctx context.Context) bool {
	d.dl.Lock()
	defer d.dl.Unlock()
	if d.halted || ctx.Err() != nil {
		d.f.SetReadDeadline(time.Unix(1, 0))
	} else {
		d.f.SetReadDeadline(time.Time{})
	}
	return d.halted
}

// wake interrupts the read in progress.
func (d *device) wake() {
	d.dl.Lock()
	d.f.SetReadDeadline(time.Unix(1, 0))
	d.dl.Unlock()
}

func (d *device) Close() error {
	d.Halt()
	return d.f.Close()
}

// ReadEvent returns the next event; see the package doc for SYN_DROPPED.
func (d *device) ReadEvent(ctx context.Context) (hal.InputEvent, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for len(d.q) == 0 {
		halted := d.arm(ctx)
		stop := context.AfterFunc(ctx, d.wake)
		n, err := d.f.Read(d.buf[:])
		stop()
		switch {
		case err != nil && ctx.Err() != nil:
			return hal.InputEvent{}, ctx.Err()
		case errors.Is(err, os.ErrDeadlineExceeded) && !halted:
			continue // woken for an earlier context, after arm: read again
		case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, os.ErrClosed):
			return hal.InputEvent{}, hal.ErrHalted
		case errors.Is(err, unix.ENODEV):
			return hal.InputEvent{}, fmt.Errorf("input: %s went away: %w", d.info.Path, hal.ErrAbsent)
		case err != nil:
			return hal.InputEvent{}, fmt.Errorf("input: %s: %w", d.info.Path, err)
		}
		for off := 0; off+uapi.InputEventSize <= n; off += uapi.InputEventSize {
			d.take(d.buf[off : off+uapi.InputEventSize])
		}
	}
	e := d.q[0]
	d.q = d.q[1:]
	return e, nil
}

// take queues one raw event, handling SYN_DROPPED.
func (d *device) take(b []byte) {
	r := uapi.DecodeInputEvent(b)
	e := hal.InputEvent{Time: hal.Mono(time.Duration(r.Time.Sec)*time.Second + time.Duration(r.Time.Usec)*time.Microsecond), Type: r.Type, Code: r.Code, Value: r.Value}
	switch {
	case e.Type == hal.EvSyn && e.Code == hal.SynDropped:
		d.drop = true
		return
	case d.drop && e.Type == hal.EvSyn && e.Code == hal.SynReport:
		d.drop = false
		d.resync(e.Time)
		return
	case d.drop:
		return
	}
	if e.Type == hal.EvKey && e.Value != 2 {
		d.keys[e.Code] = e.Value == 1
	}
	d.q = append(d.q, e)
}

// resync reads the device's key state and queues the changes the dropped
// events would have told, then a SYN_REPORT.
func (d *device) resync(t hal.Mono) {
	d.resyncs++
	dev, err := evdev.OpenWithFlags(d.info.Path, os.O_RDONLY)
	if err != nil {
		return
	}
	defer dev.Close()
	state, err := dev.State(evdev.EV_KEY)
	if err != nil {
		return
	}
	changed := false
	seen := map[uint16]bool{}
	for code, down := range state {
		c := uint16(code)
		seen[c] = true
		if d.keys[c] != down {
			d.keys[c] = down
			v := int32(0)
			if down {
				v = 1
			}
			d.q = append(d.q, hal.InputEvent{Time: t, Type: hal.EvKey, Code: c, Value: v})
			changed = true
		}
	}
	for c, down := range d.keys {
		if down && !seen[c] {
			d.keys[c] = false
			d.q = append(d.q, hal.InputEvent{Time: t, Type: hal.EvKey, Code: c, Value: 0})
			changed = true
		}
	}
	if changed {
		d.q = append(d.q, hal.InputEvent{Time: t, Type: hal.EvSyn, Code: hal.SynReport})
	}
}

var _ hal.InputDevice = (*device)(nil)
