package act

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrNotWAV is wrapped by every error of decodeWAV: the bytes are not a
// WAV file this body plays (RIFF WAVE, PCM, 16-bit, one or two channels).
var ErrNotWAV = errors.New("not a 16-bit PCM WAV file")

// wavClip is a decoded clip: interleaved samples.
type wavClip struct {
	Rate     int
	Channels int
	Samples  []int16
}

// frames is the clip's length in samples per channel.
func (c wavClip) frames() int { return len(c.Samples) / c.Channels }

// WAV limits: rates a sound card plays, and channels a speaker has.
const (
	wavMinRate = 8000
	wavMaxRate = 48000
)

// Format tags of the fmt chunk.
const (
	wavPCM        = 0x0001
	wavExtensible = 0xFFFE
)

// decodeWAV decodes a RIFF WAVE file of 16-bit PCM, mono or stereo, at
// 8..48 kHz, holding at most maxFrames frames (samples per channel). It
// reads the fmt and data chunks and skips every other chunk (LIST, fact,
// cue, ...), in any order, as long as fmt comes before data. The samples
// are copied: b may be reused. An error wraps ErrNotWAV and names what
// was wrong; one that is only too long wraps errClipTooLong.
func decodeWAV(b []byte, maxFrames int) (wavClip, error) {
	fail := func(format string, a ...any) (wavClip, error) {
		return wavClip{}, fmt.Errorf("%w: "+format, append([]any{ErrNotWAV}, a...)...)
	}
	if len(b) < 12 || string(b[0:4]) != "RIFF" || string(b[8:12]) != "WAVE" {
		return fail("no RIFF WAVE header")
	}
	// The RIFF size is often wrong in files cut short or streamed; the
	// chunks themselves are checked against what is there instead.
	rest := b[12:]
	var c wavClip
	var haveFmt bool
	for {
		if len(rest) < 8 {
			if haveFmt {
				return fail("no data chunk")
			}
			return fail("no fmt chunk")
		}
		id := string(rest[0:4])
		size := binary.LittleEndian.Uint32(rest[4:8])
		rest = rest[8:]
		if uint64(size) > uint64(len(rest)) {
			if id == "data" && haveFmt {
				// A data chunk cut short: decode what is there, whole frames only.
				size = uint32(len(rest))
			} else {
				return fail("chunk %q says %d bytes, %d are left", id, size, len(rest))
			}
		}
		body := rest[:size]
		switch id {
		case "fmt ":
			if haveFmt {
				return fail("two fmt chunks")
			}
			if len(body) < 16 {
				return fail("fmt chunk of %d bytes, want at least 16", len(body))
			}
			tag := binary.LittleEndian.Uint16(body[0:2])
			ch := int(binary.LittleEndian.Uint16(body[2:4]))
			rate := binary.LittleEndian.Uint32(body[4:8])
			align := int(binary.LittleEndian.Uint16(body[12:14]))
			bits := int(binary.LittleEndian.Uint16(body[14:16]))
			if tag == wavExtensible {
				// WAVE_FORMAT_EXTENSIBLE: the real format is the first two
				// bytes of the sub-format GUID.
				if len(body) < 40 {
					return fail("extensible fmt chunk of %d bytes, want 40", len(body))
				}
				tag = binary.LittleEndian.Uint16(body[24:26])
			}
			switch {
			case tag != wavPCM:
				return fail("format %#04x, want PCM (1)", tag)
			case bits != 16:
				return fail("%d bits a sample, want 16", bits)
			case ch != 1 && ch != 2:
				return fail("%d channels, want 1 or 2", ch)
			case rate < wavMinRate || rate > wavMaxRate:
				return fail("sample rate %d Hz outside %d..%d", rate, wavMinRate, wavMaxRate)
			case align != 2*ch:
				return fail("block align %d, want %d for %d channels of 16 bits", align, 2*ch, ch)
			}
			c.Rate, c.Channels, haveFmt = int(rate), ch, true
		case "data":
			if !haveFmt {
				return fail("data chunk before the fmt chunk")
			}
			frames := len(body) / (2 * c.Channels)
			if frames == 0 {
				return fail("no samples")
			}
			if frames > maxFrames {
				return wavClip{}, fmt.Errorf("%w: %d samples at %d Hz, more than %d", errClipTooLong, frames, c.Rate, maxFrames)
			}
			c.Samples = make([]int16, frames*c.Channels)
			for i := range c.Samples {
				c.Samples[i] = int16(binary.LittleEndian.Uint16(body[2*i:]))
			}
			return c, nil
		}
		// Chunks are padded to an even size.
		skip := uint64(size) + uint64(size&1)
		if skip > uint64(len(rest)) {
			skip = uint64(len(rest))
		}
		rest = rest[skip:]
	}
}

// errClipTooLong says a clip plays longer than the channel allows.
var errClipTooLong = errors.New("clip too long")
