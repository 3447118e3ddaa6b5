package hal

import (
	"testing"
	"time"

	"periph.io/x/conn/v3/physic"
)

func TestPixelFormatString(t *testing.T) {
	for _, tc := range []struct {
		p    PixelFormat
		want string
	}{
		{PixelYUYV, "YUYV"},
		{PixelMJPEG, "MJPG"},
		{PixelGrey, "GREY"},
		{0, "0x00000000"},
		{FourCC('Y', 'U', 0x01, 'V'), "0x56015559"},
	} {
		if got := tc.p.String(); got != tc.want {
			t.Errorf("%#x: got %q, want %q", uint32(tc.p), got, tc.want)
		}
	}
	// The value is the kernel's: V4L2_PIX_FMT_YUYV is 0x56595559.
	if PixelYUYV != 0x56595559 {
		t.Errorf("YUYV is %#x, want the kernel's 0x56595559", uint32(PixelYUYV))
	}
}

func TestAudioFormat(t *testing.T) {
	for _, tc := range []struct {
		f    AudioFormat
		dur  time.Duration
		size int
	}{
		{AudioFormat{Rate: 16 * physic.KiloHertz, Channels: 1, FrameSamples: 320}, 20 * time.Millisecond, 320},
		{AudioFormat{Rate: 48 * physic.KiloHertz, Channels: 2, FrameSamples: 480}, 10 * time.Millisecond, 960},
		{AudioFormat{}, 0, 0},
	} {
		if got := tc.f.FrameDuration(); got != tc.dur {
			t.Errorf("%v: duration %v, want %v", tc.f, got, tc.dur)
		}
		if got := tc.f.Len(); got != tc.size {
			t.Errorf("%v: len %d, want %d", tc.f, got, tc.size)
		}
	}
}

func TestFrameReleaseOnce(t *testing.T) {
	n := 0
	f := NewFrame(FrameFormat{}, []byte{1}, 1, 0, func() { n++ })
	f.Release()
	f.Release()
	if n != 1 || f.Data != nil {
		t.Errorf("released %d times, data %v; want once and nil", n, f.Data)
	}
}

func TestMonoNowIsMonotonic(t *testing.T) {
	a := MonoNow()
	b := MonoNow()
	if b < a || a <= 0 {
		t.Errorf("MonoNow went %v then %v", a, b)
	}
}
