package sense

import (
	"testing"

	"github.com/tobe-body/tobe-body/ledger"
)

func TestEventLine(t *testing.T) {
	e := ledger.EventView{Type: "gpio.changed", ChannelID: "gpio.button", Payload: map[string]any{"line": "BUTTON", "level": "high", "edge": "rising", "active": true}}
	if got, want := eventLine(e), "gpio.changed           gpio.button      active=true edge=rising level=high line=BUTTON"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}
