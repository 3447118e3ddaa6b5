//go:build linux

package camera

import (
	"bytes"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The kernel's structures (linux/videodev2.h), laid out as the C
// compiler does for the ABI Go builds for: a struct timeval of two longs
// and a pointer-sized union make struct v4l2_buffer 88 bytes on amd64 and
// arm64 and 68 on 32-bit ARM (the layout the kernel keeps as
// v4l2_buffer_time32 for 32-bit time_t userspace, which Go's is); struct
// v4l2_format's union holds pointers, so it is 208 and 204 bytes. The
// request numbers are computed from the sizes, and a test checks both.

type v4l2Capability struct {
	Driver       [16]byte
	Card         [32]byte
	BusInfo      [32]byte
	Version      uint32
	Capabilities uint32
	DeviceCaps   uint32
	Reserved     [3]uint32
}

type v4l2PixFormat struct {
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

type v4l2Format struct {
	Type uint32
	_    [0]uintptr // the union holds pointers (struct v4l2_window)
	Pix  v4l2PixFormat
	_    [200 - unsafe.Sizeof(v4l2PixFormat{})]byte
}

type v4l2Fract struct {
	Numerator   uint32
	Denominator uint32
}

type v4l2CaptureParm struct {
	Capability   uint32
	CaptureMode  uint32
	TimePerFrame v4l2Fract
	ExtendedMode uint32
	ReadBuffers  uint32
	Reserved     [4]uint32
}

type v4l2StreamParm struct {
	Type    uint32
	Capture v4l2CaptureParm
	_       [200 - unsafe.Sizeof(v4l2CaptureParm{})]byte
}

type v4l2RequestBuffers struct {
	Count        uint32
	Type         uint32
	Memory       uint32
	Capabilities uint32
	Flags        uint8
	Reserved     [3]uint8
}

type v4l2Timecode struct {
	Type     uint32
	Flags    uint32
	Frames   uint8
	Seconds  uint8
	Minutes  uint8
	Hours    uint8
	Userbits [4]uint8
}

type v4l2Buffer struct {
	Index     uint32
	Type      uint32
	BytesUsed uint32
	Flags     uint32
	Field     uint32
	Timestamp unix.Timeval // two longs
	Timecode  v4l2Timecode
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

const (
	iocWrite = 1
	iocRead  = 2
)

// Request numbers: _IOC(dir, 'V', nr, size).
const (
	vidiocQueryCap  = iocRead<<30 | unsafe.Sizeof(v4l2Capability{})<<16 | 'V'<<8 // nr 0
	vidiocGFmt      = (iocRead|iocWrite)<<30 | unsafe.Sizeof(v4l2Format{})<<16 | 'V'<<8 | 4
	vidiocSFmt      = (iocRead|iocWrite)<<30 | unsafe.Sizeof(v4l2Format{})<<16 | 'V'<<8 | 5
	vidiocReqBufs   = (iocRead|iocWrite)<<30 | unsafe.Sizeof(v4l2RequestBuffers{})<<16 | 'V'<<8 | 8
	vidiocQueryBuf  = (iocRead|iocWrite)<<30 | unsafe.Sizeof(v4l2Buffer{})<<16 | 'V'<<8 | 9
	vidiocQBuf      = (iocRead|iocWrite)<<30 | unsafe.Sizeof(v4l2Buffer{})<<16 | 'V'<<8 | 15
	vidiocDQBuf     = (iocRead|iocWrite)<<30 | unsafe.Sizeof(v4l2Buffer{})<<16 | 'V'<<8 | 17
	vidiocStreamOn  = iocWrite<<30 | 4<<16 | 'V'<<8 | 18
	vidiocStreamOff = iocWrite<<30 | 4<<16 | 'V'<<8 | 19
	vidiocGParm     = (iocRead|iocWrite)<<30 | unsafe.Sizeof(v4l2StreamParm{})<<16 | 'V'<<8 | 21
	vidiocSParm     = (iocRead|iocWrite)<<30 | unsafe.Sizeof(v4l2StreamParm{})<<16 | 'V'<<8 | 22
)

// Values of the kernel's enums and flags.
const (
	bufTypeVideoCapture = 1
	memoryMMAP          = 1
	fieldAny            = 0
	fieldNone           = 1
	fieldAlternate      = 7

	bufFlagError         = 0x00000040
	bufFlagTimestampMask = 0x0000e000
	bufFlagTimestampMono = 0x00002000

	capTimePerFrame = 0x1000
)

// ioctl issues one request; EINTR is retried.
func ioctl(fd int, req uintptr, arg unsafe.Pointer) error {
	for {
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(arg))
		switch e {
		case 0:
			return nil
		case unix.EINTR:
			continue
		}
		return e
	}
}

func cstr(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

func capInfoOf(c *v4l2Capability) capInfo {
	caps := c.Capabilities
	if caps&capDeviceCapsFlag != 0 {
		caps = c.DeviceCaps
	}
	return capInfo{Driver: cstr(c.Driver[:]), Card: cstr(c.Card[:]), Bus: cstr(c.BusInfo[:]), Caps: caps}
}

// queryCapFD asks an open node about itself.
func queryCapFD(fd int) (capInfo, error) {
	var c v4l2Capability
	if err := ioctl(fd, vidiocQueryCap, unsafe.Pointer(&c)); err != nil {
		return capInfo{}, os.NewSyscallError("ioctl VIDIOC_QUERYCAP", err)
	}
	return capInfoOf(&c), nil
}

// openNode opens a V4L2 node for streaming, non-blocking.
func openNode(node string) (int, error) {
	for {
		fd, err := unix.Open(node, unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return -1, &os.PathError{Op: "open", Path: node, Err: err}
		}
		return fd, nil
	}
}

// queryCap asks the node at path about itself.
func queryCap(node string) (capInfo, error) {
	fd, err := openNode(node)
	if err != nil {
		return capInfo{}, err
	}
	defer unix.Close(fd)
	c, err := queryCapFD(fd)
	if err != nil {
		return c, &os.PathError{Op: "query", Path: node, Err: err}
	}
	return c, nil
}
