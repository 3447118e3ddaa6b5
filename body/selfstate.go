package body

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"periph.io/x/conn/v3/physic"
	"periph.io/x/host/v3/sysfs"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/periphhost"
)

// Degradation is how well the body can do its work, from its own state.
// The action runner narrows what it allows by it: critical allows only
// read-only actions, degraded nothing above R1.
type Degradation int

// Degradation levels, from best to worst.
const (
	LevelNormal      Degradation = iota // all is well
	LevelConstrained                    // busy or short of something, still fine
	LevelDegraded                       // hot, throttled, low on disk, a channel broken
	LevelCritical                       // about to fail: very hot, disk nearly full
)

var degradationNames = []string{"normal", "constrained", "degraded", "critical"}

func (d Degradation) String() string {
	if d >= 0 && int(d) < len(degradationNames) {
		return degradationNames[d]
	}
	return fmt.Sprintf("degradation(%d)", int(d))
}

// MarshalText writes the level's name.
func (d Degradation) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads a level's name.
func (d *Degradation) UnmarshalText(b []byte) error {
	for i, n := range degradationNames {
		if string(b) == n {
			*d = Degradation(i)
			return nil
		}
	}
	return fmt.Errorf("body: %q is not a degradation level (%s)", b, strings.Join(degradationNames, ", "))
}

// Throttle is what the board says about throttling and power. Now bits are
// the state at the sample; Since bits say it happened since boot.
type Throttle struct {
	Source           string `json:"source" cbor:"source"`
	UnderVoltage     bool   `json:"under_voltage" cbor:"under_voltage"`
	FreqCapped       bool   `json:"freq_capped" cbor:"freq_capped"`
	Throttled        bool   `json:"throttled" cbor:"throttled"`
	SoftTempLimit    bool   `json:"soft_temp_limit" cbor:"soft_temp_limit"`
	UnderVoltageSeen bool   `json:"under_voltage_seen,omitempty" cbor:"under_voltage_seen,omitempty"`
	ThrottledSeen    bool   `json:"throttled_seen,omitempty" cbor:"throttled_seen,omitempty"`
}

// Any tells whether anything holds the board back now.
func (t Throttle) Any() bool { return t.UnderVoltage || t.FreqCapped || t.Throttled || t.SoftTempLimit }

// SelfState is one sample of the body's own state.
type SelfState struct {
	At hal.Mono `json:"-"`
	// CPU is the share of CPU time busy since the previous sample (0..1);
	// Load1 the 1-minute load average per CPU.
	CPU   float64 `json:"cpu"`
	Load1 float64 `json:"load1"`
	// Memory in bytes.
	MemTotal     uint64 `json:"mem_total"`
	MemAvailable uint64 `json:"mem_available"`
	// Disk of the data partition, in bytes.
	DiskTotal uint64 `json:"disk_total"`
	DiskFree  uint64 `json:"disk_free"`
	// Temps by thermal zone type, in °C.
	Temps    map[string]float64 `json:"temps,omitempty"`
	Throttle *Throttle          `json:"throttle,omitempty"`
	Clock    ClockSync          `json:"clock"`
	// Outbox is the number of events waiting to be sent.
	Outbox uint64 `json:"outbox"`
	// Channels counts channels by lifecycle state.
	Channels map[State]int `json:"channels"`
	// Shed is how many events the sense channels shed so far.
	Shed uint64 `json:"shed"`
	// Errors lists what could not be read.
	Errors []string `json:"errors,omitempty"`

	Level Degradation `json:"level"`
	// Why says what set Level, worst first.
	Why []string `json:"why,omitempty"`
}

// Limits are the thresholds the degradation level is judged by.
type Limits struct {
	HotC, CriticalC         float64 // temperature
	DiskLowBytes            uint64  // free space on the data partition
	DiskCriticalBytes       uint64
	MemLowFraction          float64 // available memory
	BusyFraction            float64 // CPU
	OutboxHigh              uint64  // events waiting
	ClockUnsyncedConstrains bool    // an unsynced clock constrains the body
}

