package sound

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tobe-body/tobe-body/hal"
)

// fuzzFlags are the bits of a frame's control byte in FuzzProcess.
const (
	fuzzOverrun   = 1 << iota // the frame follows an overrun
	fuzzSeqSkip               // Seq jumps
	fuzzBackwards             // Time earlier than the frame before ended
	fuzzSeqZero               // Seq is 0 (unnumbered)
	fuzzJump                  // Time jumps a second ahead
	fuzzShort                 // the frame is a third of the size
	fuzzRagged                // a trailing partial multi-channel sample
	fuzzFlush                 // Flush after the frame
)

// fuzzInput lays out FuzzProcess's input: a header (rate, channels,
// frame size, configuration), then frames, each a control byte and its
// samples (little-endian int16).
func fuzzInput(rate, ch, frame, cfg byte, frames [][]int16, ctl []byte) []byte {
	b := []byte{rate, ch, frame, cfg}
	for i, f := range frames {
		b = append(b, ctl[i%len(ctl)])
		for _, s := range f {
			b = binary.LittleEndian.AppendUint16(b, uint16(s))
		}
	}
	return b
}

var fuzzRates = [...]int{8000, 16000, 44100, 48000}

var fuzzConfigs = [...]Config{
	{},
	{Window: 5 * time.Millisecond, SummaryEvery: time.Second, MinVoice: time.Millisecond, Hangover: time.Millisecond, LoudRelease: time.Millisecond, FloorRise: 100 * time.Millisecond},
	{Window: 100 * time.Millisecond, SummaryEvery: time.Second, LoudDBFS: -90, VoiceSNR: 0.5, MinVoice: 2 * time.Second, Hangover: 5 * time.Second, LoudRelease: 10 * time.Second},
	{Window: 13 * time.Millisecond, SummaryEvery: 1100 * time.Millisecond, LoudDBFS: -0.1, LoudHysteresis: 30, VoiceSNR: 40},
}

// FuzzProcess feeds arbitrary samples in frames of arbitrary sizes with
// overruns, Seq gaps, unnumbered frames, time going back and jumping,
// ragged frames and flushes. Process must not panic, and the events must
// come in order of time, pair up, and stay within the audio fed.
func FuzzProcess(f *testing.F) {
	// Seeds from the tables: speech in noise, a clap, silence, a tone.
	r := rand.New(rand.NewPCG(1, 1))
	sp := newScene(16000, 3*time.Second)
	sp.addNoise(r, pink, -55, 0, 3*time.Second)
	sp.addSpeech(r, -45, 500*time.Millisecond, 1500*time.Millisecond)
	sp.clap(r, 2500*time.Millisecond, 0.9)
	frames := func(pcm []int16, n int) [][]int16 {
		var out [][]int16
		for i := 0; i+n <= len(pcm); i += n {
			out = append(out, pcm[i:i+n])
		}
		return out
	}
	f.Add(fuzzInput(1, 0, 160, 0, frames(sp.pcm(1), 320), []byte{0}))
	f.Add(fuzzInput(1, 0, 160, 1, frames(sp.pcm(1), 320), []byte{0, 0, fuzzOverrun, 0, fuzzSeqSkip | fuzzBackwards, fuzzShort, fuzzRagged, fuzzFlush}))
	f.Add(fuzzInput(1, 1, 160, 2, frames(sp.pcm(2), 640), []byte{fuzzSeqZero, fuzzJump, 0}))
	f.Add(fuzzInput(0, 0, 80, 3, frames(make([]int16, 8000), 160), []byte{0}))
	f.Add(fuzzInput(3, 0, 255, 0, frames(tone(48000, time.Second, 1000, 0.99).pcm(1), 960), []byte{0, fuzzBackwards}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 4 {
			return
		}
		rate := fuzzRates[int(b[0])%len(fuzzRates)]
		ch := 1 + int(b[1])%3
		frame := 1 + 4*int(b[2])
		cfg := fuzzConfigs[int(b[3])%len(fuzzConfigs)]
		a, err := New(cfg, format(rate, ch))
		if err != nil {
			t.Fatal(err)
		}
		var evs []Event
		fr := hal.AudioFrame{}
		buf := make([]int16, 0, frame*ch+1)
		now := base
		first, last := now, now // the audio fed, on the clock
		seq := uint64(0)
		data := b[4:]
		fed := 0
		for len(data) > 0 && fed < 8*rate { // 8 s of audio at most
			ctl := data[0]
			data = data[1:]
			n := frame
			if ctl&fuzzShort != 0 {
				n = max(1, n/3)
			}
			want := n * ch
			if ctl&fuzzRagged != 0 && ch > 1 {
				want++
			}
			buf = buf[:0]
			for len(buf) < want && len(data) >= 2 {
				buf = append(buf, int16(binary.LittleEndian.Uint16(data)))
				data = data[2:]
			}
			seq++
			fr.Samples = buf
			fr.Seq = seq
			fr.Overruns = 0
			switch {
			case ctl&fuzzSeqZero != 0:
				fr.Seq = 0
			case ctl&fuzzSeqSkip != 0:
				seq += 3
				fr.Seq = seq
			}
			if ctl&fuzzOverrun != 0 {
				fr.Overruns = 2
			}
			fr.Time = now
			if ctl&fuzzBackwards != 0 {
				fr.Time = now.Add(-7 * time.Millisecond)
			}
			if ctl&fuzzJump != 0 {
				fr.Time = now.Add(time.Second)
				now = fr.Time
			}
			evs = a.Process(&fr, evs)
			fed += len(buf) / ch
			// Where the Analyzer puts this frame: never before the last.
			now = max(now, fr.Time).Add(a.at(len(buf) / ch))
			last = now
			if ctl&fuzzFlush != 0 {
				evs = a.Flush(evs)
			}
		}
		evs = a.Flush(evs)
		checkOrder(t, evs)
		for _, e := range evs {
			if e.Time < first || e.Time > last || e.Start < first {
				t.Fatalf("%v outside the audio fed, %v..%v", e, first, last)
			}
		}
		if st := a.Stats(); st.Overruns > 2*st.Frames || st.Gaps > st.Frames {
			t.Fatalf("Stats %+v do not add up", st)
		}
	})
}
