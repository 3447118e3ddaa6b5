package uapi

import "unsafe"

// V4L2 (linux/videodev2.h). A struct timeval of two longs and a
// pointer-sized union make struct v4l2_buffer 88 bytes on amd64 and arm64
// and 68 on 32-bit ARM (the layout the kernel keeps as
// v4l2_buffer_time32 for 32-bit time_t userspace, which Go's is); struct
// v4l2_format's union holds pointers, so it is 208 and 204 bytes.

// V4L2Capability is struct v4l2_capability.
type V4L2Capability struct {
	Driver       [16]byte
	Card         [32]byte
	BusInfo      [32]byte
	Version      uint32
	Capabilities uint32
	DeviceCaps   uint32
	Reserved     [3]uint32
}

// NodeCaps are the node's own capabilities (device_caps) when the driver
// gives them (V4L2_CAP_DEVICE_CAPS), else the whole device's: a UVC
// camera's metadata node shares its device's capture capability but has
// none of its own.
func (c *V4L2Capability) NodeCaps() uint32 {
	if c.Capabilities&V4L2CapDeviceCaps != 0 {
		return c.DeviceCaps
	}
	return c.Capabilities
}

// V4L2PixFormat is struct v4l2_pix_format.
type V4L2PixFormat struct {
	Width        uint32
	Height       uint32
	PixelFormat  uint32
	Field        uint32
	BytesPerLine uint32
	SizeImage    uint32
	Colorspace   uint32
	Priv         uint32
	Flags        uint32
	YcbcrEnc     uint32
	Quantization uint32
	XferFunc     uint32
}

// V4L2Format is struct v4l2_format with its union as the single-planar
// pixel format.
type V4L2Format struct {
	Type uint32
	_    [0]uintptr // the union holds pointers (struct v4l2_window)
	Pix  V4L2PixFormat
	_    [200 - unsafe.Sizeof(V4L2PixFormat{})]byte
}

// V4L2Fract is struct v4l2_fract.
type V4L2Fract struct {
	Numerator   uint32
	Denominator uint32
}

// V4L2CaptureParm is struct v4l2_captureparm.
type V4L2CaptureParm struct {
	Capability   uint32
	CaptureMode  uint32
	TimePerFrame V4L2Fract
	ExtendedMode uint32
	ReadBuffers  uint32
	Reserved     [4]uint32
}

// V4L2StreamParm is struct v4l2_streamparm with its union as the capture
// parameters.
type V4L2StreamParm struct {
	Type    uint32
	Capture V4L2CaptureParm
	_       [200 - unsafe.Sizeof(V4L2CaptureParm{})]byte
}

// V4L2RequestBuffers is struct v4l2_requestbuffers.
type V4L2RequestBuffers struct {
	Count        uint32
	Type         uint32
	Memory       uint32
	Capabilities uint32
	Flags        uint8
	Reserved     [3]uint8
}

// V4L2Timecode is struct v4l2_timecode.
type V4L2Timecode struct {
	Type     uint32
	Flags    uint32
	Frames   uint8
	Seconds  uint8
	Minutes  uint8
	Hours    uint8
	Userbits [4]uint8
}

// V4L2Buffer is struct v4l2_buffer with its union m as the offset of an
// MMAP buffer.
type V4L2Buffer struct {
	Index     uint32
	Type      uint32
	BytesUsed uint32
	Flags     uint32
	Field     uint32
	Timestamp Timeval
	Timecode  V4L2Timecode
	Sequence  uint32
	Memory    uint32
	// Offset is the union m's offset member; the union is as wide as a
	// pointer (unsigned long userptr).
	Offset    uint32
	_         [unsafe.Sizeof(uintptr(0)) - 4]byte
	Length    uint32
	Reserved2 uint32
	RequestFD int32
}

// V4L2QueryCtrl is struct v4l2_queryctrl.
type V4L2QueryCtrl struct {
	ID       uint32
	Type     uint32
	Name     [32]byte
	Min      int32
	Max      int32
	Step     int32
	Default  int32
	Flags    uint32
	Reserved [2]uint32
}

// V4L2Control is struct v4l2_control.
type V4L2Control struct {
	ID    uint32
	Value int32
}

// V4L2QueryMenu is struct v4l2_querymenu with its union as the item's
// name. The kernel's is packed: 4+4+32+4 bytes, no padding here either.
type V4L2QueryMenu struct {
	ID       uint32
	Index    uint32
	Name     [32]byte
	Reserved uint32
}