// DefaultLimits are sensible for a Raspberry Pi class board (the Pi's
// firmware starts soft throttling at 80 °C and hard at 85 °C).
var DefaultLimits = Limits{
	HotC: 80, CriticalC: 85,
	DiskLowBytes: 256 << 20, DiskCriticalBytes: 32 << 20,
	MemLowFraction: 0.1, BusyFraction: 0.9,
	OutboxHigh: 10000, ClockUnsyncedConstrains: true,
}

// Sampler reads the body's state from the kernel. Fields that are nil or
// empty are not sampled.
type Sampler struct {
	// Root is where /proc and /sys are found ("/" on a device).
	Root string
	// DataDir is on the data partition.
	DataDir string
	// Zones are thermal zone types to read.
	Zones []string
	// ThrottleSource is "rpi-firmware", "cpufreq" or ""; ThrottlePath its
	// file or directory (a glob, as board profiles write it).
	ThrottleSource, ThrottlePath string
	Clock                        *Clock
	Outbox                       func() (uint64, error)
	Registry                     *Registry
	Shed                         func() uint64
	Limits                       Limits

	// sensors lists the thermal sensors (nil: periph's); tests set it.
	sensors func() []thermalSensor

	prevBusy, prevTotal uint64
}

func (s *Sampler) path(p string) string { return filepath.Join(s.Root, p) }

// Sample reads everything once and judges the level.
func (s *Sampler) Sample() SelfState {
	st := SelfState{At: hal.MonoNow(), Channels: map[State]int{}}
	fail := func(what string, err error) { st.Errors = append(st.Errors, what+": "+err.Error()) }

	if busy, total, err := s.readStat(); err != nil {
		fail("cpu", err)
	} else {
		if s.prevTotal != 0 && total > s.prevTotal {
			st.CPU = float64(busy-s.prevBusy) / float64(total-s.prevTotal)
		}
		s.prevBusy, s.prevTotal = busy, total
	}
	if l, err := s.readLoad(); err != nil {
		fail("load", err)
	} else {
		st.Load1 = l
	}
	if t, a, err := s.readMem(); err != nil {
		fail("memory", err)
	} else {
		st.MemTotal, st.MemAvailable = t, a
	}
	if s.DataDir != "" {
		var fs unixStatfs
		if err := statfs(s.DataDir, &fs); err != nil {
			fail("disk", err)
		} else {
			st.DiskTotal, st.DiskFree = fs.total, fs.avail
		}
	}
	if len(s.Zones) > 0 {
		temps, err := s.readTemps()
		if err != nil {
			fail("thermal", err)
		}
		if len(temps) > 0 {
			st.Temps = temps
		}
	}
	if s.ThrottleSource != "" && s.ThrottleSource != "none" {
		if t, err := s.readThrottle(); err != nil {
			fail("throttle", err)
		} else {
			st.Throttle = &t
		}
	}
	if s.Clock != nil {
		st.Clock = s.Clock.Sync()
	}
	if s.Outbox != nil {
		if n, err := s.Outbox(); err != nil {
			fail("outbox", err)
		} else {
			st.Outbox = n
		}
	}
	if s.Registry != nil {
		for _, c := range s.Registry.Snapshot() {
			st.Channels[c.State]++
		}
	}
	if s.Shed != nil {
		st.Shed = s.Shed()
	}
	st.Level, st.Why = s.Limits.judge(&st)
	return st
}

