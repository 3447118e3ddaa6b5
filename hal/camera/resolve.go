package camera

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/internal/uapi"
)

// capInfo is what VIDIOC_QUERYCAP says about a device node.
type capInfo struct {
	Driver, Card, Bus string
	// Caps are the node's own capabilities (device_caps) when the driver
	// gives them, else the whole device's.
	Caps uint32
}

func (c capInfo) capture() bool   { return c.Caps&uapi.V4L2CapVideoCapture != 0 }
func (c capInfo) streaming() bool { return c.Caps&uapi.V4L2CapStreaming != 0 }

func (c capInfo) String() string { return fmt.Sprintf("%s, %q", c.Driver, c.Card) }

// csiDrivers are the V4L2 drivers of SoC camera interfaces whose sensors
// are configured through the media controller, which is libcamera's job:
// the Raspberry Pi's Unicam (bcm2835-unicam, driver name "unicam") and
// RP1 CFE, and the Jetson's VI (tegra-video).
var csiDrivers = map[string]bool{
	"unicam":         true,
	"bcm2835-unicam": true,
	"rp1-cfe":        true,
	"tegra-video":    true,
}

// csi reports a media-controller-centric capture node (V4L2_CAP_IO_MC) or
// a known SoC camera interface: one that plain V4L2 streaming cannot use
// unless its pipeline was set up from outside.
func (c capInfo) csi() bool { return c.Caps&uapi.V4L2CapIOMC != 0 || csiDrivers[c.Driver] }

// explain makes the error for a node that failed: for a CSI camera it
// says that it needs libcamera, with what failed as the symptom; for
// others it names the node and what failed.
func explain(node string, c capInfo, failure error) error {
	if !c.csi() {
		return fmt.Errorf("camera: %s (%s): %w", node, c, failure)
	}
	how := "its driver sets its sensor up through the media controller"
	if c.Caps&uapi.V4L2CapIOMC != 0 {
		how = "its input is routed by the media controller (V4L2_CAP_IO_MC)"
	}
	return fmt.Errorf("camera: %s (%s) is a CSI camera that needs libcamera; %s, and plain V4L2 capture failed: %w: %w",
		node, c, how, failure, hal.ErrUnsupported)
}

// resolver finds capture nodes under root ("/" on a device, a prepared
// tree in tests), asking each node about itself with query.
type resolver struct {
	root  string
	query func(node string) (capInfo, error)
}

const (
	byID   = "/dev/v4l/by-id"
	byPath = "/dev/v4l/by-path"
)

// locate finds the node device names and returns the name to find it by
// again after it went away: a /dev/v4l symlink or a bare name is stable
// and kept; for a /dev/videoN node, the by-id (else by-path) link udev
// made for it, because the number can change when the camera is plugged
// in again; with neither, the node itself.
func (r resolver) locate(device string) (node string, info capInfo, stable string, err error) {
	node, info, err = r.find(device)
	if err != nil {
		return "", capInfo{}, "", err
	}
	stable = device
	if device == "" || strings.HasPrefix(device, "/dev/video") {
		stable = node
		for _, dir := range []string{byID, byPath} {
			if link := r.linkTo(dir, node); link != "" {
				stable = link
				break
			}
		}
	}
	return node, info, stable, nil
}

