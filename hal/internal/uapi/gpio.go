package uapi

import (
	"encoding/binary"
	"unsafe"
)

// The GPIO character device (linux/gpio.h): the chip's info (v1, which v2
// kept) and uAPI v2's lines.

// GPIOChipInfo is struct gpiochip_info.
type GPIOChipInfo struct {
	Name  [32]byte
	Label [32]byte
	Lines uint32
}

// GPIOV2LineAttribute is struct gpio_v2_line_attribute; Value is its
// union of flags, values and debounce_period_us.
type GPIOV2LineAttribute struct {
	ID      uint32
	Padding uint32
	Value   uint64
}

// GPIOV2LineConfigAttribute is struct gpio_v2_line_config_attribute.
type GPIOV2LineConfigAttribute struct {
	Attr GPIOV2LineAttribute
	Mask uint64
}

// GPIOV2LineConfig is struct gpio_v2_line_config.
type GPIOV2LineConfig struct {
	Flags    uint64
	NumAttrs uint32
	Padding  [5]uint32
	Attrs    [10]GPIOV2LineConfigAttribute
}

// GPIOV2LineRequest is struct gpio_v2_line_request.
type GPIOV2LineRequest struct {
	Offsets         [64]uint32
	Consumer        [32]byte
	Config          GPIOV2LineConfig
	NumLines        uint32
	EventBufferSize uint32
	Padding         [5]uint32
	Fd              int32
}

// GPIOV2LineValues is struct gpio_v2_line_values.
type GPIOV2LineValues struct {
	Bits uint64
	Mask uint64
}

// GPIOV2LineInfo is struct gpio_v2_line_info.
type GPIOV2LineInfo struct {
	Name     [32]byte
	Consumer [32]byte
	Offset   uint32
	NumAttrs uint32
	Flags    uint64
	Attrs    [10]GPIOV2LineAttribute
	Padding  [4]uint32
}

// GPIOV2LineEvent is struct gpio_v2_line_event, what a read of a line
// request returns, GPIOV2LineEventSize bytes each.
type GPIOV2LineEvent struct {
	TimestampNS uint64
	ID          uint32
	Offset      uint32
	Seqno       uint32
	LineSeqno   uint32
	Padding     [6]uint32
}

// GPIOV2LineEventSize is the size of one event in a read.
const GPIOV2LineEventSize = int(unsafe.Sizeof(GPIOV2LineEvent{}))

// DecodeGPIOV2LineEvent decodes the event at the start of b, which holds
// at least GPIOV2LineEventSize bytes of a read.
func DecodeGPIOV2LineEvent(b []byte) GPIOV2LineEvent {
	b = b[:GPIOV2LineEventSize]
	ne := binary.NativeEndian
	return GPIOV2LineEvent{
		TimestampNS: ne.Uint64(b[unsafe.Offsetof(GPIOV2LineEvent{}.TimestampNS):]),
		ID:          ne.Uint32(b[unsafe.Offsetof(GPIOV2LineEvent{}.ID):]),
		Offset:      ne.Uint32(b[unsafe.Offsetof(GPIOV2LineEvent{}.Offset):]),
		Seqno:       ne.Uint32(b[unsafe.Offsetof(GPIOV2LineEvent{}.Seqno):]),
		LineSeqno:   ne.Uint32(b[unsafe.Offsetof(GPIOV2LineEvent{}.LineSeqno):]),
	}
}

// Request numbers.
const (
	GPIOGetChipInfo     = iocRead<<iocDir | unsafe.Sizeof(GPIOChipInfo{})<<iocSize | 0xB4<<iocType | 0x01
	GPIOV2GetLineInfo   = (iocRead|iocWrite)<<iocDir | unsafe.Sizeof(GPIOV2LineInfo{})<<iocSize | 0xB4<<iocType | 0x05
	GPIOV2GetLine       = (iocRead|iocWrite)<<iocDir | unsafe.Sizeof(GPIOV2LineRequest{})<<iocSize | 0xB4<<iocType | 0x07
	GPIOV2LineSetConfig = (iocRead|iocWrite)<<iocDir | unsafe.Sizeof(GPIOV2LineConfig{})<<iocSize | 0xB4<<iocType | 0x0D
	GPIOV2LineGetValues = (iocRead|iocWrite)<<iocDir | unsafe.Sizeof(GPIOV2LineValues{})<<iocSize | 0xB4<<iocType | 0x0E
	GPIOV2LineSetValues = (iocRead|iocWrite)<<iocDir | unsafe.Sizeof(GPIOV2LineValues{})<<iocSize | 0xB4<<iocType | 0x0F
)

// enum gpio_v2_line_flag.
const (
	GPIOV2LineFlagUsed         = 1 << 0
	GPIOV2LineFlagActiveLow    = 1 << 1
	GPIOV2LineFlagInput        = 1 << 2
	GPIOV2LineFlagOutput       = 1 << 3
	GPIOV2LineFlagEdgeRising   = 1 << 4
	GPIOV2LineFlagEdgeFalling  = 1 << 5
	GPIOV2LineFlagOpenDrain    = 1 << 6
	GPIOV2LineFlagOpenSource   = 1 << 7
	GPIOV2LineFlagBiasPullUp   = 1 << 8
	GPIOV2LineFlagBiasPullDown = 1 << 9
	GPIOV2LineFlagBiasDisabled = 1 << 10
)

// enum gpio_v2_line_attr_id.
const (
	GPIOV2LineAttrIDFlags        = 1
	GPIOV2LineAttrIDOutputValues = 2
	GPIOV2LineAttrIDDebounce     = 3
)

// enum gpio_v2_line_event_id.
const (
	GPIOV2LineEventRisingEdge  = 1
	GPIOV2LineEventFallingEdge = 2
)
