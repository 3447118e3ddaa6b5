//go:build lab

package probe

import (
	"errors"
	"strings"
	"testing"

	"github.com/tobe-body/tobe-body/hal"
)

// Against the real kernel drivers of the lab VM (scripts/lab/run.sh).

func TestLabFindsGPIOSimChipAndLines(t *testing.T) {
	f := Finder{Root: "/"}
	path, err := f.Chip("tobe-lab")
	if err != nil {
		t.Fatalf("chip: %v", err)
	}
	for _, name := range []string{"ESTOP", "RESET", "RELAY1"} {
		if err := f.Line(path, name); err != nil {
			t.Errorf("line %s: %v", name, err)
		}
	}
	if err := f.Line(path, "NO_SUCH_LINE"); !errors.Is(err, hal.ErrAbsent) {
		t.Errorf("missing line: %v, want ErrAbsent", err)
	}
	if _, err := f.Chip("pinctrl-rp1"); !errors.Is(err, hal.ErrAbsent) || !strings.Contains(err.Error(), `"tobe-lab"`) {
		t.Errorf("absent chip: %v, want ErrAbsent listing tobe-lab", err)
	}
}

func TestLabFindsVividCamera(t *testing.T) {
	found, err := Finder{Root: "/"}.Camera("", "vivid")
	if err != nil || !strings.Contains(found, "vivid") {
		t.Fatalf("vivid: %q %v", found, err)
	}
}

func TestLabFindsLoopbackCard(t *testing.T) {
	f := Finder{Root: "/"}
	if found, err := f.Audio("Loopback", 1, true); err != nil {
		t.Errorf("capture: %v", err)
	} else {
		t.Log(found)
	}
	if _, err := f.Audio("Loopback", 0, false); err != nil {
		t.Errorf("playback: %v", err)
	}
}