// judge sets the level from the sample: the worst condition wins.
func (l Limits) judge(st *SelfState) (Degradation, []string) {
	type reason struct {
		level Degradation
		why   string
	}
	var rs []reason
	add := func(d Degradation, format string, args ...any) {
		rs = append(rs, reason{d, fmt.Sprintf(format, args...)})
	}
	for _, zone := range sortedKeys(st.Temps) {
		switch c := st.Temps[zone]; {
		case l.CriticalC > 0 && c >= l.CriticalC:
			add(LevelCritical, "%s at %.1f °C (critical %.0f °C)", zone, c, l.CriticalC)
		case l.HotC > 0 && c >= l.HotC:
			add(LevelDegraded, "%s at %.1f °C (hot %.0f °C)", zone, c, l.HotC)
		}
	}
	if t := st.Throttle; t != nil {
		switch {
		case t.UnderVoltage:
			add(LevelDegraded, "under-voltage: the power supply is too weak")
		case t.Throttled || t.FreqCapped || t.SoftTempLimit:
			add(LevelDegraded, "throttled (%s)", t.Source)
		}
	}
	if st.DiskTotal > 0 {
		switch {
		case st.DiskFree < l.DiskCriticalBytes:
			add(LevelCritical, "data partition has %d MiB free (critical below %d MiB)", st.DiskFree>>20, l.DiskCriticalBytes>>20)
		case st.DiskFree < l.DiskLowBytes:
			add(LevelDegraded, "data partition has %d MiB free (low below %d MiB)", st.DiskFree>>20, l.DiskLowBytes>>20)
		}
	}
	if n := st.Channels[Error] + st.Channels[Offline]; n > 0 {
		add(LevelDegraded, "%d channels in error or offline", n)
	}
	if st.MemTotal > 0 && float64(st.MemAvailable) < l.MemLowFraction*float64(st.MemTotal) {
		add(LevelConstrained, "memory: %d MiB available of %d MiB", st.MemAvailable>>20, st.MemTotal>>20)
	}
	if l.BusyFraction > 0 && st.CPU >= l.BusyFraction {
		add(LevelConstrained, "CPU %.0f%% busy", 100*st.CPU)
	}
	if l.OutboxHigh > 0 && st.Outbox >= l.OutboxHigh {
		add(LevelConstrained, "%d events wait in the outbox", st.Outbox)
	}
	if l.ClockUnsyncedConstrains && !st.Clock.Synced {
		add(LevelConstrained, "clock not synchronised (the wall clock may be off by any amount)")
	}
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].level > rs[j].level })
	level := LevelNormal
	var why []string
	for _, r := range rs {
		level = max(level, r.level)
		why = append(why, r.why)
	}
	return level, why
}

func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// readStat returns busy and total jiffies of all CPUs from /proc/stat.
func (s *Sampler) readStat() (busy, total uint64, err error) {
	b, err := os.ReadFile(s.path("proc/stat"))
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: no cpu line")
	}
	for i, v := range f[1:] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: field %d is not a number", i+1)
		}
		if i >= 8 { // guest and guest_nice are already in user and nice
			break
		}
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total, nil
}

func (s *Sampler) readLoad() (float64, error) {
	b, err := os.ReadFile(s.path("proc/loadavg"))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) < 1 {
		return 0, fmt.Errorf("/proc/loadavg is empty")
	}
	l, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/loadavg: %q is not a number", f[0])
	}
	return l / float64(max(1, s.cpus())), nil
}

// cpus counts the CPUs in /proc/stat.
func (s *Sampler) cpus() int {
	b, err := os.ReadFile(s.path("proc/stat"))
	if err != nil {
		return 1
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if len(line) > 3 && strings.HasPrefix(line, "cpu") && line[3] >= '0' && line[3] <= '9' {
			n++
		}
	}
	return n
}

func (s *Sampler) readMem() (total, avail uint64, err error) {
	f, err := os.Open(s.path("proc/meminfo"))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fs := strings.Fields(v)
		if len(fs) == 0 {
			continue
		}
		n, err := strconv.ParseUint(fs[0], 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "MemTotal":
			total = n << 10
		case "MemAvailable":
			avail = n << 10
		}
	}
	if total == 0 {
		return 0, 0, fmt.Errorf("/proc/meminfo has no MemTotal")
	}
	return total, avail, sc.Err()
}

