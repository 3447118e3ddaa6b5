package uapi

import (
	"encoding/binary"
	"unsafe"
)

// evdev (linux/input.h).

// InputEvent is struct input_event: a struct timeval of two longs, then
// type, code and value; 24 bytes on 64-bit, 16 on 32-bit ARM.
type InputEvent struct {
	Time  Timeval
	Type  uint16
	Code  uint16
	Value int32
}

// InputEventSize is the size of one event in a read.
const InputEventSize = int(unsafe.Sizeof(InputEvent{}))

// DecodeInputEvent decodes the event at the start of b, which holds at
// least InputEventSize bytes of a read.
func DecodeInputEvent(b []byte) InputEvent {
	b = b[:InputEventSize]
	ne := binary.NativeEndian
	var e InputEvent
	if unsafe.Sizeof(e.Time.Sec) == 8 {
		e.Time = Timeval{Sec: int(int64(ne.Uint64(b[0:]))), Usec: int(int64(ne.Uint64(b[8:])))}
	} else {
		e.Time = Timeval{Sec: int(int32(ne.Uint32(b[0:]))), Usec: int(int32(ne.Uint32(b[4:])))}
	}
	tail := b[unsafe.Offsetof(e.Type):]
	e.Type, e.Code, e.Value = ne.Uint16(tail[0:]), ne.Uint16(tail[2:]), int32(ne.Uint32(tail[4:]))
	return e
}

// Request numbers, _IOW('E', nr, int).
const (
	EVIOCGrab     = iocWrite<<iocDir | unsafe.Sizeof(int32(0))<<iocSize | 'E'<<iocType | 0x90
	EVIOCSClockID = iocWrite<<iocDir | unsafe.Sizeof(int32(0))<<iocSize | 'E'<<iocType | 0xa0
)
