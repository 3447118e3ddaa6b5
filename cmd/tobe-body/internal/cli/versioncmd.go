package main

import (
	"fmt"
	"io"
	"runtime"

	"github.com/tobe-body/tobe-body/hal/audio"
)

func runVersion(args []string, stdout, stderr io.Writer) error {
	var c common
	fs := newFlagSet("version", stderr, &c, false)
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	tags := buildTags
	if tags == "" {
		tags = "none (pure Go)"
	}
	fmt.Fprintf(stdout, "tobe-body %s\n", version)
	fmt.Fprintf(stdout, "commit    %s\n", commit)
	fmt.Fprintf(stdout, "board     %s\n", buildBoard)
	fmt.Fprintf(stdout, "tags      %s\n", tags)
	fmt.Fprintf(stdout, "go        %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(stdout, "audio     %s\n", audio.Version())
	return nil
}
