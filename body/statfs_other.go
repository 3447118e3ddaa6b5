//go:build !linux

package body

import (
	"fmt"
	"runtime"
)

type unixStatfs struct{ total, avail uint64 }

func statfs(path string, out *unixStatfs) error {
	return fmt.Errorf("statfs %s: not on %s", path, runtime.GOOS)
}
