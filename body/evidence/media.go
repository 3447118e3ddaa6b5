package evidence

import (
	"bytes"
	"fmt"
	"image"
	"image/jpeg"
	"math"

	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/hal"
)

// MinQuality is the lowest JPEG quality EncodeJPEG goes down to for a
// picture to fit its bound.
const MinQuality = 30

// EncodeJPEG encodes the region box ([x0, y0, x1, y1] normalised) of f
// as a JPEG at most width pixels wide (the aspect kept, nearest
// neighbour) at quality, and returns it with its size. A frame the camera
// sent as a JPEG (Encoded) is passed on as it is when the whole frame at
// its size is asked for and it fits in maxBytes; otherwise that JPEG is
// decoded and the region encoded from its colour. A JPEG over maxBytes
// is encoded again at lower qualities, down to 30; one still over is an
// error.
func EncodeJPEG(f *hal.Frame, box [4]float64, width, quality, maxBytes int) ([]byte, int, int, error) {
	ff := f.Format
	x0, y0 := int(math.Floor(box[0]*float64(ff.Width))), int(math.Floor(box[1]*float64(ff.Height)))
	x1, y1 := int(math.Ceil(box[2]*float64(ff.Width))), int(math.Ceil(box[3]*float64(ff.Height)))
	x0, y0, x1, y1 = max(x0, 0), max(y0, 0), min(x1, ff.Width), min(y1, ff.Height)
	if x1-x0 < 1 || y1-y0 < 1 {
		return nil, 0, 0, fmt.Errorf("the region %v of a %dx%d frame is empty", box, ff.Width, ff.Height)
	}
	cw, ch := x1-x0, y1-y0
	w := min(cw, width)
	h := max(1, int(math.Round(float64(ch)*float64(w)/float64(cw))))
	whole := x0 == 0 && y0 == 0 && cw == ff.Width && ch == ff.Height && w == cw
	if f.Encoded != nil && whole && len(f.Encoded) <= maxBytes {
		return f.Encoded, ff.Width, ff.Height, nil
	}
	var src sampler
	switch {
	case f.Encoded != nil:
		img, err := jpeg.Decode(bytes.NewReader(f.Encoded))
		if err != nil {
			return nil, 0, 0, fmt.Errorf("the camera's JPEG: %w", err)
		}
		if b := img.Bounds(); b.Dx() != ff.Width || b.Dy() != ff.Height {
			return nil, 0, 0, fmt.Errorf("the camera's JPEG is %dx%d in a %dx%d stream", b.Dx(), b.Dy(), ff.Width, ff.Height)
		}
		switch m := img.(type) {
		case *image.YCbCr:
			src = ycbcrSampler{m}
		case *image.Gray:
			src = graySampler{m.Pix, m.Stride, 1}
		default:
			return nil, 0, 0, fmt.Errorf("the camera's JPEG is %T", img)
		}
	case ff.Pixel == hal.PixelYUYV:
		if len(f.Data) < ff.Stride*(ff.Height-1)+2*ff.Width {
			return nil, 0, 0, fmt.Errorf("a YUYV frame of %d bytes for %dx%d", len(f.Data), ff.Width, ff.Height)
		}
		src = yuyvSampler{f.Data, ff.Stride}
	case ff.Pixel == hal.PixelGrey:
		stride := max(ff.Stride, ff.Width)
		if len(f.Data) < stride*(ff.Height-1)+ff.Width {
			return nil, 0, 0, fmt.Errorf("a GREY frame of %d bytes for %dx%d", len(f.Data), ff.Width, ff.Height)
		}
		src = graySampler{f.Data, stride, 1}
	default:
		return nil, 0, 0, fmt.Errorf("frames of %v cannot be kept as a JPEG: %w", ff.Pixel, hal.ErrUnsupported)
	}
	xs := make([]int, w)
	for x := range xs {
		xs[x] = x0 + x*cw/w
	}
	img := src.image(xs, y0, ch, w, h)
	var buf bytes.Buffer
	for q := quality; ; q = max(MinQuality, q-15) {
		buf.Reset()
		if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: q}); err != nil {
			return nil, 0, 0, err
		}
		if buf.Len() <= maxBytes {
			return buf.Bytes(), w, h, nil
		}
		if q == MinQuality {
			return nil, 0, 0, fmt.Errorf("a %dx%d JPEG is %d bytes at quality %d, over the %d allowed", w, h, buf.Len(), q, maxBytes)
		}
	}
}

// sampler makes the w×h image of a frame's rows from y0 (ch of them)
// whose output column x comes from the frame's column xs[x].
type sampler interface {
	image(xs []int, y0, ch, w, h int) image.Image
}

// yuyvSampler reads packed YUYV: Y0 U Y1 V for each pair of pixels.
type yuyvSampler struct {
	data   []byte
	stride int
}

func (s yuyvSampler) image(xs []int, y0, ch, w, h int) image.Image {
	m := image.NewYCbCr(image.Rect(0, 0, w, h), image.YCbCrSubsampleRatio444)
	for y := range h {
		row := s.data[(y0+y*ch/h)*s.stride:]
		yo, co := y*m.YStride, y*m.CStride
		for x, sx := range xs {
			pair := (sx &^ 1) * 2
			m.Y[yo+x] = row[sx*2]
			m.Cb[co+x] = row[pair+1]
			m.Cr[co+x] = row[pair+3]
		}
	}
	return m
}

// graySampler reads one byte a pixel.
type graySampler struct {
	pix    []byte
	stride int
	step   int
}

func (s graySampler) image(xs []int, y0, ch, w, h int) image.Image {
	m := image.NewGray(image.Rect(0, 0, w, h))
	for y := range h {
		row := s.pix[(y0+y*ch/h)*s.stride:]
		for x, sx := range xs {
			m.Pix[y*m.Stride+x] = row[sx*s.step]
		}
	}
	return m
}

// ycbcrSampler reads a decoded JPEG's planes.
type ycbcrSampler struct{ src *image.YCbCr }

func (s ycbcrSampler) image(xs []int, y0, ch, w, h int) image.Image {
	m := image.NewYCbCr(image.Rect(0, 0, w, h), image.YCbCrSubsampleRatio444)
	b := s.src.Rect.Min
	for y := range h {
		sy := b.Y + y0 + y*ch/h
		for x, sx := range xs {
			m.Y[y*m.YStride+x] = s.src.Y[s.src.YOffset(b.X+sx, sy)]
			ci := s.src.COffset(b.X+sx, sy)
			m.Cb[y*m.CStride+x], m.Cr[y*m.CStride+x] = s.src.Cb[ci], s.src.Cr[ci]
		}
	}
	return m
}

// EncodeWAV writes samples (interleaved, in f) as a 16-bit PCM WAV file.
func EncodeWAV(f hal.AudioFormat, samples []int16) []byte {
	rate := uint32(f.Rate / physic.Hertz)
	ch := uint16(f.Channels)
	data := uint32(2 * len(samples))
	b := make([]byte, 0, 44+data)
	le32 := func(v uint32) { b = append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24)) }
	le16 := func(v uint16) { b = append(b, byte(v), byte(v>>8)) }
	b = append(b, "RIFF"...)
	le32(36 + data)
	b = append(b, "WAVEfmt "...)
	le32(16)
	le16(1) // PCM
	le16(ch)
	le32(rate)
	le32(rate * uint32(ch) * 2)
	le16(ch * 2)
	le16(16)
	b = append(b, "data"...)
	le32(data)
	for _, s := range samples {
		le16(uint16(s))
	}
	return b
}
