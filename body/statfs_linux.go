//go:build linux

package body

import (
	"os"

	"golang.org/x/sys/unix"
)

type unixStatfs struct{ total, avail uint64 }

// statfs reads the size and the space available to unprivileged users
// of the filesystem holding path.
func statfs(path string, out *unixStatfs) error {
	var fs unix.Statfs_t
	if err := unix.Statfs(path, &fs); err != nil {
		return os.NewSyscallError("statfs", err)
	}
	out.total = fs.Blocks * uint64(fs.Bsize)
	out.avail = fs.Bavail * uint64(fs.Bsize)
	return nil
}
