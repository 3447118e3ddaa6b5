package board

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/probe"
	"github.com/tobe-body/tobe-body/hal/sim"
)

func TestBuiltinProfilesValidate(t *testing.T) {
	s, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"generic-amd64", "jetson-orin-nano", "lab", "pi4", "pi5", "sim"}
	if got := strings.Join(s.Names(), " "); got != strings.Join(want, " ") {
		t.Fatalf("profiles %q, want %q", got, want)
	}
	chips := map[string]string{"pi4": "pinctrl-bcm2711", "pi5": "pinctrl-rp1", "jetson-orin-nano": "tegra234-gpio", "sim": sim.ChipLabel}
	for _, n := range want {
		p, _ := s.Get(n)
		if c, ok := chips[n]; ok && (p.GPIO == nil || p.GPIO.Chip != c) {
			t.Errorf("%s: chip %v, want label %q", n, p.GPIO, c)
		}
		if p.EStop != nil && (p.EStop.Wiring != "normally-closed") {
			t.Errorf("%s: e-stop wiring %q", n, p.EStop.Wiring)
		}
		if p.GPIO != nil {
			for _, o := range p.GPIO.Outputs {
				if o.Safe == "" {
					t.Errorf("%s: output %s has no safe level", n, o.Name)
				}
			}
		}
	}
}

