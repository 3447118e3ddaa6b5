//go:build linux && !cgo

package gpio

import (
	"fmt"
	"os"

	"github.com/tobe-body/tobe-body/hal"
)

// tripwire needs cgo: its thread must run no Go code. Without cgo no line
// is ever armed, and the e-stop halts the outputs from its goroutine.
type tripwire struct{ r *os.File }

func (t *tripwire) read(*lineIn) error { return hal.ErrUnsupported }
func (t *tripwire) stop()              {}

// ArmTrip is not available in a build without cgo.
func (in *lineIn) ArmTrip(hal.Level, []hal.LineOut) ([]hal.LineOut, error) {
	return nil, fmt.Errorf("gpio: line %s: a tripwire needs a build with cgo: %w", in.name, hal.ErrUnsupported)
}

// TripThread says there is none.
func (in *lineIn) TripThread() string { return "none: built without cgo" }
