//go:build unix

package voicetest

import (
	"syscall"
	"time"
)

// CPUTime is the CPU time the process has used, user and system, for
// the benchmarks' CPU per second of audio; false where it is not known.
func CPUTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
