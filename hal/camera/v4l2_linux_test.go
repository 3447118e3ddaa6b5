//go:build linux

package camera

import (
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tobe-body/tobe-body/hal"
)

// The structures must match the kernel's byte for byte, and the request
// numbers encode their sizes: v4l2_buffer and v4l2_format differ between
// 64-bit builds (amd64, arm64) and 32-bit ARM. The figures are the C
// compiler's for linux/videodev2.h (v4l2_buffer_time32 for 32-bit ARM).
func TestUAPILayout(t *testing.T) {
	wide := unsafe.Sizeof(uintptr(0)) == 8
	pick := func(w, n uintptr) uintptr {
		if wide {
			return w
		}
		return n
	}
	for _, tc := range []struct {
		name      string
		got, want uintptr
	}{
		{"v4l2_capability", unsafe.Sizeof(v4l2Capability{}), 104},
		{"v4l2_pix_format", unsafe.Sizeof(v4l2PixFormat{}), 48},
		{"v4l2_format", unsafe.Sizeof(v4l2Format{}), pick(208, 204)},
		{"v4l2_format.fmt offset", unsafe.Offsetof(v4l2Format{}.Pix), pick(8, 4)},
		{"v4l2_captureparm", unsafe.Sizeof(v4l2CaptureParm{}), 40},
		{"v4l2_streamparm", unsafe.Sizeof(v4l2StreamParm{}), 204},
		{"v4l2_requestbuffers", unsafe.Sizeof(v4l2RequestBuffers{}), 20},
		{"v4l2_timecode", unsafe.Sizeof(v4l2Timecode{}), 16},
		{"v4l2_buffer", unsafe.Sizeof(v4l2Buffer{}), pick(88, 68)},
		{"v4l2_buffer.timestamp offset", unsafe.Offsetof(v4l2Buffer{}.Timestamp), pick(24, 20)},
		{"v4l2_buffer.sequence offset", unsafe.Offsetof(v4l2Buffer{}.Sequence), pick(56, 44)},
		{"v4l2_buffer.m offset", unsafe.Offsetof(v4l2Buffer{}.Offset), pick(64, 52)},
		{"v4l2_buffer.length offset", unsafe.Offsetof(v4l2Buffer{}.Length), pick(72, 56)},
		{"v4l2_buffer.request_fd offset", unsafe.Offsetof(v4l2Buffer{}.RequestFD), pick(80, 64)},
		{"VIDIOC_QUERYCAP", vidiocQueryCap, 0x80685600},
		{"VIDIOC_G_FMT", vidiocGFmt, pick(0xc0d05604, 0xc0cc5604)},
		{"VIDIOC_S_FMT", vidiocSFmt, pick(0xc0d05605, 0xc0cc5605)},
		{"VIDIOC_REQBUFS", vidiocReqBufs, 0xc0145608},
		{"VIDIOC_QUERYBUF", vidiocQueryBuf, pick(0xc0585609, 0xc0445609)},
		{"VIDIOC_QBUF", vidiocQBuf, pick(0xc058560f, 0xc044560f)},
		{"VIDIOC_DQBUF", vidiocDQBuf, pick(0xc0585611, 0xc0445611)},
		{"VIDIOC_STREAMON", vidiocStreamOn, 0x40045612},
		{"VIDIOC_STREAMOFF", vidiocStreamOff, 0x40045613},
		{"VIDIOC_G_PARM", vidiocGParm, 0xc0cc5615},
		{"VIDIOC_S_PARM", vidiocSParm, 0xc0cc5616},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %d (0x%x), want %d (0x%x)", tc.name, tc.got, tc.got, tc.want, tc.want)
		}
	}
}

func TestCapInfoPrefersDeviceCaps(t *testing.T) {
	c := v4l2Capability{Capabilities: capDeviceCapsFlag | capVideoCapture | capMetaCapture | capStreaming, DeviceCaps: capMetaCapture | capStreaming}
	copy(c.Driver[:], "uvcvideo")
	copy(c.Card[:], "HD Pro Webcam C920")
	got := capInfoOf(&c)
	if got.Driver != "uvcvideo" || got.Card != "HD Pro Webcam C920" || got.capture() {
		t.Errorf("%+v: the metadata node of a UVC camera must not count as a capture node", got)
	}
	c.Capabilities &^= capDeviceCapsFlag // an old driver without device_caps
	if !capInfoOf(&c).capture() {
		t.Error("without device_caps the device's capabilities count")
	}
}

func TestBufferTime(t *testing.T) {
	const now = hal.Mono(42 * time.Second)
	at := unix.Timeval{Sec: 1234, Usec: 567890}
	want := hal.Mono(1234*time.Second + 567890*time.Microsecond)
	for _, tc := range []struct {
		name   string
		flags  uint32
		ts     unix.Timeval
		want   hal.Mono
		driver bool
	}{
		{"monotonic", bufFlagTimestampMono, at, want, true},
		{"monotonic, start of exposure", bufFlagTimestampMono | 0x00010000, at, want, true},
		{"monotonic but left zero", bufFlagTimestampMono, unix.Timeval{}, now, false},
		{"copied from an output buffer", 0x00004000, at, now, false},
		{"unknown clock", 0, at, now, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := v4l2Buffer{Flags: tc.flags | bufFlagError, Timestamp: tc.ts} // other flags do not matter
			got, driver := bufferTime(&b, func() hal.Mono { return now })
			if got != tc.want || driver != tc.driver {
				t.Errorf("%v, %v; want %v, %v", got, driver, tc.want, tc.driver)
			}
		})
	}
}

func TestGoodBuffers(t *testing.T) {
	s := &session{need: 100, bufs: [][]byte{make([]byte, 128)}}
	for _, tc := range []struct {
		name  string
		flags uint32
		used  uint32
		want  bool
	}{
		{"whole frame", bufFlagTimestampMono, 100, true},
		{"padded", 0, 128, true},
		{"flagged V4L2_BUF_FLAG_ERROR", bufFlagError, 100, false},
		{"short", 0, 99, false},
		{"longer than its buffer", 0, 129, false},
	} {
		if got := s.good(&v4l2Buffer{Flags: tc.flags, BytesUsed: tc.used}); got != tc.want {
			t.Errorf("%s: good %v, want %v", tc.name, got, tc.want)
		}
	}
}
