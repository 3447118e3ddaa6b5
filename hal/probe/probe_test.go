package probe

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tobe-body/tobe-body/hal"
)

// tree writes files under a new root; a name ending in / makes a directory.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		p := filepath.Join(root, name)
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestFinder(t *testing.T) {
	root := tree(t, map[string]string{
		"sys/class/input/event2/device/name":                   "tobe-lab-keypad\n",
		"sys/class/input/event10/device/name":                  "USB Keyboard\n",
		"dev/input/event2":                                     "",
		"dev/input/event10":                                    "",
		"sys/class/thermal/thermal_zone0/type":                 "cpu-thermal\n",
		"sys/class/thermal/thermal_zone0/temp":                 "47250\n",
		"sys/class/thermal/thermal_zone1/type":                 "broken\n",
		"sys/class/thermal/thermal_zone1/temp":                 "n/a\n",
		"proc/asound/card0/id":                                 "Loopback\n",
		"proc/asound/card0/pcm0p/":                             "",
		"proc/asound/card0/pcm1c/":                             "",
		"dev/snd/pcmC0D1c":                                     "",
		"dev/snd/pcmC0D0p":                                     "",
		"proc/asound/card1/id":                                 "Headphones\n",
		"proc/asound/card1/pcm0p/":                             "",
		"sys/devices/platform/soc/soc:firmware/get_throttled":  "0x50005\n",
		"sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq": "1500000\n",
		"sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq": "1800000\n",
	})
	f := Finder{Root: root}
	for _, tc := range []struct {
		name    string
		call    func() (string, error)
		found   string
		absent  bool
		errText string
	}{
		{"input by name", func() (string, error) { return f.Input("tobe-lab-keypad") }, "/dev/input/event2 (tobe-lab-keypad)", false, ""},
		{"any input", func() (string, error) { return f.Input("*") }, "/dev/input/event2", false, ""},
		{"input absent", func() (string, error) { return f.Input("gamepad") }, "", true, `present: "tobe-lab-keypad", "USB Keyboard"`},
		{"thermal", func() (string, error) { return f.ThermalZone("cpu-thermal") }, "thermal_zone0 at 47.2 °C", false, ""},
		{"thermal unreadable", func() (string, error) { return f.ThermalZone("broken") }, "", false, `does not hold a number`},
		{"thermal absent", func() (string, error) { return f.ThermalZone("gpu-thermal") }, "", true, `present: "cpu-thermal", "broken"`},
		{"capture by card", func() (string, error) { return f.Audio("Loopback", 1, true) }, "card 0 Loopback, /dev/snd/pcmC0D1c (capture)", false, ""},
		{"default capture", func() (string, error) { return f.Audio("default", 0, true) }, "card 0 Loopback, /dev/snd/pcmC0D1c", false, ""},
		{"playback node missing", func() (string, error) { return f.Audio("Headphones", 0, false) }, "", true, "pcmC1D0p missing"},
		{"card absent", func() (string, error) { return f.Audio("USB", 0, true) }, "", true, `cards: "Loopback", "Headphones"`},
		{"no capture pcm", func() (string, error) { return f.Audio("Headphones", 0, true) }, "", true, "no capture PCM 0"},
		{"rpi throttle", func() (string, error) {
			return f.Throttle("rpi-firmware", "/sys/devices/platform/*/*firmware/get_throttled")
		}, "(bits 0x50005)", false, ""},
		{"cpufreq", func() (string, error) { return f.Throttle("cpufreq", "/sys/devices/system/cpu/cpu0/cpufreq") }, "cpu0/cpufreq", false, ""},
		{"throttle absent", func() (string, error) { return f.Throttle("rpi-firmware", "/sys/nope/get_throttled") }, "", true, "nothing at"},
		{"no gpio chips", func() (string, error) { return f.Chip("pinctrl-rp1") }, "", true, `no GPIO chip labelled "pinctrl-rp1" (present: none)`},
		{"camera absent", func() (string, error) { return f.Camera("", "uvcvideo") }, "", true, `driver "uvcvideo"`},
		{"camera path absent", func() (string, error) { return f.Camera("/dev/video0", "") }, "", true, "no camera at /dev/video0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			found, err := tc.call()
			if tc.found != "" && !strings.Contains(found, tc.found) {
				t.Errorf("found %q, want it to contain %q (err %v)", found, tc.found, err)
			}
			if tc.found != "" && err != nil {
				t.Errorf("unexpected error %v", err)
			}
			if got := errors.Is(err, hal.ErrAbsent); got != tc.absent {
				t.Errorf("error %v: absent %v, want %v", err, got, tc.absent)
			}
			if tc.errText != "" && (err == nil || !strings.Contains(err.Error(), tc.errText)) {
				t.Errorf("error %v, want it to contain %q", err, tc.errText)
			}
		})
	}
}

func TestChipOnThisMachine(t *testing.T) {
	// Whatever this machine has, the answer is a chip path or an error that
	// says absent or why; never a panic.
	f := Finder{Root: "/"}
	if _, err := f.Chip("no-such-label-here"); err == nil {
		t.Error("found a chip labelled no-such-label-here")
	}
}

func TestI2C(t *testing.T) {
	root := t.TempDir()
	for _, n := range []string{"1", "7"} {
		os.MkdirAll(filepath.Join(root, "dev"), 0o755)
		os.WriteFile(filepath.Join(root, "dev", "i2c-"+n), nil, 0o644)
		os.MkdirAll(filepath.Join(root, "sys/bus/i2c/devices/i2c-"+n), 0o755)
	}
	os.WriteFile(filepath.Join(root, "sys/bus/i2c/devices/i2c-1/name"), []byte("bcm2835 (i2c@7e804000)\n"), 0o644)
	os.WriteFile(filepath.Join(root, "sys/bus/i2c/devices/i2c-7/name"), []byte("SMBus stub driver\n"), 0o644)
	f := Finder{Root: root}
	for _, c := range []struct{ bus, want string }{
		{"1", "/dev/i2c-1 (bcm2835 (i2c@7e804000))"}, {"I2C1", "/dev/i2c-1 (bcm2835 (i2c@7e804000))"}, {"/dev/i2c-7", "/dev/i2c-7 (SMBus stub driver)"},
		{"SMBus stub driver", "/dev/i2c-7 (SMBus stub driver)"},
	} {
		if got, err := f.I2C(c.bus); err != nil || got != c.want {
			t.Errorf("I2C(%q) = %q, %v; want %q", c.bus, got, err, c.want)
		}
	}
	if _, err := f.I2C("3"); !errors.Is(err, hal.ErrAbsent) || !strings.Contains(err.Error(), `no I²C bus "3" (present: "1 (bcm2835 (i2c@7e804000))", "7 (SMBus stub driver)"`) {
		t.Errorf("an absent bus: %v", err)
	}
}
