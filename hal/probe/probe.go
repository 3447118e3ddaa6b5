// Package probe finds the kernel devices a board profile names and checks
// that they answer, without streaming from them: GPIO chips by label and
// lines by name through the GPIO character device, V4L2 capture devices by
// path or driver, ALSA cards and their PCMs, evdev devices by name, thermal
// zones by type and the throttling source. A device that is not there is
// hal.ErrAbsent; one that is there but cannot be used (no permission, a
// line held by another consumer) is another error that says why.
package probe

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/tobe-body/tobe-body/hal"
)

// Finder looks under Root ("/" on a device; a prepared tree in tests).
type Finder struct {
	Root string
}

func (f Finder) path(p string) string { return filepath.Join(f.Root, p) }

// glob returns matches sorted by their trailing number (event2 < event10).
func (f Finder) glob(pattern string) []string {
	m, _ := filepath.Glob(f.path(pattern))
	sort.Slice(m, func(i, j int) bool {
		a, b := trailingNumber(m[i]), trailingNumber(m[j])
		if a != b {
			return a < b
		}
		return m[i] < m[j]
	})
	return m
}

func trailingNumber(s string) int {
	i := len(s)
	for i > 0 && s[i-1] >= '0' && s[i-1] <= '9' {
		i--
	}
	n, err := strconv.Atoi(s[i:])
	if err != nil {
		return -1
	}
	return n
}

// Input finds an evdev device by its name, or any device for "*".
func (f Finder) Input(match string) (string, error) {
	var names []string
	var lastErr error
	for _, dir := range f.glob("sys/class/input/event*") {
		node := "/dev/input/" + filepath.Base(dir)
		name, err := os.ReadFile(filepath.Join(dir, "device", "name"))
		if err != nil {
			continue
		}
		n := strings.TrimSpace(string(name))
		names = append(names, n)
		if match != "*" && n != match {
			continue
		}
		fd, err := os.Open(f.path(node))
		if err != nil {
			lastErr = fmt.Errorf("%s (%s): %w", node, n, err)
			continue
		}
		fd.Close()
		return fmt.Sprintf("%s (%s)", node, n), nil
	}
	if lastErr != nil {
		return "", lastErr
	}
	if match == "*" {
		return "", fmt.Errorf("no input devices: %w", hal.ErrAbsent)
	}
	return "", fmt.Errorf("no input device named %q (present: %s): %w", match, list(names), hal.ErrAbsent)
}

func list(ss []string) string {
	if len(ss) == 0 {
		return "none"
	}
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

// ThermalZone finds a thermal zone by type and reads its temperature.
func (f Finder) ThermalZone(typ string) (string, error) {
	var types []string
	for _, dir := range f.glob("sys/class/thermal/thermal_zone*") {
		t, err := os.ReadFile(filepath.Join(dir, "type"))
		if err != nil {
			continue
		}
		types = append(types, strings.TrimSpace(string(t)))
		if strings.TrimSpace(string(t)) != typ {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, "temp"))
		if err != nil {
			return "", fmt.Errorf("thermal zone %s: %w", filepath.Base(dir), err)
		}
		milli, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		if err != nil {
			return "", fmt.Errorf("thermal zone %s: its temp file does not hold a number", filepath.Base(dir))
		}
		return fmt.Sprintf("%s at %.1f °C", filepath.Base(dir), float64(milli)/1000), nil
	}
	return "", fmt.Errorf("no thermal zone of type %q (present: %s): %w", typ, list(types), hal.ErrAbsent)
}

// I2C finds an I²C bus by number ("1", "I2C1", "/dev/i2c-1") or by its
// adapter's name, among the kernel's i2c-dev buses; it opens nothing.
func (f Finder) I2C(bus string) (string, error) {
	want := strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(bus), "/dev/"), "I2C"), "i2c-")
	var have []string
	for _, dev := range f.glob("dev/i2c-*") {
		n := strings.TrimPrefix(filepath.Base(dev), "i2c-")
		name, _ := os.ReadFile(f.path("sys/bus/i2c/devices/i2c-" + n + "/name"))
		adapter := strings.TrimSpace(string(name))
		have = append(have, fmt.Sprintf("%s (%s)", n, adapter))
		if n == want || adapter != "" && adapter == strings.TrimSpace(bus) {
			return fmt.Sprintf("/dev/i2c-%s (%s)", n, adapter), nil
		}
	}
	return "", fmt.Errorf("no I²C bus %q (present: %s; is i2c-dev loaded and the bus enabled?): %w", bus, list(have), hal.ErrAbsent)
}

