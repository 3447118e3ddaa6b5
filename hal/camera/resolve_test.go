package camera

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/internal/uapi"
)

const (
	capture = uapi.V4L2CapVideoCapture | uapi.V4L2CapStreaming
	c920ID  = "usb-046d_HD_Pro_Webcam_C920_8A1B2C3D-video-index0"
	c920Bus = "platform-xhci-hcd.0-usb-0:1:1.0-video-index0"
)

// testTree makes a /dev like a Raspberry Pi's with a UVC webcam, a cheap
// second one, and vivid: nodes (empty files), udev's links, and what
// each node answers to VIDIOC_QUERYCAP.
func testTree(t *testing.T) resolver {
	t.Helper()
	root := t.TempDir()
	caps := map[string]capInfo{
		"/dev/video0":  {Driver: "unicam", Card: "unicam", Caps: capture | uapi.V4L2CapIOMC},
		"/dev/video1":  {Driver: "vivid", Card: "vivid", Caps: uapi.V4L2CapVideoOutput | uapi.V4L2CapStreaming},
		"/dev/video2":  {Driver: "uvcvideo", Card: "HD Pro Webcam C920", Caps: capture},
		"/dev/video3":  {Driver: "uvcvideo", Card: "HD Pro Webcam C920", Caps: uapi.V4L2CapMetaCapture | uapi.V4L2CapStreaming},
		"/dev/video4":  {Driver: "vivid", Card: "vivid", Caps: capture},
		"/dev/video10": {Driver: "uvcvideo", Card: "USB Camera", Caps: capture},
	}
	for node := range caps {
		write(t, filepath.Join(root, node), "")
	}
	links := map[string]string{
		"dev/v4l/by-id/" + c920ID: "../../video2",
		"dev/v4l/by-id/usb-046d_HD_Pro_Webcam_C920_8A1B2C3D-video-index1": "../../video3",
		"dev/v4l/by-id/usb-Generic_USB_Camera-video-index0":               "../../video10",
		"dev/v4l/by-id/usb-Gone_Camera-video-index0":                      "../../video7", // unplugged
		"dev/v4l/by-path/" + c920Bus:                                      "../../video2",
	}
	for l, target := range links {
		p := filepath.Join(root, l)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	return resolver{root: root, query: func(node string) (capInfo, error) {
		if _, err := os.Stat(filepath.Join(root, node)); err != nil {
			return capInfo{}, err
		}
		c, ok := caps[node]
		if !ok {
			return capInfo{}, &fs.PathError{Op: "query", Path: node, Err: syscall.ENOTTY}
		}
		return c, nil
	}}
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFind(t *testing.T) {
	r := testTree(t)
	for _, tc := range []struct {
		name, device string
		want         string // node; "" when an error is wanted
		err          string
		absent       bool
	}{
		{"node", "/dev/video2", "/dev/video2", "", false},
		{"by-id link", "/dev/v4l/by-id/" + c920ID, "/dev/video2", "", false},
		{"by-path link", "/dev/v4l/by-path/" + c920Bus, "/dev/video2", "", false},
		{"by-id entry name", c920ID, "/dev/video2", "", false},
		{"part of a by-id name: the capture node, not the metadata one", "C920", "/dev/video2", "", false},
		{"card", "USB Camera", "/dev/video10", "", false},
		{"card of several nodes: the capture one", "vivid", "/dev/video4", "", false},
		{"driver: the first capture node", "uvcvideo", "/dev/video2", "", false},
		{"empty: the first that is not a CSI camera", "", "/dev/video2", "", false},
		{"a CSI camera by name is found (and refused when opened)", "unicam", "/dev/video0", "", false},
		{"ambiguous part of a name", "usb-", "", `"usb-" names several cameras in /dev/v4l/by-id (/dev/video2, /dev/video10); give the whole name`, false},
		{"metadata node", "/dev/video3", "", `/dev/video3 (uvcvideo, "HD Pro Webcam C920") is a metadata node, not the video one`, false},
		{"output node", "/dev/video1", "", `/dev/video1 (vivid, "vivid") is not a video capture device`, false},
		{"missing node", "/dev/video7", "", "no device at /dev/video7", true},
		{"unplugged by-id link", "/dev/v4l/by-id/usb-Gone_Camera-video-index0", "", "no device at /dev/v4l/by-id/usb-Gone_Camera-video-index0", true},
		{"unknown name", "Logitech Brio", "", `no camera named "Logitech Brio"`, true},
		{"relative path", "dev/video0", "", `device "dev/video0" is neither an absolute path nor a bare name`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node, c, err := r.find(tc.device)
			if tc.want == "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("%s, %v; want an error with %q", node, err, tc.err)
				}
				if errors.Is(err, hal.ErrAbsent) != tc.absent {
					t.Errorf("%v: ErrAbsent is %v, want %v", err, !tc.absent, tc.absent)
				}
				return
			}
			if err != nil || node != tc.want {
				t.Fatalf("%s, %v; want %s", node, err, tc.want)
			}
			if want, _ := r.query(tc.want); c != want {
				t.Errorf("info %+v, want %+v", c, want)
			}
		})
	}
}