// thermalSensor is a thermal zone as the sampler reads it: one of
// periph host/v3's sysfs thermal sensors (a zone of /sys/class/thermal
// or an hwmon input), its type and a reading.
type thermalSensor interface {
	Type() string
	Sense(*physic.Env) error
}

// thermalSensors are the machine's, as periph's sysfs driver found them
// when it was loaded.
func thermalSensors() []thermalSensor {
	if _, err := periphhost.Init(); err != nil {
		return nil
	}
	out := make([]thermalSensor, len(sysfs.ThermalSensors))
	for i, z := range sysfs.ThermalSensors {
		out[i] = z
	}
	return out
}

// readTemps reads the zones of the types the profile names, in °C: the
// first sensor of each type (periph lists the thermal zones before the
// hwmon inputs).
func (s *Sampler) readTemps() (map[string]float64, error) {
	want := map[string]bool{}
	for _, z := range s.Zones {
		want[z] = true
	}
	sensors := s.sensors
	if sensors == nil {
		sensors = thermalSensors
	}
	out := map[string]float64{}
	var errs []string
	for _, z := range sensors() {
		typ := z.Type()
		if !want[typ] {
			continue
		}
		want[typ] = false // the first of a type counts
		var e physic.Env
		if err := z.Sense(&e); err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", typ, err))
			continue
		}
		out[typ] = math.Round(e.Temperature.Celsius()*1000) / 1000
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return out, nil
}

// Raspberry Pi firmware throttle bits (vcgencmd get_throttled).
const (
	rpiUnderVoltage     = 1 << 0
	rpiFreqCapped       = 1 << 1
	rpiThrottled        = 1 << 2
	rpiSoftTempLimit    = 1 << 3
	rpiUnderVoltageSeen = 1 << 16
	rpiThrottledSeen    = 1 << 18
)

func (s *Sampler) readThrottle() (Throttle, error) {
	m, _ := filepath.Glob(s.path(strings.TrimPrefix(s.ThrottlePath, "/")))
	if len(m) == 0 {
		return Throttle{}, fmt.Errorf("%s: nothing at %s", s.ThrottleSource, s.ThrottlePath)
	}
	t := Throttle{Source: s.ThrottleSource}
	switch s.ThrottleSource {
	case "rpi-firmware":
		raw, err := os.ReadFile(m[0])
		if err != nil {
			return t, err
		}
		v, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(string(raw)), "0x"), 16, 32)
		if err != nil {
			return t, fmt.Errorf("%s does not hold hex throttle bits", s.ThrottlePath)
		}
		t.UnderVoltage, t.FreqCapped, t.Throttled, t.SoftTempLimit = v&rpiUnderVoltage != 0, v&rpiFreqCapped != 0, v&rpiThrottled != 0, v&rpiSoftTempLimit != 0
		t.UnderVoltageSeen, t.ThrottledSeen = v&rpiUnderVoltageSeen != 0, v&rpiThrottledSeen != 0
	case "cpufreq":
		// A cooling device or policy that lowered the ceiling below what
		// the CPU can do is holding it back.
		read := func(name string) (uint64, error) {
			raw, err := os.ReadFile(filepath.Join(m[0], name))
			if err != nil {
				return 0, err
			}
			return strconv.ParseUint(strings.TrimSpace(string(raw)), 10, 64)
		}
		hw, err := read("cpuinfo_max_freq")
		if err != nil {
			return t, err
		}
		limit, err := read("scaling_max_freq")
		if err != nil {
			return t, err
		}
		t.FreqCapped = limit < hw
	default:
		return t, fmt.Errorf("unknown throttle source %q", s.ThrottleSource)
	}
	return t, nil
}

// DefaultSampleEvery is how often the self-state channel samples.
const DefaultSampleEvery = 5 * time.Second