// LED finds one of the board's LEDs by its name in /sys/class/leds.
func (f Finder) LED(name string) (string, error) {
	dir := f.path("sys/class/leds/" + name)
	if _, err := os.Stat(filepath.Join(dir, "brightness")); err == nil && !strings.Contains(name, "/") {
		return "/sys/class/leds/" + name, nil
	}
	var have []string
	for _, d := range f.glob("sys/class/leds/*") {
		have = append(have, filepath.Base(d))
	}
	return "", fmt.Errorf("no LED %q in /sys/class/leds (present: %s): %w", name, list(have), hal.ErrAbsent)
}

// Throttle finds the throttling source and reads it once.
func (f Finder) Throttle(source, glob string) (string, error) {
	matches := f.glob(strings.TrimPrefix(glob, "/"))
	if len(matches) == 0 {
		return "", fmt.Errorf("%s: nothing at %s: %w", source, glob, hal.ErrAbsent)
	}
	p := matches[0]
	switch source {
	case "rpi-firmware":
		raw, err := os.ReadFile(p)
		if err != nil {
			return "", fmt.Errorf("%s: %w", source, err)
		}
		v, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(string(raw)), "0x"), 16, 32)
		if err != nil {
			return "", fmt.Errorf("%s: %s does not hold hex throttle bits", source, p)
		}
		return fmt.Sprintf("%s (bits %#x)", strings.TrimPrefix(p, f.Root), v), nil
	case "cpufreq":
		for _, file := range []string{"scaling_cur_freq", "cpuinfo_max_freq"} {
			if _, err := os.ReadFile(filepath.Join(p, file)); err != nil {
				if os.IsNotExist(err) {
					return "", fmt.Errorf("%s: %s has no %s: %w", source, p, file, hal.ErrAbsent)
				}
				return "", fmt.Errorf("%s: %w", source, err)
			}
		}
		return strings.TrimPrefix(p, f.Root), nil
	}
	return "", fmt.Errorf("unknown throttle source %q", source)
}

// Audio finds an ALSA card by id ("default": the first card with a PCM of
// that direction) and checks its PCM device node.
func (f Finder) Audio(device string, pcm int, capture bool) (string, error) {
	dir, dirName := "p", "playback"
	if capture {
		dir, dirName = "c", "capture"
	}
	var ids []string
	for _, card := range f.glob("proc/asound/card[0-9]*") {
		id, err := os.ReadFile(filepath.Join(card, "id"))
		if err != nil {
			continue
		}
		cid := strings.TrimSpace(string(id))
		ids = append(ids, cid)
		n := trailingNumber(card)
		if device == "default" {
			pcms, _ := filepath.Glob(filepath.Join(card, "pcm*"+dir))
			if len(pcms) == 0 {
				continue
			}
			pcm = trailingNumber(strings.TrimSuffix(pcms[0], dir))
		} else if cid != device {
			continue
		}
		if _, err := os.Stat(filepath.Join(card, fmt.Sprintf("pcm%d%s", pcm, dir))); err != nil {
			return "", fmt.Errorf("card %s has no %s PCM %d: %w", cid, dirName, pcm, hal.ErrAbsent)
		}
		node := fmt.Sprintf("/dev/snd/pcmC%dD%d%s", n, pcm, dir)
		if err := access(f.path(node)); err != nil {
			return "", fmt.Errorf("card %s %s PCM %d: %w", cid, dirName, pcm, err)
		}
		return fmt.Sprintf("card %d %s, %s (%s)", n, cid, node, dirName), nil
	}
	if device == "default" {
		return "", fmt.Errorf("no sound card with a %s PCM (cards: %s): %w", dirName, list(ids), hal.ErrAbsent)
	}
	return "", fmt.Errorf("no sound card %q (cards: %s): %w", device, list(ids), hal.ErrAbsent)
}
