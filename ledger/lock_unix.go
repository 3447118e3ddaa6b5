//go:build unix

package ledger

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// lockShared takes a shared lock on f, as bbolt's readers do, waiting up
// to timeout while a writer (bbolt's exclusive lock) holds the file.
// Closing f releases it.
func lockShared(f *os.File, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case !errors.Is(err, syscall.EWOULDBLOCK):
			return fmt.Errorf("ledger: locking %s: %w", f.Name(), os.NewSyscallError("flock", err))
		case time.Now().After(deadline):
			return fmt.Errorf("ledger: %s is %w (is tobe-body running?)", f.Name(), errLocked)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
