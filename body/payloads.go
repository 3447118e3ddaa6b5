package body

// LineChanged is the payload of gpio.changed, which the sense channel
// of a GPIO input writes and the people's takeover reads, and of
// gpio.level, the level the channel read at start (no Edge: nothing
// changed; the takeover does not read it).
type LineChanged struct {
	Line  string `cbor:"line" json:"line"`
	Level string `cbor:"level" json:"level"` // "high" or "low"
	// Edge is "rising" or "falling"; empty (and left out) in gpio.level.
	Edge   string `cbor:"edge,omitempty" json:"edge,omitempty"`
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

// ClockStepped is the payload of body.clock_stepped, which the daemon
// writes for each setting of the wall clock it noticed (Clock.Run).
type ClockStepped struct {
	// SizeNS is how far the wall clock moved against the monotonic clock,
	// in nanoseconds (forward when positive); Size the same as text.
	SizeNS int64  `cbor:"size_ns" json:"size_ns"`
	Size   string `cbor:"size" json:"size"`
	// Before and After are one instant read as UTC before and after it.
	Before string `cbor:"before" json:"before"`
	After  string `cbor:"after" json:"after"`
	// Synced: the kernel counts the clock synchronised after it.
	Synced bool `cbor:"synced" json:"synced"`
	// Noticed: "kernel" (it said the clock was set) or "measure".
	Noticed string `cbor:"noticed" json:"noticed"`
}
