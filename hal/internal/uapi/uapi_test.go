package uapi

import (
	"encoding/binary"
	"testing"
	"unsafe"
)

// The structures must match the kernel's byte for byte, and the request
// numbers encode their sizes: v4l2_buffer, v4l2_format and input_event
// differ between 64-bit builds (amd64, arm64) and 32-bit ARM. The figures
// are the C compiler's for the kernel's headers (v4l2_buffer_time32 for
// 32-bit ARM).
func TestLayout(t *testing.T) {
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
		{"gpiochip_info", unsafe.Sizeof(GPIOChipInfo{}), 68},
		{"gpio_v2_line_attribute", unsafe.Sizeof(GPIOV2LineAttribute{}), 16},
		{"gpio_v2_line_config_attribute", unsafe.Sizeof(GPIOV2LineConfigAttribute{}), 24},
		{"gpio_v2_line_config", unsafe.Sizeof(GPIOV2LineConfig{}), 272},
		{"gpio_v2_line_request", unsafe.Sizeof(GPIOV2LineRequest{}), 592},
		{"gpio_v2_line_request.fd offset", unsafe.Offsetof(GPIOV2LineRequest{}.Fd), 588},
		{"gpio_v2_line_values", unsafe.Sizeof(GPIOV2LineValues{}), 16},
		{"gpio_v2_line_info", unsafe.Sizeof(GPIOV2LineInfo{}), 256},
		{"gpio_v2_line_info.flags offset", unsafe.Offsetof(GPIOV2LineInfo{}.Flags), 72},
		{"gpio_v2_line_event", unsafe.Sizeof(GPIOV2LineEvent{}), 48},
		{"gpio_v2_line_event.line_seqno offset", unsafe.Offsetof(GPIOV2LineEvent{}.LineSeqno), 20},
		{"GPIO_GET_CHIPINFO_IOCTL", GPIOGetChipInfo, 0x8044b401},
		{"GPIO_V2_GET_LINEINFO_IOCTL", GPIOV2GetLineInfo, 0xc100b405},
		{"GPIO_V2_GET_LINE_IOCTL", GPIOV2GetLine, 0xc250b407},
		{"GPIO_V2_LINE_SET_CONFIG_IOCTL", GPIOV2LineSetConfig, 0xc110b40d},
		{"GPIO_V2_LINE_GET_VALUES_IOCTL", GPIOV2LineGetValues, 0xc010b40e},
		{"GPIO_V2_LINE_SET_VALUES_IOCTL", GPIOV2LineSetValues, 0xc010b40f},

		{"v4l2_capability", unsafe.Sizeof(V4L2Capability{}), 104},
		{"v4l2_pix_format", unsafe.Sizeof(V4L2PixFormat{}), 48},
		{"v4l2_format", unsafe.Sizeof(V4L2Format{}), pick(208, 204)},
		{"v4l2_format.fmt offset", unsafe.Offsetof(V4L2Format{}.Pix), pick(8, 4)},
		{"v4l2_captureparm", unsafe.Sizeof(V4L2CaptureParm{}), 40},
		{"v4l2_streamparm", unsafe.Sizeof(V4L2StreamParm{}), 204},
		{"v4l2_requestbuffers", unsafe.Sizeof(V4L2RequestBuffers{}), 20},
		{"v4l2_timecode", unsafe.Sizeof(V4L2Timecode{}), 16},
		{"v4l2_buffer", unsafe.Sizeof(V4L2Buffer{}), pick(88, 68)},
		{"v4l2_buffer.timestamp offset", unsafe.Offsetof(V4L2Buffer{}.Timestamp), pick(24, 20)},
		{"v4l2_buffer.sequence offset", unsafe.Offsetof(V4L2Buffer{}.Sequence), pick(56, 44)},
		{"v4l2_buffer.m offset", unsafe.Offsetof(V4L2Buffer{}.Offset), pick(64, 52)},
		{"v4l2_buffer.length offset", unsafe.Offsetof(V4L2Buffer{}.Length), pick(72, 56)},
		{"v4l2_buffer.request_fd offset", unsafe.Offsetof(V4L2Buffer{}.RequestFD), pick(80, 64)},
		{"v4l2_queryctrl", unsafe.Sizeof(V4L2QueryCtrl{}), 68},
		{"v4l2_control", unsafe.Sizeof(V4L2Control{}), 8},
		{"v4l2_querymenu", unsafe.Sizeof(V4L2QueryMenu{}), 44},
		{"VIDIOC_QUERYCAP", VIDIOCQueryCap, 0x80685600},
		{"VIDIOC_G_FMT", VIDIOCGFmt, pick(0xc0d05604, 0xc0cc5604)},
		{"VIDIOC_S_FMT", VIDIOCSFmt, pick(0xc0d05605, 0xc0cc5605)},
		{"VIDIOC_REQBUFS", VIDIOCReqBufs, 0xc0145608},
		{"VIDIOC_QUERYBUF", VIDIOCQueryBuf, pick(0xc0585609, 0xc0445609)},
		{"VIDIOC_QBUF", VIDIOCQBuf, pick(0xc058560f, 0xc044560f)},
		{"VIDIOC_DQBUF", VIDIOCDQBuf, pick(0xc0585611, 0xc0445611)},
		{"VIDIOC_STREAMON", VIDIOCStreamOn, 0x40045612},
		{"VIDIOC_STREAMOFF", VIDIOCStreamOff, 0x40045613},
		{"VIDIOC_G_PARM", VIDIOCGParm, 0xc0cc5615},
		{"VIDIOC_S_PARM", VIDIOCSParm, 0xc0cc5616},
		{"VIDIOC_G_CTRL", VIDIOCGCtrl, 0xc008561b},
		{"VIDIOC_S_CTRL", VIDIOCSCtrl, 0xc008561c},
		{"VIDIOC_QUERYCTRL", VIDIOCQueryCtrl, 0xc0445624},
		{"VIDIOC_QUERYMENU", VIDIOCQueryMenu, 0xc02c5625},

		{"i2c_smbus_ioctl_data", unsafe.Sizeof(I2CSMBusIoctlData{}), pick(16, 12)},
		{"i2c_smbus_ioctl_data.data offset", unsafe.Offsetof(I2CSMBusIoctlData{}.Data), 8},
		{"i2c_smbus_data", unsafe.Sizeof(I2CSMBusData{}), 34},
		{"uleds_user_dev", unsafe.Sizeof(ULedsUserDev{}), 68},

		{"input_event", unsafe.Sizeof(InputEvent{}), pick(24, 16)},
		{"input_event.type offset", unsafe.Offsetof(InputEvent{}.Type), pick(16, 8)},
		{"EVIOCGRAB", EVIOCGrab, 0x40044590},
		{"EVIOCSCLOCKID", EVIOCSClockID, 0x400445a0},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %d (0x%x), want %d (0x%x)", tc.name, tc.got, tc.got, tc.want, tc.want)
		}
	}
}