// Request numbers, _IOC(dir, 'V', nr, size).
const (
	VIDIOCQueryCap  = iocRead<<iocDir | unsafe.Sizeof(V4L2Capability{})<<iocSize | 'V'<<iocType // nr 0
	VIDIOCGFmt      = (iocRead|iocWrite)<<iocDir | unsafe.Sizeof(V4L2Format{})<<iocSize | 'V'<<iocType | 4
	VIDIOCSFmt      = (iocRead|iocWrite)<<iocDir | unsafe.Sizeof(V4L2Format{})<<iocSize | 'V'<<iocType | 5
	VIDIOCReqBufs   = (iocRead|iocWrite)<<iocDir | unsafe.Sizeof(V4L2RequestBuffers{})<<iocSize | 'V'<<iocType | 8
	VIDIOCQueryBuf  = (iocRead|iocWrite)<<iocDir | unsafe.Sizeof(V4L2Buffer{})<<iocSize | 'V'<<iocType | 9
	VIDIOCQBuf      = (iocRead|iocWrite)<<iocDir | unsafe.Sizeof(V4L2Buffer{})<<iocSize | 'V'<<iocType | 15
	VIDIOCDQBuf     = (iocRead|iocWrite)<<iocDir | unsafe.Sizeof(V4L2Buffer{})<<iocSize | 'V'<<iocType | 17
	VIDIOCStreamOn  = iocWrite<<iocDir | unsafe.Sizeof(int32(0))<<iocSize | 'V'<<iocType | 18
	VIDIOCStreamOff = iocWrite<<iocDir | unsafe.Sizeof(int32(0))<<iocSize | 'V'<<iocType | 19
	VIDIOCGParm     = (iocRead|iocWrite)<<iocDir | unsafe.Sizeof(V4L2StreamParm{})<<iocSize | 'V'<<iocType | 21
	VIDIOCSParm     = (iocRead|iocWrite)<<iocDir | unsafe.Sizeof(V4L2StreamParm{})<<iocSize | 'V'<<iocType | 22
	VIDIOCGCtrl     = (iocRead|iocWrite)<<iocDir | unsafe.Sizeof(V4L2Control{})<<iocSize | 'V'<<iocType | 27
	VIDIOCSCtrl     = (iocRead|iocWrite)<<iocDir | unsafe.Sizeof(V4L2Control{})<<iocSize | 'V'<<iocType | 28
	VIDIOCQueryCtrl = (iocRead|iocWrite)<<iocDir | unsafe.Sizeof(V4L2QueryCtrl{})<<iocSize | 'V'<<iocType | 36
	VIDIOCQueryMenu = (iocRead|iocWrite)<<iocDir | unsafe.Sizeof(V4L2QueryMenu{})<<iocSize | 'V'<<iocType | 37
)

// Capabilities (V4L2_CAP_*).
const (
	V4L2CapVideoCapture       = 0x00000001
	V4L2CapVideoOutput        = 0x00000002
	V4L2CapVideoCaptureMPlane = 0x00001000
	V4L2CapMetaCapture        = 0x00800000
	V4L2CapStreaming          = 0x04000000
	V4L2CapIOMC               = 0x20000000
	V4L2CapDeviceCaps         = 0x80000000
)

// Values of the kernel's enums and flags for streaming.
const (
	V4L2BufTypeVideoCapture = 1 // enum v4l2_buf_type
	V4L2MemoryMMAP          = 1 // enum v4l2_memory

	// enum v4l2_field.
	V4L2FieldAny       = 0
	V4L2FieldNone      = 1
	V4L2FieldAlternate = 7

	// struct v4l2_buffer's flags.
	V4L2BufFlagError              = 0x00000040
	V4L2BufFlagTimestampMask      = 0x0000e000
	V4L2BufFlagTimestampMonotonic = 0x00002000
	V4L2BufFlagTimestampCopy      = 0x00004000
	V4L2BufFlagTstampSrcSOE       = 0x00010000

	// struct v4l2_captureparm's capability.
	V4L2CapTimePerFrame = 0x1000
)

// Controls.
const (
	V4L2CtrlFlagNextCtrl = 0x80000000 // with an id: the next control after it
	V4L2CtrlTypeMenu     = 3          // enum v4l2_ctrl_type
)
