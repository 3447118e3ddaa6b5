//go:build linux

package hal

import "golang.org/x/sys/unix"

// MonoNow reads CLOCK_MONOTONIC.
func MonoNow() Mono {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		// CLOCK_MONOTONIC cannot fail on Linux; keep a monotonic answer anyway.
		return monoFallback()
	}
	return Mono(ts.Nano())
}
