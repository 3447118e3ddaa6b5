//go:build linux

package camera

import (
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/internal/uapi"
)

func TestCapInfoPrefersDeviceCaps(t *testing.T) {
	c := uapi.V4L2Capability{Capabilities: uapi.V4L2CapDeviceCaps | uapi.V4L2CapVideoCapture | uapi.V4L2CapMetaCapture | uapi.V4L2CapStreaming, DeviceCaps: uapi.V4L2CapMetaCapture | uapi.V4L2CapStreaming}
	copy(c.Driver[:], "uvcvideo")
	copy(c.Card[:], "HD Pro Webcam C920")
	got := capInfoOf(&c)
	if got.Driver != "uvcvideo" || got.Card != "HD Pro Webcam C920" || got.capture() {
		t.Errorf("%+v: the metadata node of a UVC camera must not count as a capture node", got)
	}
	c.Capabilities &^= uapi.V4L2CapDeviceCaps // an old driver without device_caps
	if !capInfoOf(&c).capture() {
		t.Error("without device_caps the device's capabilities count")
	}
}

func TestBufferTime(t *testing.T) {
	const now = hal.Mono(42 * time.Second)
	at := uapi.Timeval{Sec: 1234, Usec: 567890}
	want := hal.Mono(1234*time.Second + 567890*time.Microsecond)
	for _, tc := range []struct {
		name   string
		flags  uint32
		ts     uapi.Timeval
		want   hal.Mono
		driver bool
	}{
		{"monotonic", uapi.V4L2BufFlagTimestampMonotonic, at, want, true},
		{"monotonic, start of exposure", uapi.V4L2BufFlagTimestampMonotonic | uapi.V4L2BufFlagTstampSrcSOE, at, want, true},
		{"monotonic but left zero", uapi.V4L2BufFlagTimestampMonotonic, uapi.Timeval{}, now, false},
		{"copied from an output buffer", uapi.V4L2BufFlagTimestampCopy, at, now, false},
		{"unknown clock", 0, at, now, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := uapi.V4L2Buffer{Flags: tc.flags | uapi.V4L2BufFlagError, Timestamp: tc.ts} // other flags do not matter
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
		{"whole frame", uapi.V4L2BufFlagTimestampMonotonic, 100, true},
		{"padded", 0, 128, true},
		{"flagged V4L2_BUF_FLAG_ERROR", uapi.V4L2BufFlagError, 100, false},
		{"short", 0, 99, false},
		{"longer than its buffer", 0, 129, false},
	} {
		if got := s.good(&uapi.V4L2Buffer{Flags: tc.flags, BytesUsed: tc.used}); got != tc.want {
			t.Errorf("%s: good %v, want %v", tc.name, got, tc.want)
		}
	}
}
