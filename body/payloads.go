package body

// LineChanged is the payload of gpio.changed, which the sense channel
// of a GPIO input writes and the people's takeover reads.
type LineChanged struct {
	Line   string `cbor:"line" json:"line"`
	Level  string `cbor:"level" json:"level"` // "high" or "low"
	Edge   string `cbor:"edge" json:"edge"`   // "rising" or "falling"
	Active bool   `cbor:"active" json:"active"`
	// Reconciled marks a change no edge event told of (found by the
	// driver's periodic read); its time is when it was found.
	Reconciled bool `cbor:"reconciled,omitempty" json:"reconciled,omitempty"`
	// Lost counts edges lost before this one (a gap in the driver's
	// sequence).
	Lost uint64 `cbor:"lost,omitempty" json:"lost,omitempty"`
}

// KeyPress is the payload of input.pressed and input.released, which the
// sense channel of an input device with the control role writes and the
// people's takeover reads.
type KeyPress struct {
	Device string `cbor:"device" json:"device"`
	Key    string `cbor:"key" json:"key"`
}
