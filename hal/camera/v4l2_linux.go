//go:build linux

package camera

import (
	"os"
	"unsafe"

	"github.com/tobe-body/tobe-body/hal/internal/uapi"
	"golang.org/x/sys/unix"
)

func capInfoOf(c *uapi.V4L2Capability) capInfo {
	return capInfo{Driver: uapi.CString(c.Driver[:]), Card: uapi.CString(c.Card[:]), Bus: uapi.CString(c.BusInfo[:]), Caps: c.NodeCaps()}
}

// queryCapFD asks an open node about itself.
func queryCapFD(fd int) (capInfo, error) {
	var c uapi.V4L2Capability
	if err := uapi.Ioctl(fd, uapi.VIDIOCQueryCap, unsafe.Pointer(&c)); err != nil {
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
