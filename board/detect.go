package board

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"periph.io/x/host/v3/distro"
)

// Machine is what detection reads of the machine it runs on.
type Machine struct {
	Model       string // /proc/device-tree/model
	SysVendor   string // /sys/class/dmi/id/sys_vendor
	ProductName string // /sys/class/dmi/id/product_name
	Arch        string // GOARCH
}

func (m Machine) String() string {
	var parts []string
	if m.Model != "" {
		parts = append(parts, fmt.Sprintf("model %q", m.Model))
	}
	if m.SysVendor != "" || m.ProductName != "" {
		parts = append(parts, fmt.Sprintf("DMI %q %q", m.SysVendor, m.ProductName))
	}
	parts = append(parts, "arch "+m.Arch)
	return strings.Join(parts, ", ")
}

// ReadMachine reads the machine this runs on: its device-tree model
// through periph host/v3's distro package (which reads
// /proc/device-tree/model once a process), DMI from /sys/class/dmi/id
// (periph reads none) and the architecture. What is missing is left
// empty.
func ReadMachine() Machine {
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	return Machine{
		Model:       dtModel(distro.DTModel()),
		SysVendor:   read("/sys/class/dmi/id/sys_vendor"),
		ProductName: read("/sys/class/dmi/id/product_name"),
		Arch:        runtime.GOARCH,
	}
}

// dtModel is the model periph read, "" for none (periph's "<unknown>").
func dtModel(m string) string {
	m = strings.TrimSpace(strings.TrimRight(m, "\x00"))
	if m == "<unknown>" {
		return ""
	}
	return m
}

// Detect picks the profile for m: a device-tree model match first (the
// longest matching text wins), then a DMI match, then an architecture
// match. why says what matched.
func (s *Set) Detect(m Machine) (p *Profile, why string, err error) {
	best, bestLen := (*Profile)(nil), 0
	for _, n := range s.Names() {
		q := s.byName[n]
		for _, sub := range q.Match.DeviceTreeModel {
			if m.Model != "" && strings.Contains(m.Model, sub) && len(sub) > bestLen {
				best, bestLen, why = q, len(sub), fmt.Sprintf("device-tree model %q contains %q", m.Model, sub)
			}
		}
	}
	if best != nil {
		return best, why, nil
	}
	for _, n := range s.Names() {
		q := s.byName[n]
		for _, d := range q.Match.DMI {
			if (d.SysVendor == "" || strings.Contains(m.SysVendor, d.SysVendor)) &&
				(d.ProductName == "" || strings.Contains(m.ProductName, d.ProductName)) {
				return q, fmt.Sprintf("DMI %q %q", m.SysVendor, m.ProductName), nil
			}
		}
	}
	for _, n := range s.Names() {
		if q := s.byName[n]; q.Match.Arch != "" && q.Match.Arch == m.Arch {
			return q, "architecture " + m.Arch, nil
		}
	}
	return nil, "", fmt.Errorf("%w matches this machine (%s); name one with --board (known: %s)", ErrUnknown, m, strings.Join(s.Names(), ", "))
}

// Resolve picks the profile named name from the built-in profiles and
// those in UserDir, or detects the board this runs on when name is "" or
// auto. It says why it chose it.
func Resolve(name string) (*Profile, string, error) {
	set, err := LoadSet(UserDir)
	if err != nil {
		return nil, "", err
	}
	if name != "" && name != "auto" {
		p, err := set.Get(name)
		return p, "configured (board " + strconv.Quote(name) + ")", err
	}
	p, why, err := set.Detect(ReadMachine())
	return p, "detected: " + why, err
}
