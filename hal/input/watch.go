//go:build linux

package input

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tobe-body/tobe-body/hal"
)

// Dir is where the kernel (devtmpfs) makes evdev device nodes.
const Dir = "/dev/input"

// eventNode matches the evdev nodes in Dir; joysticks (jsN) and mice
// (mouseN) are older interfaces to the same devices.
var eventNode = regexp.MustCompile(`^event[0-9]+$`)

// Watcher reports evdev devices as they are plugged and unplugged, from
// inotify on /dev/input, with no udev needed: devtmpfs makes and removes
// the nodes itself. A node udev has not yet given its permissions is
// retried when its attributes change. devtmpfs removes /dev/input with
// its last device, so the watcher also watches /dev for the directory to
// come back, and reports every device it knew as removed when it goes.
type Watcher struct {
	dir      string
	fd       int // the inotify descriptor, also owned by f
	f        *os.File
	describe func(path string) (hal.InputInfo, error)

	dl     sync.Mutex // orders Close and a done context against Next's reads
	closed bool

	mu       sync.Mutex // one Next at a time; guards below
	wdParent int
	wdDir    int // -1 while the directory is absent
	known    map[string]hal.InputInfo
	pending  []hal.InputChange
	buf      [4096]byte
}

const (
	parentMask = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_ONLYDIR
	dirMask    = unix.IN_CREATE | unix.IN_DELETE | unix.IN_ATTRIB | unix.IN_MOVED_TO |
		unix.IN_MOVED_FROM | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR
)

// Watch reports the input devices of this machine as they come and go.
func Watch() (hal.InputWatcher, error) { return watch(Dir, describe) }

func watch(dir string, describe func(string) (hal.InputInfo, error)) (*Watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("input: watch %s: %w", dir, os.NewSyscallError("inotify_init1", err))
	}
	w := &Watcher{dir: dir, fd: fd, f: os.NewFile(uintptr(fd), "inotify:"+dir), describe: describe,
		wdDir: -1, known: map[string]hal.InputInfo{}}
	parent := filepath.Dir(dir)
	if w.wdParent, err = unix.InotifyAddWatch(fd, parent, parentMask); err != nil {
		w.f.Close()
		return nil, fmt.Errorf("input: watch %s: %w", parent, os.NewSyscallError("inotify_add_watch", err))
	}
	if err := w.rewatch(); err != nil {
		w.f.Close()
		return nil, err
	}
	return w, nil
}

// rewatch watches the directory if it exists and reconciles what is known
// with what is there.
func (w *Watcher) rewatch() error {
	if w.wdDir < 0 {
		wd, err := unix.InotifyAddWatch(w.fd, w.dir, dirMask)
		switch {
		case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR):
			// Not there (no input device at all): wait for it in the parent.
		case err != nil:
			return fmt.Errorf("input: watch %s: %w", w.dir, os.NewSyscallError("inotify_add_watch", err))
		default:
			w.wdDir = wd
		}
	}
	w.scan()
	return nil
}

// scan compares the directory with what is known: devices not known are
// added, known ones gone are removed.
func (w *Watcher) scan() {
	there := map[string]bool{}
	if w.wdDir >= 0 {
		ents, _ := os.ReadDir(w.dir)
		for _, e := range ents {
			if eventNode.MatchString(e.Name()) {
				there[filepath.Join(w.dir, e.Name())] = true
			}
		}
	}
	var gone []string
	for p := range w.known {
		if !there[p] {
			gone = append(gone, p)
		}
	}
	sort.Strings(gone)
	for _, p := range gone {
		w.remove(p)
	}
	var paths []string
	for p := range there {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		w.add(p)
	}
}

// add reports path once it can be opened; a node that cannot yet (udev
// has not set its permissions) is tried again when its attributes change.
func (w *Watcher) add(path string) {
	if _, ok := w.known[path]; ok {
		return
	}
	info, err := w.describe(path)
	if err != nil {
		return
	}
	w.known[path] = info
	w.pending = append(w.pending, hal.InputChange{Added: true, Info: info})
}

func (w *Watcher) remove(path string) {
	info, ok := w.known[path]
	if !ok {
		return
	}
	delete(w.known, path)
	w.pending = append(w.pending, hal.InputChange{Info: info})
}

