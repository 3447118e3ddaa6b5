package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/hal"
)

// BenchmarkRender draws one frame of the sim camera at the sizes the sim
// profile and the tests use. The sim's camera runs inside the daemon, so
// its cost is load on whatever else the daemon measures.
func BenchmarkRender(b *testing.B) {
	for _, f := range []hal.FrameFormat{
		{Pixel: hal.PixelYUYV, Width: 320, Height: 240, Stride: 640},
		{Pixel: hal.PixelYUYV, Width: 640, Height: 480, Stride: 1280},
	} {
		b.Run(fmt.Sprintf("%v-%dx%d", f.Pixel, f.Width, f.Height), func(b *testing.B) {
			bd := New(7)
			bg := bd.background(f)
			buf := make([]byte, f.Stride*f.Height)
			var seq uint64
			for b.Loop() {
				bd.render(f, bg, buf, time.Duration(seq)*100*time.Millisecond, seq)
				seq++
			}
			b.SetBytes(int64(len(buf)))
		})
	}
}
