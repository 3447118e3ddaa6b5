//go:build linux

package cli

import (
	"os"

	"golang.org/x/sys/unix"
)

// freeSpace is the space dir's filesystem has free for this user, in
// bytes.
func freeSpace(dir string) (int64, error) {
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		return 0, &os.PathError{Op: "statfs", Path: dir, Err: err}
	}
	return int64(fs.Bavail) * int64(fs.Bsize), nil
}
