//go:build !unix

package silero

import "time"

// cpuTime is not measured here.
func cpuTime() (time.Duration, bool) { return 0, false }
