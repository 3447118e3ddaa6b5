package audio

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/tobe-body/tobe-body/hal"
)

// device is one PCM as PortAudio's ALSA host API lists it: a card's PCM
// ("Loopback: PCM (hw:0,1)"), or a PCM of ALSA's configuration
// ("default", "sysdefault", "dmix", "pulse").
type device struct {
	index    int // PortAudio's device index
	name     string
	in, out  int // channels each way
	card     int // -1 for a configuration PCM
	pcm      int
	cardName string // the card's name, as in the device's name
	cardID   string // the card's id (/proc/asound/cardN/id), if known
}

// hwName matches the name PortAudio gives a card's PCM: "CARD NAME: PCM
// NAME (hw:C,D)", or plughw when PA_ALSA_PLUGHW is set.
var hwName = regexp.MustCompile(`^(.*?): .* \((?:plug)?hw:(\d+),(\d+)\)$`)

// newDevice parses what it can from a PortAudio device name. ids maps card
// numbers to their ids.
func newDevice(index int, name string, in, out int, ids map[int]string) device {
	d := device{index: index, name: name, in: in, out: out, card: -1, pcm: -1}
	if m := hwName.FindStringSubmatch(name); m != nil {
		d.card, _ = strconv.Atoi(m[2])
		d.pcm, _ = strconv.Atoi(m[3])
		d.cardName = m[1]
		d.cardID = ids[d.card]
	}
	return d
}

func (d device) channels(capture bool) int {
	if capture {
		return d.in
	}
	return d.out
}

// spec is what AudioConfig.Device asks for, in the ALSA manner: "default",
// a configuration PCM or a full PortAudio name; or CARD[,DEV] where CARD
// is a card's id, name or number and DEV its PCM (0 when left out, as
// with ALSA's hw:CARD). An "hw:" or "plughw:" in front is ignored.
type spec struct {
	raw  string
	card string
	pcm  int
}

func parseSpec(s string) spec {
	sp := spec{raw: s, card: s}
	rest := strings.TrimPrefix(strings.TrimPrefix(s, "plughw:"), "hw:")
	sp.card = rest
	if i := strings.LastIndexByte(rest, ','); i >= 0 {
		if n, err := strconv.Atoi(rest[i+1:]); err == nil && n >= 0 {
			sp.card, sp.pcm = rest[:i], n
		}
	}
	return sp
}

func (sp spec) cardMatches(d device) bool {
	if d.card < 0 || sp.card == "" {
		return false
	}
	return sp.card == d.cardID || sp.card == d.cardName || sp.card == strconv.Itoa(d.card)
}

// direction names a stream's direction in messages.
func direction(capture bool) string {
	if capture {
		return "capture"
	}
	return "playback"
}

// choose picks the device name asks for among devs, that can capture (or
// play) channels channels. def is the host API's default device for that
// direction, or nil. The errors wrap hal.ErrAbsent when there is no such
// device and hal.ErrUnsupported when it has too few channels; both list
// the devices there are.
func choose(name string, devs []device, def *device, capture bool, channels int) (device, error) {
	if name == "" {
		name = "default"
	}
	dir := direction(capture)
	check := func(d device) (device, error) {
		switch n := d.channels(capture); {
		case n == 0:
			return device{}, fmt.Errorf("%q has no %s channels (%s devices: %s): %w", d.name, dir, dir, listDevices(devs, capture), hal.ErrAbsent)
		case n < channels:
			return device{}, fmt.Errorf("%q has %d %s channels, not %d: %w", d.name, n, dir, channels, hal.ErrUnsupported)
		}
		return d, nil
	}
	for _, d := range devs {
		if d.name == name {
			return check(d)
		}
	}
	if name == "default" && def != nil {
		return check(*def)
	}
	sp := parseSpec(name)
	for _, d := range devs {
		if sp.cardMatches(d) && d.pcm == sp.pcm {
			return check(d)
		}
	}
	return device{}, fmt.Errorf("no %s device %q (%s devices: %s): %w", dir, name, dir, listDevices(devs, capture), hal.ErrAbsent)
}

// listDevices names the devices that can capture (or play), each with the
// CARD,DEV a config can name it by, for error messages.
func listDevices(devs []device, capture bool) string {
	var out []string
	for _, d := range devs {
		if d.channels(capture) == 0 {
			continue
		}
		s := strconv.Quote(d.name)
		if d.card >= 0 {
			id := d.cardID
			if id == "" {
				id = strconv.Itoa(d.card)
			}
			s = fmt.Sprintf("%s,%d %s", id, d.pcm, s)
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "; ")
}

// cardIDs reads the ALSA card ids under root (/proc/asound/cardN/id).
func cardIDs(root string) map[int]string {
	ids := map[int]string{}
	dirs, _ := filepath.Glob(filepath.Join(root, "proc", "asound", "card[0-9]*"))
	for _, dir := range dirs {
		n, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(dir), "card"))
		if err != nil {
			continue
		}
		if id, err := os.ReadFile(filepath.Join(dir, "id")); err == nil {
			ids[n] = strings.TrimSpace(string(id))
		}
	}
	return ids
}
