package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteThenRun(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if err := run(t.Context(), []string{"write", dir, "-frames", "40"}, &out); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "clip.yuyv")); err != nil || fi.Size() != 40*640*480*2 {
		t.Fatalf("clip.yuyv: %v, %v; want 40 frames of 640x480 YUYV", fi, err)
	}
	if err := run(t.Context(), []string{"run", dir, "-passes", "1"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "go      40 frames x 1 passes:") || !strings.Contains(out.String(), "frames/s cpu") {
		t.Errorf("printed %q", out.String())
	}
	res, err := os.ReadFile(filepath.Join(dir, "go.txt"))
	if err != nil {
		t.Fatal(err)
	}
	// The bright object enters at 1 s (frame 30) and starts motion in the
	// left zone a few frames later.
	if got := strings.Count(string(res), "\nf "); got != 39 {
		t.Errorf("go.txt has %d frame lines after the first, want 39", got)
	}
	if !strings.Contains(string(res), "started left") {
		t.Errorf("go.txt has no start in the left zone:\n%s", res)
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"write"}, {"draw", "dir"}, {"write", t.TempDir(), "-frames", "0"}, {"run", t.TempDir()}} {
		if err := run(t.Context(), args, &bytes.Buffer{}); err == nil {
			t.Errorf("%q: got nil, want an error", args)
		}
	}
}
