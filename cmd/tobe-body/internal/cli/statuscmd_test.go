package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/body"
)

// status says whether the clock is synchronised, and what waits for it.
func TestStatusSaysWhetherTheClockIsSynchronised(t *testing.T) {
	for _, tc := range []struct {
		sync body.ClockSync
		want string
	}{
		{body.ClockSync{Synced: true, MaxError: 5 * time.Millisecond}, "synchronised (the kernel's maximum error 5ms)"},
		{body.ClockSync{MaxError: 16 * time.Second}, "NOT synchronised: the wall clock may be off by any amount; requests at act.safety.unsynced_clock_refuse_from"},
	} {
		if got := clockLine(tc.sync); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%+v: %q, want it to start %q", tc.sync, got, tc.want)
		}
	}
}
