// Package vivid sets the controls of vivid, the kernel's virtual video
// test driver, by name and from outside the camera under test: the lab's
// way to choose what a camera sees (vivid's test pattern, its movement,
// its text overlay) and how vivid stamps its frames. Controls and menu
// items are found by the names vivid gives them ("Test Pattern", "Ten
// Pixels Wide Cross"), through the V4L2 control ioctls on a descriptor of
// its own beside the camera's.
package vivid

import (
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unsafe"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/internal/uapi"
)

// Card is the card name of vivid's nodes (VIDIOC_QUERYCAP).
const Card = "vivid"

// Controls is vivid's capture node, open for its controls. Its methods
// must not be called concurrently.
type Controls struct {
	Node  string // the capture node, /dev/videoN
	fd    int
	byKey map[string]uapi.V4L2QueryCtrl
	names []string // in the driver's order, for errors
}

// Open finds vivid's first capture node among /dev/video* and lists its
// controls. No vivid node is hal.ErrAbsent.
func Open() (*Controls, error) {
	nodes, _ := filepath.Glob("/dev/video*")
	sort.Slice(nodes, func(i, j int) bool { return number(nodes[i]) < number(nodes[j]) })
	var seen []string
	for _, node := range nodes {
		fd, err := open(node)
		if err != nil {
			seen = append(seen, err.Error())
			continue
		}
		var c uapi.V4L2Capability
		err = ioctl(fd, uapi.VIDIOCQueryCap, unsafe.Pointer(&c))
		card := uapi.CString(c.Card[:])
		if err != nil || card != Card || c.NodeCaps()&uapi.V4L2CapVideoCapture == 0 {
			seen = append(seen, fmt.Sprintf("%s %q", node, card))
			closeFD(fd)
			continue
		}
		v := &Controls{Node: node, fd: fd, byKey: map[string]uapi.V4L2QueryCtrl{}}
		for id := uint32(0); ; {
			q := uapi.V4L2QueryCtrl{ID: id | uapi.V4L2CtrlFlagNextCtrl}
			if ioctl(fd, uapi.VIDIOCQueryCtrl, unsafe.Pointer(&q)) != nil {
				break // EINVAL after the last one
			}
			id = q.ID
			name := uapi.CString(q.Name[:])
			v.byKey[name] = q
			v.names = append(v.names, name)
		}
		return v, nil
	}
	if len(seen) == 0 {
		seen = []string{"none"}
	}
	return nil, fmt.Errorf("vivid: no capture node of card %q among the V4L2 nodes (%s): %w", Card, strings.Join(seen, "; "), hal.ErrAbsent)
}

func number(node string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(node), "video"))
	if err != nil {
		return -1
	}
	return n
}

func (v *Controls) control(name string) (uapi.V4L2QueryCtrl, error) {
	q, ok := v.byKey[name]
	if !ok {
		return q, fmt.Errorf("vivid: %s has no control %q among %q", v.Node, name, v.names)
	}
	return q, nil
}

// Get returns the value of the control called name.
func (v *Controls) Get(name string) (int32, error) {
	q, err := v.control(name)
	if err != nil {
		return 0, err
	}
	c := uapi.V4L2Control{ID: q.ID}
	if err := ioctl(v.fd, uapi.VIDIOCGCtrl, unsafe.Pointer(&c)); err != nil {
		return 0, fmt.Errorf("vivid: get %q on %s: %w", name, v.Node, err)
	}
	return c.Value, nil
}

// Set sets the control called name to value.
func (v *Controls) Set(name string, value int32) error {
	q, err := v.control(name)
	if err != nil {
		return err
	}
	c := uapi.V4L2Control{ID: q.ID, Value: value}
	if err := ioctl(v.fd, uapi.VIDIOCSCtrl, unsafe.Pointer(&c)); err != nil {
		return fmt.Errorf("vivid: set %q to %d on %s: %w", name, value, v.Node, err)
	}
	return nil
}

// Item returns the value of the item called item of the menu control
// called name.
func (v *Controls) Item(name, item string) (int32, error) {
	q, err := v.control(name)
	if err != nil {
		return 0, err
	}
	if q.Type != uapi.V4L2CtrlTypeMenu {
		return 0, fmt.Errorf("vivid: control %q of %s is not a menu", name, v.Node)
	}
	var items []string
	for i := q.Min; i <= q.Max; i++ {
		m := uapi.V4L2QueryMenu{ID: q.ID, Index: uint32(i)}
		if ioctl(v.fd, uapi.VIDIOCQueryMenu, unsafe.Pointer(&m)) != nil {
			continue // a gap in the menu
		}
		if uapi.CString(m.Name[:]) == item {
			return i, nil
		}
		items = append(items, uapi.CString(m.Name[:]))
	}
	return 0, fmt.Errorf("vivid: control %q of %s has no item %q among %q", name, v.Node, item, items)
}

// Close closes the node.
func (v *Controls) Close() error { return closeFD(v.fd) }
