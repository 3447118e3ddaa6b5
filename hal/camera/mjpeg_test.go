package camera

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"strings"
	"testing"
)

// testJPEG encodes a w×h picture with a gradient and a bright square, in
// colour (4:2:0) or grey, with image/jpeg, whose Huffman tables are the
// standard ones.
func testJPEG(t testing.TB, w, h int, colour bool) []byte {
	t.Helper()
	var img image.Image
	if colour {
		m := image.NewRGBA(image.Rect(0, 0, w, h))
		for y := range h {
			for x := range w {
				m.Set(x, y, color.RGBA{uint8(x * 255 / w), uint8(y * 255 / h), 90, 255})
			}
		}
		img = m
	} else {
		m := image.NewGray(image.Rect(0, 0, w, h))
		for y := range h {
			for x := range w {
				v := uint8((x + y) * 200 / (w + h))
				if x > w/4 && x < w/2 && y > h/4 && y < h/2 {
					v = 240
				}
				m.SetGray(x, y, color.Gray{v})
			}
		}
		img = m
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// stripDHT removes the DHT segments, as a UVC camera's MJPEG leaves them out.
func stripDHT(t testing.TB, b []byte) []byte {
	t.Helper()
	out := []byte{0xff, markerSOI}
	i := 2
	for {
		m := b[i+1]
		if m == markerSOS {
			return append(out, b[i:]...)
		}
		n := int(b[i+2])<<8 | int(b[i+3])
		if m != markerDHT {
			out = append(out, b[i:i+2+n]...)
		}
		i += 2 + n
	}
}

// lumaOf decodes with image/jpeg alone, for comparison.
func lumaOf(t testing.TB, b []byte) []byte {
	t.Helper()
	img, err := jpeg.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	w, h := img.Bounds().Dx(), img.Bounds().Dy()
	out := make([]byte, 0, w*h)
	for y := range h {
		switch m := img.(type) {
		case *image.YCbCr:
			out = append(out, m.Y[y*m.YStride:y*m.YStride+w]...)
		case *image.Gray:
			out = append(out, m.Pix[y*m.Stride:y*m.Stride+w]...)
		}
	}
	return out
}

func TestDecodeLuma(t *testing.T) {
	colour := testJPEG(t, 64, 48, true)
	gray := testJPEG(t, 40, 30, false)
	odd := testJPEG(t, 33, 17, true)
	sos, _, err := scanHeader(colour)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		frame []byte
		w, h  int
		want  []byte // luma; nil when an error is wanted
		err   string
	}{
		{"colour with tables", colour, 64, 48, lumaOf(t, colour), ""},
		{"colour without tables (UVC)", stripDHT(t, colour), 64, 48, lumaOf(t, colour), ""},
		{"grey without tables", stripDHT(t, gray), 40, 30, lumaOf(t, gray), ""},
		{"odd size, padded planes", stripDHT(t, odd), 33, 17, lumaOf(t, odd), ""},
		{"another size than the stream's", colour, 640, 480, nil, "a 64x48 frame in a 640x480 stream"},
		{"empty", nil, 64, 48, nil, "no start-of-image marker"},
		{"not a JPEG", []byte("GIF89a, not at all a JPEG frame"), 64, 48, nil, "no start-of-image marker"},
		{"cut in the header", colour[:40], 64, 48, nil, "no scan"},
		{"cut in the scan", colour[:sos+40], 64, 48, nil, "mjpeg: invalid JPEG format: short Huffman data"},
		{"end of image before the scan", []byte{0xff, markerSOI, 0xff, markerEOI}, 64, 48, nil, "no scan"},
		{"a segment of length 1", []byte{0xff, markerSOI, 0xff, 0xe0, 0, 1, 0, 0}, 64, 48, nil, "marker 0xe0 with length 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := make([]byte, tc.w*tc.h)
			err := decodeLuma(tc.frame, tc.w, tc.h, dst)
			if tc.want == nil {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("%v, want an error with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(dst, tc.want) {
				t.Error("the luma differs from image/jpeg's decoding of the frame with its tables")
			}
		})
	}
}

func TestStandardDHTIsWellFormed(t *testing.T) {
	if got := int(standardDHT[2])<<8 | int(standardDHT[3]); got != len(standardDHT)-2 || got != 2+2*(1+16+12)+2*(1+16+162) {
		t.Errorf("DHT length field %d for %d bytes", got, len(standardDHT))
	}
}

func FuzzDecodeMJPEG(f *testing.F) {
	colour := testJPEG(f, 32, 16, true)
	f.Add(colour)
	f.Add(stripDHT(f, colour))
	f.Add(stripDHT(f, testJPEG(f, 32, 16, false)))
	f.Add(colour[:len(colour)/3])
	f.Add([]byte{0xff, markerSOI, 0xff, 0xff, 0xff, markerSOS})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, frame []byte) {
		dst := make([]byte, 32*16)
		if err := decodeLuma(frame, 32, 16, dst); err == nil {
			// Whatever decoded is a 32x16 frame: check that it agrees
			// with image/jpeg on the same bytes, tables added if needed.
			cfg, err2 := jpeg.DecodeConfig(bytes.NewReader(withTables(frame)))
			if err2 != nil || cfg.Width != 32 || cfg.Height != 16 {
				t.Errorf("decoded a frame image/jpeg sees as %+v, %v", cfg, err2)
			}
		}
	})
}

// withTables returns frame with the standard DHT in front of its scan
// when it has none.
func withTables(frame []byte) []byte {
	sos, hasDHT, err := scanHeader(frame)
	if err != nil || hasDHT {
		return frame
	}
	return append(append(append([]byte{}, frame[:sos]...), standardDHT...), frame[sos:]...)
}