func TestParseRefuses(t *testing.T) {
	good, err := os.ReadFile("profiles/sim.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, file, from, to, want string
	}{
		{"unknown key", "sim.json", `"drivers": "sim",`, `"drivers": "sim", "colour": "red",`, `$.colour: unknown key "colour"`},
		{"wrong type", "sim.json", `"fps": 30`, `"fps": "10"`, `$.cameras[0].fps: wrong type: got string, want integer`},
		{"out of range", "sim.json", `"fps": 30`, `"fps": 1000`, `$.cameras[0].fps: out of range: 1000 is more than the maximum 120`},
		{"bad pull", "sim.json", `"line": "ESTOP", "wiring": "normally-closed", "pull": "up"`, `"line": "ESTOP", "wiring": "normally-closed", "pull": "sideways"`, `$.estop.pull: not one of the allowed values "up", "down", "none"`},
		{"normally open e-stop", "sim.json", `"wiring": "normally-closed"`, `"wiring": "normally-open"`, `$.estop.wiring: must be "normally-closed"`},
		{"line used twice", "sim.json", `"line": "RELAY2"`, `"line": "RELAY1"`, `line "RELAY1" is already used`},
		{"name used twice", "sim.json", `"name": "relay2"`, `"name": "relay1"`, `name "relay1" is already used`},
		{"feedback of nothing", "sim.json", `"feedback_of": "relay1"`, `"feedback_of": "relay9"`, `no output is named "relay9"`},
		{"throttle path escapes /sys", "sim.json", `"throttle": {"source": "none"}`, `"throttle": {"source": "cpufreq", "path": "/sys/../etc/shadow"}`, `$.thermal.throttle.path: must be a clean path under /sys/`},
		{"file and name disagree", "other.json", ``, ``, `the profile is named "sim" but its file is "other.json"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := string(good)
			if tc.from != "" {
				if !strings.Contains(doc, tc.from) {
					t.Fatalf("test edit %q does not apply", tc.from)
				}
				doc = strings.Replace(doc, tc.from, tc.to, 1)
			}
			_, err := Parse(tc.file, []byte(doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestUserProfiles(t *testing.T) {
	dir := t.TempDir()
	sim, _ := os.ReadFile("profiles/sim.json")
	mine := strings.Replace(strings.Replace(string(sim), `"name": "sim"`, `"name": "garage"`, 1), `"fps": 30`, `"fps": 5`, 1)
	os.WriteFile(filepath.Join(dir, "garage.json"), []byte(mine), 0o644)
	os.WriteFile(filepath.Join(dir, "pi5.json"), []byte(strings.Replace(mine, `"name": "garage"`, `"name": "pi5"`, 1)), 0o644)
	s, err := LoadSet(dir)
	if err != nil {
		t.Fatal(err)
	}
	g, err := s.Get("garage")
	if err != nil || g.Cameras[0].FPS != 5 || g.Source != filepath.Join(dir, "garage.json") {
		t.Fatalf("garage: %+v, %v", g, err)
	}
	if len(s.Replaced) != 1 || s.Replaced[0] != "pi5" {
		t.Errorf("replaced %v, want [pi5]", s.Replaced)
	}
	// One bad file fails the set, naming the file.
	os.WriteFile(filepath.Join(dir, "bad.json"), []byte(`{"version": 1,}`), 0o644)
	if _, err := LoadSet(dir); err == nil || !strings.Contains(err.Error(), "bad.json") {
		t.Errorf("bad file: %v", err)
	}
	os.Remove(filepath.Join(dir, "bad.json"))
	// A FIFO is not read.
	if err := mkfifo(filepath.Join(dir, "fifo.json")); err == nil {
		if _, err := LoadSet(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("fifo: %v", err)
		}
	}
	if _, err := s.Get("nope"); !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), "garage") {
		t.Errorf("unknown name: %v", err)
	}
}

func TestDetect(t *testing.T) {
	s, _ := Builtin()
	for _, tc := range []struct {
		m    Machine
		want string
	}{
		{Machine{Model: "Raspberry Pi 4 Model B Rev 1.5", Arch: "arm64"}, "pi4"},
		{Machine{Model: "Raspberry Pi 400 Rev 1.0", Arch: "arm64"}, "pi4"},
		{Machine{Model: "Raspberry Pi 5 Model B Rev 1.0", Arch: "arm64"}, "pi5"},
		{Machine{Model: "Raspberry Pi Compute Module 5 Rev 1.0", Arch: "arm64"}, "pi5"},
		{Machine{Model: "NVIDIA Jetson Orin Nano Engineering Reference Developer Kit Super", Arch: "arm64"}, "jetson-orin-nano"},
		{Machine{SysVendor: "Dell Inc.", ProductName: "OptiPlex 7090", Arch: "amd64"}, "generic-amd64"},
		{Machine{Model: "Raspberry Pi 3 Model B Plus Rev 1.3", Arch: "arm"}, ""},
	} {
		p, why, err := s.Detect(tc.m)
		if tc.want == "" {
			if err == nil || !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), "--board") {
				t.Errorf("%v: got %v %v, want an error that says --board", tc.m, p, err)
			}
			continue
		}
		if err != nil || p.Name != tc.want || why == "" {
			t.Errorf("%v: got %v (%s) %v, want %s", tc.m, p, why, err, tc.want)
		}
	}
}

func TestReadMachine(t *testing.T) {
	for _, c := range []struct{ periph, want string }{
		{"Raspberry Pi 5 Model B Rev 1.0", "Raspberry Pi 5 Model B Rev 1.0"},
		{"Raspberry Pi 4 Model B Rev 1.4\x00", "Raspberry Pi 4 Model B Rev 1.4"},
		{"<unknown>", ""},
	} {
		if got := dtModel(c.periph); got != c.want {
			t.Errorf("dtModel(%q) = %q, want %q", c.periph, got, c.want)
		}
	}
	if m := ReadMachine(); m.Arch != runtime.GOARCH {
		t.Errorf("this machine: %+v", m)
	}
}

func TestCheckSimBoardLoadsEverything(t *testing.T) {
	s, _ := Builtin()
	p, _ := s.Get("sim")
	rs := Check(p, sim.New(1).Drivers(), nil)
	if len(rs) < 12 {
		t.Fatalf("%d reports, want every device: %+v", len(rs), rs)
	}
	for _, r := range rs {
		// The sim board's PWR LED is left to the system, as a Pi's is.
		if r.Status != Loaded && !(r.Kind == "led" && r.Status == Skipped && strings.HasPrefix(r.Reason, "left to the system")) {
			t.Errorf("%s %s: %s %s", r.Kind, r.Name, r.Status, r.Reason)
		}
	}
}

func TestCheckPi5HereIsSkippedNotFailed(t *testing.T) {
	s, _ := Builtin()
	p, _ := s.Get("pi5")
	rs := Check(p, hal.Drivers{Name: "linux"}, probe.Finder{Root: t.TempDir()})
	for _, r := range rs {
		if r.Status != Skipped || !strings.HasPrefix(r.Reason, "absent on this board: ") && !strings.HasPrefix(r.Reason, "left to the system (") {
			t.Errorf("%s %s: %s %q, want Skipped with a reason", r.Kind, r.Name, r.Status, r.Reason)
		}
	}
	if got := Summary(rs); !strings.HasPrefix(got, "0 Loaded") || !strings.HasSuffix(got, "0 Failed") {
		t.Errorf("summary %q", got)
	}
}

func TestCheckBusyLineFails(t *testing.T) {
	s, _ := Builtin()
	p, _ := s.Get("sim")
	b := sim.New(1)
	d := b.Drivers()
	held, _ := d.OpenChip(sim.ChipLabel)
	defer held.Close()
	if _, err := held.Out(sim.LineRelay1, hal.OutConfig{}); err != nil {
		t.Fatal(err)
	}
	for _, r := range Check(p, d, nil) {
		if r.Name == "relay1" && (r.Status != Failed || !strings.Contains(r.Reason, "held by consumer")) {
			t.Errorf("relay1: %s %q, want Failed naming the consumer", r.Status, r.Reason)
		}
	}
}

func TestLines(t *testing.T) {
	s, _ := Builtin()
	p, _ := s.Get("pi5")
	var got []string
	for _, l := range p.Lines() {
		got = append(got, l.Kind+":"+l.Name+":"+l.Line)
	}
	want := "estop:main:GPIO17 estop:second:GPIO27 estop:reset:GPIO22 gpio-in:button:GPIO5 gpio-in:relay1-feedback:GPIO6 gpio-out:relay1:GPIO23 gpio-out:relay2:GPIO24 gpio-out:led:GPIO25 gpio-out:buzzer:GPIO18"
	if strings.Join(got, " ") != want {
		t.Errorf("lines %v\nwant %s", got, want)
	}
	main := p.Lines()[0]
	if main.Role != RoleEStop || main.Active != hal.High || main.In.Pull != hal.PullUp || main.In.Debounce != 5*time.Millisecond {
		t.Errorf("e-stop line %+v", main)
	}
	if g, _ := s.Get("generic-amd64"); g.Lines() != nil {
		t.Error("a board without GPIO has lines")
	}
}

func TestCameraConfig(t *testing.T) {
	for _, tc := range []struct {
		cam  Camera
		want string
	}{
		{Camera{Name: "front", Driver: "uvcvideo", Format: []string{"YUYV", "MJPG"}, Width: 640, Height: 480, FPS: 15}, "uvcvideo [YUYV MJPG] 640x480@15Hz"},
		{Camera{Name: "door", Device: "/dev/v4l/by-id/usb-cam-video-index0", Driver: "uvcvideo", Format: []string{"GREY"}}, "/dev/v4l/by-id/usb-cam-video-index0 [GREY] 0x0@0Hz"},
	} {
		c := CameraConfig(tc.cam)
		if got := fmt.Sprintf("%s %v %dx%d@%s", c.Device, c.Pixel, c.Width, c.Height, c.Rate); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.cam, got, tc.want)
		}
	}
}

func TestCheckUnsupportedIsSkippedWithTheReason(t *testing.T) {
	s, _ := Builtin()
	p, _ := s.Get("lab")
	var asked []string
	notBuilt := func(cfg hal.AudioConfig) error {
		asked = append(asked, cfg.Device)
		return fmt.Errorf("audio: %q: this binary was built without PortAudio: %w", cfg.Device, hal.ErrUnsupported)
	}
	d := hal.Drivers{
		Name:         "linux",
		OpenCapture:  func(cfg hal.AudioConfig) (hal.AudioCapture, error) { return nil, notBuilt(cfg) },
		OpenPlayback: func(cfg hal.AudioConfig) (hal.AudioPlayback, error) { return nil, notBuilt(cfg) },
	}
	n := 0
	for _, r := range Check(p, d, probe.Finder{Root: t.TempDir()}) {
		if r.Kind != "audio-capture" && r.Kind != "audio-playback" {
			continue
		}
		n++
		if r.Status != Skipped || !strings.HasPrefix(r.Reason, "unsupported: audio: ") || !strings.HasSuffix(r.Reason, "built without PortAudio") {
			t.Errorf("%s: %s %q, want Skipped with the driver's reason", r.Kind, r.Status, r.Reason)
		}
	}
	// The lab profile's capture is PCM 1 of the loopback card, its playback PCM 0.
	if n != 2 || strings.Join(asked, " ") != "Loopback,1 Loopback" {
		t.Errorf("%d audio reports, devices asked %q; want 2, Loopback,1 and Loopback", n, asked)
	}
}

func TestTakeLEDs(t *testing.T) {
	s, _ := Builtin()
	p, _ := s.Get("pi5")
	q, err := p.TakeLEDs(map[string]bool{"act": true})
	if err != nil || !q.LEDs[0].Take || q.LEDs[1].Take || p.LEDs[0].Take {
		t.Fatalf("take act: %v %+v (the profile itself: %+v)", err, q.LEDs, p.LEDs)
	}
	if _, err := p.TakeLEDs(map[string]bool{"blue": true}); err == nil || err.Error() != "act.leds.blue: board pi5 has no LED named blue (its LEDs: act, pwr)" {
		t.Errorf("an LED the board has not: %v", err)
	}
	sim, _ := s.Get("sim")
	if q, _ := sim.TakeLEDs(map[string]bool{"act": false}); q.LEDs[0].Take {
		t.Error("act.leds.act: false left the sim board's ACT taken")
	}
}
