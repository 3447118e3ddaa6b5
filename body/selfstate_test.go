package body

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"periph.io/x/conn/v3/physic"
)

// fakeSys writes a /proc and /sys tree under a temp dir.
func fakeSys(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const (
	stat1   = "cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 50 0 50 400 0 0 0 0 0 0\ncpu1 50 0 50 400 0 0 0 0 0 0\n"
	stat2   = "cpu  190 0 190 820 0 0 0 0 0 0\ncpu0 95 0 95 410 0 0 0 0 0 0\ncpu1 95 0 95 410 0 0 0 0 0 0\n"
	meminfo = "MemTotal:        4000000 kB\nMemFree:          100000 kB\nMemAvailable:    2000000 kB\n"
)

func TestSampleReadsTheKernel(t *testing.T) {
	root := fakeSys(t, map[string]string{
		"proc/stat":                            stat1,
		"proc/loadavg":                         "1.50 0.90 0.40 2/300 1234\n",
		"proc/meminfo":                         meminfo,
		"sys/class/thermal/thermal_zone0/type": "cpu-thermal\n",
		"sys/devices/platform/soc/soc:firmware/get_throttled": "0x50005\n",
	})
	reg := NewRegistry(time.Now)
	reg.Register(Channel{ID: "camera.front", State: Enabled})
	reg.Register(Channel{ID: "audio.mic", State: Error})
	s := &Sampler{Root: root, Zones: []string{"cpu-thermal"}, ThrottleSource: "rpi-firmware",
		ThrottlePath: "/sys/devices/platform/*/*firmware/get_throttled", Registry: reg,
		Outbox: func() (uint64, error) { return 12, nil }, Shed: func() uint64 { return 3 }, Limits: DefaultLimits,
		sensors: zones(zone{"cpu-thermal", 81.234, nil}, zone{"gpu-thermal", 40, nil}, zone{"cpu-thermal", 20, nil})}
	s.Sample()
	os.WriteFile(filepath.Join(root, "proc/stat"), []byte(stat2), 0o644)
	st := s.Sample()
	if len(st.Errors) > 0 {
		t.Fatalf("errors: %v", st.Errors)
	}
	want := Throttle{Source: "rpi-firmware", UnderVoltage: true, Throttled: true, UnderVoltageSeen: true, ThrottledSeen: true}
	switch {
	case st.CPU != 0.9: // 180 busy of 200 jiffies
		t.Errorf("cpu %v, want 0.9", st.CPU)
	case st.Load1 != 0.75:
		t.Errorf("load1 %v, want 1.5 over 2 CPUs", st.Load1)
	case st.MemTotal != 4000000<<10 || st.MemAvailable != 2000000<<10:
		t.Errorf("memory %d/%d", st.MemAvailable, st.MemTotal)
	case len(st.Temps) != 1 || st.Temps["cpu-thermal"] != 81.234:
		t.Errorf("temps %v, want only cpu-thermal at 81.234", st.Temps)
	case st.Throttle == nil || *st.Throttle != want:
		t.Errorf("throttle %+v, want %+v", st.Throttle, want)
	case st.Outbox != 12 || st.Shed != 3 || st.Channels[Error] != 1 || st.Channels[Enabled] != 1:
		t.Errorf("outbox %d shed %d channels %v", st.Outbox, st.Shed, st.Channels)
	case st.Level != LevelDegraded:
		t.Errorf("level %v, want degraded", st.Level)
	}
	got := strings.Join(st.Why, "; ")
	for _, w := range []string{"cpu-thermal at 81.2 °C (hot 80 °C)", "under-voltage", "1 channels in error or offline", "CPU 90% busy", "clock not synchronised"} {
		if !strings.Contains(got, w) {
			t.Errorf("why %q lacks %q", got, w)
		}
	}
}

func TestSampleSaysWhatItCouldNotRead(t *testing.T) {
	root := fakeSys(t, map[string]string{
		"proc/stat":        "intr 1 2 3\n",
		"proc/meminfo":     "nothing\n",
		"fw/get_throttled": "zzz\n",
	})
	st := (&Sampler{Root: root, Zones: []string{"cpu-thermal"}, ThrottleSource: "rpi-firmware", ThrottlePath: "/fw/get_throttled",
		sensors: zones(zone{"cpu-thermal", 0, errors.New("sysfs-thermal: strconv.Atoi: parsing \"hot\": invalid syntax")})}).Sample()
	got := strings.Join(st.Errors, "\n")
	for _, w := range []string{"cpu: /proc/stat: no cpu line", "load: open", "memory: /proc/meminfo has no MemTotal", "thermal: cpu-thermal: sysfs-thermal: strconv.Atoi: parsing \"hot\"", "throttle: /fw/get_throttled does not hold hex throttle bits"} {
		if !strings.Contains(got, w) {
			t.Errorf("errors %q lack %q", got, w)
		}
	}
}

func TestJudge(t *testing.T) {
	synced := ClockSync{Synced: true, MaxError: 10 * time.Millisecond}
	quiet := func(mod func(*SelfState)) SelfState {
		st := SelfState{MemTotal: 1 << 30, MemAvailable: 1 << 29, DiskTotal: 1 << 34, DiskFree: 1 << 33, Clock: synced, Channels: map[State]int{Enabled: 3}}
		mod(&st)
		return st
	}
	for _, tc := range []struct {
		name string
		st   SelfState
		want Degradation
		why  string
	}{
		{"all well", quiet(func(*SelfState) {}), LevelNormal, ""},
		{"unsynced clock", quiet(func(s *SelfState) { s.Clock = ClockSync{MaxError: 16 * time.Second} }), LevelConstrained, "clock not synchronised"},
		{"busy", quiet(func(s *SelfState) { s.CPU = 0.95 }), LevelConstrained, "CPU 95% busy"},
		{"low memory", quiet(func(s *SelfState) { s.MemAvailable = 1 << 20 }), LevelConstrained, "memory: 1 MiB available of 1024 MiB"},
		{"outbox backlog", quiet(func(s *SelfState) { s.Outbox = 20000 }), LevelConstrained, "20000 events wait"},
		{"hot", quiet(func(s *SelfState) { s.Temps = map[string]float64{"cpu-thermal": 82} }), LevelDegraded, "cpu-thermal at 82.0 °C (hot 80 °C)"},
		{"freq capped", quiet(func(s *SelfState) { s.Throttle = &Throttle{Source: "cpufreq", FreqCapped: true} }), LevelDegraded, "throttled (cpufreq)"},
		{"disk low", quiet(func(s *SelfState) { s.DiskFree = 100 << 20 }), LevelDegraded, "data partition has 100 MiB free (low below 256 MiB)"},
		{"channel offline", quiet(func(s *SelfState) { s.Channels[Offline] = 1 }), LevelDegraded, "1 channels in error or offline"},
		{"very hot", quiet(func(s *SelfState) { s.Temps = map[string]float64{"cpu-thermal": 86} }), LevelCritical, "(critical 85 °C)"},
		{"disk nearly full", quiet(func(s *SelfState) { s.DiskFree = 10 << 20 }), LevelCritical, "10 MiB free (critical below 32 MiB)"},
		{"the worst wins and comes first", quiet(func(s *SelfState) { s.CPU = 1; s.DiskFree = 1 << 20 }), LevelCritical, "data partition has 1 MiB free (critical below 32 MiB); CPU 100% busy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.st
			level, why := DefaultLimits.judge(&st)
			if level != tc.want || !strings.Contains(strings.Join(why, "; "), tc.why) || (tc.why == "" && len(why) > 0) {
				t.Errorf("level %v %q, want %v %q", level, why, tc.want, tc.why)
			}
		})
	}
}

