// Package gpiosim drives the lines of a gpio-sim chip, the kernel's GPIO
// simulator, from outside through its sysfs attributes: the lab's way to
// press a button or open an e-stop contact (a line's pull), and to read
// what the body drove an output to (its value). It also reads a line's
// edges the plainest way a program can (RequestEdges), the yardstick the
// lab measures the body's readers against.
package gpiosim

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tobe-body/tobe-body/hal/probe"
)

// Line is one line of a gpio-sim chip.
type Line struct {
	Name   string
	chip   string // its chip's device node
	offset uint32
	dir    string // its sim_gpioN directory
}

// Find finds the line named line on the gpio-sim chip labelled chip.
func Find(chip, line string) (Line, error) {
	f := probe.Finder{Root: "/"}
	path, err := f.Chip(chip)
	if err != nil {
		return Line{}, err
	}
	off, err := f.LineOffset(path, line)
	if err != nil {
		return Line{}, err
	}
	m, _ := filepath.Glob(fmt.Sprintf("/sys/devices/platform/gpio-sim.*/%s/sim_gpio%d", filepath.Base(path), off))
	if len(m) != 1 {
		return Line{}, fmt.Errorf("gpiosim: no gpio-sim attributes for line %s of %s: %v", line, chip, m)
	}
	return Line{Name: line, chip: path, offset: off, dir: m[0]}, nil
}

// Attr is the path of one of the line's attributes ("pull", "value").
func (l Line) Attr(name string) string { return filepath.Join(l.dir, name) }

// SetPull pulls the line up (high) or down, as a contact outside would:
// an input requested from the chip sees an edge.
func (l Line) SetPull(high bool) error {
	v := "pull-down"
	if high {
		v = "pull-up"
	}
	if err := os.WriteFile(l.Attr("pull"), []byte(v), 0); err != nil {
		return fmt.Errorf("gpiosim: line %s: %w", l.Name, err)
	}
	return nil
}

// Value reads the line's level as the simulator sees it: "0" or "1".
func (l Line) Value() (string, error) {
	b, err := os.ReadFile(l.Attr("value"))
	if err != nil {
		return "", fmt.Errorf("gpiosim: line %s: %w", l.Name, err)
	}
	return strings.TrimSpace(string(b)), nil
}
