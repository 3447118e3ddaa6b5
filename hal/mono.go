package hal

import "time"

// processStart anchors the fallback clock: Go's own monotonic reading.
var processStart = time.Now()

// monoFallback counts from process start on platforms without
// CLOCK_MONOTONIC. Its values are monotonic but not since boot.
func monoFallback() Mono { return Mono(time.Since(processStart)) }
