package motion

import (
	"testing"
	"time"
)

// BenchmarkStages times each stage of Process on its own, on a 640x480
// YUYV frame of the benchmark clip with the object in view, to see where
// a frame's time goes.
func BenchmarkStages(b *testing.B) {
	f := yuyv(640, 480)
	frames := benchClip(b, f, 60)
	d, err := New(Config{Zones: halves}, f)
	if err != nil {
		b.Fatal(err)
	}
	for i := range 30 {
		d.process(frames[i], base.Add(time.Duration(i)*time.Second/30), nil)
	}
	if d.Last().Regions == 0 {
		b.Fatal("no motion in the frame the stages are timed on")
	}
	light := d.illumination()
	limit := float32(20)
	stages := []struct {
		name string
		run  func(i int)
	}{
		{"downscale", func(i int) { d.downscale(frames[i%len(frames)]) }},
		{"blur", func(int) { d.gauss3() }},
		{"illumination", func(int) { d.illumination() }},
		{"noise", func(int) { d.noise(light) }},
		{"difference", func(int) { d.difference(light, limit, 0) }},
		{"dilate", func(int) { d.dilate() }},
		{"label", func(int) { d.label() }},
		{"zones", func(int) { d.zoneTest() }},
	}
	for _, s := range stages {
		b.Run(s.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				s.run(i)
				i++
			}
		})
	}
}
