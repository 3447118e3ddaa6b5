//go:build lab

package act

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestLabTripSyscalls counts, with the kernel's own tracer (tracefs, the
// raw_syscalls:sys_enter event filtered to one thread), the system calls
// a stop makes: on the tripwire's thread from ESTOP's edge until its
// record is read, and on the goroutine path (TripNow on a thread of its
// own, as an agent's stop or a build without cgo halts the outputs).
// The count is logged ("trip syscalls: ..."); what is asserted is that
// the lab profile's four outputs, on one chip, were halted with exactly
// one GPIO_V2_LINE_SET_VALUES and read back with exactly one GET_VALUES
// on each path (the tripwire's periodic read of its own line, on the
// descriptor its events are read from, is not a read-back).
func TestLabTripSyscalls(t *testing.T) {
	tr := openTrace(t)
	r := newLabRig(t, false)
	r.runner.inspect = false // its reads of gpio-sim would be the thread's syscalls
	r.healthy(t)
	waitFor(t, 10*time.Second, "the tripwire's threads", func() bool { return len(fifoThreads(t)) > 0 })

	// The tripwire's thread (or threads: ESTOP's and ESTOP2's).
	tids := fifoThreads(t)
	tr.start(t, tids)
	r.pull(t, "ESTOP", true)
	tp := r.next(t, "estop.tripped", 10*time.Second).Payload.(Trip)
	byTid := tr.stop(t)
	if !tp.AllSafe || tp.ByDriver != len(r.outs) {
		t.Fatalf("trip %+v: want every output halted by the tripwire", tp)
	}
	var most []call
	for _, calls := range byTid {
		if len(calls) > len(most) {
			most = calls
		}
	}
	t.Logf("trip syscalls: tripwire thread, %d outputs: %s", len(r.outs), summarize(most))
	t.Logf("trip syscalls: tripwire thread, in order: %s", order(most))
	checkHalted(t, "tripwire", most)
	r.opened(t)
	r.pull(t, "ESTOP", false)
	r.healthy(t)
	if err := r.e.Reset(admin); err != nil {
		t.Fatal(err)
	}
	r.runner.take()

	// The goroutine path: a stop asked for, on this thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := unix.Gettid()
	tr.start(t, []int{tid})
	tp = r.e.TripNow("the lab counts a trip's system calls")
	byTid = tr.stopElsewhere(t) // the tracer's own calls are not this thread's
	if !tp.AllSafe || tp.ByDriver != 0 {
		t.Fatalf("trip %+v: want every output halted by the goroutine", tp)
	}
	t.Logf("trip syscalls: e-stop goroutine, %d outputs: %s", len(r.outs), summarize(byTid[tid]))
	checkHalted(t, "goroutine", byTid[tid])
}

// call is one system call a thread entered: its number and arguments.
type call struct {
	nr   int
	args []uint64
}

// The GPIO character device's value ioctls, _IOWR(0xB4, 0x0F and 0x0E,
// struct gpio_v2_line_values), the same on every architecture.
const (
	gpioSetValues = 0xc010b40f
	gpioGetValues = 0xc010b40e
)

// The system call numbers the trips make, by architecture.
var (
	sysIoctl = map[string]int{"amd64": 16, "arm64": 29, "arm": 54}[runtime.GOARCH]
	sysNames = map[string]map[int]string{
		"amd64": {0: "read", 1: "write", 3: "close", 7: "poll", 72: "fcntl", 233: "epoll_ctl", 257: "openat", 202: "futex", 228: "clock_gettime", 271: "ppoll", 14: "rt_sigprocmask", 186: "gettid", 39: "getpid", 24: "sched_yield"},
		"arm64": {63: "read", 64: "write", 57: "close", 73: "ppoll", 25: "fcntl", 21: "epoll_ctl", 56: "openat", 98: "futex", 113: "clock_gettime", 135: "rt_sigprocmask", 178: "gettid", 172: "getpid", 124: "sched_yield"},
		"arm":   {3: "read", 4: "write", 6: "close", 168: "poll", 55: "fcntl", 221: "fcntl64", 251: "epoll_ctl", 322: "openat", 336: "ppoll", 240: "futex", 422: "futex_time64", 263: "clock_gettime", 403: "clock_gettime64", 175: "rt_sigprocmask", 224: "gettid", 20: "getpid", 158: "sched_yield"},
	}[runtime.GOARCH]
)

func (c call) name() string {
	if c.nr == sysIoctl && len(c.args) > 1 {
		switch uint32(c.args[1]) {
		case gpioSetValues:
			return "ioctl(GPIO_V2_LINE_SET_VALUES)"
		case gpioGetValues:
			return "ioctl(GPIO_V2_LINE_GET_VALUES)"
		}
		return fmt.Sprintf("ioctl(%#x)", c.args[1])
	}
	if n, ok := sysNames[c.nr]; ok {
		return n
	}
	return fmt.Sprintf("syscall %d", c.nr)
}

