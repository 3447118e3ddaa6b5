//go:build !linux

package main

import (
	"errors"
	"net"
	"runtime"
)

var errConnRefused = errors.New("connection refused")

func lockData(dir string) (func(), error) {
	return nil, errors.New("tobe-body runs on Linux; this is " + runtime.GOOS)
}

func sdNotify(string) error { return nil }

func peerCred(net.Conn) (uid, gid int) { return -1, -1 }