// find resolves a device name to a capture node:
//
//   - an absolute path: a node or a symlink to one (/dev/v4l/by-id/...);
//   - a bare name: a /dev/v4l/by-id entry of that name, else the one
//     entry whose name contains it, else the first capture node whose
//     card (VIDIOC_QUERYCAP) is that name, else the first whose driver is;
//   - "": the first capture node that is not a CSI camera.
//
// A name that matches nothing wraps hal.ErrAbsent and lists what there is.
func (r resolver) find(device string) (string, capInfo, error) {
	switch {
	case device == "":
		return r.scan("camera that is not a CSI camera", func(_ string, c capInfo) bool { return !c.csi() })
	case filepath.IsAbs(device):
		node, err := r.deref(device)
		if errors.Is(err, fs.ErrNotExist) {
			return "", capInfo{}, fmt.Errorf("camera: no device at %s: %w", device, hal.ErrAbsent)
		}
		if err != nil {
			return "", capInfo{}, fmt.Errorf("camera: %s: %w", device, err)
		}
		c, err := r.capture(node)
		return node, c, err
	case strings.ContainsRune(device, '/'):
		return "", capInfo{}, fmt.Errorf("camera: device %q is neither an absolute path nor a bare name", device)
	}
	links := r.entries(byID)
	if node, err := r.deref(filepath.Join(byID, device)); err == nil {
		c, err := r.capture(node)
		return node, c, err
	}
	var nodes []string
	var infos []capInfo
	for _, l := range links {
		if !strings.Contains(l, device) {
			continue
		}
		node, err := r.deref(filepath.Join(byID, l))
		if err != nil {
			continue
		}
		if c, err := r.query(node); err == nil && c.capture() && !slices.Contains(nodes, node) {
			nodes, infos = append(nodes, node), append(infos, c)
		}
	}
	switch len(nodes) {
	case 1:
		return nodes[0], infos[0], nil
	case 0:
	default:
		return "", capInfo{}, fmt.Errorf("camera: %q names several cameras in %s (%s); give the whole name", device, byID, strings.Join(nodes, ", "))
	}
	if node, c, err := r.scan("", func(_ string, c capInfo) bool { return c.Card == device }); err == nil {
		return node, c, nil
	}
	node, c, err := r.scan(fmt.Sprintf("camera named %q (entries of %s: %s)", device, byID, list(links)),
		func(_ string, c capInfo) bool { return c.Driver == device })
	return node, c, err
}

func list(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// capture asks node and checks that it captures video.
func (r resolver) capture(node string) (capInfo, error) {
	c, err := r.query(node)
	if err != nil {
		return c, err
	}
	if !c.capture() {
		if c.Caps&uapi.V4L2CapVideoCaptureMPlane != 0 {
			return c, explain(node, c, fmt.Errorf("it offers only the multi-planar API, which this driver does not do: %w", hal.ErrUnsupported))
		}
		what := "not a video capture device"
		if c.Caps&uapi.V4L2CapMetaCapture != 0 {
			what = "a metadata node, not the video one"
		}
		return c, fmt.Errorf("camera: %s (%s) is %s", node, c, what)
	}
	return c, nil
}

// scan returns the first capture node, in number order, that match
// accepts. want names what was looked for in the error.
func (r resolver) scan(want string, match func(string, capInfo) bool) (string, capInfo, error) {
	var seen []string
	var errs []error
	for _, node := range r.nodes() {
		c, err := r.query(node)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !c.capture() {
			continue
		}
		seen = append(seen, fmt.Sprintf("%s (%s)", node, c))
		if match(node, c) {
			return node, c, nil
		}
	}
	err := fmt.Errorf("camera: no %s among the capture devices (%s): %w", want, list(seen), hal.ErrAbsent)
	if len(errs) > 0 {
		// A node that could not be asked may be the one wanted.
		err = fmt.Errorf("camera: no %s among the capture devices that answered (%s): %w", want, list(seen), errors.Join(errs...))
	}
	return "", capInfo{}, err
}

// nodes lists /dev/video* in number order (video2 before video10).
func (r resolver) nodes() []string {
	m, _ := filepath.Glob(filepath.Join(r.root, "dev", "video*"))
	var out []string
	for _, p := range m {
		if _, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(p), "video")); err == nil {
			out = append(out, "/dev/"+filepath.Base(p))
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, _ := strconv.Atoi(strings.TrimPrefix(out[i], "/dev/video"))
		b, _ := strconv.Atoi(strings.TrimPrefix(out[j], "/dev/video"))
		return a < b
	})
	return out
}

// entries lists the names in a /dev/v4l directory.
func (r resolver) entries(dir string) []string {
	des, _ := os.ReadDir(filepath.Join(r.root, dir))
	var out []string
	for _, d := range des {
		out = append(out, d.Name())
	}
	return out
}

// deref follows the symlinks at p (udev's are relative, one level; a
// chain is followed a few steps) and returns the node path without root.
func (r resolver) deref(p string) (string, error) {
	for range 8 {
		fi, err := os.Lstat(filepath.Join(r.root, p))
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return p, nil
		}
		t, err := os.Readlink(filepath.Join(r.root, p))
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(t) {
			t = filepath.Join(filepath.Dir(p), t)
		}
		p = filepath.Clean(t)
	}
	return "", fmt.Errorf("too many levels of symbolic links at %s", p)
}

// linkTo returns the entry of dir that points at node, or "".
func (r resolver) linkTo(dir, node string) string {
	for _, e := range r.entries(dir) {
		l := filepath.Join(dir, e)
		if n, err := r.deref(l); err == nil && n == node {
			return l
		}
	}
	return ""
}
