//go:build !linux

package body

import (
	"time"

	"github.com/google/uuid"

	"github.com/tobe-body/tobe-body/hal"
)

// Off Linux there is no boot id nor adjtimex: the domain is this process
// (hal's fallback monotonic clock counts from its start) and the clock
// is never claimed synchronised.
var processDomain = uuid.NewString()

var systemClock = clockSource{
	mono:   hal.MonoNow,
	utc:    time.Now,
	sync:   func() (ClockSync, error) { return ClockSync{}, nil },
	bootID: func() (string, error) { return processDomain, nil },
}
