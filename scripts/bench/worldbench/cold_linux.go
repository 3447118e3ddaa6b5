package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// evict drops the file at path from the page cache (what is not mapped
// or dirty), as a reboot would: the next reads come from the disk.
func evict(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return err
	}
	return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}