func TestFindListsWhatThereIs(t *testing.T) {
	_, _, err := testTree(t).find("Logitech Brio")
	for _, want := range []string{c920ID, "/dev/video2 (uvcvideo, \"HD Pro Webcam C920\")", "/dev/video4 (vivid, \"vivid\")"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: does not list %s", err, want)
		}
	}
}

func TestFindUnreadableNodeIsNotAbsent(t *testing.T) {
	r := testTree(t)
	write(t, filepath.Join(r.root, "dev/video5"), "") // a node query cannot ask
	_, _, err := r.find("Logitech Brio")
	if err == nil || errors.Is(err, hal.ErrAbsent) || !strings.Contains(err.Error(), "/dev/video5") {
		t.Errorf("%v: want an error naming the unreadable /dev/video5, not ErrAbsent (it may be the camera)", err)
	}
}

func TestLocateKeepsAStableName(t *testing.T) {
	r := testTree(t)
	for _, tc := range []struct{ device, node, stable string }{
		{"/dev/video2", "/dev/video2", "/dev/v4l/by-id/" + c920ID},
		{"/dev/video4", "/dev/video4", "/dev/video4"}, // vivid has no udev links
		{"", "/dev/video2", "/dev/v4l/by-id/" + c920ID},
		{"C920", "/dev/video2", "C920"},
		{"vivid", "/dev/video4", "vivid"},
		{"/dev/v4l/by-path/" + c920Bus, "/dev/video2", "/dev/v4l/by-path/" + c920Bus},
	} {
		node, _, stable, err := r.locate(tc.device)
		if err != nil || node != tc.node || stable != tc.stable {
			t.Errorf("locate(%q): %s, %q, %v; want %s, %q", tc.device, node, stable, err, tc.node, tc.stable)
		}
	}
}

func TestNodesInNumberOrder(t *testing.T) {
	r := testTree(t)
	write(t, filepath.Join(r.root, "dev/video-not-a-node"), "")
	want := []string{"/dev/video0", "/dev/video1", "/dev/video2", "/dev/video3", "/dev/video4", "/dev/video10"}
	if got := r.nodes(); !reflect.DeepEqual(got, want) {
		t.Errorf("%v, want %v", got, want)
	}
}

func TestCSICamerasNeedLibcamera(t *testing.T) {
	failure := errors.New("VIDIOC_STREAMON: broken pipe")
	for _, tc := range []struct {
		name string
		info capInfo
		csi  string // the reason in the message; "" when not a CSI camera
	}{
		{"UVC webcam", capInfo{Driver: "uvcvideo", Card: "HD Pro Webcam C920", Caps: capture}, ""},
		{"vivid", capInfo{Driver: "vivid", Card: "vivid", Caps: capture}, ""},
		{"Pi 4 Unicam", capInfo{Driver: "unicam", Card: "unicam", Caps: capture}, "its driver sets its sensor up through the media controller"},
		{"Pi 4 Unicam, media-controller mode", capInfo{Driver: "unicam", Card: "unicam", Caps: capture | uapi.V4L2CapIOMC}, "routed by the media controller (V4L2_CAP_IO_MC)"},
		{"Pi 5 RP1 CFE", capInfo{Driver: "rp1-cfe", Card: "rp1-cfe", Caps: capture | uapi.V4L2CapIOMC}, "V4L2_CAP_IO_MC"},
		{"Jetson VI", capInfo{Driver: "tegra-video", Card: "vi-output, imx219 9-0010", Caps: capture}, "its driver sets its sensor up"},
		{"any media-controller node", capInfo{Driver: "rkisp1", Card: "rkisp1", Caps: capture | uapi.V4L2CapIOMC}, "V4L2_CAP_IO_MC"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.info.csi(); got != (tc.csi != "") {
				t.Errorf("csi() = %v", got)
			}
			err := explain("/dev/video0", tc.info, failure)
			if !errors.Is(err, failure) {
				t.Errorf("%v does not wrap the failure", err)
			}
			msg := err.Error()
			if tc.csi == "" {
				if errors.Is(err, hal.ErrUnsupported) || strings.Contains(msg, "libcamera") {
					t.Errorf("a %s is not a CSI camera: %v", tc.info.Driver, err)
				}
				return
			}
			want := "camera: /dev/video0 (" + tc.info.Driver + `, "` + tc.info.Card + `") is a CSI camera that needs libcamera; `
			if !strings.HasPrefix(msg, want) || !strings.Contains(msg, tc.csi) || !errors.Is(err, hal.ErrUnsupported) {
				t.Errorf("%v\nwant it to start %q, say %q and wrap ErrUnsupported", err, want, tc.csi)
			}
		})
	}
}

func TestMultiPlanarCSINodeIsExplained(t *testing.T) {
	r := resolver{root: t.TempDir(), query: func(string) (capInfo, error) {
		return capInfo{Driver: "rp1-cfe", Card: "rp1-cfe", Caps: uapi.V4L2CapVideoCaptureMPlane | uapi.V4L2CapStreaming | uapi.V4L2CapIOMC}, nil
	}}
	write(t, filepath.Join(r.root, "dev/video0"), "")
	_, _, err := r.find("/dev/video0")
	if err == nil || !strings.Contains(err.Error(), "is a CSI camera that needs libcamera") || !strings.Contains(err.Error(), "multi-planar") {
		t.Errorf("%v: want the libcamera reason with the multi-planar symptom", err)
	}
}
