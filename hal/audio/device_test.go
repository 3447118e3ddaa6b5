package audio

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/hal"
)

// labDevices is what PortAudio lists in the lab VM (snd-aloop as card 0)
// with a USB microphone as card 1, as names PortAudio gives them.
func labDevices() []device {
	ids := map[int]string{0: "Loopback", 1: "Mic"}
	return []device{
		newDevice(0, "Loopback: PCM (hw:0,0)", 32, 32, ids),
		newDevice(1, "Loopback: PCM (hw:0,1)", 32, 32, ids),
		newDevice(2, "USB PnP Sound Device: Audio (hw:1,0)", 1, 0, ids),
		newDevice(3, "sysdefault", 128, 128, ids),
		newDevice(4, "default", 128, 128, ids),
		newDevice(5, "dmix", 0, 2, ids),
	}
}

func TestNewDeviceParsesPortAudioNames(t *testing.T) {
	for _, tc := range []struct {
		name           string
		card, pcm      int
		cardName, id   string
		in, out        int
		wantChannelsIn int
	}{
		{"Loopback: PCM (hw:0,1)", 0, 1, "Loopback", "Loopback", 2, 2, 2},
		{"bcm2835 Headphones: - (hw:1,0)", 1, 0, "bcm2835 Headphones", "Headphones", 0, 8, 0},
		{"HDA Intel PCH: ALC3232 Analog (hw:2,0)", 2, 0, "HDA Intel PCH", "", 2, 2, 2},
		{"USB Audio: - (plughw:3,0)", 3, 0, "USB Audio", "", 1, 0, 1},
		{"default", -1, -1, "", "", 128, 128, 128},
		{"pulse", -1, -1, "", "", 32, 32, 32},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDevice(7, tc.name, tc.in, tc.out, map[int]string{0: "Loopback", 1: "Headphones"})
			if d.card != tc.card || d.pcm != tc.pcm || d.cardName != tc.cardName || d.cardID != tc.id || d.index != 7 {
				t.Errorf("got card %d pcm %d name %q id %q index %d, want %d %d %q %q 7", d.card, d.pcm, d.cardName, d.cardID, d.index, tc.card, tc.pcm, tc.cardName, tc.id)
			}
			if got := d.channels(true); got != tc.wantChannelsIn {
				t.Errorf("capture channels %d, want %d", got, tc.wantChannelsIn)
			}
		})
	}
}

func TestChooseDevice(t *testing.T) {
	devs := labDevices()
	def := &devs[4]
	for _, tc := range []struct {
		spec     string
		capture  bool
		channels int
		want     string // the device's name, or the error's text
		err      error
	}{
		{"", true, 1, "default", nil},
		{"default", false, 2, "default", nil},
		{"Loopback", false, 1, "Loopback: PCM (hw:0,0)", nil},
		{"Loopback,1", true, 1, "Loopback: PCM (hw:0,1)", nil},
		{"Loopback,0", true, 2, "Loopback: PCM (hw:0,0)", nil},
		{"hw:Loopback,1", true, 1, "Loopback: PCM (hw:0,1)", nil},
		{"plughw:0,1", true, 1, "Loopback: PCM (hw:0,1)", nil},
		{"0,1", true, 1, "Loopback: PCM (hw:0,1)", nil},
		{"Mic", true, 1, "USB PnP Sound Device: Audio (hw:1,0)", nil},
		{"USB PnP Sound Device", true, 1, "USB PnP Sound Device: Audio (hw:1,0)", nil},
		{"Loopback: PCM (hw:0,1)", true, 1, "Loopback: PCM (hw:0,1)", nil},
		{"sysdefault", true, 1, "sysdefault", nil},
		{"dmix", false, 2, "dmix", nil},
		{"Loopback,2", true, 1, `no capture device "Loopback,2" (capture devices: Loopback,0 "Loopback: PCM (hw:0,0)"; Loopback,1 "Loopback: PCM (hw:0,1)"; Mic,0 "USB PnP Sound Device: Audio (hw:1,0)"; "sysdefault"; "default")`, hal.ErrAbsent},
		{"Headphones", false, 1, `no playback device "Headphones" (playback devices: Loopback,0 "Loopback: PCM (hw:0,0)"; Loopback,1 "Loopback: PCM (hw:0,1)"; "sysdefault"; "default"; "dmix")`, hal.ErrAbsent},
		{"loopback", true, 1, `no capture device "loopback"`, hal.ErrAbsent},
		{"Mic", false, 1, `"USB PnP Sound Device: Audio (hw:1,0)" has no playback channels`, hal.ErrAbsent},
		{"dmix", true, 1, `"dmix" has no capture channels`, hal.ErrAbsent},
		{"Mic", true, 2, `"USB PnP Sound Device: Audio (hw:1,0)" has 1 capture channels, not 2`, hal.ErrUnsupported},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			d, err := choose(tc.spec, devs, def, tc.capture, tc.channels)
			if tc.err == nil {
				if err != nil || d.name != tc.want {
					t.Errorf("got %q %v, want %q", d.name, err, tc.want)
				}
				return
			}
			if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %q %v, want an error %q wrapping %v", d.name, err, tc.want, tc.err)
			}
		})
	}
}

