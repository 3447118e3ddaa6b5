//go:build linux

package input

import (
	"strconv"
	"testing"
)

// struct input_event is two longs and 8 bytes: 24 bytes on 64-bit, 16 on
// 32-bit ARM.
func TestRawEventSize(t *testing.T) {
	if want := 2*strconv.IntSize/8 + 8; rawSize != want {
		t.Errorf("rawSize %d, want %d", rawSize, want)
	}
}

func TestTakeDropsUntilReport(t *testing.T) {
	d := &device{keys: map[uint16]bool{}}
	ev := func(typ, code uint16, value int32) []byte {
		b := make([]byte, rawSize)
		tail := b[rawSize-8:]
		tail[0], tail[1] = byte(typ), byte(typ>>8)
		tail[2], tail[3] = byte(code), byte(code>>8)
		tail[4], tail[5], tail[6], tail[7] = byte(value), byte(value>>8), byte(value>>16), byte(value>>24)
		return b
	}
	d.take(ev(1, 30, 1)) // KEY_A down
	d.take(ev(0, 0, 0))  // SYN_REPORT
	d.take(ev(0, 3, 0))  // SYN_DROPPED
	d.take(ev(1, 30, 0)) // dropped
	if len(d.q) != 2 || !d.drop {
		t.Fatalf("queue %v, dropping %v", d.q, d.drop)
	}
	if !d.keys[30] {
		t.Error("a dropped event changed the key state")
	}
}
