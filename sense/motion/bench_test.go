package motion

import (
	"syscall"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/sense/motion/motiontest"
)

// benchClip renders n frames of an object crossing two zones at 30 fps.
func benchClip(b *testing.B, f hal.FrameFormat, n int) [][]byte {
	sc := motiontest.Scene{Format: f, Seed: 1, Noise: 4, Objects: crossing(230)}
	frames := make([][]byte, n)
	for i := range frames {
		frames[i] = make([]byte, sc.Bytes())
		sc.Render(frames[i], 2*time.Second+time.Duration(i)*time.Second/30, uint64(i))
	}
	return frames
}

func benchProcess(b *testing.B, f hal.FrameFormat, cfg Config) {
	frames := benchClip(b, f, 60)
	d, err := New(cfg, f)
	if err != nil {
		b.Fatal(err)
	}
	out := make([]Transition, 0, 16)
	fr := hal.NewFrame(f, nil, 0, 0, nil)
	b.ReportAllocs()
	b.SetBytes(int64(len(frames[0])))
	cpu0 := cpuTime()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		fr.Data, fr.Time = frames[i%len(frames)], base.Add(time.Duration(i)*time.Second/30)
		i++
		if out, err = d.Process(fr, out[:0]); err != nil {
			b.Fatal(err)
		}
	}
	cpu := cpuTime() - cpu0
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
	b.ReportMetric(float64(b.N)/cpu.Seconds(), "frames/cpu-s")
}

// cpuTime is the CPU time the process has used: on a shared machine the
// benchmark's wall time includes time other processes took from its core.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkProcess640x480YUYV(b *testing.B) {
	benchProcess(b, yuyv(640, 480), Config{Zones: halves})
}

func BenchmarkProcess640x480Grey(b *testing.B) {
	benchProcess(b, grey(640, 480), Config{Zones: halves})
}

func BenchmarkProcess640x480YUYVBy4(b *testing.B) {
	benchProcess(b, yuyv(640, 480), Config{Zones: halves, Downscale: 4})
}

func BenchmarkProcess1280x720YUYV(b *testing.B) {
	benchProcess(b, yuyv(1280, 720), Config{Zones: halves})
}