// On this machine: the real kernel's files parse.
func TestSampleThisMachine(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	s := &Sampler{Root: "/", DataDir: t.TempDir(), Limits: DefaultLimits}
	s.Sample()
	st := s.Sample()
	if len(st.Errors) > 0 || st.MemTotal == 0 || st.DiskTotal == 0 || st.CPU < 0 || st.CPU > 1 {
		t.Errorf("sample %+v", st)
	}
	t.Logf("this machine: cpu %.2f load1 %.2f mem %d/%d MiB disk %d/%d MiB level %v %q",
		st.CPU, st.Load1, st.MemAvailable>>20, st.MemTotal>>20, st.DiskFree>>20, st.DiskTotal>>20, st.Level, st.Why)
}

// zone is a thermal sensor for the sampler's tests: a type, and the
// temperature it reads or the error.
type zone struct {
	typ string
	c   float64
	err error
}

func (z zone) Type() string { return z.typ }
func (z zone) Sense(e *physic.Env) error {
	if z.err != nil {
		return z.err
	}
	e.Temperature = physic.ZeroCelsius + physic.Temperature(z.c*float64(physic.Celsius))
	return nil
}

func zones(zs ...zone) func() []thermalSensor {
	return func() []thermalSensor {
		out := make([]thermalSensor, len(zs))
		for i, z := range zs {
			out[i] = z
		}
		return out
	}
}
