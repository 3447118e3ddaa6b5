//go:build !portaudio || !linux

package audio

import (
	"errors"
	"strings"
	"testing"

	"github.com/tobe-body/tobe-body/hal"
)

func TestNotBuiltSaysSo(t *testing.T) {
	if Built {
		t.Fatal("Built in a build without PortAudio")
	}
	_, cerr := OpenCapture(hal.AudioConfig{Device: "Loopback,1"})
	_, perr := OpenPlayback(hal.AudioConfig{Device: "default"})
	for _, err := range []error{cerr, perr} {
		if !errors.Is(err, hal.ErrUnsupported) || !strings.Contains(err.Error(), "built without PortAudio") {
			t.Errorf("got %v, want ErrUnsupported saying the binary was built without PortAudio", err)
		}
	}
	if !strings.Contains(cerr.Error(), `capture "Loopback,1"`) || !strings.Contains(perr.Error(), `playback "default"`) {
		t.Errorf("errors do not name the device: %v; %v", cerr, perr)
	}
	if v := Version(); !strings.HasPrefix(v, "not built (") {
		t.Errorf("Version %q", v)
	}
	old := missing
	defer func() { missing = old }()
	missing = "portaudio-2.0"
	if v := Version(); !strings.Contains(v, "pkg-config portaudio-2.0") && !strings.Contains(v, "for Linux") {
		t.Errorf("Version with the Makefile's note: %q", v)
	}
}
