//go:build !portaudio || !linux

package audio

import (
	"fmt"
	"runtime"

	"github.com/tobe-body/tobe-body/hal"
)

// Built says whether this binary drives sound devices (built with the
// portaudio tag, on Linux).
const Built = false

// missing is what the build found missing, set by the Makefile with
// -X when pkg-config did not find PortAudio (the module's name).
var missing string

// why says why there is no audio driver in this binary.
func why() string {
	switch {
	case runtime.GOOS != "linux":
		return "this driver is for Linux; this is " + runtime.GOOS
	case missing != "":
		return "no portaudio tag: libportaudio's development files (pkg-config " + missing + ") were missing at build time"
	}
	return "no portaudio tag"
}

// Version says that audio is not built, and why.
func Version() string { return "not built (" + why() + ")" }

// OpenCapture returns an error wrapping hal.ErrUnsupported: this binary
// was built without PortAudio.
func OpenCapture(cfg hal.AudioConfig) (hal.AudioCapture, error) {
	return nil, fmt.Errorf("audio: capture %q: this binary was built without PortAudio (%s): %w", cfg.Device, why(), hal.ErrUnsupported)
}

// OpenPlayback returns an error wrapping hal.ErrUnsupported: this binary
// was built without PortAudio.
func OpenPlayback(cfg hal.AudioConfig) (hal.AudioPlayback, error) {
	return nil, fmt.Errorf("audio: playback %q: this binary was built without PortAudio (%s): %w", cfg.Device, why(), hal.ErrUnsupported)
}
