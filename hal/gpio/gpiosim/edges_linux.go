//go:build linux

package gpiosim

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/internal/uapi"
)

// RequestEdges requests the line from its chip as consumer, an input
// watched for both edges, at the pull the simulator gives it.
func (l Line) RequestEdges(consumer string) (*Edges, error) {
	chip, err := os.Open(l.chip)
	if err != nil {
		return nil, fmt.Errorf("gpiosim: line %s: %w", l.Name, err)
	}
	defer chip.Close()
	req := uapi.GPIOV2LineRequest{NumLines: 1, EventBufferSize: 64}
	req.Config.Flags = uapi.GPIOV2LineFlagInput | uapi.GPIOV2LineFlagEdgeRising | uapi.GPIOV2LineFlagEdgeFalling
	req.Offsets[0] = l.offset
	copy(req.Consumer[:len(req.Consumer)-1], consumer)
	if err := uapi.Ioctl(int(chip.Fd()), uapi.GPIOV2GetLine, unsafe.Pointer(&req)); err != nil {
		return nil, fmt.Errorf("gpiosim: line %s: %w", l.Name, os.NewSyscallError("ioctl GPIO_V2_GET_LINE", err))
	}
	return &Edges{Name: l.Name, fd: int(req.Fd)}, nil
}

// Read waits in read(2) for the line's next event and returns it.
func (e *Edges) Read() (Edge, error) {
	var buf [uapi.GPIOV2LineEventSize]byte
	n, err := unix.Read(e.fd, buf[:])
	switch {
	case err != nil:
		return Edge{}, fmt.Errorf("gpiosim: line %s: %w", e.Name, os.NewSyscallError("read", err))
	case n != len(buf):
		return Edge{}, fmt.Errorf("gpiosim: line %s: read %d bytes of an event of %d", e.Name, n, len(buf))
	}
	k := uapi.DecodeGPIOV2LineEvent(buf[:])
	ed := Edge{Time: hal.Mono(k.TimestampNS), Edge: hal.FallingEdge, Seq: k.LineSeqno}
	if k.ID == uapi.GPIOV2LineEventRisingEdge {
		ed.Edge = hal.RisingEdge
	}
	return ed, nil
}

// Close releases the line.
func (e *Edges) Close() error {
	if err := unix.Close(e.fd); err != nil {
		return fmt.Errorf("gpiosim: line %s: %w", e.Name, os.NewSyscallError("close", err))
	}
	return nil
}
