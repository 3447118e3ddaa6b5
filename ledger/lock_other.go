//go:build !unix

package ledger

import (
	"os"
	"time"
)

// lockShared takes no lock where there is no flock: the check before
// bbolt's own lock then reads the file unguarded.
func lockShared(*os.File, time.Duration) error { return nil }
