//go:build linux

package input

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/hal"
)

// A directory of plain files stands in for /dev/input: inotify sees the
// same creations and removals, and describe reads a file's content as the
// device's name ("" means not yet openable, like a node udev has not yet
// given its permissions).
func fakeDescribe(path string) (hal.InputInfo, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return hal.InputInfo{}, err
	}
	if len(b) == 0 {
		return hal.InputInfo{}, os.ErrPermission
	}
	return hal.InputInfo{Name: strings.TrimSpace(string(b)), Path: path}, nil
}

func next(t *testing.T, w *Watcher) hal.InputChange {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	c, err := w.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// none asserts nothing is pending: every filesystem change the test made
// is already in the inotify queue, so a Next with a done context that
// finds nothing means nothing is coming.
func none(t *testing.T, w *Watcher) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if c, err := w.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("unexpected change %v %v", c, err)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestWatcherHotplug(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "input")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "event0"), "keypad")
	write(t, filepath.Join(dir, "mouse0"), "not an evdev node")
	w, err := watch(dir, fakeDescribe)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	want := func(added bool, name string) {
		t.Helper()
		if c := next(t, w); c.Added != added || c.Info.Name != name {
			t.Fatalf("got %v, want added=%v %q", c, added, name)
		}
	}
	// What is there at the start comes first, as additions.
	want(true, "keypad")
	none(t, w)

	// Plugged.
	write(t, filepath.Join(dir, "event1"), "gamepad")
	want(true, "gamepad")
	// A node not yet openable is retried when its attributes change.
	write(t, filepath.Join(dir, "event2"), "")
	none(t, w)
	write(t, filepath.Join(dir, "event2"), "keyboard")
	if err := os.Chmod(filepath.Join(dir, "event2"), 0o640); err != nil {
		t.Fatal(err)
	}
	want(true, "keyboard")
	// Other nodes are not devices of ours.
	write(t, filepath.Join(dir, "js0"), "joystick")
	none(t, w)

	// Unplugged: the removal carries what was known.
	if err := os.Remove(filepath.Join(dir, "event1")); err != nil {
		t.Fatal(err)
	}
	want(false, "gamepad")

	// devtmpfs removes the directory with its last device...
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for range 2 {
		c := next(t, w)
		if c.Added {
			t.Fatalf("got %v, want removals", c)
		}
		got[c.Info.Name] = true
	}
	if !got["keypad"] || !got["keyboard"] {
		t.Fatalf("removed %v, want keypad and keyboard", got)
	}
	none(t, w)
	// ...and makes it again with the next one.
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "event7"), "button box")
	want(true, "button box")
	none(t, w)
}

func TestWatcherWithoutDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "input")
	w, err := watch(dir, fakeDescribe)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	none(t, w)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "event0"), "first")
	if c := next(t, w); !c.Added || c.Info.Name != "first" {
		t.Fatalf("got %v", c)
	}
}

func TestWatcherCloseWakesNext(t *testing.T) {
	w, err := watch(t.TempDir(), fakeDescribe)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := w.Next(context.Background())
		done <- err
	}()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, hal.ErrClosed) {
		t.Fatalf("Next after Close: %v, want ErrClosed", err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
