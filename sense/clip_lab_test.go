//go:build lab && portaudio

package sense_test

import (
	"context"
	"encoding/binary"
	"math"
	"path/filepath"
	"testing"
	"time"

	"periph.io/x/conn/v3/physic"

	"github.com/tobe-body/tobe-body/act"
	"github.com/tobe-body/tobe-body/body/evidence"
	"github.com/tobe-body/tobe-body/hal"
	"github.com/tobe-body/tobe-body/hal/audio"
	"github.com/tobe-body/tobe-body/ledger"
	"github.com/tobe-body/tobe-body/sense"
	"github.com/tobe-body/tobe-body/sense/sound"
)

// discard is a ledger that keeps nothing (the channel's events are not
// what is looked at here).
type discard struct{}

func (discard) Append(_ context.Context, evs ...ledger.Event) ([]ledger.Result, error) {
	return make([]ledger.Result, len(evs)), nil
}

// zeroCrossings is the frequency of a tone by its rising zero crossings
// (interpolated), from the first to the last.
func zeroCrossings(s []int16, rate int) float64 {
	var first, last float64
	n := 0
	for i := 1; i < len(s); i++ {
		a, b := float64(s[i-1]), float64(s[i])
		if a < 0 && b >= 0 {
			at := float64(i-1) - a/(b-a)
			if n == 0 {
				first = at
			}
			last, n = at, n+1
		}
	}
	if n < 2 {
		return 0
	}
	return float64(n-1) * float64(rate) / (last - first)
}

// TestLabClipHoldsTheTone: audio.clip through the microphone channel on
// snd-aloop's capture, while the speaker (its playback) plays a 1 kHz
// tone: the clip, half of it from the channel's ring before the request
// and half after, is kept as a WAV whose tone is 1 kHz within 1 %.
func TestLabClipHoldsTheTone(t *testing.T) {
	mic, err := audio.OpenCapture(hal.AudioConfig{Device: "Loopback,1"})
	if err != nil {
		t.Fatal(err)
	}
	defer mic.Close()
	spk, err := audio.OpenPlayback(hal.AudioConfig{Device: "Loopback,0"})
	if err != nil {
		t.Fatal(err)
	}
	defer spk.Close()
	o := sense.NewOutlet(sense.Source{Channel: "audio.mic"}, 256)
	ch, err := sense.NewMicChannel(o, mic, sound.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ch.SetRing(5 * time.Second)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { ch.Run(ctx); close(done) }()
	go o.Run(ctx, discard{})
	defer func() { cancel(); <-done }()

	dir := t.TempDir()
	classes := ledger.DefaultClasses()
	store, err := ledger.Open(ledger.Options{Path: filepath.Join(dir, "ledger.db"), Classes: &classes, Projections: evidence.Projections()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ev, err := evidence.Open(t.Context(), evidence.Options{Dir: filepath.Join(dir, "evidence"), Ledger: store})
	if err != nil {
		t.Fatal(err)
	}
	clip := act.NewAudioClip([]*act.Ear{{Channel: "audio.mic", Ring: 5 * time.Second, Clip: ch.Clip}}, ev)

	played := make(chan error, 1)
	go func() {
		played <- spk.Play(t.Context(), audio.Tone(spk.Format(), 1000*physic.Hertz, -12, 3*time.Second))
	}()
	time.Sleep(1500 * time.Millisecond) // a second and a half of the tone in the ring
	inv := &act.Invocation{ActionID: ledger.NewID().String(), Principal: act.Principal{Subject: "admin:lab"}, Target: "audio.mic",
		Params: map[string]string{"before_ms": "700", "after_ms": "700"}}
	receipt, err := clip.Do(t.Context(), inv)
	if err != nil {
		t.Fatal(err)
	}
	if v := clip.Verify(t.Context(), inv); v.Result != "verified" {
		t.Fatalf("verification: %+v", v)
	}
	if err := <-played; err != nil {
		t.Fatal(err)
	}
	t.Log(receipt)
	items, _ := ev.List(evidence.Filter{})
	if len(items) != 1 {
		t.Fatalf("%d pieces kept", len(items))
	}
	_, wav, err := ev.ReadBack(items[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	rate := int(binary.LittleEndian.Uint32(wav[24:28]))
	s := make([]int16, (len(wav)-44)/2)
	for i := range s {
		s[i] = int16(binary.LittleEndian.Uint16(wav[44+2*i:]))
	}
	f := zeroCrossings(s, rate)
	t.Logf("the clip: %d samples at %d Hz (%v), a tone of %.2f Hz", len(s), rate, time.Duration(len(s))*time.Second/time.Duration(rate), f)
	if rate != int(mic.Format().Rate/physic.Hertz) || math.Abs(f-1000) > 10 {
		t.Errorf("the clip's tone is %.2f Hz at %d Hz, want 1000 Hz within 1 %%", f, rate)
	}
}
