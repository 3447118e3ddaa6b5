//go:build !unix

package voicetest

import "time"

// CPUTime is not measured here.
func CPUTime() (time.Duration, bool) { return 0, false }
