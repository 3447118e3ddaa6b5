package evidence

import (
	"bytes"
	"image"
	"image/jpeg"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/hal"
)

// bars are the YUV of eight vertical bars, as a test pattern has them.
var bars = [8][3]byte{{180, 128, 128}, {162, 44, 142}, {131, 156, 44}, {112, 72, 58}, {84, 184, 198}, {65, 100, 212}, {35, 212, 114}, {16, 128, 128}}

// barsYUYV is a w×h YUYV frame of the bars, each w/8 wide.
func barsYUYV(w, h int) *hal.Frame {
	stride := 2 * w
	data := make([]byte, stride*h)
	for y := range h {
		for x := 0; x < w; x += 2 {
			c := bars[x*8/w]
			i := y*stride + 2*x
			data[i], data[i+1], data[i+2], data[i+3] = c[0], c[1], c[0], c[2]
		}
	}
	return hal.NewFrame(hal.FrameFormat{Pixel: hal.PixelYUYV, Width: w, Height: h, Stride: stride}, data, 7, hal.Mono(time.Second), nil)
}

// yuvAt reads a decoded JPEG's YCbCr at x, y.
func yuvAt(t *testing.T, img image.Image, x, y int) [3]int {
	t.Helper()
	m, ok := img.(*image.YCbCr)
	if !ok {
		t.Fatalf("decoded a %T, want YCbCr", img)
	}
	ci := m.COffset(x, y)
	return [3]int{int(m.Y[m.YOffset(x, y)]), int(m.Cb[ci]), int(m.Cr[ci])}
}

func nearYUV(a [3]int, b [3]byte, tol int) bool {
	for i := range a {
		if d := a[i] - int(b[i]); d > tol || d < -tol {
			return false
		}
	}
	return true
}

func TestEncodeJPEG(t *testing.T) {
	f := barsYUYV(640, 480)
	decode := func(b []byte) image.Image {
		t.Helper()
		img, err := jpeg.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		return img
	}
	// The whole frame keeps every bar's colour.
	jpg, w, h, err := EncodeJPEG(f, [4]float64{0, 0, 1, 1}, 1920, 90, 1<<20)
	if err != nil || w != 640 || h != 480 {
		t.Fatalf("%dx%d, %v", w, h, err)
	}
	img := decode(jpg)
	if img.Bounds().Dx() != 640 || img.Bounds().Dy() != 480 {
		t.Fatalf("decoded %v", img.Bounds())
	}
	for i, c := range bars {
		if got := yuvAt(t, img, i*80+40, 240); !nearYUV(got, c, 6) {
			t.Errorf("bar %d: YCbCr %v, want %v", i, got, c)
		}
	}
	// A region: the two middle bars' box, at half its width.
	jpg, w, h, err = EncodeJPEG(f, [4]float64{0.25, 0.5, 0.5, 1}, 80, 90, 1<<20)
	if err != nil || w != 80 || h != 120 {
		t.Fatalf("a region: %dx%d, %v", w, h, err)
	}
	img = decode(jpg)
	for i, x := range []int{20, 60} {
		if got := yuvAt(t, img, x, 60); !nearYUV(got, bars[2+i], 6) {
			t.Errorf("region bar %d: YCbCr %v, want %v", 2+i, got, bars[2+i])
		}
	}
	// Too big at every quality: refused, not truncated.
	if _, _, _, err := EncodeJPEG(f, [4]float64{0, 0, 1, 1}, 1920, 90, 100); err == nil || !strings.Contains(err.Error(), "over the 100 allowed") {
		t.Errorf("a JPEG over its bound: %v", err)
	}
	// An empty region.
	if _, _, _, err := EncodeJPEG(f, [4]float64{0.5, 0.5, 0.5, 0.7}, 1920, 90, 1<<20); err == nil {
		t.Error("an empty region was encoded")
	}
	// GREY.
	grey := hal.NewFrame(hal.FrameFormat{Pixel: hal.PixelGrey, Width: 64, Height: 48, Stride: 64}, bytes.Repeat([]byte{200}, 64*48), 1, 0, nil)
	jpg, w, h, err = EncodeJPEG(grey, [4]float64{0, 0, 1, 1}, 32, 90, 1<<20)
	if err != nil || w != 32 || h != 24 {
		t.Fatalf("grey: %dx%d %v", w, h, err)
	}
	if g, ok := decode(jpg).(*image.Gray); !ok || math.Abs(float64(g.Pix[12*g.Stride+16])-200) > 3 {
		t.Errorf("grey: decoded %T", decode(jpg))
	}
	// A camera's own JPEG is passed on for the whole frame at its size,
	// and decoded for a region.
	var own bytes.Buffer
	src, _, _, _ := EncodeJPEG(f, [4]float64{0, 0, 1, 1}, 1920, 95, 1<<20)
	own.Write(src)
	mj := hal.NewFrame(hal.FrameFormat{Pixel: hal.PixelGrey, Width: 640, Height: 480, Stride: 640}, make([]byte, 640*480), 2, 0, nil)
	mj.Encoded = own.Bytes()
	if jpg, _, _, err := EncodeJPEG(mj, [4]float64{0, 0, 1, 1}, 1920, 80, 1<<20); err != nil || !bytes.Equal(jpg, own.Bytes()) {
		t.Errorf("the camera's JPEG was not passed on: %v", err)
	}
	jpg, w, h, err = EncodeJPEG(mj, [4]float64{0.5, 0, 1, 1}, 1920, 90, 1<<20)
	if err != nil || w != 320 || h != 480 {
		t.Fatalf("a region of the camera's JPEG: %dx%d %v", w, h, err)
	}
	if got := yuvAt(t, decode(jpg), 40, 100); !nearYUV(got, bars[4], 8) {
		t.Errorf("a region of the camera's JPEG: bar 4 is %v, want %v", got, bars[4])
	}
}
