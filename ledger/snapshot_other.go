//go:build !linux

package ledger

import (
	"fmt"
	"os"
	"runtime"
)

const oNoFollow = 0

// freeSpace is not known here: a snapshot is refused rather than taken
// blind.
var freeSpace = func(dir string) (int64, error) {
	return 0, fmt.Errorf("free space is not known on %s", runtime.GOOS)
}

// openTmpfile: there is no O_TMPFILE here.
func openTmpfile(string) (*os.File, error) { return nil, errNoTmpfile }
