//go:build !linux

package cli

import (
	"fmt"
	"runtime"
)

// freeSpace is not known here.
func freeSpace(string) (int64, error) {
	return 0, fmt.Errorf("free space is not known on %s", runtime.GOOS)
}
