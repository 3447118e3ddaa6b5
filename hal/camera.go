package hal

import (
	"context"
	"fmt"

	"periph.io/x/conn/v3/physic"
)

// PixelFormat is a V4L2 FourCC code.
type PixelFormat uint32

// FourCC builds a PixelFormat from its four characters.
func FourCC(a, b, c, d byte) PixelFormat {
	return PixelFormat(uint32(a) | uint32(b)<<8 | uint32(c)<<16 | uint32(d)<<24)
}

// The pixel formats the body understands.
var (
	PixelYUYV  = FourCC('Y', 'U', 'Y', 'V') // 4:2:2 packed, luma at even bytes
	PixelMJPEG = FourCC('M', 'J', 'P', 'G')
	PixelGrey  = FourCC('G', 'R', 'E', 'Y') // 8-bit luma only
)

func (p PixelFormat) String() string {
	b := []byte{byte(p), byte(p >> 8), byte(p >> 16), byte(p >> 24)}
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return fmt.Sprintf("0x%08x", uint32(p))
		}
	}
	return string(b)
}

// FrameFormat describes the frames a camera delivers.
type FrameFormat struct {
	Pixel  PixelFormat
	Width  int
	Height int
	// Stride is the number of bytes per row (V4L2 bytesperline); 0 for
	// compressed formats.
	Stride int
	// Rate is the negotiated frame rate.
	Rate physic.Frequency
}

func (f FrameFormat) String() string {
	return fmt.Sprintf("%s %dx%d@%s", f.Pixel, f.Width, f.Height, f.Rate)
}

// CameraConfig is what a consumer asks of a camera; the driver picks the
// nearest the device offers and reports it in Camera.Format.
type CameraConfig struct {
	// Device is a path (/dev/video0, /dev/v4l/by-id/...) or, for the sim,
	// a name.
	Device string
	// Pixel lists acceptable formats in order of preference.
	Pixel  []PixelFormat
	Width  int
	Height int
	Rate   physic.Frequency
}

// Frame is one image. Data may point into a driver buffer (V4L2 MMAP): it
// is valid until Release, and the consumer must call Release exactly once
// and as soon as it can, because the driver has only a few buffers.
type Frame struct {
	Format FrameFormat
	Data   []byte
	// Seq is the driver's frame sequence; a gap means frames were dropped
	// before they reached the consumer.
	Seq uint64
	// Time is the driver's capture timestamp.
	Time Mono
	// Encoded is the frame as the camera sent it when that was
	// compressed (MJPEG: a JPEG any decoder reads, whose luma Data
	// holds), nil otherwise:
	// a snapshot passes it on without encoding again. Valid until
	// Release, as Data is.
	Encoded []byte
	release func()
}

// NewFrame builds a frame for drivers; release is called once by Release.
func NewFrame(f FrameFormat, data []byte, seq uint64, t Mono, release func()) *Frame {
	return &Frame{Format: f, Data: data, Seq: seq, Time: t, release: release}
}

// Release gives the frame's buffer back to the driver. Data must not be used
// afterwards. Calling it again does nothing.
func (f *Frame) Release() {
	if r := f.release; r != nil {
		f.release = nil
		r()
	}
	f.Data, f.Encoded = nil, nil
}

// Camera is a stream of frames.
type Camera interface {
	Halter
	Name() string
	Format() FrameFormat
	// NextFrame blocks until the next frame, ctx is done, or the camera is
	// halted (ErrHalted). A camera that disappeared returns ErrAbsent.
	NextFrame(ctx context.Context) (*Frame, error)
	Close() error
}

// CameraStats is what a camera driver counted since it was opened.
type CameraStats struct {
	// Frames counts frames handed to the consumer by NextFrame.
	Frames uint64
	// Dropped counts frames the driver threw away because the consumer
	// fell behind or held too many frames at once.
	Dropped uint64
	// ErrorFrames counts frames the device marked as broken, delivered
	// short, or that did not decode; they are dropped, never delivered.
	ErrorFrames uint64
	// Reopens counts the times the device came back after going offline.
	Reopens uint64
	// Online is true while the device is streaming.
	Online bool
	// DriverTime is true when the frames carry the driver's capture time
	// on CLOCK_MONOTONIC, false when they are stamped on arrival.
	DriverTime bool
	// LastErr is the most recent error the driver met (nil if none); it
	// stays after the device came back.
	LastErr error
}

// CameraStatser is a camera that counts what it sees. Consumers find it
// by type assertion on a Camera; Stats is safe to call at any time from
// any goroutine, also after Close.
type CameraStatser interface {
	Stats() CameraStats
}
