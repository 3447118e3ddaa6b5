//go:build linux

package main

import "golang.org/x/sys/unix"

func mkfifo(path string) error { return unix.Mkfifo(path, 0o644) }

func umask(mask int) int { return unix.Umask(mask) }
