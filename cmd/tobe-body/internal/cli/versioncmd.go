package cli

import (
	"fmt"
	"io"
	"runtime"

	"github.com/tobe-body/tobe-body/hal/audio"
)

// Build is what the build says of itself (set with -ldflags -X in
// package main).
type Build struct {
	Version, Commit string
	Board           string // the board an image was built for
	Tags            string // build tags that change behaviour (portaudio, ...)
}

// Version is 'tobe-body version': the build, the Go toolchain and the
// audio library.
func Version(args []string, stdout, stderr io.Writer, b Build) error {
	var c Common
	fs := NewFlagSet("version", stderr, &c, false)
	if _, err := Parse(fs, args, 0); err != nil {
		return err
	}
	tags := b.Tags
	if tags == "" {
		tags = "none (pure Go)"
	}
	fmt.Fprintf(stdout, "tobe-body %s\n", b.Version)
	fmt.Fprintf(stdout, "commit    %s\n", b.Commit)
	fmt.Fprintf(stdout, "board     %s\n", b.Board)
	fmt.Fprintf(stdout, "tags      %s\n", tags)
	fmt.Fprintf(stdout, "go        %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(stdout, "audio     %s\n", audio.Version())
	return nil
}
