//go:build linux

package ledger

import (
	"errors"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

const oNoFollow = unix.O_NOFOLLOW

// freeSpace is the space dir's filesystem has free for unprivileged
// users, in bytes. A variable, so tests can make a disk full.
var freeSpace = func(dir string) (int64, error) {
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		return 0, os.NewSyscallError("statfs", err)
	}
	return int64(fs.Bavail) * int64(fs.Bsize), nil
}

// openTmpfile makes an unnamed file in dir with O_TMPFILE and O_EXCL (it
// can never be given a name), mode 0600. errNoTmpfile: the kernel or the
// filesystem has none (EOPNOTSUPP; EISDIR or EINVAL from kernels before
// it).
func openTmpfile(dir string) (*os.File, error) {
	for {
		fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_EXCL|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
		switch {
		case err == nil:
			return os.NewFile(uintptr(fd), filepath.Join(dir, "(unnamed snapshot)")), nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EISDIR), errors.Is(err, unix.EINVAL):
			return nil, errNoTmpfile
		}
		return nil, &os.PathError{Op: "open O_TMPFILE", Path: dir, Err: err}
	}
}
