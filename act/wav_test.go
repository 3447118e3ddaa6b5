package act

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// wavFile builds a WAV file: a fmt chunk of tag, channels, rate and bits,
// extra chunks before data, and the samples.
func wavFile(tag uint16, ch, rate, bits int, samples []int16, extra ...[]byte) []byte {
	var b bytes.Buffer
	le := func(v any) { binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	le(uint32(0)) // patched below
	b.WriteString("WAVE")
	b.WriteString("fmt ")
	le(uint32(16))
	le(tag)
	le(uint16(ch))
	le(uint32(rate))
	le(uint32(rate * ch * bits / 8))
	le(uint16(ch * bits / 8))
	le(uint16(bits))
	for _, e := range extra {
		b.Write(e)
	}
	b.WriteString("data")
	le(uint32(2 * len(samples)))
	for _, s := range samples {
		le(s)
	}
	out := b.Bytes()
	binary.LittleEndian.PutUint32(out[4:], uint32(len(out)-8))
	return out
}

func chunk(id string, body []byte) []byte {
	b := append([]byte(id), 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(b[4:], uint32(len(body)))
	b = append(b, body...)
	if len(body)%2 == 1 {
		b = append(b, 0)
	}
	return b
}

// extensible is a 40-byte fmt chunk of WAVE_FORMAT_EXTENSIBLE with sub-format sub.
func extensible(ch, rate int, sub uint16) []byte {
	var b bytes.Buffer
	le := func(v any) { binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	le(uint32(0))
	b.WriteString("WAVE")
	b.WriteString("fmt ")
	le(uint32(40))
	le(uint16(wavExtensible))
	le(uint16(ch))
	le(uint32(rate))
	le(uint32(rate * ch * 2))
	le(uint16(ch * 2))
	le(uint16(16))
	le(uint16(22))            // cbSize
	le(uint16(16))            // valid bits
	le(uint32(0))             // channel mask
	le(sub)                   // the GUID's first two bytes
	b.Write(make([]byte, 14)) // the rest of the GUID
	b.WriteString("data")
	le(uint32(4 * ch))
	for range 2 * ch {
		le(int16(-2))
	}
	return b.Bytes()
}

var wavCases = []struct {
	name     string
	in       []byte
	max      int
	rate, ch int
	n        int    // samples
	err      string // "" for none
}{
	{"mono", wavFile(wavPCM, 1, 16000, 16, []int16{1, -1, 32767, -32768}), 100, 16000, 1, 4, ""},
	{"stereo", wavFile(wavPCM, 2, 48000, 16, []int16{1, 2, 3, 4}), 100, 48000, 2, 4, ""},
	{"other chunks first, odd one padded", wavFile(wavPCM, 1, 8000, 16, []int16{7}, chunk("LIST", []byte("INFOabc")), chunk("fact", []byte{1, 2, 3, 4})), 100, 8000, 1, 1, ""},
	{"extensible PCM", extensible(2, 22050, wavPCM), 100, 22050, 2, 4, ""},
	{"data cut short keeps whole frames", wavFile(wavPCM, 2, 16000, 16, []int16{1, 2, 3, 4})[:44+6], 100, 16000, 2, 2, ""},
	{"empty", nil, 100, 0, 0, 0, "no RIFF WAVE header"},
	{"not RIFF", []byte("ID3\x04 an mp3 pretending to be a clip"), 100, 0, 0, 0, "no RIFF WAVE header"},
	{"RIFF but AVI", append([]byte("RIFF\x04\x00\x00\x00AVI "), make([]byte, 8)...), 100, 0, 0, 0, "no RIFF WAVE header"},
	{"float", wavFile(3, 1, 16000, 32, []int16{1, 2}), 100, 0, 0, 0, "format 0x0003, want PCM"},
	{"extensible float", extensible(1, 16000, 3), 100, 0, 0, 0, "format 0x0003, want PCM"},
	{"8-bit", wavFile(wavPCM, 1, 16000, 8, []int16{1}), 100, 0, 0, 0, "8 bits a sample, want 16"},
	{"24-bit", wavFile(wavPCM, 1, 16000, 24, []int16{1, 2, 3}), 100, 0, 0, 0, "24 bits a sample"},
	{"six channels", wavFile(wavPCM, 6, 16000, 16, make([]int16, 6)), 100, 0, 0, 0, "6 channels, want 1 or 2"},
	{"zero channels", wavFile(wavPCM, 0, 16000, 16, []int16{1}), 100, 0, 0, 0, "0 channels"},
	{"rate too low", wavFile(wavPCM, 1, 4000, 16, []int16{1}), 100, 0, 0, 0, "sample rate 4000 Hz outside 8000..48000"},
	{"rate too high", wavFile(wavPCM, 1, 96000, 16, []int16{1}), 100, 0, 0, 0, "sample rate 96000 Hz"},
	{"no samples", wavFile(wavPCM, 1, 16000, 16, nil), 100, 0, 0, 0, "no samples"},
	{"no data chunk", wavFile(wavPCM, 1, 16000, 16, nil)[:36], 100, 0, 0, 0, "no data chunk"},
	{"no fmt chunk", append([]byte("RIFF\x10\x00\x00\x00WAVE"), chunk("data", []byte{1, 0})...), 100, 0, 0, 0, "data chunk before the fmt chunk"},
	{"only a header", []byte("RIFF\x04\x00\x00\x00WAVE"), 100, 0, 0, 0, "no fmt chunk"},
	{"short fmt", append([]byte("RIFF\x10\x00\x00\x00WAVE"), chunk("fmt ", []byte{1, 0, 1, 0})...), 100, 0, 0, 0, "fmt chunk of 4 bytes"},
	{"chunk past the end", append([]byte("RIFF\x10\x00\x00\x00WAVE"), []byte("LIST\xff\xff\xff\x7f")...), 100, 0, 0, 0, `chunk "LIST" says 2147483647 bytes`},
	{"too long", wavFile(wavPCM, 1, 8000, 16, make([]int16, 101)), 100, 0, 0, 0, "clip too long: 101 samples"},
}

func TestDecodeWAV(t *testing.T) {
	for _, tc := range wavCases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := decodeWAV(tc.in, tc.max)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want an error with %q", err, tc.err)
				}
				if !errors.Is(err, ErrNotWAV) && !errors.Is(err, errClipTooLong) {
					t.Errorf("%v wraps neither ErrNotWAV nor errClipTooLong", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Rate != tc.rate || c.Channels != tc.ch || len(c.Samples) != tc.n {
				t.Errorf("got %d Hz x%d, %d samples; want %d Hz x%d, %d", c.Rate, c.Channels, len(c.Samples), tc.rate, tc.ch, tc.n)
			}
		})
	}
	c, _ := decodeWAV(wavFile(wavPCM, 1, 16000, 16, []int16{1, -1, 32767, -32768}), 10)
	if want := []int16{1, -1, 32767, -32768}; !equalInt16(c.Samples, want) {
		t.Errorf("samples %v, want %v", c.Samples, want)
	}
}

func equalInt16(a, b []int16) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FuzzDecodeWAV: any bytes give a clip that keeps its promises or an
// error that says what was wrong; nothing panics or allocates past the
// limit.
func FuzzDecodeWAV(f *testing.F) {
	for _, tc := range wavCases {
		f.Add(tc.in)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		const maxFrames = 4096
		c, err := decodeWAV(b, maxFrames)
		if err != nil {
			if !errors.Is(err, ErrNotWAV) && !errors.Is(err, errClipTooLong) {
				t.Fatalf("%v wraps neither ErrNotWAV nor errClipTooLong", err)
			}
			return
		}
		switch {
		case c.Channels != 1 && c.Channels != 2:
			t.Fatalf("%d channels", c.Channels)
		case c.Rate < wavMinRate || c.Rate > wavMaxRate:
			t.Fatalf("rate %d", c.Rate)
		case len(c.Samples) == 0 || len(c.Samples)%c.Channels != 0:
			t.Fatalf("%d samples for %d channels", len(c.Samples), c.Channels)
		case c.frames() > maxFrames:
			t.Fatalf("%d frames, more than %d", c.frames(), maxFrames)
		case 2*len(c.Samples) > len(b):
			t.Fatalf("%d samples from %d bytes", len(c.Samples), len(b))
		}
	})
}
