//go:build portaudio && linux

package audio

import (
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/hal"
)

// With PortAudio, on any machine: what needs no sound card.

func TestVersionIsPortAudios(t *testing.T) {
	if !Built {
		t.Fatal("not Built with the portaudio tag")
	}
	if v := Version(); !strings.HasPrefix(v, "PortAudio V19") || !strings.HasSuffix(v, " over ALSA") {
		t.Errorf("Version %q, want PortAudio's version text over ALSA", v)
	}
}

func TestOpenNoSuchDeviceListsDevicesAndReleasesPortAudio(t *testing.T) {
	_, cerr := OpenCapture(hal.AudioConfig{Device: "no-such-card,3"})
	_, perr := OpenPlayback(hal.AudioConfig{Device: "no-such-card"})
	if !errors.Is(cerr, hal.ErrAbsent) || !strings.Contains(cerr.Error(), `audio: capture "no-such-card,3": no capture device "no-such-card,3" (capture devices: `) {
		t.Errorf("capture: %v", cerr)
	}
	if !errors.Is(perr, hal.ErrAbsent) || !strings.Contains(perr.Error(), `no playback device "no-such-card" (playback devices: `) {
		t.Errorf("playback: %v", perr)
	}
	if n := pa.users(); n != 0 {
		t.Errorf("PortAudio held by %d after failed opens, want terminated", n)
	}
	_, err := OpenCapture(hal.AudioConfig{Device: "default", Rate: 1000 * physic.Hertz})
	if !errors.Is(err, hal.ErrUnsupported) || !strings.Contains(err.Error(), `capture "default": sample rate 1kHz`) {
		t.Errorf("bad rate: %v", err)
	}
}

func TestOpenIsQuiet(t *testing.T) {
	// PortAudio's ALSA and JACK probes print on stderr unless muted.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved, err := unix.Dup(2)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Dup2(int(w.Fd()), 2); err != nil {
		t.Fatal(err)
	}
	_, oerr := OpenCapture(hal.AudioConfig{Device: "no-such-card"})
	unix.Dup2(saved, 2)
	unix.Close(saved)
	w.Close()
	out, _ := io.ReadAll(r)
	r.Close()
	if oerr == nil {
		t.Fatal("opened a card that is not there")
	}
	if len(out) > 0 {
		t.Errorf("opening printed on stderr:\n%s", out)
	}
}

func TestConcurrentOpensShareOnePortAudio(t *testing.T) {
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			var err error
			if i%2 == 0 {
				_, err = OpenCapture(hal.AudioConfig{Device: "no-such-card"})
			} else {
				_, err = OpenPlayback(hal.AudioConfig{Device: "no-such-card"})
			}
			if !errors.Is(err, hal.ErrAbsent) {
				t.Errorf("open %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if n := pa.users(); n != 0 {
		t.Errorf("PortAudio held by %d, want terminated", n)
	}
}

// With a sound card: the machine's default capture device.

func TestDefaultCaptureDeliversFrames(t *testing.T) {
	cards, err := os.ReadFile("/proc/asound/cards")
	if err != nil || strings.Contains(string(cards), "no soundcards") {
		t.Skipf("no sound card on this machine (/proc/asound/cards: %v): the lab tests cover a real device", err)
	}
	mic, err := OpenCapture(hal.AudioConfig{})
	if err != nil {
		t.Skipf("this machine's default capture device does not open: %v", err)
	}
	defer mic.Close()
	f := hal.AudioFrame{Samples: make([]int16, mic.Format().Len())}
	var last hal.AudioFrame
	for i := range 10 {
		if err := mic.ReadFrame(t.Context(), &f); err != nil {
			t.Fatal(err)
		}
		if i > 0 && (f.Seq <= last.Seq || f.Time <= last.Time) {
			t.Errorf("frame %d: seq %d time %v after seq %d time %v", i, f.Seq, f.Time, last.Seq, last.Time)
		}
		if age := hal.MonoNow().Sub(f.Time); age < 0 || age > time.Second {
			t.Errorf("frame %d is %v old", i, age)
		}
		last = f
	}
	t.Logf("%s, %s, stamped with %v", mic.Name(), mic.Format(), mic.(*Capture).clockSource())
}