func TestChooseDefaultWithoutADefaultPCM(t *testing.T) {
	devs := labDevices()[:3] // no "default" PCM in ALSA's configuration
	d, err := choose("default", devs, &devs[1], true, 1)
	if err != nil || d.name != "Loopback: PCM (hw:0,1)" {
		t.Errorf("got %q %v, want the host API's default device", d.name, err)
	}
	_, err = choose("", nil, nil, true, 1)
	if !errors.Is(err, hal.ErrAbsent) || !strings.Contains(err.Error(), `no capture device "default" (capture devices: none)`) {
		t.Errorf("no devices at all: %v", err)
	}
}

func TestCardIDs(t *testing.T) {
	root := t.TempDir()
	for n, id := range map[string]string{"card0": "Loopback\n", "card3": "Headphones\n"} {
		dir := filepath.Join(root, "proc", "asound", n)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "id"), []byte(id), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A card whose id cannot be read, and an entry that is not a card.
	os.MkdirAll(filepath.Join(root, "proc", "asound", "card7"), 0o755)
	os.MkdirAll(filepath.Join(root, "proc", "asound", "cards"), 0o755)
	got := cardIDs(root)
	if len(got) != 2 || got[0] != "Loopback" || got[3] != "Headphones" {
		t.Errorf("got %v, want card 0 Loopback and 3 Headphones", got)
	}
	if got := cardIDs(t.TempDir()); len(got) != 0 {
		t.Errorf("no /proc/asound: got %v", got)
	}
}

func TestFormatFor(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  hal.AudioConfig
		want hal.AudioFormat
		err  string
	}{
		{"defaults", hal.AudioConfig{}, hal.AudioFormat{Rate: 16000 * physic.Hertz, Channels: 1, FrameSamples: 320}, ""},
		{"48k stereo", hal.AudioConfig{Rate: 48 * physic.KiloHertz, Channels: 2}, hal.AudioFormat{Rate: 48000 * physic.Hertz, Channels: 2, FrameSamples: 960}, ""},
		{"frame given", hal.AudioConfig{FrameSamples: 160}, hal.AudioFormat{Rate: 16000 * physic.Hertz, Channels: 1, FrameSamples: 160}, ""},
		{"rate too low", hal.AudioConfig{Rate: 4000 * physic.Hertz}, hal.AudioFormat{}, "sample rate 4kHz"},
		{"fractional rate", hal.AudioConfig{Rate: 16000*physic.Hertz + physic.MilliHertz}, hal.AudioFormat{}, "whole number of Hz"},
		{"channels", hal.AudioConfig{Channels: 33}, hal.AudioFormat{}, "33 channels"},
		{"tiny frame", hal.AudioConfig{FrameSamples: 8}, hal.AudioFormat{}, "8 samples a frame"},
		{"frame over a second", hal.AudioConfig{FrameSamples: 16001}, hal.AudioFormat{}, "16001 samples a frame"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := formatFor(tc.cfg)
			if tc.err != "" {
				if !errors.Is(err, hal.ErrUnsupported) || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("got %v, want an unsupported error naming %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %v %v, want %v", got, err, tc.want)
			}
		})
	}
}

func TestLatencyAndRing(t *testing.T) {
	f := hal.AudioFormat{Rate: 16000 * physic.Hertz, Channels: 1, FrameSamples: 320}
	if got := latencyFor(f, 46*time.Millisecond); got != 80*time.Millisecond {
		t.Errorf("latency %v, want four 20 ms frames", got)
	}
	if got := latencyFor(f, 200*time.Millisecond); got != 200*time.Millisecond {
		t.Errorf("latency %v, want the device's 200ms", got)
	}
	if got := ringFrames(f); got != 25 {
		t.Errorf("ring %d frames, want 25 (500 ms)", got)
	}
	if got := ringFrames(hal.AudioFormat{Rate: 16000 * physic.Hertz, Channels: 1, FrameSamples: 16000}); got != 2 {
		t.Errorf("ring of 1 s frames: %d, want at least 2", got)
	}
}
