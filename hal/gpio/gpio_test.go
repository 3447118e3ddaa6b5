//go:build linux

package gpio

import (
	"testing"
	"unsafe"
)

// The structures must match the kernel's byte for byte; the request
// numbers encode their sizes.
func TestUAPILayout(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  uintptr
		want uintptr
	}{
		{"gpio_v2_line_attribute", unsafe.Sizeof(lineAttr{}), 16},
		{"gpio_v2_line_config_attribute", unsafe.Sizeof(lineConfigAttr{}), 24},
		{"gpio_v2_line_config", unsafe.Sizeof(lineConfig{}), 272},
		{"gpio_v2_line_request", unsafe.Sizeof(lineRequest{}), 592},
		{"gpio_v2_line_values", unsafe.Sizeof(lineValues{}), 16},
		{"request fd offset", unsafe.Offsetof(lineRequest{}.Fd), 588},
		{"GPIO_V2_GET_LINE_IOCTL size", (ioctlGetLine >> 16) & 0x3fff, 592},
		{"GPIO_V2_LINE_SET_CONFIG_IOCTL size", (ioctlSetConfig >> 16) & 0x3fff, 272},
		{"GPIO_V2_LINE_GET_VALUES_IOCTL size", (ioctlGetValues >> 16) & 0x3fff, 16},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, tc.got, tc.want)
		}
	}
}
