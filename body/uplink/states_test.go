package uplink

import (
	"testing"

	"github.com/tobe-body/tobe-body/body"
)

// The board's document takes the CPU's temperature from the zone the
// board names for it, else the hottest zone's; none without zones.
func TestSelfDocOfTheCPUZone(t *testing.T) {
	for _, tc := range []struct {
		name  string
		temps map[string]float64
		want  float64 // 0: none
	}{
		{"a cpu zone", map[string]float64{"gpu-thermal": 70, "cpu-thermal": 55}, 55},
		{"a package zone", map[string]float64{"acpitz": 40, "x86_pkg_temp": 61}, 61},
		{"the hottest", map[string]float64{"soc": 48, "board": 52}, 52},
		{"no zones", nil, 0},
	} {
		doc := SelfDocOf(body.SelfState{Temps: tc.temps, DiskFree: 3 << 20})
		switch {
		case tc.want == 0 && doc.CPUTempC != nil:
			t.Errorf("%s: %v °C, want none", tc.name, *doc.CPUTempC)
		case tc.want != 0 && (doc.CPUTempC == nil || *doc.CPUTempC != tc.want):
			t.Errorf("%s: %v, want %v °C", tc.name, doc.CPUTempC, tc.want)
		}
		if doc.DiskFreeMB != 3 {
			t.Errorf("%s: disk free %v MB, want 3", tc.name, doc.DiskFreeMB)
		}
	}
}