// Next returns the next change.
func (w *Watcher) Next(ctx context.Context) (hal.InputChange, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.pending) == 0 {
		// What the kernel has queued is taken first, even when ctx is
		// done already; only then does Next wait.
		if n, err := w.readNow(); err != nil {
			return hal.InputChange{}, err
		} else if n > 0 {
			if err := w.handle(w.buf[:n]); err != nil {
				return hal.InputChange{}, err
			}
			continue
		}
		w.dl.Lock()
		if w.closed || ctx.Err() != nil {
			w.f.SetReadDeadline(time.Unix(1, 0))
		} else {
			w.f.SetReadDeadline(time.Time{})
		}
		w.dl.Unlock()
		stop := context.AfterFunc(ctx, w.wake)
		n, err := w.f.Read(w.buf[:])
		stop()
		switch {
		case err == nil:
			if err := w.handle(w.buf[:n]); err != nil {
				return hal.InputChange{}, err
			}
		case ctx.Err() != nil:
			return hal.InputChange{}, ctx.Err()
		case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, os.ErrClosed):
			return hal.InputChange{}, fmt.Errorf("input: watch %s: %w", w.dir, hal.ErrClosed)
		default:
			return hal.InputChange{}, fmt.Errorf("input: watch %s: %w", w.dir, err)
		}
	}
	c := w.pending[0]
	w.pending = w.pending[1:]
	return c, nil
}

// readNow reads what is queued without waiting (the descriptor is
// non-blocking; Control, unlike Read, ignores deadlines).
func (w *Watcher) readNow() (int, error) {
	rc, err := w.f.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("input: watch %s: %w", w.dir, hal.ErrClosed)
	}
	var n int
	var rerr error
	if err := rc.Control(func(fd uintptr) { n, rerr = unix.Read(int(fd), w.buf[:]) }); err != nil {
		return 0, fmt.Errorf("input: watch %s: %w", w.dir, hal.ErrClosed)
	}
	if rerr != nil && !errors.Is(rerr, unix.EAGAIN) {
		return 0, fmt.Errorf("input: watch %s: %w", w.dir, os.NewSyscallError("read", rerr))
	}
	return max(n, 0), nil
}

func (w *Watcher) wake() {
	w.dl.Lock()
	w.f.SetReadDeadline(time.Unix(1, 0))
	w.dl.Unlock()
}

// handle applies a buffer of struct inotify_event.
func (w *Watcher) handle(b []byte) error {
	const head = unix.SizeofInotifyEvent
	for len(b) >= head {
		wd := int(int32(binary.NativeEndian.Uint32(b[0:])))
		mask := binary.NativeEndian.Uint32(b[4:])
		n := int(binary.NativeEndian.Uint32(b[12:]))
		if head+n > len(b) {
			return fmt.Errorf("input: watch %s: a truncated inotify event", w.dir)
		}
		name := string(bytes.TrimRight(b[head:head+n], "\x00"))
		b = b[head+n:]
		switch {
		case mask&unix.IN_Q_OVERFLOW != 0:
			// Events were lost: look again.
			if err := w.rewatch(); err != nil {
				return err
			}
		case wd == w.wdParent:
			if name == filepath.Base(w.dir) && mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 {
				if err := w.rewatch(); err != nil {
					return err
				}
			}
		case wd == w.wdDir:
			switch {
			case mask&(unix.IN_IGNORED|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0:
				// The directory went away with its devices; it may be back
				// already.
				if mask&unix.IN_IGNORED == 0 {
					unix.InotifyRmWatch(w.fd, uint32(w.wdDir))
				}
				w.wdDir = -1
				if err := w.rewatch(); err != nil {
					return err
				}
			case !eventNode.MatchString(name):
			case mask&(unix.IN_DELETE|unix.IN_MOVED_FROM) != 0:
				w.remove(filepath.Join(w.dir, name))
			default:
				w.add(filepath.Join(w.dir, name))
			}
		}
	}
	return nil
}

// Close ends the watcher; a waiting Next returns hal.ErrClosed.
func (w *Watcher) Close() error {
	w.dl.Lock()
	if w.closed {
		w.dl.Unlock()
		return nil
	}
	w.closed = true
	w.f.SetReadDeadline(time.Unix(1, 0))
	w.dl.Unlock()
	w.mu.Lock() // wait for a Next in progress to see it
	defer w.mu.Unlock()
	return w.f.Close()
}

var _ hal.InputWatcher = (*Watcher)(nil)