// summarize counts calls by name: "7 in all: 4 ioctl(...), 1 read, ...".
func summarize(calls []call) string {
	n := map[string]int{}
	for _, c := range calls {
		n[c.name()]++
	}
	names := make([]string, 0, len(n))
	for k := range n {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		return n[names[i]] > n[names[j]] || n[names[i]] == n[names[j]] && names[i] < names[j]
	})
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%d %s", n[k], k)
	}
	return fmt.Sprintf("%d in all: %s", len(calls), strings.Join(parts, ", "))
}

// order names the calls in the order they were entered.
func order(calls []call) string {
	names := make([]string, len(calls))
	for i, c := range calls {
		names[i] = c.name()
	}
	return strings.Join(names, " -> ")
}

func checkHalted(t *testing.T, path string, calls []call) {
	t.Helper()
	in := uint64(1 << 63) // the line's descriptor: what its events are read from
	for _, c := range calls {
		if n, ok := sysNames[c.nr]; ok && n == "read" && len(c.args) > 0 {
			in = c.args[0]
		}
	}
	set, get := 0, 0
	for _, c := range calls {
		switch {
		case c.name() == "ioctl(GPIO_V2_LINE_SET_VALUES)":
			set++
		case c.name() == "ioctl(GPIO_V2_LINE_GET_VALUES)" && c.args[0] != in:
			get++
		}
	}
	if set != 1 || get != 1 {
		t.Errorf("%s: %d SET_VALUES and %d GET_VALUES of the outputs traced, want one of each for one chip's outputs", path, set, get)
	}
}

// fifoThreads are this process's threads that run SCHED_FIFO: the
// tripwires' (nothing else of the process asks for it).
func fifoThreads(t *testing.T) []int {
	t.Helper()
	dirs, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var tids []int
	for _, d := range dirs {
		tid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if a, err := unix.SchedGetAttr(tid, 0); err == nil && a.Policy == unix.SCHED_FIFO {
			tids = append(tids, tid)
		}
	}
	return tids
}

// trace is the kernel's tracer, in tracefs.
type trace struct{ dir string }

func openTrace(t *testing.T) *trace {
	t.Helper()
	dir := "/sys/kernel/tracing"
	if _, err := os.Stat(filepath.Join(dir, "trace")); err != nil {
		if err := unix.Mount("nodev", dir, "tracefs", 0, ""); err != nil {
			t.Fatalf("mount tracefs on %s: %v", dir, err)
		}
	}
	tr := &trace{dir: dir}
	t.Cleanup(func() {
		tr.write("tracing_on", "0")
		tr.write("events/raw_syscalls/sys_enter/enable", "0")
		tr.write("events/raw_syscalls/sys_enter/filter", "0")
	})
	return tr
}

func (tr *trace) write(file, s string) error {
	return os.WriteFile(filepath.Join(tr.dir, file), []byte(s), 0)
}

// start traces every system call the threads tids enter, from now.
func (tr *trace) start(t *testing.T, tids []int) {
	t.Helper()
	var f []string
	for _, tid := range tids {
		f = append(f, fmt.Sprintf("common_pid == %d", tid))
	}
	for _, w := range [][2]string{
		{"tracing_on", "0"},
		{"trace", ""},
		{"buffer_size_kb", "1024"},
		{"events/raw_syscalls/sys_enter/filter", strings.Join(f, " || ")},
		{"events/raw_syscalls/sys_enter/enable", "1"},
		{"tracing_on", "1"},
	} {
		if err := tr.write(w[0], w[1]); err != nil {
			t.Fatalf("tracefs %s: %v", w[0], err)
		}
	}
}

// sysEnter is a line of the trace: "comm-TID [cpu] flags ts: sys_enter: NR n (a, b, ...)".
var sysEnter = regexp.MustCompile(`-(\d+)\s+\[\d+\].*sys_enter: NR (\d+) \(([^)]*)\)`)

// stopElsewhere is stop with tracing turned off by another thread than
// the caller's, which is locked to its thread.
func (tr *trace) stopElsewhere(t *testing.T) map[int][]call {
	t.Helper()
	off := make(chan error)
	go func() { off <- tr.write("tracing_on", "0") }()
	if err := <-off; err != nil {
		t.Fatal(err)
	}
	return tr.stop(t)
}

// stop ends the trace and returns each thread's calls, in order.
func (tr *trace) stop(t *testing.T) map[int][]call {
	t.Helper()
	if err := tr.write("tracing_on", "0"); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(tr.dir, "trace"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[int][]call{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := sysEnter.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		tid, _ := strconv.Atoi(m[1])
		nr, _ := strconv.Atoi(m[2])
		c := call{nr: nr}
		for _, a := range strings.Split(m[3], ",") {
			v, _ := strconv.ParseUint(strings.TrimSpace(a), 16, 64)
			c.args = append(c.args, v)
		}
		out[tid] = append(out[tid], c)
	}
	if err := sc.Err(); err != nil && !errors.Is(err, os.ErrClosed) {
		t.Fatal(err)
	}
	return out
}
