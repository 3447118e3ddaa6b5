//go:build !linux

package main

import (
	"errors"
	"runtime"
)

func lockData(dir string) (func(), error) {
	return nil, errors.New("tobe-body runs on Linux; this is " + runtime.GOOS)
}

func sdNotify(string) error { return nil }

func checkDataDir(string) error {
	return errors.New("tobe-body runs on Linux; this is " + runtime.GOOS)
}