func TestDecodeGPIOV2LineEvent(t *testing.T) {
	b := make([]byte, 2*GPIOV2LineEventSize)
	ne := binary.NativeEndian
	ne.PutUint64(b[0:], 123456789012)
	ne.PutUint32(b[8:], GPIOV2LineEventFallingEdge)
	ne.PutUint32(b[12:], 7)
	ne.PutUint32(b[16:], 41)
	ne.PutUint32(b[20:], 5)
	want := GPIOV2LineEvent{TimestampNS: 123456789012, ID: GPIOV2LineEventFallingEdge, Offset: 7, Seqno: 41, LineSeqno: 5}
	if got := DecodeGPIOV2LineEvent(b); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestDecodeInputEvent(t *testing.T) {
	b := make([]byte, InputEventSize)
	ne := binary.NativeEndian
	if InputEventSize == 24 {
		ne.PutUint64(b[0:], 1234)
		ne.PutUint64(b[8:], 567890)
	} else {
		ne.PutUint32(b[0:], 1234)
		ne.PutUint32(b[4:], 567890)
	}
	tail := b[InputEventSize-8:]
	ne.PutUint16(tail[0:], 1)  // EV_KEY
	ne.PutUint16(tail[2:], 30) // KEY_A
	ne.PutUint32(tail[4:], 1)  // down
	want := InputEvent{Time: Timeval{Sec: 1234, Usec: 567890}, Type: 1, Code: 30, Value: 1}
	if got := DecodeInputEvent(b); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestNodeCaps(t *testing.T) {
	c := V4L2Capability{Capabilities: V4L2CapDeviceCaps | V4L2CapVideoCapture | V4L2CapMetaCapture, DeviceCaps: V4L2CapMetaCapture}
	if got := c.NodeCaps(); got != V4L2CapMetaCapture {
		t.Errorf("with device_caps: 0x%x, want the node's 0x%x", got, V4L2CapMetaCapture)
	}
	c.Capabilities &^= V4L2CapDeviceCaps // an old driver without device_caps
	if got := c.NodeCaps(); got != V4L2CapVideoCapture|V4L2CapMetaCapture {
		t.Errorf("without device_caps: 0x%x, want the device's", got)
	}
}

func TestCString(t *testing.T) {
	var b [16]byte
	copy(b[:], "vivid")
	if got := CString(b[:]); got != "vivid" {
		t.Errorf("%q", got)
	}
	full := []byte("0123456789abcdef")
	if got := CString(full); got != string(full) {
		t.Errorf("no NUL: %q", got)
	}
}
