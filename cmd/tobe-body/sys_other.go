//go:build !linux

package main

import (
	"errors"
	"io"
	"runtime"
)

func lockData(dir string) (func(), error) {
	return nil, errors.New("tobe-body runs on Linux; this is " + runtime.GOOS)
}

func sdNotify(string) error { return nil }

func checkDataDir(string) error {
	return errors.New("tobe-body runs on Linux; this is " + runtime.GOOS)
}

// isTerminal cannot tell here: the line is printed, as to a terminal.
func isTerminal(io.Writer) bool { return true }
